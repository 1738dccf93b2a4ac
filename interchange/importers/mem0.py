"""mem0 (https://github.com/mem0ai/mem0): its ``get_all()`` / platform export JSON and its
history database.

- Export: ``{"results": [{"id", "memory", "hash", "metadata", "user_id", "agent_id", "run_id",
  "created_at", "updated_at"}]}`` (a bare list of the same objects is accepted too). ``hash``
  is mem0's MD5 of the memory text; a mismatch means the text was changed after mem0 wrote it
  and is reported.
- History: mem0's SQLite ``history`` table (``id, memory_id, old_memory, new_memory, event,
  created_at, updated_at, is_deleted, actor_id, role``), read in the order mem0 wrote it.
  ``ADD`` gives the memory; each ``UPDATE`` gives a new version ``<memory_id>#v<n>`` and a
  history event superseding the previous version; each ``DELETE`` a history event retiring
  the current version, whose text is kept (MutMem's retention).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from interchange.importers.common import id_ok, iter_object_members, rfc3339
from interchange.importers.registry import MEMORIES, Head, Importer, Sniff, register, sniff_sqlite_table, sqlite_parse
from interchange.issues import Collector
from interchange.readers import decode, iter_json_array
from interchange.records import HistoryEvent, MemoryRecord, Parsed
from interchange.streams import JsonStream, StreamError

_PEOPLE = ("user_id", "agent_id", "run_id", "actor_id", "role")


def mem0_record(obj: Any, file: str, line: int | None, col: Collector) -> MemoryRecord | None:
    if not isinstance(obj, dict):
        col.add(file, line, None, f"expected a mem0 memory object, got {type(obj).__name__}")
        return None
    mid, text = obj.get("id"), obj.get("memory")
    if not isinstance(mid, str) or not id_ok(mid, file, line, col):
        if not isinstance(mid, str):
            col.add(file, line, "id", "missing or not a string")
        return None
    if not isinstance(text, str) or not text.strip():
        col.add(file, line, "memory", "missing or empty")
        return None
    h = obj.get("hash")
    if isinstance(h, str) and h and hashlib.md5(text.encode("utf-8")).hexdigest() != h:  # noqa: S324 - mem0's own content hash
        col.add(file, line, "hash", f"mem0 hash {h} does not match the memory text (changed after mem0 wrote it?)")
        return None
    created = obj.get("created_at")
    created_at = rfc3339(created)
    if created not in (None, "") and created_at is None:
        col.add(file, line, "created_at", f"not a time: {created!r}")
        return None
    meta: dict[str, Any] = {"source": "mem0", "mem0_id": mid}
    if isinstance(h, str) and h:
        meta["mem0_hash"] = h
    for k in (*_PEOPLE, "updated_at", "categories"):
        if obj.get(k) not in (None, "", []):
            meta[k] = obj[k]
    if isinstance(obj.get("metadata"), dict) and obj["metadata"]:
        meta["mem0_metadata"] = obj["metadata"]
    return MemoryRecord(id=mid, text=text, metadata=meta, created_at=created_at)


class Mem0Export(Importer):
    name = "mem0-export"
    title = "mem0 export (get_all() / platform export JSON)"
    kind = MEMORIES
    extensions = (".json",)
    example = ('{"results": [\n'
               '  {"id": "3f1c…", "memory": "Prefers window seats", "hash": "<md5 of memory>", "metadata": null,\n'
               '   "user_id": "alice", "created_at": "2025-06-01T10:00:00-07:00", "updated_at": null},\n'
               '  {"id": "9ab2…", "memory": "Allergic to peanuts", "user_id": "alice", "created_at": "…"}\n'
               ']}')
    notes = ("Each result becomes a memory (id = mem0 id, text = memory); user/agent/run ids, hash and "
             "metadata go into metadata; a hash that does not match its text is refused.")

    def sniff(self, head: Head) -> Sniff:
        s = head.stripped()[:8192]
        if '"memory"' not in s:
            return Sniff.no()
        if s.startswith("{") and ('"results"' in s or '"memories"' in s):
            return Sniff(0.9, 'a JSON object with "results" of mem0 memories')
        if s.startswith("[") and '"id"' in s and '"text"' not in s:
            return Sniff(0.6, "a JSON array of mem0 memory objects")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        text = decode(data, filename, col)
        if text is None:
            return Parsed([])
        if text.lstrip().startswith("["):
            pairs: Iterator[tuple[int, Any]] = iter_json_array(text, filename, col)
        else:
            pairs = (pair for key, pair in iter_object_members(text, filename, col, ("results", "memories"))
                     if key in ("results", "memories"))
        out, seen = [], {}
        for line, obj in pairs:
            rec = mem0_record(obj, filename, line, col)
            if rec is None:
                continue
            if rec.id in seen:
                col.add(filename, line, "id", f"duplicate id {rec.id!r} (first on line {seen[rec.id]})")
                continue
            seen[rec.id] = line
            out.append(rec)
        return Parsed(out)

    streams = True

    def stream(self, f, filename: str, col: Collector, events: list, *,
               unique: bool = True) -> Iterator[MemoryRecord]:
        js = JsonStream(f, filename, col)
        seen: dict[str, int | None] = {}
        try:
            pairs = js.array() if js.peek() == "[" else (
                pair for key, pair in js.members(("results", "memories")) if key in ("results", "memories"))
            for line, obj in pairs:
                rec = mem0_record(obj, filename, line, col)
                if rec is None:
                    continue
                if not unique:
                    yield rec
                    continue
                if rec.id in seen:
                    col.add(filename, line, "id", f"duplicate id {rec.id!r} (first on line {seen[rec.id]})")
                    continue
                seen[rec.id] = line
                yield rec
        except StreamError:
            return


HISTORY_COLUMNS = ("rowid", "id", "memory_id", "old_memory", "new_memory", "event", "created_at", "updated_at",
                   "actor_id", "role")


def history_rows(path: str | Path, *, after_rowid: int = 0) -> Iterator[dict[str, Any]]:
    """mem0's history rows in the order mem0 wrote them (rowid), read-only."""
    conn = sqlite3.connect(f"file:{Path(path).as_posix()}?mode=ro", uri=True)
    try:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(history)")}
        select = ", ".join(c if c == "rowid" or c in cols else f"NULL AS {c}" for c in HISTORY_COLUMNS)
        for row in conn.execute(f"SELECT {select} FROM history WHERE rowid > ? ORDER BY rowid",  # noqa: S608 - fixed names
                                (after_rowid,)):
            yield dict(zip(HISTORY_COLUMNS, row, strict=True))
    finally:
        conn.close()


