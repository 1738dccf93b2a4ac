"""The housekeeper signs only recorded decisions (issue 11, "The housekeeper signs whatever
reaches its queue"), and the files it trusts are its user's only.

Reproductions: a ``label_append_task`` message with a label and an actor of the sender's
choosing (called directly, and written as a raw file into the filesystem broker's queue folder)
produced a signed ``poison_likely`` with no proposal behind it; ``var/broker/`` was 0755 and the
SQLite database 0644. Now a label task carries a decision id; the housekeeper rebuilds the label
from the decision and refuses (``SigningRefusal``, activity ``signing.refused``, keys page)
anything that is not an eligible, recorded decision.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ledger import tasks
from ledger.models import ClassifierFinding, EpistemicLabel, Memory, SigningRefusal
from orgs.models import ActivityEvent, Membership
from tests.hardening.world import member

FORGED = {"label": "poison_likely", "reason": "forged", "evidence": {}, "actor": "user:reviewer",
          "idempotency_key": "forged-1"}


def _labels(memory_id: int) -> list[str]:
    return list(EpistemicLabel.objects.filter(memory_id=memory_id).order_by("seq").values_list("label", flat=True))


@pytest.fixture
def people(organization):
    return {"ana": member(organization, "ana", "analyst"), "rita": member(organization, "rita", "reviewer"),
            "dana": member(organization, "dana", "admin")}


def _proposal(memory, by, **fields):
    from audits.models import ReviewProposal

    return ReviewProposal.objects.create(
        organization=memory.organization, store=memory.store, memory=memory, reason="audit rank 1",
        proposed_by=by, proposed_by_actor=f"user:{by.get_username()}", idempotency_key=f"p-{uuid.uuid4().hex}",
        **fields)


def test_a_forged_label_task_signs_nothing_and_the_refusal_is_on_the_keys_page(
        memories, organization, people, housekeeper, client, monkeypatch):
    m = memories[0]
    monkeypatch.delenv("MEMAUDIT_ROLE")  # the task holds the role itself, as on the worker
    assert tasks.label_append_task.apply(kwargs={"memory_id": m.pk, **FORGED}).get() == 0
    assert tasks.label_append_task.apply(args=[m.pk, "poison_likely", "r", {}, "user:reviewer"]).get() == 0
    assert _labels(m.pk) == [] and Memory.objects.get(pk=m.pk).epistemic_state == ""
    refusals = list(SigningRefusal.objects.filter(organization=organization).order_by("pk"))
    assert len(refusals) == 2
    assert "besides a decision id" in refusals[0].reason and refusals[0].payload["kwargs"]["actor"] == "user:reviewer"
    assert ActivityEvent.objects.filter(organization=organization, verb="signing.refused").count() == 2

    client.force_login(people["dana"])
    page = client.get("/keys/").content.decode()
    assert "Refused signing requests" in page and "besides a decision id" in page and "user:reviewer" in page
    assert 'id="signer-backend">file<' in page


def test_a_raw_message_in_the_broker_folder_signs_nothing(memories, organization, housekeeper, tmp_path):
    """The message an attacker with write access to var/broker/queue wrote by hand, consumed by
    kombu's filesystem transport and run as the worker runs it (the task by its header name)."""
    from kombu import Connection

    from memaudit_site.celery import app

    queue = tmp_path / "broker"
    queue.mkdir()
    m = memories[1]
    body = json.dumps([[], {"memory_id": m.pk, **FORGED}, {"callbacks": None, "errbacks": None, "chain": None,
                                                             "chord": None}]).encode()
    task_id = str(uuid.uuid4())
    message = {"body": base64.b64encode(body).decode(), "content-encoding": "utf-8",
               "content-type": "application/json",
               "headers": {"lang": "py", "task": "ledger.tasks.label_append_task", "id": task_id,
                           "root_id": task_id, "parent_id": None, "retries": 0, "argsrepr": "()", "kwargsrepr": "{}"},
               "properties": {"correlation_id": task_id, "delivery_mode": 2, "priority": 0, "body_encoding": "base64",
                              "delivery_tag": str(uuid.uuid4()),
                              "delivery_info": {"exchange": "", "routing_key": "housekeeper"}}}
    (queue / f"{int(time.monotonic() * 1000)}_{uuid.uuid4()}.housekeeper.msg").write_text(json.dumps(message))

    options = {"data_folder_in": str(queue), "data_folder_out": str(queue), "control_folder": str(tmp_path / "control"),
               "store_processed": False}
    with Connection("filesystem://", transport_options=options) as conn:
        got = conn.SimpleQueue("housekeeper", no_ack=True).get(timeout=2)
        args, kwargs, _embed = got.decode()
        assert app.tasks[got.headers["task"]].apply(args=args, kwargs=kwargs).get() == 0
    assert _labels(m.pk) == []
    assert SigningRefusal.objects.get(organization=organization).payload["kwargs"]["label"] == "poison_likely"


