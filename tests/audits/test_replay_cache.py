"""Replays are cached per store by (query, retrieved ids, agent config hash): re-auditing an
unchanged store reaches the agent zero times."""

from __future__ import annotations

import pytest

from audits import services
from audits.models import AuditRun, ReplayCacheEntry
from audits.services import analysis as analysis_services
from audits.services import replay as replay_services

pytestmark = pytest.mark.django_db(transaction=True)


class Counting:
    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def answer(self, query, retrieved, candidates=None):
        self.calls += 1
        return self.inner.answer(query, retrieved, candidates)


@pytest.fixture
def agents(monkeypatch):
    made: list[Counting] = []

    def factory(config):
        made.append(Counting(services.make_agent(config)))
        return made[-1]

    monkeypatch.setattr(replay_services, "agent_for", factory)
    return made


def _audit(poisoned, alice, incident_ids, **settings) -> AuditRun:
    run = services.audit_run_create(store=poisoned.store, incident_ids=incident_ids, settings=settings, user=alice)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    return run


def test_a_re_audit_of_an_unchanged_store_calls_the_agent_zero_times(poisoned, alice, agents):
    ids = [i.pk for i in services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=alice)]
    first = _audit(poisoned, alice, ids)
    first_calls = sum(a.calls for a in agents)
    assert first_calls > 0 and first.results["agent_calls"] == first_calls
    assert ReplayCacheEntry.objects.filter(store=poisoned.store).count() == first_calls

    services._CONTEXTS.items.clear()  # as if another worker process took the re-audit
    agents.clear()
    # Another alpha: the analysis is recomputed (no reuse), every replay comes from the cache.
    second = _audit(poisoned, alice, ids, alpha=0.5)
    assert "reused_from" not in second.results
    assert sum(a.calls for a in agents) == 0
    assert second.results["agent_calls"] == 0
    assert second.results["batch"] == first.results["batch"]


def test_a_re_audit_with_nothing_changed_reuses_the_analysis(poisoned, alice, agents, monkeypatch):
    ids = [i.pk for i in services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=alice)]
    first = _audit(poisoned, alice, ids)
    monkeypatch.setattr(analysis_services, "analyse", lambda *a, **k: pytest.fail("the analysis was recomputed"))
    agents.clear()
    second = _audit(poisoned, alice, ids)
    assert second.results["reused_from"] == first.pk and second.fingerprint == first.fingerprint
    assert sum(a.calls for a in agents) == 0
    assert [(s.memory_id, s.rank, s.ds, s.in_batch) for s in second.suspects.order_by("rank")] == \
        [(s.memory_id, s.rank, s.ds, s.in_batch) for s in first.suspects.order_by("rank")]


def test_a_ledger_change_in_the_store_invalidates_the_reuse(poisoned, alice, agents, monkeypatch):
    from ledger.services import label_append
    from ledger.signing import housekeeper_role

    ids = [i.pk for i in services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=alice)]
    first = _audit(poisoned, alice, ids)
    top = first.suspects.order_by("rank").first()
    with housekeeper_role():
        label_append(memory_id=top.memory_id, label="poison_likely", reason="confirmed", evidence={},
                     actor="user:bob")
    second = _audit(poisoned, alice, ids)
    assert "reused_from" not in second.results and second.fingerprint != first.fingerprint


def test_another_agent_config_does_not_reuse_the_cache(poisoned, alice, agents):
    ids = [i.pk for i in services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=alice)]
    _audit(poisoned, alice, ids)
    agents.clear()
    _audit(poisoned, alice, ids, agent={"connector": "builtin-vote", "top_k": 4})
    assert sum(a.calls for a in agents) > 0


def test_the_cache_is_per_store(poisoned, globex_store, alice, charlie, agents):
    """Charlie's store holds other texts under the same memory ids: no answer crosses over."""
    ids = [i.pk for i in services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=alice)]
    _audit(poisoned, alice, ids)
    agents.clear()
    theirs = [i.pk for i in services.incidents_import(store=globex_store.store, data=globex_store.incidents_jsonl(),
                                                      filename="incidents.jsonl", user=charlie)]
    run = services.audit_run_create(store=globex_store.store, incident_ids=theirs, settings={}, user=charlie)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    # Every replay of Charlie's audit reached his agent: none was answered from Acme's cache.
    assert sum(a.calls for a in agents) == run.results["agent_calls"] > 0
    assert ReplayCacheEntry.objects.filter(store=globex_store.store).count() == run.results["agent_calls"]
