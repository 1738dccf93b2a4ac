"""The importer registry: one class per format, chosen from the file itself.

An importer declares its ``name``, a ``title`` people read, its ``kind`` (``memories`` or
``incidents``), a five-line ``example`` (the upload page and docs/formats.md show it) and two
functions:

- ``sniff(head) -> Sniff``: a confidence in [0, 1] and the reason, from the first
  ``HEAD_BYTES`` of the file, its name and, for an SQLite file, its table names. It must be
  cheap and must not raise.
- ``parse(data, filename, col)``: memories give ``Parsed`` (records, then history events);
  incidents give ``[(line, incident object)]`` in the project's incident shape. Problems go to
  the ``Collector`` with file, line and field.

``detect`` runs every sniffer and takes the most confident; a file that matches nothing with at
least ``MIN_CONFIDENCE`` is refused with the list of formats tried, and one that matches a
format of the other kind says where it belongs. Adding a format is one module in this package
that calls ``register`` plus its test.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from interchange.issues import Collector, Issue, ValidationError
from interchange.records import Parsed

HEAD_BYTES = 64 * 1024
MIN_CONFIDENCE = 0.3
SQLITE_MAGIC = b"SQLite format 3\x00"
MEMORIES = "memories"
INCIDENTS = "incidents"


@dataclass(frozen=True)
class Sniff:
    confidence: float
    reason: str

    @classmethod
    def no(cls, reason: str = "") -> Sniff:
        return cls(0.0, reason)


@dataclass(frozen=True)
class Head:
    """What a sniffer sees: the first bytes, the name, the decoded start of the text (invalid
    UTF-8 replaced), and the table names when the file is an SQLite database."""

    data: bytes
    filename: str
    text: str
    sqlite_tables: frozenset[str] | None = None

    @property
    def lower_name(self) -> str:
        return self.filename.lower()

    def stripped(self) -> str:
        return self.text.lstrip("\ufeff \t\r\n")

    def first_record(self) -> Any:
        """The first JSON value of the file when it parses from the head: the first line of
        JSONL, or the first element of a top-level array; None otherwise."""
        s = self.stripped()
        try:
            if s.startswith("["):
                return json.JSONDecoder().raw_decode(s[1:].lstrip())[0]
            return json.loads(self.first_line())
        except (ValueError, RecursionError):
            return None

    def first_line(self) -> str:
        for raw in self.text.removeprefix("\ufeff").split("\n"):
            if raw.strip():
                return raw.strip()
        return ""


class Importer:
    name = ""
    title = ""
    kind = MEMORIES
    extensions: tuple[str, ...] = ()
    example = ""
    notes = ""  # one line for the upload page: what becomes what
    listed_first = False  # MemAudit's own formats head the lists people read

    def sniff(self, head: Head) -> Sniff:  # pragma: no cover - every importer overrides it
        raise NotImplementedError

    def parse(self, data: bytes, filename: str, col: Collector) -> Any:  # pragma: no cover
        raise NotImplementedError

    # A format that can be read from its file a record at a time (bounded memory for a large
    # upload on the worker) overrides this: yield the records, append history events to
    # ``events``, put problems in ``col`` (the same ones ``parse`` reports, duplicates included).
    streams = False

    def stream(self, f: BinaryIO, filename: str, col: Collector, events: list, *,
               unique: bool = True) -> Iterator[Any]:  # pragma: no cover
        """The records a piece of the file at a time. ``unique=False``: the file was checked
        by a pass with ``unique=True`` already; keep nothing per record (no duplicate check)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "kind": self.kind, "extensions": list(self.extensions),
                "example": self.example, "notes": self.notes}


REGISTRY: dict[str, Importer] = {}


def register(importer: Importer) -> Importer:
    if importer.name in REGISTRY:
        raise ValueError(f"importer {importer.name!r} registered twice")
    REGISTRY[importer.name] = importer
    return importer


def formats(kind: str | None = None) -> list[Importer]:
    """The registered importers (of one kind), MemAudit's own first, then in registration order."""
    return sorted((imp for imp in REGISTRY.values() if kind is None or imp.kind == kind),
                  key=lambda imp: not imp.listed_first)


