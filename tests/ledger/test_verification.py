"""Tamper detection: an edit of any ledger column by raw SQL, with the triggers out of the way as a
database superuser could do, is reported by ``ledger_verify`` and by the portable verifier run on
an export (``python -m ledger.core.verify``), both naming the memory (and entry) concerned."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.db import connection

from ledger import export
from ledger.core.verify import main as portable_verify
from ledger.export import bundle_write
from ledger.models import KeyEpoch, LogLeaf, Memory, Store, TreeHead
from ledger.verification import (
    memories_verify,
    memory_verify,
    memory_verify_cache_clear,
    organization_verify,
)
from orgs.models import Organization

pytestmark = pytest.mark.django_db

T_OTHER = "2025-06-01T00:00:00Z"
ZERO = bytes(32)
SIG = bytes(64)


def disable_triggers(table: str) -> None:
    with connection.cursor() as c:
        if connection.vendor == "postgresql":
            c.execute("SET LOCAL session_replication_role = replica")  # what a superuser can do
        else:
            c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table])
            for (name,) in c.fetchall():
                c.execute(f"DROP TRIGGER {name}")  # rolled back with the test transaction


def run_ledger_verify(capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        call_command("ledger_verify", "--org", "acme")
    assert info.value.code == 1
    return capsys.readouterr().out


def run_portable(tmp_path, capsys) -> tuple[int, str]:
    out = tmp_path / "bundle.json"
    bundle_write(Organization.objects.get(slug="acme"), out)
    anchor = KeyEpoch.objects.filter(organization__slug="acme", number=1).values_list("public_key", flat=True).first()
    capsys.readouterr()
    code = portable_verify([str(out)] + (["--anchor", bytes(anchor).hex()] if anchor is not None else []))
    return code, capsys.readouterr().out


def ids(ledger, org="acme"):
    return {k: v.pk for k, v in ledger.items()} | {"globex": Organization.objects.get(slug="globex").pk,
                                                   "other": Store.objects.get(slug="other").pk}


# (table, column, SQL SET value (callable on ids), WHERE, expected in both outputs, portable verifier sees it)
M0 = "main/m0"
CASES = [
    ("ledger_memory", "text", lambda i: "edited text", "id = {m0}", f"memory={M0}", True),
    ("ledger_memory", "content_sha256", lambda i: hashlib.sha256(b"x").digest(), "id = {m0}", f"memory={M0}", True),
    ("ledger_memory", "external_id", lambda i: "m9", "id = {m0}", "memory=main/m9", True),
    ("ledger_memory", "store_id", lambda i: i["other"], "id = {m0}", "memory=other/m0", True),
    ("ledger_memory", "organization_id", lambda i: i["globex"], "id = {m0}", f"memory={M0}", True),
    ("ledger_memory", "live_weight_q", lambda i: 2999, "id = {m0}", f"memory={M0} live", True),
    ("ledger_memory", "live_seq", lambda i: 0, "id = {m0}", f"memory={M0}", False),
    ("ledger_memory", "chain_head", lambda i: ZERO, "id = {m0}", f"memory={M0} live", True),
    ("ledger_memory", "epistemic_state", lambda i: "poison_likely", "id = {m0}", f"memory={M0} live", True),
    ("ledger_memory", "label_seq", lambda i: 0, "id = {m0}", f"memory={M0}", False),
    ("ledger_genesisentry", "weight_q", lambda i: 1500, "memory_id = {m0}", f"memory={M0} genesis", True),
    ("ledger_genesisentry", "epoch", lambda i: 2, "memory_id = {m0}", f"memory={M0} genesis", True),
    ("ledger_genesisentry", "time", lambda i: T_OTHER, "memory_id = {m0}", f"memory={M0} genesis", True),
    ("ledger_genesisentry", "signature", lambda i: SIG, "memory_id = {m0}", f"memory={M0} genesis", True),
    ("ledger_genesisentry", "entry_hash", lambda i: ZERO, "memory_id = {m0}", f"memory={M0} genesis", False),
    ("ledger_genesisentry", "memory_id", lambda i: i["m3"], "memory_id = {m0}", f"memory={M0}", True),
    ("ledger_genesisentry", "organization_id", lambda i: i["globex"], "memory_id = {m0}", f"memory={M0} genesis", True),
] + [
    ("ledger_provenancenode", col, val, "memory_id = {m0} AND seq = 1", f"memory={M0} provenance", True)
    for col, val in [("seq", lambda i: 7), ("prev_weight_q", lambda i: 999), ("new_weight_q", lambda i: 1001),
                     ("valence_q", lambda i: 1), ("eta_q", lambda i: 1), ("evidence", lambda i: '["outcome:99"]'),
                     ("prev", lambda i: ZERO), ("epoch", lambda i: 2), ("time", lambda i: T_OTHER),
                     ("signature", lambda i: SIG), ("organization_id", lambda i: i["globex"])]
] + [
    ("ledger_provenancenode", "entry_hash", lambda i: ZERO, "memory_id = {m0} AND seq = 1",
     f"memory={M0} provenance seq=1", False),
    ("ledger_provenancenode", "memory_id", lambda i: i["m2"], "memory_id = {m0} AND seq = 1", f"memory={M0}", True),
] + [
    ("ledger_transitioncommitment", col, val, "memory_id = {m0} AND seq = 1", f"memory={M0}", True)
    for col, val in [("seq", lambda i: 9), ("new_weight_q", lambda i: 1001), ("provenance_hash", lambda i: ZERO),
                     ("epoch", lambda i: 2), ("time", lambda i: T_OTHER), ("signature", lambda i: SIG),
                     ("memory_id", lambda i: i["m2"]), ("organization_id", lambda i: i["globex"])]
] + [
    ("ledger_epistemiclabel", col, val, "memory_id = {m0} AND seq = 0", f"memory={M0} label", True)
    for col, val in [("seq", lambda i: 5), ("label", lambda i: "poison_likely"), ("reason", lambda i: "edited"),
                     ("evidence", lambda i: '{"s": 2}'), ("actor", lambda i: "user:mallory"), ("prev", lambda i: b"\1" * 32),
                     ("epoch", lambda i: 2), ("time", lambda i: T_OTHER), ("signature", lambda i: SIG),
                     ("organization_id", lambda i: i["globex"])]
] + [
    ("ledger_epistemiclabel", "entry_hash", lambda i: ZERO, "memory_id = {m0} AND seq = 0",
     f"memory={M0} label seq=0", False),
    ("ledger_epistemiclabel", "memory_id", lambda i: i["m1"], "memory_id = {m0} AND seq = 0", f"memory={M0}", True),
    ("ledger_logleaf", "index", lambda i: 999, "memory_id = {m0} AND kind = 'provenance' AND seq = 1", f"memory={M0}",
     True),
    ("ledger_logleaf", "memory_id", lambda i: i["m1"], "memory_id = {m0} AND kind = 'provenance' AND seq = 1",
     f"memory={M0} provenance seq=1", True),
    ("ledger_logleaf", "kind", lambda i: "label", "memory_id = {m0} AND kind = 'provenance' AND seq = 1",
     f"memory={M0}", True),
    ("ledger_logleaf", "seq", lambda i: 5, "memory_id = {m0} AND kind = 'provenance' AND seq = 1", f"memory={M0}", True),
    ("ledger_logleaf", "leaf_hash", lambda i: ZERO, "memory_id = {m0} AND kind = 'provenance' AND seq = 1",
     f"memory={M0} provenance seq=1", False),
    ("ledger_logleaf", "organization_id", lambda i: i["globex"], "memory_id = {m0} AND kind = 'provenance' AND seq = 1",
     f"memory={M0} provenance seq=1", True),
] + [
    ("ledger_treehead", col, val, "id = (SELECT MIN(id) FROM ledger_treehead)", "tree_head", True)
    for col, val in [("size", lambda i: 1), ("root", lambda i: ZERO), ("time", lambda i: T_OTHER),
                     ("epoch", lambda i: 2), ("signature", lambda i: SIG)]
] + [
    ("ledger_keyepoch", "public_key", lambda i: b"\7" * 32, "number = 1", "epoch=2", True),
    ("ledger_keyepoch", "not_before", lambda i: "2099-01-01T00:00:00Z", "number = 1", f"memory={M0}", True),
    ("ledger_keyepoch", "not_after", lambda i: "2000-01-01T00:00:00Z", "number = 1", "epoch=1", True),
    ("ledger_keyepoch", "revoked_at", lambda i: "2000-01-01T00:00:00Z", "number = 1", f"memory={M0}", True),
    ("ledger_keyepoch", "endorsement", lambda i: SIG, "number = 2", "epoch=2", True),
    ("ledger_keyepoch", "number", lambda i: 3, "number = 2", "epoch=", True),
    ("ledger_keyepoch", "organization_id", lambda i: i["globex"], "number = 2", f"memory={M0}", True),
]


@pytest.mark.parametrize("table,column,value,where,expected,portable", CASES,
                         ids=[f"{c[0].removeprefix('ledger_')}.{c[1]}" for c in CASES])
def test_a_raw_edit_of_any_ledger_column_is_reported(ledger, tmp_path, capsys, table, column, value, where,
                                                     expected, portable):
    assert organization_verify(Organization.objects.get(slug="acme")) == []
    i = ids(ledger)
    disable_triggers(table)
    with connection.cursor() as c:
        c.execute(f'UPDATE {table} SET "{column}" = %s WHERE {where.format(**i)}', [value(i)])
        assert c.rowcount == 1
    out = run_ledger_verify(capsys)
    assert expected in out, out
    code, pout = run_portable(tmp_path, capsys)
    if portable:
        assert code == 1 and expected in pout, pout
    else:
        # Derived columns the bundle does not carry: the portable verifier recomputes them from
        # the signed bodies, so the edit cannot mislead it — and ledger_verify reports it.
        assert code in (0, 1)


def test_a_tree_head_moved_to_another_organization_is_reported_there(ledger, capsys):
    disable_triggers("ledger_treehead")
    TreeHead.objects.filter(pk=TreeHead.objects.order_by("pk").first().pk).update(
        organization=Organization.objects.get(slug="globex"))
    findings = organization_verify(Organization.objects.get(slug="globex"))
    assert any(str(f).startswith("FAIL tree_head size=") for f in findings), findings


def test_a_widened_trust_anchor_window_is_reported_by_ledger_verify(ledger, capsys):
    # Epoch 1's window is not signed by anyone (docs/bundle.md), so only the key directory
    # can tell a widened one; ledger_verify compares the two.
    disable_triggers("ledger_keyepoch")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_keyepoch SET not_after = '2099-01-01T00:00:00Z' WHERE number = 1")
    out = run_ledger_verify(capsys)
    assert "epoch=1" in out and "not_after" in out


def test_memory_verify_names_the_entry_and_caches_only_clean_results(ledger):
    m0 = Memory.objects.select_related("store", "organization").get(pk=ledger["m0"].pk)
    assert memory_verify(m0) == []
    disable_triggers("ledger_provenancenode")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_provenancenode SET valence_q = 1 WHERE memory_id = %s AND seq = 2", [m0.pk])
    assert memory_verify(m0) == []  # cached by chain head: the row lock-step did not move
    memory_verify_cache_clear()
    findings = memory_verify(m0)
    assert [f"{f.subject} {f.entry}" for f in findings][:1] == [f"memory={M0} provenance seq=2"]


def test_a_memory_labelled_after_the_caller_read_it_is_moved_not_failed(ledger):
    """The caller's row predates a label committed since: the check reads the row again with its
    chains, says the memory moved (nothing verified for the state the caller holds) instead of
    "label_seq 0 but the label chain ends at seq 1", and memory_verify checks the new state."""
    from ledger import services

    stale = Memory.objects.select_related("store", "organization").get(pk=ledger["m1"].pk)
    services.label_append(memory_id=stale.pk, label="poison_suspect", reason="r", evidence={}, actor="user:bob")

    assert memories_verify([stale], cached=False) == {stale.pk: None}
    assert memory_verify(stale, cached=False) == []
    disable_triggers("ledger_memory")
    with connection.cursor() as c:  # a raw edit of the row: the same in both reads, so a finding
        c.execute("UPDATE ledger_memory SET label_seq = 5 WHERE id = %s", [stale.pk])
    edited = Memory.objects.select_related("store", "organization").get(pk=stale.pk)
    assert any("label_seq 5" in str(f) for f in memory_verify(edited, cached=False))


def test_the_portable_verifier_runs_as_a_module_without_django(ledger, tmp_path):
    out = tmp_path / "b.json"
    bundle_write(Organization.objects.get(slug="acme"), out)
    anchor = bytes(KeyEpoch.objects.get(number=1).public_key).hex()
    ok = subprocess.run([sys.executable, "-m", "ledger.core.verify", str(out), "--trust-anchor", anchor],
                        check=False, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "."})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("OK: 3 memories")
    data = json.loads(out.read_text())
    assert {m["id"] for m in data["memories"]} == {"main/m0", "main/m1", "main/m2"}
    assert len(data["log"]["leaves"]) == LogLeaf.objects.filter(organization__slug="acme").count()
    assert data["receipt_keys"] == [] and len(data["epochs"]) == 2


def _fresh(ledger) -> list[Memory]:
    pks = [m.pk for m in ledger.values()]
    return list(Memory.objects.select_related("store", "organization").filter(pk__in=pks).order_by("pk"))


@pytest.mark.parametrize("table,column,value,where,expected,portable", CASES,
                         ids=[f"{c[0].removeprefix('ledger_')}.{c[1]}" for c in CASES])
def test_a_batch_attributes_each_finding_to_its_memory_as_one_by_one_checks_do(ledger, table, column, value, where,
                                                                                expected, portable):
    i = ids(ledger)
    disable_triggers(table)
    with connection.cursor() as c:
        c.execute(f'UPDATE {table} SET "{column}" = %s WHERE {where.format(**i)}', [value(i)])
    memories = _fresh(ledger)

    def said(findings):  # "log leaf N" is a position in the bundle checked, which a batch shifts
        return [re.sub(r"log leaf \d+", "log leaf N", str(f)) for f in findings]

    alone = {m.pk: said(memory_verify(m, cached=False)) for m in memories}
    batch = memories_verify(memories, cached=False)
    assert batch.keys() == alone.keys()
    for pk, found in batch.items():
        assert said(found) == alone[pk]


def _count_bundles(monkeypatch) -> list[int]:
    """The number of memories of every bundle ``memories_verify`` builds, in order."""
    parts: list[int] = []
    real = export.bundle_parts
    monkeypatch.setattr(export, "bundle_parts", lambda org, memories: parts.append(len(memories)) or
                        real(org, memories=memories))
    return parts


def test_a_batch_fails_only_the_tampered_memory_and_caches_the_clean_ones(ledger, monkeypatch):
    disable_triggers("ledger_genesisentry")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_genesisentry SET signature = %s WHERE memory_id = %s", [SIG, ledger["m1"].pk])
    memories = [m for m in _fresh(ledger) if m.external_id != "m3"]
    parts = _count_bundles(monkeypatch)

    found = memories_verify(memories)

    assert parts == [3]  # one bundle for the three
    assert [str(f) for f in found[ledger["m1"].pk]] and all(
        f.subject == "memory=main/m1" for f in found[ledger["m1"].pk])
    assert found[ledger["m0"].pk] == [] and found[ledger["m2"].pk] == []
    assert memories_verify(memories)[ledger["m1"].pk]  # failures are never cached
    assert parts == [3, 1]  # only m1 was checked again: m0 and m2 came from the cache


def test_a_batch_with_a_finding_it_cannot_attribute_checks_each_memory_alone(ledger, monkeypatch):
    disable_triggers("ledger_keyepoch")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_keyepoch SET endorsement = %s WHERE number = 2", [SIG])
    memories = [m for m in _fresh(ledger) if m.external_id != "m3"]
    parts = _count_bundles(monkeypatch)

    found = memories_verify(memories)

    assert parts == [3, 1, 1, 1]
    assert found == {m.pk: memory_verify(m, cached=False) for m in memories}
    assert any(f.subject == "epoch=2" for f in found[ledger["m0"].pk])


def test_checking_some_memories_reads_only_this_organizations_key_endorsement_leaves_by_the_memory_index(
        ledger, memories, organization):
    from django.test.utils import CaptureQueriesContext

    from ledger import services

    other = Organization.objects.create(name="Initech", slug="initech")
    services.housekeeper_init(organization=other)
    theirs = services.memories_create(store=services.store_create(organization=other, name="G", slug="g"),
                                      records=[{"id": "x", "text": "Initech memory."}])
    services.memory_genesis_sign(memory_ids=[m.pk for m in theirs])  # initech's online key: its own leaf
    assert LogLeaf.objects.filter(organization=other, memory__isnull=True).exists()
    m0 = Memory.objects.select_related("store").get(pk=memories[0].pk)
    with CaptureQueriesContext(connection) as queries:
        parts = export.bundle_parts(organization, memories=[m0])
    keys = [row for row in parts["leaf_rows"] if row[1] is None]
    ours = list(LogLeaf.objects.filter(organization=organization, memory__isnull=True).order_by("index")
                .values_list("index", flat=True))
    assert [row[0] for row in keys] == ours and ours  # acme's endorsements, none of initech's
    assert memory_verify(m0) == [] and memory_verify(Memory.objects.get(pk=theirs[0].pk)) == []
    if connection.vendor == "sqlite":  # the plan: the memory index, not a walk of the organization's log
        sql = next(q["sql"] for q in queries.captured_queries if '"memory_id" IS NULL' in q["sql"])
        with connection.cursor() as c:
            c.execute("EXPLAIN QUERY PLAN " + sql)
            plan = " ".join(str(r) for r in c.fetchall())
        assert "logleaf_memory_index" in plan, plan


def test_a_tree_head_signed_while_the_bundle_is_read_leaves_the_bundle_consistent(ledger, memories, organization,
                                                                                   monkeypatch):
    """"Verify now" under load (CI, a loaded host): the housekeeper signed a tree head between the
    bundle's read of its tree heads and its read of their checkpoints, and the live verification
    reported "checkpoint #1 — size 69 matches no valid tree head of the bundle". The tree heads
    are read once, before the log's leaves, and the checkpoints are those heads' notes."""
    from ledger import checkpoints, services

    services.transition_append(memory_id=memories[2].pk, valence_q=500, evidence=["outcome:3"])  # the log grew
    real = checkpoints.checkpoint_notes

    def housekeeper_signs_meanwhile(*args, **kwargs):
        services.tree_head_issue(organization=organization)
        return real(*args, **kwargs)

    monkeypatch.setattr(export, "checkpoint_notes", housekeeper_signs_meanwhile)
    heads_before = TreeHead.objects.filter(organization=organization).count()
    assert organization_verify(organization) == []
    assert TreeHead.objects.filter(organization=organization).count() == heads_before + 1  # it did sign one
