"""Fuzzing the upload paths (DESIGN section 5): memory files (JSONL, JSON array, CSV) through the
engine's parser and the one import path, incident files through ``incidents_import``.

Properties, for any bytes at all:
- no exception escapes other than the typed validation error (anything else is a 500 upstream);
- a rejected file writes nothing (row counts unchanged) and every issue names the file, a line
  within it (or none) and a message;
- an accepted file writes exactly its records, and every string stored can be stored: valid
  UTF-8 without NUL (PostgreSQL text refuses NUL; SQLite and hashing refuse lone surrogates).
"""

from __future__ import annotations

import pytest
from django.db import transaction
from hypothesis import given

from audits.engine.scenario import MemoryRecord, ValidationError, parse_memories
from tests.hardening.conftest import count_case, fuzz_settings
from tests.hardening.strategies import incident_file, memory_file

pytestmark = pytest.mark.django_db


def _storable(value) -> bool:
    if isinstance(value, str):
        if "\x00" in value:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return all(_storable(k) and _storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(v) for v in value)
    return True


def _check_issues(issues, filename: str, data: bytes) -> None:
    assert issues, "a rejection must say why"
    n_lines = len(data.splitlines()) + 1  # as csv counts lines: \n, \r\n or a lone \r
    for issue in issues:
        file, line, message = (issue["file"], issue["line"], issue["message"]) if isinstance(issue, dict) else (
            issue.file, issue.line, issue.message)
        assert file == filename, issue
        assert line is None or 1 <= line <= n_lines, (issue, n_lines)
        assert isinstance(message, str) and message.strip(), issue


@fuzz_settings()
@given(memory_file())
def test_fuzz_parse_memories_accepts_only_storable_records_or_names_the_problem(upload):
    filename, data, _ = upload
    count_case("memories file: parser")
    try:
        records = parse_memories(data, filename)
    except ValidationError as exc:
        _check_issues(exc.issues, filename, data)
        return
    assert records and all(isinstance(r, MemoryRecord) for r in records)
    for r in records:
        assert _storable(r.id) and _storable(r.text) and _storable(r.metadata), r
        assert r.id.strip() and r.text.strip()


@fuzz_settings(2)
@given(upload=memory_file())
def test_fuzz_memories_import_is_all_or_nothing_with_clear_messages(store, upload):
    from ledger.imports import memories_import
    from ledger.models import ImportJob, Memory

    filename, data, _ = upload
    count_case("memories file: import (service)")
    with transaction.atomic():
        before = Memory.objects.count()
        job = memories_import(store=store, data=data, filename=filename)
        after = Memory.objects.count()
        if job.status == ImportJob.Status.FAILED:
            assert after == before, "a rejected file wrote memories"
            _check_issues(job.errors, filename, data)
            assert all(set(e) == {"file", "line", "field", "message"} for e in job.errors)
        else:
            assert after == before + job.total and job.total > 0
            assert Memory.objects.filter(store=store, external_id="").count() == 0
        transaction.set_rollback(True)