def sqlite_tables(path: str | Path) -> frozenset[str]:
    """Table names of an SQLite file, opened read-only (nothing is ever written to it)."""
    conn = sqlite3.connect(f"file:{Path(path).as_posix()}?mode=ro", uri=True)
    try:
        return frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        conn.close()


@contextmanager
def sqlite_file(data: bytes) -> Iterator[Path]:
    """An uploaded SQLite database as a temporary file (sqlite3 reads files, not bytes)."""
    with tempfile.TemporaryDirectory(prefix="memaudit-import-") as tmp:
        path = Path(tmp) / "upload.sqlite3"
        path.write_bytes(data)
        yield path


def sqlite_parse(data: bytes, filename: str, col: Collector, read: Callable[[Path], Parsed]) -> Parsed:
    """``read`` an uploaded SQLite database; a file SQLite cannot read is one issue, not a crash."""
    try:
        with sqlite_file(data) as path:
            return read(path)
    except sqlite3.DatabaseError as exc:
        col.add(filename, None, None, f"cannot read the SQLite database: {exc}")
        return Parsed([])


def sniff_sqlite_table(head: Head, table: str, reason: str) -> Sniff:
    """A database importer's sniff: confident when the upload is SQLite with ``table``."""
    if head.sqlite_tables is not None and table in head.sqlite_tables:
        return Sniff(0.95, reason)
    return Sniff.no()


def head_of(data: bytes, filename: str) -> Head:
    tables = None
    if data.startswith(SQLITE_MAGIC):
        try:
            with sqlite_file(data) as path:
                tables = sqlite_tables(path)
        except sqlite3.DatabaseError:
            tables = frozenset()
    chunk = data[:HEAD_BYTES]
    return Head(chunk, filename, chunk.decode("utf-8", "replace"), tables)


def sniff_all(head: Head) -> list[tuple[Importer, Sniff]]:
    """Every importer's verdict, most confident first (registration order breaks ties)."""
    verdicts = []
    for imp in REGISTRY.values():
        try:
            verdict = imp.sniff(head)
        except Exception as exc:  # noqa: BLE001 - a sniffer bug must not hide the other formats
            verdict = Sniff.no(f"sniffer failed: {type(exc).__name__}")
        verdicts.append((imp, verdict))
    return sorted(verdicts, key=lambda iv: -iv[1].confidence)


def tried(kind: str | None = None) -> str:
    return ", ".join(imp.name for imp in formats(kind))


def detect(head: Head, kind: str, *, fmt: str | None = None) -> tuple[Importer, str]:
    """The importer for this file and the message to show ("this looks like ..."), or
    ``ValidationError``: an unknown format (with the formats tried), one of the other kind,
    or a named ``fmt`` that does not exist."""
    if fmt:
        imp = REGISTRY.get(fmt)
        if imp is None or imp.kind != kind:
            raise ValidationError([Issue(head.filename, None, "format",
                                         f"unknown {kind} format {fmt!r}; one of: {tried(kind)}")])
        return imp, f"read as {imp.title} (format chosen by the uploader)"
    verdicts = [(imp, v) for imp, v in sniff_all(head) if v.confidence >= MIN_CONFIDENCE]
    if not verdicts:
        raise ValidationError([Issue(head.filename, None, None,
                                     f"no known format matched (tried: {tried()})")])
    best, verdict = verdicts[0]
    if best.kind != kind:
        same = [(imp, v) for imp, v in verdicts if imp.kind == kind and v.confidence >= verdict.confidence]
        if not same:
            where = "an incidents upload" if best.kind == INCIDENTS else "a memories import"
            raise ValidationError([Issue(head.filename, None, None,
                                         f"this looks like {best.title} ({verdict.reason}), which is {where}; "
                                         f"{kind} formats are: {tried(kind)}")])
        best, verdict = same[0]
    return best, f"this looks like {best.title}: {verdict.reason}"
