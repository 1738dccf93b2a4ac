"""MemAudit's own formats (DESIGN section 5): memories as JSONL, a JSON array or CSV, and
incidents as JSONL or a JSON array. They are the fallback for a file with their extension that
no other format claims, so a broken file of ours is still reported line by line."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from interchange.fields import check_unique, req_id, req_str
from interchange.importers.registry import INCIDENTS, MEMORIES, Head, Importer, Sniff, register
from interchange.issues import Collector
from interchange.readers import checked, decode, is_rfc3339, iter_json_array, iter_jsonl, loads, unstorable
from interchange.records import HistoryEvent, MemoryRecord, Parsed
from interchange.streams import JsonStream, StreamError, iter_jsonl_file


def memory_from_obj(obj: Any, file: str, line: int | None, col: Collector) -> MemoryRecord | None:
    if not isinstance(obj, dict):
        col.add(file, line, None, f"expected an object, got {type(obj).__name__}")
        return None
    n_before = col.total
    mid = req_id(obj, file, line, col)
    text = req_str(obj, "text", file, line, col)
    meta = obj.get("metadata", {})
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        col.add(file, line, "metadata", f"must be an object, got {type(meta).__name__}")
    created = obj.get("created_at")
    if created is not None and (not isinstance(created, str) or not is_rfc3339(created)):
        col.add(file, line, "created_at", f"must be an RFC 3339 timestamp, got {created!r}")
    if col.total != n_before or mid is None or text is None:
        return None
    return MemoryRecord(id=mid, text=text, metadata=dict(meta), created_at=created)


def memories_from_csv(text: str, file: str, col: Collector) -> Iterator[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = reader.fieldnames or []
    for required in ("id", "text"):
        if required not in fields:
            col.add(file, 1, required, "missing column")
    if any(r not in fields for r in ("id", "text")):
        return
    extra = [f for f in fields if f not in ("id", "text", "metadata", "created_at")]
    rows = iter(reader)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. a field over csv.field_size_limit(), an unclosed quote
            col.add(file, reader.line_num + 1, None, f"bad CSV: {exc}")  # the line being read
            return
        line = reader.line_num
        bad = unstorable({k: v for k, v in row.items() if k is not None})
        if bad is not None:
            col.add(file, line, bad[0] or None, bad[1])
            continue
        obj: dict[str, Any] = {"id": row.get("id"), "text": row.get("text")}
        meta: Any = {}
        if row.get("metadata"):
            try:
                meta = loads(row["metadata"])
            except json.JSONDecodeError as exc:
                col.add(file, line, "metadata", f"bad JSON: {exc.msg}")
                continue
            except ValueError as exc:
                col.add(file, line, "metadata", f"bad JSON: {exc}")
                continue
            if not checked(meta, file, line, col):
                continue
        if isinstance(meta, dict):
            # Any other column (query, answer, source...) lands in metadata.
            for f in extra:
                if row.get(f) not in (None, ""):
                    meta.setdefault(f, row[f])
        obj["metadata"] = meta
        if row.get("created_at"):
            obj["created_at"] = row["created_at"]
        yield line, obj


def _supersedes(obj: dict, rec: MemoryRecord, filename: str, line: int | None,
                col: Collector) -> HistoryEvent | None | bool:
    """The update a record's ``supersedes`` asks for: None when it names nothing, False when it is
    refused (the issue is in ``col``). Only an earlier version of the same memory (<id>,
    <id>#v<k>) can be superseded, so a writer cannot push an unrelated memory's weight down by
    "replacing" it."""
    old = obj.get("supersedes")
    if old is None:
        return None
    base = rec.id.split("#v", 1)[0]
    if not isinstance(old, str) or old == rec.id or old.split("#v", 1)[0] != base:
        col.add(filename, line, "supersedes", f"must name an earlier version of {base!r} ({base!r} or {base + '#v<n>'!r})")
        return False
    return HistoryEvent("update", old, f"{old}->{rec.id}", rec.created_at, rec.id, "client")


def _records(items, filename: str, col: Collector) -> Parsed:
    """Records, plus a history event for each record that names the memory it ``supersedes``
    (a new version written through the client: the old one gets a signed provenance entry)."""
    out: list[MemoryRecord] = []
    events: list[HistoryEvent] = []
    ids: list[tuple[str, int | None]] = []
    for line, obj in items:
        rec = memory_from_obj(obj, filename, line, col)
        if rec is None:
            continue
        update = _supersedes(obj, rec, filename, line, col)
        if update is False:
            continue
        if update is not None:
            events.append(update)
        out.append(rec)
        ids.append((rec.id, line))
    check_unique(ids, filename, col)
    return Parsed(out, events)


def _first_object(head: Head) -> dict | None:
    try:
        obj = json.loads(head.first_line())
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


class MemAuditJsonl(Importer):
    listed_first = True
    name = "memaudit-jsonl"
    title = "MemAudit memories (JSONL)"
    kind = MEMORIES
    extensions = (".jsonl", ".ndjson")
    example = ('{"id": "m1", "text": "The office opens at 9.", "metadata": {"source": "chat"}}\n'
               '{"id": "m2", "text": "Refunds take 5 days.", "created_at": "2025-01-02T03:04:05Z"}\n'
               '{"id": "m3", "text": "Alice prefers email."}\n'
               '{"id": "m4", "text": "Q: capital of France? A: Paris", "metadata": {"query": "capital of France?"}}\n'
               '{"id": "m5", "text": "The VPN needs the new client."}')
    notes = ("One memory per line: id and text required; metadata (object), created_at (RFC 3339) and "
             "supersedes (the id of the memory this one replaces) optional.")

    def sniff(self, head: Head) -> Sniff:
        first = _first_object(head)
        if first is not None and ("id" in first or "text" in first) and not head.stripped().startswith("["):
            return Sniff(0.8, "one JSON object per line with id/text")
        if head.lower_name.endswith(self.extensions):
            return Sniff(0.3, "a .jsonl file")
        if head.stripped().startswith("{") and "\n" in head.text.strip():
            return Sniff(0.3, "JSON objects on several lines")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        text = decode(data, filename, col)
        return _records(iter_jsonl(text, filename, col), filename, col) if text is not None else Parsed([])

    streams = True

    def stream(self, f, filename: str, col: Collector, events: list, *,
               unique: bool = True) -> Iterator[MemoryRecord]:
        yield from stream_records(iter_jsonl_file(f, filename, col), filename, col, events, unique=unique)


class MemAuditJson(Importer):
    listed_first = True
    name = "memaudit-json"
    title = "MemAudit memories (JSON array)"
    kind = MEMORIES
    extensions = (".json",)
    example = ('[\n'
               '  {"id": "m1", "text": "The office opens at 9."},\n'
               '  {"id": "m2", "text": "Refunds take 5 days.", "metadata": {"source": "faq"}},\n'
               '  {"id": "m3", "text": "Alice prefers email.", "created_at": "2025-01-02T03:04:05Z"}\n'
               ']')
    notes = "The same records as JSONL, in one JSON array."

    def sniff(self, head: Head) -> Sniff:
        s = head.stripped()
        if s.startswith("[") and ('"text"' in s[:4096] or '"id"' in s[:4096]):
            return Sniff(0.8, "a JSON array of objects with id/text")
        if s.startswith("[") or head.lower_name.endswith(".json"):
            return Sniff(0.3, "a JSON array" if s.startswith("[") else "a .json file")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        text = decode(data, filename, col)
        return _records(iter_json_array(text, filename, col), filename, col) if text is not None else Parsed([])

    streams = True

    def stream(self, f, filename: str, col: Collector, events: list, *,
               unique: bool = True) -> Iterator[MemoryRecord]:
        js = JsonStream(f, filename, col)
        try:
            yield from stream_records(js.array(), filename, col, events, unique=unique)
        except StreamError:
            return


class MemAuditCsv(Importer):
    listed_first = True
    name = "memaudit-csv"
    title = "MemAudit memories (CSV)"
    kind = MEMORIES
    extensions = (".csv",)
    example = ('id,text,metadata,created_at,source\n'
               'm1,The office opens at 9.,,2025-01-02T03:04:05Z,wiki\n'
               'm2,Refunds take 5 days.,"{""team"": ""support""}",,faq\n'
               'm3,"Alice prefers email, not phone.",,,crm\n'
               'm4,The VPN needs the new client.,,,it')
    notes = ("Header row; columns id and text required, metadata (a JSON object) and created_at optional; "
             "any other column goes into metadata.")

    def sniff(self, head: Head) -> Sniff:
        header = [c.strip().strip('"').lower() for c in head.first_line().split(",")]
        if "id" in header and "text" in header:
            return Sniff(0.8, "CSV with id and text columns")
        if head.lower_name.endswith(".csv"):
            return Sniff(0.3, "a .csv file")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        text = decode(data, filename, col)
        return _records(memories_from_csv(text, filename, col), filename, col) if text is not None else Parsed([])


class MemAuditIncidents(Importer):
    listed_first = True
    name = "memaudit-incidents"
    title = "MemAudit incidents (JSONL or JSON array)"
    kind = INCIDENTS
    extensions = (".jsonl", ".ndjson", ".json")
    example = ('{"id": "inc-1", "query": "When does the office open?", "output": "At 6 am.", '
               '"retrieved": ["m1", "m7"], "harm": {"type": "contains", "target": "6 am"}}\n'
               '{"id": "inc-2", "query": "Refund time?", "output": "Never.", "retrieved": ["m2"], "harm": true}\n'
               '{"id": "inc-3", "query": "How do I reach Alice?", "output": "Call her at home.", '
               '"retrieved": ["m3"], "harm": 0.8}\n'
               '{"id": "inc-4", "query": "VPN?", "output": "Disable it.", "retrieved": ["m5"], '
               '"harm": {"type": "regex", "pattern": "disable"}}\n'
               '{"id": "inc-5", "query": "Capital?", "output": "Lyon", "retrieved": ["m4"], "candidates": ["Paris", "Lyon"]}')
    notes = "id, query, output, retrieved (memory ids) required; harm: a spec, true/false or a value in [0, 1]."

    def sniff(self, head: Head) -> Sniff:
        s = head.stripped()
        first = _first_object(head)
        if first is not None and "query" in first and "retrieved" in first:
            return Sniff(0.8, "incident objects with query/retrieved")
        if s.startswith("[") and '"retrieved"' in s[:4096] and '"query"' in s[:4096]:
            return Sniff(0.8, "a JSON array of incidents")
        if head.lower_name.endswith(self.extensions):
            return Sniff(0.3, f"a {head.lower_name.rsplit('.', 1)[-1]} file")
        if s.startswith(("{", "[")):
            return Sniff(0.3, "JSON")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> list[tuple[int | None, Any]]:
        text = decode(data, filename, col)
        if text is None:
            return []
        lower = filename.lower()
        if lower.endswith(".json") or (not lower.endswith((".jsonl", ".ndjson")) and text.lstrip().startswith("[")):
            elements = list(iter_json_array(text, filename, col))
            return [] if col.total else elements
        return list(iter_jsonl(text, filename, col))





def stream_records(pairs, filename: str, col: Collector, events: list, *,
                   unique: bool = True) -> Iterator[MemoryRecord]:
    """``_records`` a record at a time (the duplicate check keeps only ids and lines; with
    ``unique=False``, a pass over a file already checked, nothing is kept per record)."""
    seen: dict[str, int | None] = {}
    for line, obj in pairs:
        rec = memory_from_obj(obj, filename, line, col)
        if rec is None:
            continue
        if unique and rec.id in seen:
            col.add(filename, line, "id", f"duplicate id {rec.id!r} (first on line {seen[rec.id]})")
            continue
        update = _supersedes(obj, rec, filename, line, col)
        if update is False:
            continue
        if update is not None:
            events.append(update)
        if unique:
            seen[rec.id] = line
        yield rec

for _imp in (MemAuditJsonl(), MemAuditJson(), MemAuditCsv(), MemAuditIncidents()):
    register(_imp)
