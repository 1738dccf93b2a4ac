"""Incidents from agent traces.

- **OpenAI Chat Completions message logs**: a conversation is ``{"messages": [...]}`` (one per
  line, a JSON array of them, or one object; a bare list of messages is one conversation).
  The incident's output is the last assistant message, its query the user message before it,
  its retrieved memories the ids returned by memory-tool calls (a tool whose name mentions
  memory, recall, retrieve or search; the tool message's JSON: a list of ids, of objects with
  ``id``, or ``{"results"|"memories": [...]}``), or ``metadata.retrieved`` when the log has it.
- **OpenTelemetry GenAI spans as OTLP/JSON** (``resourceSpans`` → ``scopeSpans`` → ``spans``):
  per trace, the last chat span (``gen_ai.operation.name`` ``chat``) gives the query and output
  (``gen_ai.input.messages``/``gen_ai.output.messages`` JSON, or the older ``gen_ai.prompt``/
  ``gen_ai.completion``), and retrieval spans (``gen_ai.operation.name`` ``retrieval``, or a
  ``execute_tool`` span of a memory tool) give the ids (``gen_ai.retrieval.documents`` JSON, or
  OpenInference's ``retrieval.documents.N.document.id``).

A conversation is taken as an incident because someone exported it as one: harm defaults to
observed (``true``) unless the log carries ``harm``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from interchange.importers.common import text_of, whole_json
from interchange.importers.registry import INCIDENTS, Head, Importer, Sniff, register
from interchange.issues import Collector
from interchange.readers import decode, iter_json_array, iter_jsonl

MEMORY_TOOL = re.compile(r"memor|recall|retriev|search", re.IGNORECASE)


def ids_in(payload: Any) -> list[str]:
    """Memory ids in a memory tool's result: ids, objects with id, or a results/memories list."""
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError:
            return []
    if isinstance(payload, dict):
        for k in ("results", "memories", "documents", "items"):
            if isinstance(payload.get(k), list):
                return ids_in(payload[k])
        return [str(payload["id"])] if isinstance(payload.get("id"), (str, int)) else []
    if isinstance(payload, list):
        out = []
        for x in payload:
            if isinstance(x, str):
                out.append(x)
            elif isinstance(x, dict):
                for k in ("id", "memory_id", "key"):
                    if isinstance(x.get(k), (str, int)):
                        out.append(str(x[k]))
                        break
        return out
    return []


def _dedup(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def conversation_incident(conv: Any, file: str, line: int | None, n: int, col: Collector) -> dict | None:
    if isinstance(conv, list):
        conv = {"messages": conv}
    if not isinstance(conv, dict) or not isinstance(conv.get("messages"), list):
        col.add(file, line, "messages", "expected a conversation with a list of messages")
        return None
    msgs = [m for m in conv["messages"] if isinstance(m, dict)]
    last_assistant = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant" and text_of(m.get("content"))),
                         default=None)
    if last_assistant is None:
        col.add(file, line, "messages", "no assistant answer in the conversation")
        return None
    query = next((text_of(m.get("content")) for m in reversed(msgs[:last_assistant]) if m.get("role") == "user"), "")
    if not query.strip():
        col.add(file, line, "messages", "no user message before the last assistant answer")
        return None
    memory_calls: set[str] = set()
    for m in msgs[:last_assistant]:
        for call in m.get("tool_calls") or []:
            fn = (call or {}).get("function") or {}
            if isinstance(fn.get("name"), str) and MEMORY_TOOL.search(fn["name"]):
                memory_calls.add(str(call.get("id")))
    retrieved: list[str] = []
    meta = conv.get("metadata") if isinstance(conv.get("metadata"), dict) else {}
    if isinstance(conv.get("retrieved"), list):
        retrieved = [str(x) for x in conv["retrieved"]]
    elif isinstance(meta.get("retrieved"), list):
        retrieved = [str(x) for x in meta["retrieved"]]
    else:
        for m in msgs[:last_assistant]:
            if m.get("role") == "tool" and str(m.get("tool_call_id")) in memory_calls:
                retrieved.extend(ids_in(m.get("content") if not isinstance(m.get("content"), list)
                                        else text_of(m.get("content"))))
    inc: dict[str, Any] = {"id": str(conv.get("id") or meta.get("id") or f"chat-{line or n}"), "query": query,
                           "output": text_of(msgs[last_assistant].get("content")), "retrieved": _dedup(retrieved)}
    for k in ("harm", "candidates"):
        if k in conv:
            inc[k] = conv[k]
    return inc


class OpenAIChat(Importer):
    name = "openai-chat"
    title = "OpenAI Chat Completions message log"
    kind = INCIDENTS
    extensions = (".jsonl", ".json")
    example = ('{"id": "conv-7", "messages": [\n'
               '  {"role": "user", "content": "When does the office open?"},\n'
               '  {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search_memory", "arguments": "{}"}}]},\n'
               '  {"role": "tool", "tool_call_id": "c1", "content": "[{\\"id\\": \\"m1\\"}, {\\"id\\": \\"m7\\"}]"},\n'
               '  {"role": "assistant", "content": "At 6 am."}], "harm": {"type": "contains", "target": "6 am"}}')
    notes = ("One conversation per line (or a JSON array): query = last user turn, output = last assistant "
             "turn, retrieved = ids returned by memory-tool calls.")

    def sniff(self, head: Head) -> Sniff:
        s = head.stripped()[:16384]
        if '"role"' in s and ('"messages"' in s or s.startswith("[")) and ('"assistant"' in s or '"user"' in s):
            return Sniff(0.9, "chat messages with roles (OpenAI Chat Completions)")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> list[tuple[int | None, Any]]:
        text = decode(data, filename, col)
        if text is None:
            return []
        s = text.lstrip()
        if s.startswith("["):
            elements = list(iter_json_array(text, filename, col, what="a JSON array"))
            if elements and all(isinstance(e, dict) and "role" in e for _, e in elements):
                elements = [(elements[0][0], [e for _, e in elements])]  # one bare conversation
        elif s.startswith("{") and "\n" in s.strip() and not s.split("\n", 1)[0].rstrip().endswith("}"):
            doc = whole_json(text, filename, col)
            elements = [(1, doc)] if doc is not None else []
        else:
            elements = list(iter_jsonl(text, filename, col))
        out = []
        for n, (line, conv) in enumerate(elements, start=1):
            inc = conversation_incident(conv, filename, line, n, col)
            if inc is not None:
                out.append((line, inc))
        return out