@fuzz_settings()
@given(upload=memory_file())
def test_fuzz_memory_upload_page_never_fails_and_imports_all_or_nothing(client, org_a, alice, upload):
    """The browser upload (multipart) through the page, as the analyst."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from ledger.models import Memory
    from ledger.services import store_create

    filename, data, _ = upload
    count_case("memories file: upload page")
    with transaction.atomic():
        store = store_create(organization=org_a, name="Fuzz", slug="fuzz")
        client.force_login(alice)
        before = Memory.objects.count()
        resp = client.post(reverse("store-import", kwargs={"store_id": store.pk}),
                           {"file": SimpleUploadedFile(filename, data)})
        assert resp.status_code in (302, 400), resp.status_code
        if resp.status_code == 400:
            assert Memory.objects.count() == before
        transaction.set_rollback(True)


@fuzz_settings(2)
@given(upload=incident_file(["m0", "m1", "m2"]))
def test_fuzz_incidents_import_is_all_or_nothing_with_clear_messages(memories, store, upload):
    from audits.models import Incident
    from audits.services import incidents_import

    filename, data = upload
    count_case("incidents file: import (service)")
    with transaction.atomic():
        before = Incident.objects.count()
        try:
            rows = incidents_import(store=store, data=data, filename=filename)
        except ValidationError as exc:
            assert Incident.objects.count() == before, "a rejected file wrote incidents"
            _check_issues(exc.issues, filename, data)
        else:
            assert Incident.objects.count() == before + len(rows) and rows
            for inc in rows:
                assert _storable(inc.query) and _storable(inc.output) and _storable(inc.retrieved)
                assert set(inc.retrieved) <= {"m0", "m1", "m2"}
        transaction.set_rollback(True)


# Cases the fuzzer found in the engine's parser (fixed in audits/engine/scenario.py); each
# was a 500 (or a record split in two) before the fix.
REGRESSIONS = [
    ("lone surrogate", "memories.jsonl", b'{"id": "a", "text": "x\\ud800y"}\n', 1, "text", "surrogate"),
    ("NUL in text", "memories.jsonl", b'{"id": "a", "text": "x\\u0000y"}\n', 1, "text", "NUL"),
    ("NUL in metadata", "memories.json", b'[{"id": "a", "text": "x", "metadata": {"k": "\\u0000"}}]', 1,
     "metadata.k", "NUL"),
    ("NaN", "memories.jsonl", b'{"id": "a", "text": "x"}\n{"id": "b", "text": "x", "metadata": {"v": NaN}}\n', 2,
     None, "NaN"),
    ("Infinity in an array file", "memories.json", b'[{"id": "a", "text": "x", "metadata": {"v": -Infinity}}]', 1,
     None, "Infinity"),
    ("deep nesting", "memories.jsonl", b'{"id": "a", "text": "x", "metadata": ' + b'{"a":' * 5000 + b"1"
     + b"}" * 5001 + b"\n", 1, None, "nested too deeply"),
    ("huge integer", "memories.jsonl", b'{"id": "a", "text": "x", "metadata": {"n": 1' + b"0" * 5000 + b"}}\n", 1,
     None, "digits"),
    ("CSV field over the csv limit", "memories.csv", b"id,text\na,ok\nb," + b"x" * 200_000 + b"\n", 3, None,
     "field larger"),
    ("NUL in a CSV cell", "memories.csv", b"id,text\na,x\x00y\n", 2, "text", "NUL"),
]


@pytest.mark.parametrize("filename,data,line,field,words", [r[1:] for r in REGRESSIONS],
                         ids=[r[0] for r in REGRESSIONS])
def test_the_parser_refuses_what_no_database_stores_naming_line_and_field(filename, data, line, field, words):
    with pytest.raises(ValidationError) as info:
        parse_memories(data, filename)
    [issue] = info.value.issues
    assert (issue.file, issue.line, issue.field) == (filename, line, field), issue
    assert words in issue.message, issue


def test_a_line_separator_inside_a_jsonl_string_does_not_split_the_record():
    data = '{"id": "a", "text": "one\u2028two\u2029three\x85four"}\n{"id": "b", "text": "y"}\n'.encode()
    records = parse_memories(data, "memories.jsonl")
    assert [r.id for r in records] == ["a", "b"] and records[0].text == "one\u2028two\u2029three\x85four"


def test_a_rejected_memories_file_leaves_the_store_untouched_through_the_api(client, org_a, dana):
    from ledger.models import ImportJob, Memory
    from ledger.services import store_create

    store = store_create(organization=org_a, name="Main", slug="main")
    client.force_login(dana)
    url = f"/api/v1/stores/{store.pk}/memories/"
    for name, filename, data, *_ in REGRESSIONS:
        from django.core.files.uploadedfile import SimpleUploadedFile

        resp = client.post(url, {"file": SimpleUploadedFile(filename, data)})
        assert resp.status_code == 400, (name, resp.status_code)
        assert filename in resp.json()["detail"] and resp.json()["errors"], name
    assert Memory.objects.count() == 0
    assert set(ImportJob.objects.values_list("status", flat=True)) == {ImportJob.Status.FAILED}
