"""Fuzzing every API input (DESIGN section 7) through the Django test client.

The operations come from the OpenAPI schema at test time (so a new endpoint is fuzzed without
editing this file); bodies are drawn per operation from its request schema — the right field
names with values of any JSON type, awkward strings and numbers — or as arbitrary JSON and raw
bytes. Properties: never a 5xx; a 4xx answers JSON that says what is wrong; a rejected write
changes no row. Targeted properties cover recall {query, k}, outcomes {memory, reward}, bulk
memories and review decisions.
"""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from django.db import transaction
from hypothesis import given
from hypothesis import strategies as st

from tests.hardening.conftest import count_case, fuzz_settings
from tests.hardening.strategies import NASTY_STRINGS, strict_json, texts
from tests.hardening.world import build_tenant

pytestmark = pytest.mark.django_db

WRITE_METHODS = ("post", "put", "patch", "delete")


@cache
def api_schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = schema["components"]["schemas"][name]
    return node


def operations() -> list[tuple[str, str, dict | None]]:
    """(path template, method, JSON request schema or None) for every operation in the schema."""
    schema = api_schema()
    out = []
    for path, item in sorted(schema["paths"].items()):
        for method, op in sorted(item.items()):
            if method not in ("get", *WRITE_METHODS):
                continue
            body = (op.get("requestBody") or {}).get("content", {})
            js = body.get("application/json", {}).get("schema")
            out.append((path, method, _resolve(schema, js) if js else None))
    return out


def value_for(schema: dict, node: dict | None) -> st.SearchStrategy:
    """Values that fit the field's type most of the time and anything at all otherwise."""
    node = _resolve(schema, node or {})
    kind = node.get("type")
    typed: st.SearchStrategy
    if kind == "integer":
        typed = st.one_of(st.integers(-5, 200), st.sampled_from([0, -1, 2**31, 2**63, 2**64, 10**30]))
    elif kind == "number":
        typed = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-3, 3),
                          st.sampled_from([1e308, -1e308, 5e-324]))
    elif kind == "boolean":
        typed = st.booleans()
    elif kind == "array":
        typed = st.lists(value_for(schema, node.get("items")), max_size=4)
    elif kind == "object" and node.get("properties"):
        typed = body_for(schema, node)
    elif kind == "string":
        typed = st.one_of(texts, st.sampled_from(["open", "all", "max", "builtin-vote", "contains"]))
    else:
        typed = strict_json
    return st.one_of(typed, typed, typed, strict_json)


def body_for(schema: dict, node: dict) -> st.SearchStrategy:
    props = node.get("properties") or {}
    required = [k for k in node.get("required", []) if k in props]
    optional = {k: value_for(schema, v) for k, v in props.items() if k not in required}
    return st.fixed_dictionaries({k: value_for(schema, props[k]) for k in required}, optional=optional)


@pytest.fixture
def world(organization, housekeeper, recall_env, settings):
    """Acme (the housekeeper fixture's organization) and Globex, both complete."""
    from orgs.models import Organization

    acme = build_tenant(organization, "acme")
    globex = build_tenant(Organization.objects.create(name="Globex", slug="globex"), "globex")
    return {"own": acme, "other": globex}


def _fill(path: str, ids: dict[str, int], data: st.DataObject) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1)
        choice = data.draw(st.sampled_from(["own", "own", "own", "missing", "huge"]), label=name)
        return str({"own": ids.get(name, 1), "missing": 999_999, "huge": 2**63 + 5}[choice])

    return re.sub(r"\{(\w+)\}", sub, path)


def _row_counts() -> dict[str, int]:
    from audits.models import AuditRun, Incident, ReviewProposal
    from ledger.models import EpistemicLabel, Memory, Outcome, Store

    return {m.__name__: m.objects.count() for m in (AuditRun, Incident, ReviewProposal, EpistemicLabel, Memory,
                                                    Outcome, Store)}


def _check_response(resp, what: str) -> None:
    assert resp.status_code < 500, f"{what}: {resp.status_code} {resp.content[:300]!r}"
    if resp.status_code >= 400 and resp.status_code != 405:
        assert resp["Content-Type"].startswith("application/json"), (what, resp["Content-Type"])
        body = resp.json()
        assert body, f"{what}: an empty error body"


ROLES = ["admin", "analyst", "reviewer"]