def _attr_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "boolValue", "doubleValue"):
        if k in v:
            return v[k]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "arrayValue" in v:
        return [_attr_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv.get("key"): _attr_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", [])}
    return None


def span_attributes(span: dict) -> dict[str, Any]:
    return {a.get("key"): _attr_value(a.get("value")) for a in span.get("attributes") or [] if isinstance(a, dict)}


def _messages_text(raw: Any, roles: tuple[str, ...]) -> str:
    """The text of the last message with one of ``roles`` in a GenAI messages attribute (JSON
    list of {role, content | parts}), or the attribute itself when it is plain text."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return raw
    if isinstance(raw, dict):
        raw = [raw]
    if isinstance(raw, list):
        for m in reversed(raw):
            if isinstance(m, dict) and (m.get("role") in roles or "role" not in m):
                t = text_of(m.get("content")) or text_of(m.get("parts"))
                if t:
                    return t
    return ""


def _retrieved_ids(attrs: dict[str, Any]) -> list[str]:
    ids: list[str] = []
    for key in ("gen_ai.retrieval.documents", "gen_ai.tool.call.result", "retrieval.documents"):
        if key in attrs:
            ids.extend(ids_in(attrs[key]))
    for key, value in sorted(attrs.items()):
        if isinstance(key, str) and re.fullmatch(r"retrieval\.documents\.\d+\.document\.id", key):
            ids.append(str(value))
    return ids


class OtelGenAI(Importer):
    name = "otel-genai"
    title = "OpenTelemetry GenAI spans (OTLP/JSON)"
    kind = INCIDENTS
    extensions = (".json", ".jsonl")
    example = ('{"resourceSpans": [{"scopeSpans": [{"spans": [\n'
               '  {"traceId": "5b8e…", "spanId": "a1", "name": "retrieval memories", "attributes": [\n'
               '    {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},\n'
               '    {"key": "gen_ai.retrieval.documents", "value": {"stringValue": "[{\\"id\\": \\"m1\\"}]"}}]},\n'
               '  {"traceId": "5b8e…", "spanId": "a2", "name": "chat gpt-4o", "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}, ...]}]}]}]}')
    notes = ("One incident per trace: the last chat span's input/output messages, the ids from its "
             "retrieval (or memory-tool) spans.")

    def sniff(self, head: Head) -> Sniff:
        s = head.stripped()[:16384]
        if '"resourceSpans"' in s:
            return Sniff(0.95 if "gen_ai." in head.text else 0.6, "OTLP/JSON spans (resourceSpans)")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> list[tuple[int | None, Any]]:
        text = decode(data, filename, col)
        if text is None:
            return []
        docs = list(iter_jsonl(text, filename, col)) if "\n{" in text.strip() else [(1, whole_json(text, filename, col))]
        traces: dict[str, dict[str, Any]] = {}
        for line, doc in docs:
            if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
                if doc is not None:
                    col.add(filename, line, "resourceSpans", "missing: not an OTLP/JSON export")
                continue
            for rs in doc["resourceSpans"]:
                for ss in (rs or {}).get("scopeSpans") or []:
                    for span in (ss or {}).get("spans") or []:
                        if not isinstance(span, dict):
                            continue
                        t = traces.setdefault(str(span.get("traceId") or "trace"), {"line": line, "chat": None, "ids": []})
                        attrs = span_attributes(span)
                        op = str(attrs.get("gen_ai.operation.name") or "")
                        tool = str(attrs.get("gen_ai.tool.name") or "")
                        if op == "chat" or (not op and str(span.get("name", "")).startswith("chat")):
                            if t["chat"] is None or int(span.get("endTimeUnixNano") or 0) >= int(
                                    t["chat"][0].get("endTimeUnixNano") or 0):
                                t["chat"] = (span, attrs)
                        elif op in ("retrieval", "retrieve") or (op == "execute_tool" and MEMORY_TOOL.search(tool)) \
                                or any(str(k).startswith("retrieval.documents.") for k in attrs):
                            t["ids"].extend(_retrieved_ids(attrs))
        out = []
        for trace_id, t in traces.items():
            if t["chat"] is None:
                continue
            _, attrs = t["chat"]
            query = _messages_text(attrs.get("gen_ai.input.messages") or attrs.get("gen_ai.prompt"), ("user",))
            output = _messages_text(attrs.get("gen_ai.output.messages") or attrs.get("gen_ai.completion"),
                                    ("assistant",))
            if not query:
                col.add(filename, t["line"], "gen_ai.input.messages", f"trace {trace_id}: no user message on its chat span")
                continue
            inc: dict[str, Any] = {"id": trace_id, "query": query, "output": output, "retrieved": _dedup(t["ids"])}
            out.append((t["line"], inc))
        if not out and not col.total:
            col.add(filename, None, None, "no trace with a chat span (gen_ai.operation.name = chat)")
        return out


register(OpenAIChat())
register(OtelGenAI())