def test_a_proposal_signs_only_what_an_eligible_person_recorded(memories, organization, people, housekeeper):
    from audits.models import ReviewProposal

    m = memories[0]
    p = _proposal(m, people["ana"])
    ref = f"proposal:{p.pk}"
    # An open proposal by an analyst: its poison_suspect flag, nothing more (no decision yet).
    assert tasks.label_append_task(ref) == 1
    assert _labels(m.pk) == ["poison_suspect"]
    label = EpistemicLabel.objects.get(memory=m)
    assert label.actor == "user:ana" and label.evidence["proposal"] == p.pk

    # A decision row written without the review rules: the proposer approving herself (four-eyes).
    ReviewProposal.objects.filter(pk=p.pk).update(status="applying", decision="approve", decided_by=people["ana"],
                                                  decision_reason="mine")
    assert tasks.label_append_task(ref) == 0
    assert _labels(m.pk) == ["poison_suspect"]
    assert "may not review" in SigningRefusal.objects.latest("pk").reason
    # An admin who proposed and decided: eligible to review, but the organization wants four eyes.
    q = _proposal(memories[1], people["dana"], status="applying", decision="approve", decided_by=people["dana"],
                  decision_reason="mine too")
    assert tasks.label_append_task(f"proposal:{q.pk}") == 0
    assert "four-eyes" in SigningRefusal.objects.latest("pk").reason and _labels(memories[1].pk) == []
    # A deactivated reviewer's decision is not a decision any more.
    ReviewProposal.objects.filter(pk=p.pk).update(decided_by=people["rita"], decision_reason="planted")
    Membership.objects.filter(user=people["rita"]).update(is_active=False)
    assert tasks.label_append_task(ref) == 0
    assert "not an active member" in SigningRefusal.objects.latest("pk").reason
    # The reviewer, active: signed, with the label, reason and actor from the decision row.
    Membership.objects.filter(user=people["rita"]).update(is_active=True)
    assert tasks.label_append_task(ref) == 1  # decided: the decision's label (the flag was signed while open)
    assert _labels(m.pk) == ["poison_suspect", "poison_likely"]
    last = EpistemicLabel.objects.filter(memory=m).latest("seq")
    assert (last.actor, last.reason) == ("user:rita", "planted")
    assert tasks.label_append_task(ref) == 1 and len(_labels(m.pk)) == 2  # redelivered: nothing twice


def test_a_proposal_by_someone_who_may_not_propose_is_refused(memories, organization, people, housekeeper):
    p = _proposal(memories[2], people["rita"])  # a reviewer may not propose
    assert tasks.label_append_task(f"proposal:{p.pk}") == 0
    assert "may not propose" in SigningRefusal.objects.latest("pk").reason and _labels(memories[2].pk) == []
    for bad in ("proposal:999999", "finding:999999", "proposal:1; drop", "", None):
        assert tasks.label_append_task(bad) == 0
    assert _labels(memories[2].pk) == []


def test_a_classifier_label_needs_a_recorded_finding_over_the_current_content(store, organization, housekeeper):
    from ledger.classifier_service import ACTOR
    from ledger.services import memories_create, memory_genesis_sign

    ms = memories_create(store=store, records=[{"id": f"c{i}", "text": f"What is the code? It is {i}."}
                                                for i in range(4)])
    memory_genesis_sign(memory_ids=[m.pk for m in ms])
    group = [m.external_id for m in ms]
    evidence = {"classifier": ACTOR, "group": group, "distinct_passages": 4, "pattern": "what is the code"}

    def finding(m, **over):
        fields = {"organization": organization, "memory": m, "classifier": ACTOR, "reason": "repeated pattern",
                  "evidence": evidence, "content_sha256": bytes(m.content_sha256), **over}
        return ClassifierFinding.objects.create(**fields)

    stale = finding(ms[0], content_sha256=b"\0" * 32)
    other = finding(ms[1], classifier="ingest-classifier@0")
    lone = finding(ms[2], evidence={**evidence, "group": [ms[2].external_id]})
    for f in (stale, other, lone):
        assert tasks.label_append_task(f"finding:{f.pk}") == 0
        assert _labels(f.memory_id) == []
    reasons = " | ".join(SigningRefusal.objects.values_list("reason", flat=True))
    assert "content changed" in reasons and "not the classifier this housekeeper runs" in reasons
    good = finding(ms[3])
    assert tasks.label_append_task(f"finding:{good.pk}") == 1
    label = EpistemicLabel.objects.get(memory=ms[3])
    assert (label.label, label.actor, label.reason) == ("poison_likely", ACTOR, "repeated pattern")
    good.refresh_from_db()
    assert good.label_id == label.pk


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_var_broker_database_and_key_folders_are_owner_only(tmp_path, settings):
    """A fresh VAR_DIR as ``make run`` creates it, under a permissive umask (022)."""
    var = tmp_path / "var"
    env = {**os.environ, "VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "memaudit_site.settings",
           "CELERY_BROKER_URL": "filesystem://"}
    env.pop("DATABASE_URL", None)
    env.pop("SQLITE_PATH", None)
    code = ("import os; os.umask(0o022); import django; django.setup(); "
            "from django.db import connection; connection.ensure_connection(); "
            "connection.cursor().execute('CREATE TABLE IF NOT EXISTS t (x int)')")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=Path(__file__).resolve().parents[2],
                   timeout=120)
    assert _mode(var) == 0o700
    for d in (var / "broker", var / "broker" / "queue", var / "broker" / "control"):
        assert _mode(d) == 0o700, d
    db = var / "memaudit.sqlite3"
    assert _mode(db) == 0o600
    for side in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        if side.exists():
            assert _mode(side) & 0o077 == 0, side

    from ledger.keystore import KeyDirectory

    old = os.umask(0o022)
    try:
        kd = KeyDirectory(var / "keys")
        kd.init("acme")
    finally:
        os.umask(old)
    assert _mode(var / "keys") == 0o700 and _mode(var / "keys" / "acme") == 0o700
    assert _mode(var / "keys" / "acme" / "epoch-1.key") == 0o600