@fuzz_settings(3)
@given(data=st.data())
def test_fuzz_every_api_operation_answers_without_a_server_error(client, world, data):
    schema = api_schema()
    ops = operations()
    path, method, body_schema = data.draw(st.sampled_from(ops), label="operation")
    role = data.draw(st.sampled_from(ROLES), label="role")
    tenant = world["own"]
    client.force_login(tenant.users[role])
    url = _fill(path, tenant.ids, data)
    count_case(f"API {method.upper()} (schema-driven)")
    with transaction.atomic():
        before = _row_counts()
        if method == "get":
            params = data.draw(st.dictionaries(st.sampled_from(["store", "status", "state", "limit", "offset", "q",
                                                                "weight_min", "weight_max", "page", "x"]),
                                               st.one_of(st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
                                                         st.integers().map(str)), max_size=3))
            resp = client.get(url, params)
        else:
            shape = data.draw(st.sampled_from(["schema", "schema", "schema", "json", "bytes", "form"]), label="shape")
            if shape == "schema" and body_schema is not None:
                payload = data.draw(body_for(schema, body_schema) if body_schema.get("type") != "array"
                                    else st.lists(value_for(schema, body_schema.get("items")), max_size=4))
                resp = getattr(client, method)(url, json.dumps(payload), content_type="application/json")
            elif shape == "bytes":
                raw = data.draw(st.one_of(st.binary(max_size=64), st.sampled_from(
                    [b"{", b"[" * 5000, b'{"a": NaN}', b'{"query": "\\ud800"}', b"\xff\xfe", b"null"])))
                resp = getattr(client, method)(url, raw, content_type="application/json")
            elif shape == "form":
                resp = getattr(client, method)(url, data.draw(st.dictionaries(
                    st.sampled_from(["store", "file", "query", "k", "reason", "ids"]), st.text(max_size=10),
                    max_size=3)))
            else:
                resp = getattr(client, method)(url, json.dumps(data.draw(strict_json)),
                                               content_type="application/json")
        _check_response(resp, f"{method.upper()} {url}")
        if resp.status_code >= 400:
            assert _row_counts() == before, f"{method.upper()} {url} was refused ({resp.status_code}) but wrote rows"
        transaction.set_rollback(True)


@fuzz_settings()
@given(query=st.one_of(texts, strict_json), k=st.one_of(st.integers(-3, 120), strict_json, st.just(5)),
       auth=st.sampled_from(["token", "session"]))
def test_fuzz_recall_answers_results_or_a_clear_400(client, world, query, k, auth):
    tenant = world["own"]
    count_case("API recall {query, k}")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {tenant.token}"} if auth == "token" else {}
    if auth == "session":
        client.force_login(tenant.users["analyst"])
    with transaction.atomic():
        resp = client.post(f"/api/v1/stores/{tenant.store.pk}/recall", json.dumps({"query": query, "k": k}),
                           content_type="application/json", **headers)
        _check_response(resp, f"recall {query!r} k={k!r}")
        if resp.status_code == 200:
            body = resp.json()
            assert isinstance(k, int) and 1 <= k <= 100 and len(body["results"]) <= k
            assert [r["rank"] for r in body["results"]] == list(range(1, len(body["results"]) + 1))
        else:
            assert resp.status_code == 400, resp.status_code
            assert set(resp.json()) & {"query", "k", "detail", "non_field_errors"}, resp.json()
        transaction.set_rollback(True)


@fuzz_settings()
@given(memory=st.one_of(st.sampled_from(["m4", "acme-store/m4", "m1", "globex-store/m4", "", "m9"]), texts,
                        strict_json),
       reward=st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-3, 3), strict_json))
