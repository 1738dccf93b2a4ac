"""The ``echo`` connector: one class in ``audits/engine/agents.py``; agent.json, the audit
settings, the audit form and a whole audit take it from the registry."""

from __future__ import annotations

import pytest

from audits.engine.agents import make_agent
from audits.engine.retriever import RetrievedMemory
from audits.engine.scenario import parse_agent_config
from audits.forms import AuditStartForm
from audits.models import AuditRun
from audits.services import audit_run_create, incidents_import
from audits.services.settings import audit_settings_clean


def test_it_answers_with_the_query_or_the_fixed_reply():
    mem = [RetrievedMemory("m1", "A: Evilton", 0.9, 1)]
    assert make_agent({"connector": "echo"}).answer("who?", mem).text == "who?"
    assert make_agent({"connector": "echo", "reply": "nobody"}).answer("who?", mem).text == "nobody"
    assert make_agent({"connector": "echo"}).simulation


def test_agent_json_checks_its_settings():
    assert parse_agent_config({"connector": "echo", "reply": "x"}).settings == {"reply": "x"}
    with pytest.raises(Exception, match="reply"):
        parse_agent_config({"connector": "echo", "reply": 3})


@pytest.mark.django_db
def test_the_form_and_the_settings_offer_it(poisoned, alice):
    incidents = incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(), filename="i.jsonl",
                                 user=alice)
    form = AuditStartForm({"incidents": [i.pk for i in incidents], "connector": "echo", "reply": "fine",
                           "top_k": 5, "alpha": 0.6}, incidents=poisoned.store.incidents.all())
    assert form.is_valid(), form.errors
    assert audit_settings_clean(form.audit_settings())["agent"] == {"connector": "echo", "top_k": 5, "reply": "fine"}


@pytest.mark.django_db(transaction=True)
def test_an_audit_runs_with_it(poisoned, alice):
    incidents = incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(), filename="i.jsonl",
                                 user=alice)
    run = audit_run_create(store=poisoned.store, incident_ids=[i.pk for i in incidents], user=alice,
                           settings={"agent": {"connector": "echo", "reply": "nothing harmful"}})
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    # An agent that never repeats the poison: no replay is harmful, so nothing is credited.
    assert run.results["batch"] == []
