"""``manage.py audit`` and ``manage.py evaluate`` (DESIGN section 5)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audits.engine.evaluate import KEYS, METHODS
from audits.models import AuditRun
from tests.audits.engine.conftest import qa_scenario

pytestmark = pytest.mark.django_db(transaction=True)


def _write_scenario(path, **kw):
    sc = qa_scenario(**kw)
    path.mkdir()
    (path / "memories.jsonl").write_text("".join(
        json.dumps({"id": m.id, "text": m.text, "metadata": m.metadata}) + "\n" for m in sc.memories))
    (path / "probes.jsonl").write_text("".join(json.dumps(
        {"id": p.id, "query": p.query, "harm": p.harm.to_dict(), "observed": p.observed}) + "\n" for p in sc.probes))
    (path / "agent.json").write_text(json.dumps({"connector": "builtin-vote", "top_k": 5}))
    (path / "truth.json").write_text(json.dumps({"poisoned": sorted(sc.truth)}))
    return sc


def test_evaluate_prints_and_writes_every_method(tmp_path):
    _write_scenario(tmp_path / "sc", n_topics=12, n_targets=3, poisons_per_target=3)
    out = StringIO()
    call_command("evaluate", str(tmp_path / "sc"), "--method", "all", "--json", str(tmp_path / "out.json"),
                 stdout=out)
    data = json.loads((tmp_path / "out.json").read_text())
    assert list(data) == list(METHODS)
    for row in data.values():
        assert list(row) == list(KEYS)
    ma = data["memaudit"]
    assert ma["asr_before"] == 1.0 - 9 / 12 or ma["asr_before"] > 0
    assert ma["asr_after"] == 0.0 and ma["precision"] == 1.0 and ma["recall"] == 1.0
    assert ma["removed"] == 9 and ma["agent_calls"] > 0
    assert all(data[m]["removed"] == ma["removed"] for m in METHODS)
    assert data["random"]["recall"] < 1.0
    assert "memaudit" in out.getvalue() and "asr_before" in out.getvalue()


def test_evaluate_one_method_and_bad_input(tmp_path):
    _write_scenario(tmp_path / "sc", n_topics=8, n_targets=2, poisons_per_target=2)
    call_command("evaluate", str(tmp_path / "sc"), "--method", "cmis", "--alpha", "0.6",
                 "--json", str(tmp_path / "o.json"), stdout=StringIO())
    assert list(json.loads((tmp_path / "o.json").read_text())) == ["cmis"]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "memories.jsonl").write_text('{"id": "a"}\n')
    with pytest.raises(CommandError, match=r"memories.jsonl:1 \[text\]"):
        call_command("evaluate", str(tmp_path / "bad"), stdout=StringIO())


def test_audit_command_imports_runs_and_prints_suspects(poisoned, tmp_path):
    path = tmp_path / "incidents.jsonl"
    path.write_bytes(poisoned.incidents_jsonl())
    out = StringIO()
    call_command("audit", "acme/main", "--incidents", str(path), "--audit-settings", '{"alpha": 0.6}',
                 "--json", str(tmp_path / "r.json"), stdout=out)
    run = AuditRun.objects.get()
    assert run.status == AuditRun.Status.DONE
    text = out.getvalue()
    assert "residual harm 0/" in text
    for mid in poisoned.poisoned:
        assert mid in text
    assert json.loads((tmp_path / "r.json").read_text())["audit_run"] == run.pk


def test_audit_command_reports_bad_files_by_line(poisoned, tmp_path):
    path = tmp_path / "incidents.jsonl"
    path.write_text('{"id": "x", "query": "q", "output": "o", "retrieved": ["ghost"]}\n')
    with pytest.raises(CommandError, match=r"incidents.jsonl:1 \[retrieved\].*'ghost'"):
        call_command("audit", "main", "--incidents", str(path), stdout=StringIO())
    with pytest.raises(CommandError, match="no store"):
        call_command("audit", "nowhere", "--incidents", str(path), stdout=StringIO())


def test_evaluate_through_the_ledger_matches_the_engine_path(tmp_path, monkeypatch):
    from ledger.models import Memory

    monkeypatch.setenv("MEMAUDIT_ROLE", "")
    _write_scenario(tmp_path / "sc", n_topics=12, n_targets=3, poisons_per_target=3)
    call_command("evaluate", str(tmp_path / "sc"), "--json", str(tmp_path / "engine.json"), stdout=StringIO())
    call_command("evaluate", str(tmp_path / "sc"), "--through-ledger", "--json", str(tmp_path / "ledger.json"),
                 stdout=StringIO())
    engine = json.loads((tmp_path / "engine.json").read_text())
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    for method in ("memaudit", "cmis", "frequency"):
        for key in ("asr_before", "asr_after", "removed", "true_positives", "precision", "recall"):
            assert ledger[method][key] == engine[method][key], (method, key)
    # The memories went through the signed import path.
    assert Memory.objects.filter(chain_head__isnull=False).count() == Memory.objects.count() > 0