def test_fuzz_outcomes_accept_only_a_given_memory_and_a_reward_in_range(client, world, memory, reward):
    from ledger.models import Outcome

    tenant = world["own"]
    count_case("API outcomes {memory, reward}")
    given_ids = [r["memory"] for r in tenant.receipt.body["results"]]
    with transaction.atomic():
        before = Outcome.objects.count()
        resp = client.post(f"/api/v1/receipts/{tenant.receipt.pk}/outcomes", json.dumps(
            {"memory": memory, "reward": reward}), content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {tenant.token}")
        _check_response(resp, f"outcome {memory!r} {reward!r}")
        if resp.status_code == 201:
            assert Outcome.objects.count() == before + 1
            assert resp.json()["memory"] in given_ids
            assert isinstance(reward, (int, float)) and not isinstance(reward, bool) and -1 <= reward <= 1
        else:
            assert resp.status_code == 400 and Outcome.objects.count() == before, resp.content
        transaction.set_rollback(True)


@fuzz_settings()
@given(records=st.one_of(st.lists(st.one_of(
    st.fixed_dictionaries({"id": st.one_of(st.from_regex(r"[a-z]{1,8}", fullmatch=True), texts),
                           "text": st.one_of(st.text(min_size=1, max_size=30), texts)},
                          optional={"metadata": strict_json, "created_at": st.one_of(texts, strict_json)}),
    strict_json), max_size=5), strict_json))
def test_fuzz_bulk_memories_are_all_or_nothing(client, world, records):
    from ledger.models import Memory

    tenant = world["own"]
    client.force_login(tenant.users["analyst"])
    count_case("API bulk memories (JSON)")
    with transaction.atomic():
        before = Memory.objects.count()
        resp = client.post(f"/api/v1/stores/{tenant.store.pk}/memories/", json.dumps(records),
                           content_type="application/json")
        _check_response(resp, f"bulk {records!r}")
        if resp.status_code == 202:
            assert Memory.objects.count() == before + len(records)
        else:
            assert resp.status_code == 400 and Memory.objects.count() == before
            body = resp.json()
            if isinstance(records, list):
                assert body.get("errors") and all(e["file"] == "request.jsonl" for e in body["errors"]), body
        transaction.set_rollback(True)


@fuzz_settings()
@given(reason=st.one_of(texts, strict_json), decision=st.sampled_from(["approve", "refute"]),
       role=st.sampled_from(ROLES), which=st.sampled_from(["own", "own", "other", "missing"]))
def test_fuzz_review_decisions_decide_once_or_say_why(client, world, reason, decision, role, which):
    from ledger.models import EpistemicLabel

    tenant = world["own"]
    pid = {"own": tenant.proposal.pk, "other": world["other"].proposal.pk, "missing": 999_999}[which]
    client.force_login(tenant.users[role])
    count_case("API review approve/refute")
    with transaction.atomic():
        labels = EpistemicLabel.objects.count()
        resp = client.post(f"/api/v1/reviews/{pid}/{decision}/", json.dumps({"reason": reason}),
                           content_type="application/json")
        _check_response(resp, f"{decision} {reason!r} as {role}")
        if role == "analyst":
            assert resp.status_code == 403
        elif which != "own":
            assert resp.status_code in (400, 404)  # an invalid reason may be reported first
        if resp.status_code == 200:
            # DRF's CharField takes numbers as their text (reason 0 is "0"); anything else must be text.
            assert isinstance(reason, (str, int, float)) and not isinstance(reason, bool) and str(reason).strip()
            assert EpistemicLabel.objects.count() <= labels + 1
        transaction.set_rollback(True)


@pytest.mark.parametrize("raw", [b'{"query": "\\ud800", "k": 3}', b'[' * 3000 + b']' * 3000,
                                 b'{"query": "x", "k": 1e400}', b'{"query": "a\\u0000b", "k": 2}'])
def test_recall_with_awkward_json_is_a_clear_400_or_results(client, world, raw):
    resp = client.post(f"/api/v1/stores/{world['own'].store.pk}/recall", raw, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {world['own'].token}")
    _check_response(resp, raw[:40])


@pytest.mark.parametrize("record", [{"id": "s", "text": "x\ud800y"}, {"id": "a" * 300, "text": "long id"},
                                    {"id": "n", "text": "x\u0000y"}])
def test_bulk_memories_with_unstorable_values_are_a_400_naming_the_line(client, world, record):
    from ledger.models import Memory

    tenant = world["own"]
    client.force_login(tenant.users["analyst"])
    before = Memory.objects.count()
    body = json.dumps([{"id": "ok", "text": "fine"}, record])
    resp = client.post(f"/api/v1/stores/{tenant.store.pk}/memories/", body, content_type="application/json")
    assert resp.status_code == 400, (resp.status_code, resp.content[:300])
    assert Memory.objects.count() == before
    [issue] = resp.json()["errors"]
    assert issue["file"] == "request.jsonl" and issue["line"] == 2, issue


def test_the_fuzzer_reaches_every_operation_in_the_schema():
    ops = operations()
    assert len(ops) >= 20, ops
    names = {p for p, _, _ in ops}
    for expected in ("/api/v1/stores/{store_id}/recall", "/api/v1/receipts/{receipt_id}/outcomes",
                     "/api/v1/reviews/{proposal_id}/approve/", "/api/v1/audits/create/"):
        assert expected in names, sorted(names)
    assert NASTY_STRINGS
