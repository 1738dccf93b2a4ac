"""The importer registry and each format, on files made by the real tools (pure: no database)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from interchange.importers import INCIDENTS, MEMORIES, formats, incidents_parse, memories_parse
from interchange.issues import ValidationError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_every_format_has_a_name_a_title_and_a_five_line_example():
    names = [f.name for f in formats()]
    assert len(names) == len(set(names))
    assert {"memaudit-jsonl", "memaudit-json", "memaudit-csv", "mem0-export", "mem0-history", "langgraph-json",
            "langgraph-sqlite", "letta-af", "memaudit-incidents", "openai-chat", "otel-genai"} <= set(names)
    for f in formats():
        assert f.title and f.notes and f.kind in (MEMORIES, INCIDENTS)
        assert 3 <= len(f.example.splitlines()) <= 6, f.name


def test_an_unknown_format_is_refused_with_the_formats_tried():
    with pytest.raises(ValidationError) as info:
        memories_parse(b"<html><body>not a memory file</body></html>", "export.html")
    [issue] = info.value.issues
    assert issue.message.startswith("no known format matched (tried: ")
    assert "mem0-export" in issue.message and "letta-af" in issue.message and "openai-chat" in issue.message


def test_a_chat_log_sent_as_memories_says_what_it_looks_like_and_where_it_goes():
    log = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    with pytest.raises(ValidationError) as info:
        memories_parse(log.encode(), "chat.jsonl")
    [issue] = info.value.issues
    assert "this looks like OpenAI Chat Completions message log" in issue.message
    assert "incidents upload" in issue.message


def test_our_own_jsonl_still_names_line_and_field():
    with pytest.raises(ValidationError) as info:
        memories_parse(b'{"id": "a", "text": "ok"}\n{"id": "b"}\n', "memories.jsonl")
    assert [(i.line, i.field, i.message) for i in info.value.issues] == [(2, "text", "missing")]


def test_mem0_export_from_the_real_library(mem0_made):
    importer, message, parsed = memories_parse(mem0_made.export, "mem0.json")

    assert importer.name == "mem0-export" and message.startswith("this looks like mem0 export")
    by_id = {r.id: r for r in parsed.records}
    assert set(by_id) == {mem0_made.kept, mem0_made.untouched}  # the deleted one is gone from get_all
    kept = by_id[mem0_made.kept]
    assert kept.text == "Alice lives in Lyon, near the station"
    assert kept.metadata["user_id"] == "alice" and kept.metadata["source"] == "mem0"
    assert kept.metadata["mem0_hash"] == hashlib.md5(kept.text.encode()).hexdigest()  # noqa: S324
    assert kept.created_at is not None


def test_a_mem0_export_edited_after_the_fact_is_refused_by_its_hash(mem0_made):
    doc = json.loads(mem0_made.export)
    doc["results"][0]["memory"] = "Alice lives in Marseille"
    with pytest.raises(ValidationError) as info:
        memories_parse(json.dumps(doc).encode(), "mem0.json")
    assert info.value.issues[0].field == "hash"


def test_mem0_history_keeps_every_version_and_the_events_in_mem0s_order(mem0_made):
    importer, _, parsed = memories_parse(mem0_made.history_db.read_bytes(), "history.db")

    assert importer.name == "mem0-history"
    k, d = mem0_made.kept, mem0_made.deleted
    texts = {r.id: r.text for r in parsed.records}
    assert texts[k] == "Alice lives in Paris"
    assert texts[f"{k}#v2"] == "Alice lives in Lyon"
    assert texts[f"{k}#v3"] == "Alice lives in Lyon, near the station"
    assert texts[d] == "Alice is allergic to peanuts"  # the text outlives the DELETE
    assert [(e.kind, e.memory, e.new_memory) for e in parsed.events] == [
        ("update", k, f"{k}#v2"), ("update", f"{k}#v2", f"{k}#v3"), ("delete", d, None)]


def test_langgraph_dump_from_the_in_memory_store(langgraph_dump):
    importer, _, parsed = memories_parse(langgraph_dump, "items.json")

    assert importer.name == "langgraph-json"
    by_id = {r.id: r for r in parsed.records}
    assert by_id["memories.alice:k1"].text == "Alice prefers tea"
    assert by_id["memories.alice:k2"].text == "Alice works in Berlin"
    assert by_id["memories.alice:k2"].metadata["value"]["topic"] == "work"
    assert json.loads(by_id["memories.bob:k1"].text) == {"kind": "preference", "likes": ["jazz"]}
    assert by_id["memories.alice:k1"].metadata["namespace"] == ["memories", "alice"]


def test_langgraph_sqlite_store_read_directly(langgraph_db):
    importer, message, parsed = memories_parse(langgraph_db.read_bytes(), "store.db")

    assert importer.name == "langgraph-sqlite" and "store table" in message
    assert {r.id for r in parsed.records} == {"memories.alice:k1", "memories.alice:k2", "memories.bob:k1"}
    assert all(r.created_at and r.created_at.endswith("+00:00") for r in parsed.records)


@pytest.mark.parametrize("name", ["customer_service.af", "memgpt_agent.af"])
def test_a_published_letta_agent_file(name):
    """Real files from github.com/letta-ai/agent-file (see tests/fixtures/letta/SOURCE.md); both
    are published JSON-encoded twice."""
    data = (FIXTURES / "letta" / name).read_bytes()
    importer, _, parsed = memories_parse(data, name)

    assert importer.name == "letta-af"
    doc = json.loads(json.loads(data))
    blocks = [b for b in doc["blocks"] if b["value"].strip()]
    assert len(parsed.records) == len(blocks) >= 2
    agent = doc["agents"][0]["name"]
    for rec, block in zip(parsed.records, blocks, strict=True):
        assert rec.id == f"{agent}/{block['id']}"
        assert rec.text == block["value"] and rec.metadata["label"] == block["label"]
        assert rec.created_at is not None


def test_letta_archival_passages_are_memories_too():
    doc = {"agents": [{"id": "agent-0", "name": "bot", "block_ids": ["block-0"]}],
           "blocks": [{"id": "block-0", "label": "human", "value": "Name: Chad"}],
           "passages": [{"id": "passage-0", "text": "Order 1234 shipped", "created_at": "2025-06-01T10:00:00Z"}]}
    _, _, parsed = memories_parse(json.dumps(doc).encode(), "bot.af")
    assert [(r.id, r.metadata["letta_kind"]) for r in parsed.records] == [("bot/block-0", "block"),
                                                                         ("bot/passage-0", "passage")]


CHAT = {"id": "conv-7", "messages": [
    {"role": "system", "content": "You are a support bot."},
    {"role": "user", "content": "When does the office open?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search_memory", "arguments": "{\"q\": \"office\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"results": [{"id": "m1"}, {"id": "m7"}]})},
    {"role": "tool", "tool_call_id": "c2", "content": json.dumps([{"id": "not-a-memory"}])},
    {"role": "assistant", "content": [{"type": "text", "text": "At 6 am."}]}]}


def test_openai_chat_log_becomes_an_incident():
    data = (json.dumps(CHAT) + "\n" + json.dumps({**CHAT, "id": "conv-8", "harm": 0.5}) + "\n").encode()
    importer, _, items = incidents_parse(data, "chats.jsonl")

    assert importer.name == "openai-chat"
    assert [inc for _, inc in items][0] == {"id": "conv-7", "query": "When does the office open?",
                                            "output": "At 6 am.", "retrieved": ["m1", "m7"]}
    assert items[1][1]["harm"] == 0.5 and items[1][0] == 2


def test_a_chat_without_an_answer_is_named():
    bad = {"messages": [{"role": "user", "content": "hello?"}]}
    with pytest.raises(ValidationError) as info:
        incidents_parse(json.dumps(bad).encode() + b"\n", "chats.jsonl")
    assert info.value.issues[0].message == "no assistant answer in the conversation"


def _attr(key, value):
    return {"key": key, "value": {"stringValue": value}}


OTLP = {"resourceSpans": [{"resource": {"attributes": [_attr("service.name", "support-bot")]}, "scopeSpans": [
    {"scope": {"name": "agent"}, "spans": [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "a1", "name": "retrieval memories",
         "attributes": [_attr("gen_ai.operation.name", "retrieval"),
                        _attr("gen_ai.retrieval.documents", json.dumps([{"id": "m1", "score": 0.9}, {"id": "m2"}]))]},
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "a2", "name": "chat gpt-4o",
         "endTimeUnixNano": "1700000000000000000",
         "attributes": [_attr("gen_ai.operation.name", "chat"), _attr("gen_ai.request.model", "gpt-4o"),
                        _attr("gen_ai.input.messages", json.dumps([
                            {"role": "user", "parts": [{"type": "text", "text": "Refund time?"}]}])),
                        _attr("gen_ai.output.messages", json.dumps([
                            {"role": "assistant", "parts": [{"type": "text", "text": "Never."}]}]))]}]}]}]}


def test_otel_genai_spans_become_an_incident_per_trace():
    importer, message, items = incidents_parse(json.dumps(OTLP).encode(), "traces.json")

    assert importer.name == "otel-genai" and "OTLP" in message
    assert [inc for _, inc in items] == [{"id": "5b8efff798038103d269b633813fc60c", "query": "Refund time?",
                                         "output": "Never.", "retrieved": ["m1", "m2"]}]


def test_at_most_100_issues_are_kept_and_all_are_counted():
    with pytest.raises(ValidationError) as info:
        memories_parse(b"{}\n" * 1000, "memories.jsonl")
    assert (len(info.value.issues), info.value.total) == (100, 2000)


def test_a_record_may_supersede_only_an_earlier_version_of_itself():
    ok = b'{"id": "k#v2", "text": "new", "supersedes": "k"}\n'
    _, _, parsed = memories_parse(ok, "memories.jsonl")
    assert [(e.kind, e.memory, e.new_memory, e.source) for e in parsed.events] == [("update", "k", "k#v2", "client")]
    with pytest.raises(ValidationError) as info:
        memories_parse(b'{"id": "mine", "text": "x", "supersedes": "someone-elses"}\n', "memories.jsonl")
    assert info.value.issues[0].field == "supersedes"


@pytest.mark.parametrize("name,filename,data", [
    ("mem0-export", "mem0.json", json.dumps({"results": [
        {"id": f"id-{i}", "memory": f"text {i} é", "created_at": "2025-01-01T00:00:00Z"} for i in range(30)],
        "relations": [1, 2.5, {"a": [3]}]}, indent=1).encode()),
    ("memaudit-json", "m.json", json.dumps([{"id": f"m{i}", "text": f"t{i}", "metadata": {"n": 10**13 + i}}
                                            for i in range(30)], indent=2).encode()),
    ("memaudit-jsonl", "m.jsonl", b"\n".join(json.dumps({"id": f"m{i}", "text": f"t{i}"}).encode() for i in range(30))),
    ("memaudit-json", "bad.json", json.dumps([{"id": f"m{i}", "text": f"t{i}"} for i in range(5)], indent=1)
     .encode().replace(b'"t3"', b'"t3" x')),
    ("memaudit-jsonl", "dup.jsonl", b'{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n{"id": "a", "text": "z"}\n'),
])
def test_streaming_a_file_in_small_pieces_gives_what_parsing_it_whole_gives(monkeypatch, name, filename, data):
    import io

    import interchange.streams
    from interchange.importers import REGISTRY
    from interchange.issues import Collector

    monkeypatch.setattr(interchange.streams, "PIECE", 7)  # every piece boundary inside a token
    importer = REGISTRY[name]
    whole, streamed = Collector(), Collector()
    ref = importer.parse(data, filename, whole)
    got = list(importer.stream(io.BytesIO(data), filename, streamed, []))
    assert [(i.line, i.field) for i in streamed.issues] == [(i.line, i.field) for i in whole.issues]
    ids = [r.id for r in got]
    assert ids == list(dict.fromkeys(r.id for r in ref.records))
    assert [r.text for r in got] == [r.text for r in ref.records][:len(got)]
