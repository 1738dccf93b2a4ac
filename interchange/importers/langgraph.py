"""LangGraph ``BaseStore`` items (https://langchain-ai.github.io/langgraph/): a JSON dump of
``Item.dict()`` objects (``namespace``, ``key``, ``value``, ``created_at``, ``updated_at``), or
the ``store`` table of a ``langgraph-checkpoint-sqlite`` ``SqliteStore`` database read directly
(``prefix`` is the namespace joined by ``.``, ``value`` JSON text).

A memory's id is ``<namespace joined by '.'>:<key>``; its text is the value's ``text``,
``content``, ``memory`` or ``data`` string, else the value as canonical JSON.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from interchange.importers.common import id_ok, iter_object_members, rfc3339
from interchange.importers.registry import MEMORIES, Head, Importer, Sniff, register, sniff_sqlite_table, sqlite_parse
from interchange.issues import Collector
from interchange.readers import checked, decode, iter_json_array, iter_jsonl, loads
from interchange.records import MemoryRecord, Parsed

TEXT_KEYS = ("text", "content", "memory", "data")


def value_text(value: Any) -> str:
    if isinstance(value, dict):
        for k in TEXT_KEYS:
            if isinstance(value.get(k), str) and value[k].strip():
                return value[k]
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def item_record(namespace: Any, key: Any, value: Any, created: Any, updated: Any, file: str, line: int | None,
                col: Collector) -> MemoryRecord | None:
    if isinstance(namespace, str):
        namespace = namespace.split(".")
    if not isinstance(namespace, (list, tuple)) or not all(isinstance(p, str) for p in namespace):
        col.add(file, line, "namespace", "must be a list of strings")
        return None
    if not isinstance(key, str) or not key:
        col.add(file, line, "key", "missing or not a string")
        return None
    ext = f"{'.'.join(namespace)}:{key}"
    if not id_ok(ext, file, line, col, "key"):
        return None
    text = value_text(value)
    if not text.strip():
        col.add(file, line, "value", "holds no text")
        return None
    meta: dict[str, Any] = {"source": "langgraph", "namespace": list(namespace), "key": key}
    if isinstance(value, dict) and set(value) - {k for k in TEXT_KEYS if value.get(k) == text}:
        meta["value"] = value
    if updated:
        meta["updated_at"] = rfc3339(updated) or str(updated)
    return MemoryRecord(ext, text, meta, rfc3339(created))


def _unique(records: Iterator[tuple[int | None, MemoryRecord | None]], file: str, col: Collector) -> Parsed:
    out, seen = [], {}
    for line, rec in records:
        if rec is None:
            continue
        if rec.id in seen:
            col.add(file, line, "key", f"duplicate item {rec.id!r} (first on line {seen[rec.id]})")
            continue
        seen[rec.id] = line
        out.append(rec)
    return Parsed(out)


class LangGraphJson(Importer):
    name = "langgraph-json"
    title = "LangGraph store items (JSON dump)"
    kind = MEMORIES
    extensions = (".json", ".jsonl")
    example = ('[\n'
               '  {"namespace": ["memories", "alice"], "key": "k1", "value": {"text": "Prefers tea"},\n'
               '   "created_at": "2025-06-01T10:00:00+00:00", "updated_at": "2025-06-01T10:00:00+00:00"},\n'
               '  {"namespace": ["memories", "alice"], "key": "k2", "value": {"content": "Works in Berlin"}}\n'
               ']')
    notes = ("[item.dict() for item in store.search(ns)] as a JSON array, {\"items\": [...]} or JSONL; "
             "id = namespace.joined:key.")

    def sniff(self, head: Head) -> Sniff:
        first = head.first_record()
        if isinstance(first, dict) and {"namespace", "key", "value"} <= set(first):
            return Sniff(0.9, "objects with namespace, key and value (LangGraph store items)")
        s = head.stripped()[:256]
        if s.startswith("{") and '"items"' in s and '"namespace"' in head.text[:8192]:
            return Sniff(0.8, "an object with items holding namespace, key and value")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        text = decode(data, filename, col)
        if text is None:
            return Parsed([])
        s = text.lstrip()
        if s.startswith("["):
            pairs: Iterator[tuple[int, Any]] = iter_json_array(text, filename, col)
        elif s.startswith("{") and s.split("\n", 1)[0].rstrip().endswith("}") and '"namespace"' in s.split("\n", 1)[0]:
            pairs = iter_jsonl(text, filename, col)
        else:
            pairs = (p for k, p in iter_object_members(text, filename, col, ("items",)) if k == "items")

        def records():
            for line, obj in pairs:
                if not isinstance(obj, dict):
                    col.add(filename, line, None, f"expected a store item object, got {type(obj).__name__}")
                    continue
                yield line, item_record(obj.get("namespace"), obj.get("key"), obj.get("value"), obj.get("created_at"),
                                        obj.get("updated_at"), filename, line, col)
        return _unique(records(), filename, col)


def store_rows(path: str | Path, *, since: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a SqliteStore's ``store`` table (optionally only those updated after ``since``)."""
    conn = sqlite3.connect(f"file:{Path(path).as_posix()}?mode=ro", uri=True)
    try:
        sql = "SELECT rowid, prefix, key, value, created_at, updated_at FROM store"
        args: tuple = ()
        if since:
            sql += " WHERE updated_at > ?"
            args = (since,)
        for row in conn.execute(sql + " ORDER BY updated_at, rowid", args):
            yield dict(zip(("rowid", "prefix", "key", "value", "created_at", "updated_at"), row, strict=True))
    finally:
        conn.close()


def store_parse(rows: Iterator[dict[str, Any]], filename: str, col: Collector) -> Parsed:
    def records():
        for row in rows:
            line = row["rowid"]
            raw = row["value"]
            try:
                value = loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
            except (ValueError, UnicodeDecodeError, AttributeError, TypeError):
                col.add(filename, line, "value", "not JSON")
                continue
            if not checked(value, filename, line, col):
                continue
            yield line, item_record(str(row["prefix"]), row["key"], value, row["created_at"], row["updated_at"],
                                    filename, line, col)
    return _unique(records(), filename, col)


class LangGraphSqlite(Importer):
    name = "langgraph-sqlite"
    title = "LangGraph SqliteStore database"
    kind = MEMORIES
    extensions = (".db", ".sqlite", ".sqlite3")
    example = ("store.db — the file given to SqliteStore.from_conn_string(...), table store:\n"
               "prefix          | key | value                    | created_at          | updated_at\n"
               "memories.alice  | k1  | {\"text\": \"Prefers tea\"}  | 2025-06-01 10:00:00 | 2025-06-01 10:00:00\n"
               "memories.alice  | k2  | {\"content\": \"Berlin\"}    | 2025-06-02 09:30:00 | 2025-06-03 08:00:00\n"
               "(read-only; checkpoint tables in the same file are ignored)")
    notes = "Each row of the store table becomes a memory (id = prefix:key); times without a zone are UTC."

    def sniff(self, head: Head) -> Sniff:
        return sniff_sqlite_table(head, "store", "an SQLite database with LangGraph's store table")

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        return sqlite_parse(data, filename, col, lambda path: store_parse(store_rows(path), filename, col))


register(LangGraphJson())
register(LangGraphSqlite())