def history_parse(rows: Iterator[dict[str, Any]], filename: str, col: Collector,
                  known: dict[str, tuple[str, int]] | None = None) -> Parsed:
    """Records and events from history rows. ``known`` maps a mem0 id to its current
    (external id, version) from an earlier import (continuous sync); it is updated in place."""
    current: dict[str, tuple[str, int]] = known if known is not None else {}
    records: list[MemoryRecord] = []
    events: list[HistoryEvent] = []

    def base(row: dict[str, Any], text: str, line: int) -> str:
        mid = row["memory_id"]
        meta = {"source": "mem0-history", "mem0_id": mid, "version": 1, "mem0_event": row["id"]}
        meta.update({k: row[k] for k in ("actor_id", "role") if row.get(k)})
        records.append(MemoryRecord(mid, text, meta, rfc3339(row.get("created_at"))))
        current[mid] = (mid, 1)
        return mid

    for row in rows:
        line = row["rowid"]
        mid, event = row.get("memory_id"), str(row.get("event") or "").upper()
        if not isinstance(mid, str) or not id_ok(mid, filename, line, col, "memory_id"):
            continue
        old, new = row.get("old_memory"), row.get("new_memory")
        if event == "ADD":
            if mid in current:
                col.add(filename, line, "event", f"ADD for memory {mid!r}, which was added before")
            elif not isinstance(new, str) or not new.strip():
                col.add(filename, line, "new_memory", "an ADD without text")
            else:
                base(row, new, line)
        elif event == "UPDATE":
            if not isinstance(new, str) or not new.strip():
                col.add(filename, line, "new_memory", "an UPDATE without the new text")
                continue
            if mid not in current:
                if not isinstance(old, str) or not old.strip():
                    col.add(filename, line, "old_memory", f"UPDATE of unknown memory {mid!r} without its old text")
                    continue
                base(row, old, line)
            prev, version = current[mid]
            new_id = f"{mid}#v{version + 1}"
            if not id_ok(new_id, filename, line, col, "memory_id"):
                continue
            meta = {"source": "mem0-history", "mem0_id": mid, "version": version + 1, "mem0_event": row["id"],
                    "supersedes": prev}
            meta.update({k: row[k] for k in ("actor_id", "role") if row.get(k)})
            at = rfc3339(row.get("updated_at")) or rfc3339(row.get("created_at"))
            records.append(MemoryRecord(new_id, new, meta, at))
            events.append(HistoryEvent("update", prev, str(row["id"]), at, new_id))
            current[mid] = (new_id, version + 1)
        elif event == "DELETE":
            if mid not in current:
                if not isinstance(old, str) or not old.strip():
                    col.add(filename, line, "old_memory", f"DELETE of unknown memory {mid!r} without its text")
                    continue
                base(row, old, line)
            at = rfc3339(row.get("updated_at")) or rfc3339(row.get("created_at"))
            events.append(HistoryEvent("delete", current[mid][0], str(row["id"]), at))
        else:
            col.add(filename, line, "event", f"unknown mem0 event {row.get('event')!r} (ADD, UPDATE or DELETE)")
    return Parsed(records, events)


class Mem0History(Importer):
    name = "mem0-history"
    title = "mem0 history database (SQLite)"
    kind = MEMORIES
    extensions = (".db", ".sqlite", ".sqlite3")
    example = ("history.db — mem0's SQLite file (Memory.from_config(...history_db_path)), table history:\n"
               "id | memory_id | old_memory        | new_memory          | event  | created_at | updated_at\n"
               "h1 | 3f1c…     | NULL              | Lives in Paris      | ADD    | 2025-06-01 | NULL\n"
               "h2 | 3f1c…     | Lives in Paris    | Lives in Lyon       | UPDATE | 2025-06-01 | 2025-07-02\n"
               "h3 | 3f1c…     | Lives in Lyon     | NULL                | DELETE | 2025-06-01 | 2025-08-03")
    notes = ("ADD gives the memory; each UPDATE a new version <id>#v<n> and a signed provenance entry "
             "superseding the old one; each DELETE a signed retirement that keeps the text; in mem0's order.")

    def sniff(self, head: Head) -> Sniff:
        return sniff_sqlite_table(head, "history", "an SQLite database with mem0's history table")

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        return sqlite_parse(data, filename, col, lambda path: history_parse(history_rows(path), filename, col))


register(Mem0Export())
register(Mem0History())
