"""Tree heads on their own, witness-ready checkpoints and the auditor's pins, on the product:
the schedule's service, the checkpoint / consistency / cosignature endpoints, the export, the
receipt-check page, and the verifier run on what the product serves."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger import services
from ledger.core.checkpoint import open_checkpoint, parse_checkpoint_text
from ledger.core.merkle import verify_consistency
from ledger.core.note import COSIGNATURE_V1, NoteSigner, VerifierKey, cosign, parse_note
from ledger.models import TreeHead, WitnessCosignature
from ledger.signing import epochs_for, receipt_key_endorsement_for

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
WITNESS = NoteSigner("witness.example/w1", b"\x07" * 32, COSIGNATURE_V1)
WKEY = VerifierKey(WITNESS.name, COSIGNATURE_V1, WITNESS.public_key)


def test_every_tree_head_is_also_a_signed_c2sp_checkpoint(ledger, organization, client):
    r = client.get(f"/api/v1/orgs/{organization.slug}/checkpoint")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/plain")
    opened = open_checkpoint(r.content, [e.public_key for e in epochs_for(organization)])
    newest = TreeHead.objects.filter(organization=organization).order_by("-size").first()
    assert opened.checkpoint.origin == "127.0.0.1:8000/memaudit/acme"
    assert (opened.checkpoint.size, opened.checkpoint.root) == (newest.size, bytes(newest.root))
    assert client.get("/api/v1/orgs/nobody/checkpoint").status_code == 404


def test_the_schedule_signs_only_where_the_log_grew(ledger, organization, memories):
    assert services.tree_heads_issue_due() == 0  # the fixture's last tree head covers the log
    services.label_append(memory_id=memories[1].pk, label="poison_suspect", reason="r", evidence={}, actor="user:a")
    before = TreeHead.objects.count()
    assert services.tree_heads_issue_due() == 1
    assert TreeHead.objects.count() == before + 1
    assert services.tree_heads_issue_due() == 0


def test_the_beat_schedule_runs_the_task_every_interval(settings):
    import ledger.tasks  # noqa: F401  (registers the tasks, as the worker's autodiscovery does)
    from memaudit_site.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["tree-heads"]
    assert entry["task"] == "ledger.tasks.tree_heads_issue_due_task" and entry["schedule"] == 60.0
    assert app.conf.beat_schedule["tree-heads"]["task"] in app.tasks
    run = (ROOT / "bin" / "run").read_text()
    assert "worker -B -Q housekeeper -c 1" in run


def test_consistency_proofs_link_two_checkpoints(ledger, organization, client):
    sizes = sorted(TreeHead.objects.filter(organization=organization).values_list("size", flat=True))
    old, new = sizes[0], sizes[-1]
    r = client.get(f"/api/v1/orgs/acme/proof/consistency?old={old}&new={new}")
    assert r.status_code == 200
    proof = [base64.b64decode(h) for h in r.json()["proof"]]
    roots = {t.size: bytes(t.root) for t in TreeHead.objects.filter(organization=organization)}
    verify_consistency(old, new, proof, roots[old], roots[new])
    for bad in (f"old=0&new={new}", f"old={new}&new={old}", f"old=1&new={new + 1}", "old=a&new=2"):
        assert client.get(f"/api/v1/orgs/acme/proof/consistency?{bad}").status_code == 400


def test_a_known_witness_cosignature_is_stored_and_served(ledger, organization, client):
    from ledger.checkpoints import witness_key_add

    witness_key_add(organization=organization, vkey=WKEY.encode())
    note = client.get("/api/v1/orgs/acme/checkpoint").content.decode()
    line = cosign(parse_note(note), WITNESS, int(time.time())).line()
    r = client.post("/api/v1/orgs/acme/checkpoint/cosignature", note + line, content_type="text/plain")
    assert r.status_code == 201 and r.json() == {"stored": 1, "witnesses": [WITNESS.name]}
    assert client.post("/api/v1/orgs/acme/checkpoint/cosignature", note + line,
                       content_type="text/plain").json()["stored"] == 0  # a repeat is not stored twice
    served = client.get("/api/v1/orgs/acme/checkpoint").content.decode()
    assert served == note + line
    # refused: a stranger's cosignature, a forged one, a checkpoint this log never signed
    stranger = NoteSigner("witness.example/w1", b"\x08" * 32, COSIGNATURE_V1)
    for body in (note + cosign(parse_note(note), stranger, 1).line(),
                 note + line.replace(line.split(" ")[-1][:12], "AAAAAAAAAAAA"),
                 note.replace(note.split("\n")[2], base64.b64encode(b"\x00" * 32).decode()) + line, "junk"):
        r = client.post("/api/v1/orgs/acme/checkpoint/cosignature", body, content_type="text/plain")
        assert r.status_code == 400, body
    assert WitnessCosignature.objects.count() == 1


def test_only_a_cosignature_key_can_be_trusted_as_a_witness(organization):
    from django.core.exceptions import ValidationError

    from ledger.checkpoints import witness_key_add

    with pytest.raises(ValidationError):
        witness_key_add(organization=organization, vkey=VerifierKey("w", 0x01, WITNESS.public_key).encode())
    with pytest.raises(ValidationError):
        witness_key_add(organization=organization, vkey="not a key")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.core.verify", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_the_export_verifies_anchored_against_the_served_checkpoint_and_witness(ledger, organization, memories,
                                                                                 client, alice, tmp_path):
    from ledger.checkpoints import witness_key_add

    client.force_login(alice)
    witness_key_add(organization=organization, vkey=WKEY.encode())
    pinned = client.get("/api/v1/orgs/acme/checkpoint").content.decode()
    pinned += cosign(parse_note(pinned), WITNESS, int(time.time())).line()
    (tmp_path / "checkpoint.txt").write_text(pinned)
    # the log grows after the pin; the export asks the housekeeper for a covering tree head
    services.label_append(memory_id=memories[2].pk, label="poison_suspect", reason="r", evidence={}, actor="user:a")
    r = client.get("/ledger/export/")
    assert r.status_code == 200
    bundle = json.loads(r.content)
    assert len(bundle["log"]["checkpoints"]) == TreeHead.objects.filter(organization=organization).count()
    (tmp_path / "b.json").write_bytes(r.content)
    anchor = epochs_for(organization)[0].public_key.hex()
    out = _cli(str(tmp_path / "b.json"), "--anchor", anchor, "--checkpoint", str(tmp_path / "checkpoint.txt"),
               "--witness", WKEY.encode(), "--witness-threshold", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "consistent with the pinned checkpoint" in out.stdout
    out = _cli(str(tmp_path / "b.json"))
    assert out.returncode == 3 and out.stdout.startswith("UNANCHORED")


def test_the_ledger_page_shows_the_pins_and_the_tree_head_age(ledger, organization, client, alice):

    client.force_login(alice)  # an analyst
    r = client.get("/ledger/")
    body = r.content.decode()
    assert epochs_for(organization)[0].public_key.hex() in body
    assert "/api/v1/orgs/acme/checkpoint" in body and 'id="sth-age"' in body and " s ago" in body
    assert 'id="issue-sth"' in body  # analysts may ask for a tree head too
    assert client.post("/ledger/tree-head/").status_code == 302


def test_the_receipt_check_page(ledger, organization, store, client, alice, recall_settings):
    from ledger.models import Receipt
    from ledger.recall import recall

    client.force_login(alice)
    services.tree_head_issue(organization=organization)
    recall(store=store, query="Memory number 1", k=2)
    receipt = Receipt.objects.filter(organization=organization).latest("id").body
    services.label_append(memory_id=ledger["m1"].pk, label="poison_suspect", reason="r", evidence={}, actor="u:a")
    services.tree_head_issue(organization=organization)  # the checkpoint moved on: a proof links them
    r = client.post("/ledger/receipt-check/", {"receipt": json.dumps(receipt)})
    assert r.status_code == 200 and "✓ Verified" in r.content.decode(), r.content.decode()[:3000]
    forged = json.loads(json.dumps(receipt))
    forged["body"]["sth_root"] = "00" * 32
    r = client.post("/ledger/receipt-check/", {"receipt": json.dumps(forged)})
    assert "finding" in r.content.decode()
    r = client.post("/ledger/receipt-check/", {"receipt": "{not json"})
    assert "Not checked" in r.content.decode()


def test_the_receipt_command_checks_a_receipt_against_anchor_and_checkpoint(ledger, organization, store, tmp_path,
                                                                             client, recall_settings):
    from ledger.recall import recall

    services.tree_head_issue(organization=organization)
    recall(store=store, query="Memory number 1", k=2)
    from ledger.models import Receipt, ReceiptKey

    receipt = Receipt.objects.filter(organization=organization).latest("id").body
    key = bytes(ReceiptKey.objects.get(organization=organization, key_id=receipt["body"]["key_id"]).public_key)
    # the key history since the anchor (the fixture rotated once): the checkpoint is signed by epoch 2
    epochs = [e.to_json() for e in epochs_for(organization)]
    endorsement = receipt_key_endorsement_for(organization, receipt["body"]).to_json()
    (tmp_path / "r.json").write_text(json.dumps({"receipt": receipt, "receipt_public_key": key.hex(),
                                                 "receipt_key_endorsement": endorsement, "epochs": epochs}))
    (tmp_path / "cp.txt").write_bytes(client.get("/api/v1/orgs/acme/checkpoint").content)
    anchor = epochs_for(organization)[0].public_key.hex()
    out = _cli("receipt", str(tmp_path / "r.json"), "--anchor", anchor, "--checkpoint", str(tmp_path / "cp.txt"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert parse_checkpoint_text(parse_note((tmp_path / "cp.txt").read_text()).text).size == receipt["body"]["sth_size"]
    out = _cli("receipt", str(tmp_path / "r.json"), "--anchor", "11" * 32, "--checkpoint", str(tmp_path / "cp.txt"))
    assert out.returncode == 1 and "FAIL checkpoint" in out.stdout
    out = _cli("receipt", str(tmp_path / "r.json"))
    assert out.returncode == 3 and out.stdout.startswith("UNANCHORED")

    # Issue 13: a receipt signed by a key of the forger's own, named in the file, is refused; so
    # is the real receipt when the file carries no endorsement of its key.
    from ledger.core.keys import Ed25519Key
    from ledger.core.receipts import TAG_RECEIPT, entry_hash, key_id

    stranger = Ed25519Key.generate()
    body = {**receipt["body"], "key_id": key_id(stranger.public_key)}
    forged = {**receipt, "body": body, "signature": stranger.sign(entry_hash(TAG_RECEIPT, body)).hex()}
    (tmp_path / "f.json").write_text(json.dumps({"receipt": forged, "receipt_public_key": stranger.public_key.hex(),
                                                 "receipt_key_endorsement": endorsement, "epochs": epochs}))
    out = _cli("receipt", str(tmp_path / "f.json"), "--anchor", anchor, "--checkpoint", str(tmp_path / "cp.txt"))
    assert out.returncode == 1 and "FAIL receipt key" in out.stdout, out.stdout
    (tmp_path / "n.json").write_text(json.dumps({"receipt": receipt, "receipt_public_key": key.hex(),
                                                 "epochs": epochs}))
    out = _cli("receipt", str(tmp_path / "n.json"), "--anchor", anchor, "--checkpoint", str(tmp_path / "cp.txt"))
    assert out.returncode == 1 and "FAIL receipt key" in out.stdout, out.stdout


def test_operator_commands_take_the_pins(ledger, organization, memories, tmp_path, capsys, client):
    from django.core.management import call_command

    (tmp_path / "cp.txt").write_bytes(client.get("/api/v1/orgs/acme/checkpoint").content)
    services.label_append(memory_id=memories[1].pk, label="poison_suspect", reason="r", evidence={}, actor="user:a")
    call_command("ledger_export", "--org", "acme", "--out", str(tmp_path / "b.json"), "--tree-head")
    anchor = epochs_for(organization)[0].public_key.hex()
    out = _cli(str(tmp_path / "b.json"), "--anchor", anchor, "--checkpoint", str(tmp_path / "cp.txt"))
    assert out.returncode == 0, out.stdout  # --tree-head covered the new label
    capsys.readouterr()
    call_command("ledger_verify", "--org", "acme", "--anchor", anchor, "--checkpoint", str(tmp_path / "cp.txt"))
    assert "extends the pinned checkpoint" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        call_command("ledger_verify", "--org", "acme", "--anchor", "22" * 32)
    assert info.value.code == 1 and "FAIL epoch=1" in capsys.readouterr().out
