"""Incident upload: JSONL and JSON arrays, every problem named by file, line and field, all or nothing."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied

from audits import selectors, services
from audits.engine.scenario import ValidationError
from audits.models import Incident

pytestmark = pytest.mark.django_db(transaction=True)

HARM = {"type": "contains", "target": "Evilton"}


def _row(i, retrieved=("c0_0",), **kw):
    return {"id": f"inc-{i}", "query": "what is the capital of Country0?", "output": "Evilton",
            "retrieved": list(retrieved), "harm": HARM, **kw}


def test_it_imports_jsonl(poisoned, alice):
    got = services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                    filename="incidents.jsonl", user=alice)
    assert len(got) == len(poisoned.incidents)
    assert got[0].organization == poisoned.store.organization and got[0].created_by == alice
    assert got[0].harm == poisoned.incidents[0]["harm"]


def test_it_imports_a_json_array(poisoned, alice):
    data = json.dumps([_row(1), _row(2)], indent=2).encode()
    got = services.incidents_import(store=poisoned.store, data=data, filename="incidents.json", user=alice)
    assert [i.external_id for i in got] == ["inc-1", "inc-2"]


def test_it_names_unknown_memory_ids_with_line_and_writes_nothing(poisoned, alice):
    data = (json.dumps(_row(1)) + "\n" + json.dumps(_row(2, retrieved=["c0_0", "nope-1"])) + "\n").encode()
    with pytest.raises(ValidationError) as exc:
        services.incidents_import(store=poisoned.store, data=data, filename="incidents.jsonl", user=alice)
    (issue,) = exc.value.issues
    assert (issue.file, issue.line, issue.field) == ("incidents.jsonl", 2, "retrieved")
    assert "'nope-1'" in issue.message
    assert Incident.objects.count() == 0


def test_a_json_array_error_names_the_line_of_the_element(poisoned, alice):
    data = json.dumps([_row(1), {"id": "inc-2", "query": "q", "retrieved": "c0_0"}], indent=2).encode()
    with pytest.raises(ValidationError) as exc:
        services.incidents_import(store=poisoned.store, data=data, filename="incidents.json", user=alice)
    # The element opens on the line before its "id".
    start = next(n for n, line in enumerate(data.decode().splitlines(), start=1) if '"inc-2"' in line) - 1
    fields = {(i.line, i.field) for i in exc.value.issues}
    assert (start, "output") in fields and (start, "retrieved") in fields


def test_it_rejects_malformed_json_and_duplicates(poisoned, alice):
    with pytest.raises(ValidationError) as exc:
        services.incidents_import(store=poisoned.store, data=b'{"id": "x", "query": \n',
                                  filename="incidents.jsonl", user=alice)
    assert exc.value.issues[0].line == 1 and "bad JSON" in exc.value.issues[0].message
    services.incidents_import(store=poisoned.store, data=(json.dumps(_row(1)) + "\n").encode(),
                              filename="incidents.jsonl", user=alice)
    with pytest.raises(ValidationError) as exc:
        services.incidents_import(store=poisoned.store, data=(json.dumps(_row(1)) + "\n").encode(),
                                  filename="incidents.jsonl", user=alice)
    assert exc.value.issues[0].field == "id" and "already exists" in exc.value.issues[0].message


def test_the_single_form_uses_the_same_checks(poisoned, alice):
    inc = services.incident_create(store=poisoned.store, query="q?", output="Evilton", retrieved=["c0_0"],
                                   harm=HARM, user=alice)
    assert inc.external_id.startswith("inc-") and inc.retrieved == ["c0_0"]
    with pytest.raises(ValidationError) as exc:
        services.incident_create(store=poisoned.store, query="", output="x", retrieved=[], user=alice)
    assert {i.field for i in exc.value.issues} == {"query", "retrieved"}


def test_a_reviewer_cannot_upload_and_charlie_cannot_see_them(poisoned, alice, bob, charlie, globex):
    with pytest.raises(PermissionDenied):
        services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                  filename="incidents.jsonl", user=bob)
    with pytest.raises(PermissionDenied):
        services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                  filename="incidents.jsonl", user=charlie)
    got = services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                    filename="incidents.jsonl", user=alice)
    assert selectors.incident_list(organization=globex).count() == 0
    with pytest.raises(Incident.DoesNotExist):
        selectors.incident_get(organization=globex, incident_id=got[0].pk)
    rows = selectors.incident_retrieved_memories(incident=got[0])
    assert rows[0]["rank"] == 1 and rows[0]["memory"] is not None
