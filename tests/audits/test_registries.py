"""Connectors and harm types are registered once (``engine.agents.CONNECTORS``,
``engine.harm.HARMS``); agent.json, incident files, the audit settings, the audit form and the API
read the registries, so a class registered here (in a test only) is accepted everywhere and
an unregistered name nowhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.test import APIClient

from audits.engine.agents import CONNECTORS, Agent, AgentOutput, Setting, make_agent
from audits.engine.harm import HARMS, Harm, make_harm
from audits.engine.scenario import ValidationError, parse_agent_config, parse_harm_spec, parse_incidents
from audits.forms import AuditStartForm, agent_choices, endpoint_connector_choices
from audits.models import AuditRun
from audits.services import incidents_import
from audits.services.settings import audit_settings_clean

pytestmark = pytest.mark.django_db


class ShoutHarm(Harm):
    """Harmful when the answer holds ``word`` in capitals."""

    type = "shout"
    title = "Answer shouts a word"
    settings = (Setting("word", "str", required=True, form=True, help="the word"),)

    @classmethod
    def check(cls, spec: Mapping[str, Any]) -> list[tuple[str, str]]:
        problems = super().check(spec)
        if not problems and not spec["word"].isalpha():
            problems.append(("word", "letters only"))
        return problems

    def score(self, query: str, output: str, *, harmful_output: str | None = None) -> float:
        return 1.0 if self.spec["word"].upper() in (output or "") else 0.0


class ParrotAgent(Agent):
    connector = "parrot"
    title = analyst_title = "Parrot (repeats the top memory)"
    simulation = True
    settings = (Setting("prefix", "str", form=True, help="put before the answer"),
                Setting("times", "int", min=1, max=3))

    def answer(self, query, retrieved, candidates=None) -> AgentOutput:
        return AgentOutput(str(self.config.get("prefix", "")) + (retrieved[0].text if retrieved else ""))


@pytest.fixture
def shout(monkeypatch):
    monkeypatch.setitem(HARMS, "shout", ShoutHarm)


@pytest.fixture
def parrot(monkeypatch):
    monkeypatch.setitem(CONNECTORS, "parrot", ParrotAgent)


def _form(poisoned, incidents, **data):
    return AuditStartForm({"incidents": [i.pk for i in incidents], "top_k": 5, "alpha": 0.6, **data},
                          incidents=poisoned.store.incidents.all())


@pytest.fixture
def incidents(poisoned, alice):
    return incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(), filename="incidents.jsonl",
                            user=alice)


# ----------------------------------------------------------------------------- harms


def test_an_unregistered_harm_type_is_refused_by_files_settings_and_builder():
    with pytest.raises(ValidationError) as exc:
        parse_harm_spec({"type": "shout", "word": "evil"})
    assert "unknown harm type 'shout'" in str(exc.value)
    with pytest.raises(DjangoValidationError) as exc:
        audit_settings_clean({"harm": {"type": "shout", "word": "evil"}})
    assert "harm" in exc.value.message_dict
    with pytest.raises(ValueError, match="unknown harm type"):
        make_harm({"type": "shout", "word": "evil"})


def test_a_registered_harm_is_checked_by_its_own_rules(shout):
    assert parse_harm_spec({"type": "shout", "word": "evil"}).to_dict() == {"type": "shout", "word": "evil"}
    with pytest.raises(ValidationError) as exc:
        parse_harm_spec({"type": "shout", "word": "ev1l"})
    assert [(i.field, i.message) for i in exc.value.issues] == [("harm.word", "letters only")]
    with pytest.raises(ValidationError) as exc:
        parse_harm_spec({"type": "shout"})
    assert [(i.field, i.message) for i in exc.value.issues] == [("harm.word", "required")]
    assert make_harm({"type": "shout", "word": "evil"})("q", "that is EVIL") == 1.0
    data = b'{"id": "i1", "query": "q", "output": "o", "retrieved": ["m1"], "harm": {"type": "shout", "word": "x"}}\n'
    assert parse_incidents(data, "incidents.jsonl")[0].harm.to_dict() == {"type": "shout", "word": "x"}


def test_a_registered_harm_is_a_choice_of_the_form_with_its_settings(shout, poisoned, incidents):
    form = _form(poisoned, incidents, connector="builtin-vote", harm_type="shout", harm_word="evil")
    assert "shout" in dict(form.fields["harm_type"].choices)
    assert form.is_valid(), form.errors
    settings = form.audit_settings()
    assert settings["harm"] == {"type": "shout", "word": "evil"}
    assert audit_settings_clean(settings)["harm"] == {"type": "shout", "word": "evil"}


def test_the_audit_page_renders_a_registered_harms_settings(shout, client, alice, poisoned, incidents):
    client.force_login(alice)
    page = client.get(f"/audits/new/?store={poisoned.store.pk}").content.decode()
    assert 'name="harm_word"' in page and "Answer shouts a word" in page
    assert 'value="shout"' in page


def test_the_api_accepts_a_registered_harm_and_refuses_an_unknown_one(shout, alice, poisoned, incidents):
    c = APIClient()
    c.force_authenticate(alice)
    ids = [i.pk for i in incidents]
    r = c.post("/api/v1/audits/create/", {"store": poisoned.store.pk, "incident_ids": ids,
                                          "settings": {"harm": {"type": "shout", "word": "evil"}}}, format="json")
    assert r.status_code == 201, r.data
    assert AuditRun.objects.get(pk=r.data["id"]).settings["harm"] == {"type": "shout", "word": "evil"}
    r = c.post("/api/v1/audits/create/", {"store": poisoned.store.pk, "incident_ids": ids,
                                          "settings": {"harm": {"type": "whisper"}}}, format="json")
    assert r.status_code == 400
    assert "shout" in str(r.data)  # the registered types are named in the error


# ----------------------------------------------------------------------------- connectors


def test_agent_json_is_checked_against_the_connectors_schema():
    with pytest.raises(ValidationError) as exc:
        parse_agent_config({"connector": "openai-chat", "model": 5, "base_url": "http://x/v1"})
    assert [(i.field, i.message) for i in exc.value.issues] == [("model", "must be a string, got 5")]
    with pytest.raises(ValidationError) as exc:
        parse_agent_config({"connector": "webhook"})
    assert [(i.field, i.message) for i in exc.value.issues] == [("url", "required for connector 'webhook'")]
    with pytest.raises(ValidationError) as exc:
        parse_agent_config({"connector": "parrot"})
    assert "unknown connector 'parrot'" in str(exc.value)


def test_a_registered_connector_is_accepted_by_agent_json_settings_and_form(parrot, poisoned, incidents):
    assert parse_agent_config({"connector": "parrot", "times": 2}).settings == {"times": 2}
    with pytest.raises(ValidationError) as exc:
        parse_agent_config({"connector": "parrot", "times": 9})
    assert [i.field for i in exc.value.issues] == ["times"]
    assert isinstance(make_agent({"connector": "parrot"}), ParrotAgent)
    assert audit_settings_clean({"agent": {"connector": "parrot", "prefix": ">"}})["agent"] == {
        "connector": "parrot", "top_k": 5, "prefix": ">"}
    assert ("parrot", ParrotAgent.analyst_title) in agent_choices()
    form = _form(poisoned, incidents, connector="parrot", prefix=">")
    assert form.is_valid(), form.errors
    assert form.audit_settings()["agent"] == {"connector": "parrot", "top_k": 5, "prefix": ">"}


def test_a_simulation_is_never_an_endpoint_connector():
    assert [c for c, _ in endpoint_connector_choices()] == ["openai-chat", "webhook"]


@pytest.mark.parametrize("key", ["url", "base_url", "api_key", "api_key_env", "headers"])
def test_an_analyst_cannot_give_a_registered_connector_a_url_or_secret(parrot, key):
    with pytest.raises(DjangoValidationError) as exc:
        audit_settings_clean({"agent": {"connector": "parrot", key: "x"}})
    assert f"{key}: not accepted in audit settings" in " ".join(exc.value.message_dict["agent"])
