"""Operator commands: housekeeper init|rotate|revoke|status|tree-head, ledger_export, ledger_verify; tasks."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from ledger import tasks
from ledger.core.verify import main as portable_verify
from ledger.models import KeyEpoch, Memory, TreeHead
from orgs.models import Organization

pytestmark = pytest.mark.django_db


def run(capsys, *args) -> str:
    capsys.readouterr()
    call_command(*args)
    return capsys.readouterr().out


def test_housekeeper_init_rotate_revoke_and_status(organization, capsys, settings, monkeypatch):
    monkeypatch.delenv("MEMAUDIT_ROLE", raising=False)  # the command holds the role itself
    out = run(capsys, "housekeeper", "init", "--org", "acme")
    assert "epoch 1 created" in out and "trust anchor" in out
    assert not next(iter(settings.HOUSEKEEPER_KEY_DIR.glob("*/*.key"))).stat().st_mode & 0o077
    with pytest.raises(CommandError, match="already has key epochs"):
        call_command("housekeeper", "init", "--org", "acme")
    assert "endorsed by epoch 1" in run(capsys, "housekeeper", "rotate", "--org", "acme")
    assert "revoked" in run(capsys, "housekeeper", "revoke", "--org", "acme", "--epoch", "1")
    status = run(capsys, "housekeeper", "status", "--org", "acme")
    assert "epoch 1" in status and "revoked" in status and "epoch 2" in status and "active" in status
    assert KeyEpoch.objects.filter(organization=organization).count() == 2
    assert not KeyEpoch.objects.values_list("public_key", flat=True).filter(public_key=b"").exists()
    with pytest.raises(CommandError, match="no organization"):
        call_command("housekeeper", "status", "--org", "nope")


def test_export_and_verify_a_clean_ledger(memories, tmp_path, capsys):
    tasks.tree_head_issue_task(Organization.objects.get(slug="acme").pk)
    assert "OK" in run(capsys, "ledger_verify", "--org", "acme")
    out = tmp_path / "acme.json"
    assert "3 memories" in run(capsys, "ledger_export", "--org", "acme", "--out", str(out))
    bundle = json.loads(out.read_text())
    assert bundle["tenant"] == "acme"
    anchor = bundle["epochs"][0]["public_key"]
    assert portable_verify([str(out), "--anchor", anchor]) == 0
    assert portable_verify([str(out)]) == 3  # UNANCHORED without the pinned epoch-1 key
    d = tmp_path / "acme-dir"
    run(capsys, "ledger_export", "--org", "acme", "--out", str(d), "--dir")
    assert portable_verify([str(d), "--anchor", anchor]) == 0


def test_tasks_hold_the_housekeeper_role_themselves(store, housekeeper, monkeypatch):
    from ledger.services import memories_create

    [m] = memories_create(store=store, records=[{"id": "t", "text": "task"}])
    monkeypatch.delenv("MEMAUDIT_ROLE")
    assert tasks.memory_genesis_sign_task([m.pk]) == 1
    # A label message carries a decision id only; label fields of the sender's choosing are refused.
    assert tasks.label_append_task(m.pk, "poison_suspect", "r", {}, "user:alice", "k1") == 0
    assert tasks.outcomes_apply_task(store.organization_id) == 0
    assert tasks.tree_head_issue_task(store.organization_id) == 2  # genesis + the online key's endorsement
    assert TreeHead.objects.count() == 1 and Memory.objects.get(pk=m.pk).epistemic_state == ""
    assert tasks.memory_genesis_sign_task.name == "ledger.tasks.memory_genesis_sign_task"
