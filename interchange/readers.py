"""Strict readers with line numbers: UTF-8, RFC 8259 JSON, JSONL and JSON arrays.

Every problem is added to a ``Collector`` as an ``Issue`` naming the file and the line; the
readers yield ``(line, value)`` pairs for what parsed, so a caller can go on and report every
problem in one pass. Values holding a string no database stores (NUL, a lone surrogate) are
reported and skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

from interchange.issues import Collector

T = TypeVar("T")


def decode(data: bytes, filename: str, col: Collector) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col.add(filename, line, None, f"not valid UTF-8 (byte offset {exc.start})")
        return None
    return text.removeprefix("\ufeff")


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def loads(raw: str | bytes) -> Any:
    """``json.loads`` limited to RFC 8259 JSON: NaN/Infinity refused (the database's JSON
    refuses them); nesting beyond the recursion limit and integers beyond Python's digit
    limit raise ValueError instead of escaping as other exceptions."""
    try:
        return json.loads(raw, parse_constant=reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def unstorable(obj: Any, path: str = "") -> tuple[str, str] | None:
    """(field path, why) of the first string no database can store: NUL (PostgreSQL text and
    jsonb refuse it) or a lone surrogate (not encodable as UTF-8)."""
    stack = [(path, obj)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return where, "contains a NUL character"
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return where, "contains a lone surrogate (not valid Unicode text)"
        elif isinstance(v, dict):
            for k, x in v.items():
                sub = f"{where}.{k}" if where else str(k)
                stack.append((where, k))
                stack.append((sub, x))
        elif isinstance(v, list):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
    return None


# In JSON text decoded from valid UTF-8, a NUL or a lone surrogate can only come from a \\u
# escape (raw control characters are refused by the decoder), so a value whose source holds no
# such escape needs no walk: the walk was most of the time spent parsing a large export.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def checked(obj: Any, filename: str, line: int | None, col: Collector, raw: str | None = None) -> bool:
    """False (and an issue) when ``obj`` holds a string no database stores. ``raw``, the JSON
    text ``obj`` was decoded from, lets the common case skip the walk."""
    if raw is not None and ("\\u" not in raw or not _RISKY_ESCAPE.search(raw)):
        return True
    bad = unstorable(obj)
    if bad is not None:
        col.add(filename, line, bad[0].encode("utf-8", "backslashreplace").decode() or None, bad[1])
        return False
    return True


SKIP = object()  # what parse_line answers for a line that yields no record


def parse_line(raw: str, filename: str, n: int, col: Collector) -> Any:
    """One JSON Lines line: its object, or ``SKIP`` for a blank line or one whose problem
    (bad JSON, a value the database cannot store) is now recorded in ``col``."""
    if not raw.strip():
        return SKIP
    try:
        obj = loads(raw)
    except json.JSONDecodeError as exc:
        col.add(filename, n, None, f"bad JSON: {exc.msg} (column {exc.colno})")
        return SKIP
    except ValueError as exc:
        col.add(filename, n, None, f"bad JSON: {exc}")
        return SKIP
    return obj if checked(obj, filename, n, col, raw) else SKIP


def iter_jsonl(text: str, filename: str, col: Collector) -> Iterator[tuple[int, Any]]:
    # Lines end at "\n" only: str.splitlines() also splits at U+2028/U+2029, U+0085 and
    # others, which JSON strings may hold unescaped, and would cut a valid record in two.
    start, n = 0, 0
    while start <= len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        n += 1
        raw = text[start:end].removesuffix("\r")
        start = end + 1
        obj = parse_line(raw, filename, n, col)
        if obj is not SKIP:
            yield n, obj


def iter_json_array(text: str, filename: str, col: Collector, *, start: int = 0,
                    what: str = "a JSON array of objects", end_at: list[int] | None = None
                    ) -> Iterator[tuple[int, Any]]:
    """Yield (line, element) of the JSON array starting at ``start`` (the top level by
    default), with each element's starting line; elements are decoded one at a time, so a
    large array never exists twice in memory. ``end_at`` (a one-item list) receives the index
    just after a nested array's closing bracket."""
    dec = json.JSONDecoder(parse_constant=reject_constant)
    ws = " \t\r\n"
    i = start
    top = start == 0
    while i < len(text) and text[i] in ws:
        i += 1
    if i >= len(text) or text[i] != "[":
        if top:
            try:
                loads(text)
            except json.JSONDecodeError as exc:
                col.add(filename, exc.lineno, None, f"bad JSON: {exc.msg} (column {exc.colno})")
                return
            except ValueError as exc:
                col.add(filename, 1, None, f"bad JSON: {exc}")
                return
        col.add(filename, text.count("\n", 0, i) + 1, None, f"expected {what}")
        return
    i += 1
    line, line_pos = text.count("\n", 0, i) + 1, i  # the line count is advanced, never recounted
    while True:
        while i < len(text) and text[i] in ws:
            i += 1
        if i < len(text) and text[i] == "]":
            i += 1
            break
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            col.add(filename, exc.lineno, None, f"bad JSON: {exc.msg} (column {exc.colno})")
            return
        except (ValueError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            col.add(filename, text.count("\n", 0, i) + 1, None, f"bad JSON: {why}")
            return
        line += text.count("\n", line_pos, i)
        line_pos = i
        if checked(obj, filename, line, col, text[i:end]):
            yield line, obj
        i = end
        while i < len(text) and text[i] in ws:
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        if i < len(text) and text[i] == "]":
            i += 1
            break
        col.add(filename, text.count("\n", 0, i) + 1, None, "bad JSON: expected ',' or ']'")
        return
    if end_at is not None:
        end_at[:] = [i]
    if top and text[i:].strip():
        col.add(filename, text.count("\n", 0, i) + 1, None, "bad JSON: data after the array")


def is_rfc3339(s: str) -> bool:
    if "T" not in s.upper() and " " not in s:
        return False
    try:
        dt = datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError:
        return False
    return dt.tzinfo is not None


def line_of(data: bytes, needle: str | bytes) -> int | None:
    """Best-effort line of a record found after parsing (the records keep no line): the
    1-based number of the first line of the upload holding ``needle`` (a str is taken as
    UTF-8), or None. To match an id as a whole JSON string, pass ``json.dumps(id)``."""
    if isinstance(needle, str):
        needle = needle.encode("utf-8")
    for n, raw in enumerate(data.splitlines(), start=1):
        if needle in raw:
            return n
    return None


def line_of_id(data: bytes, record_id: str) -> int | None:
    """Best-effort line of the record whose id is ``record_id``: the first line holding it as a
    JSON string (so an id that is a substring of another's text is not matched), written as is
    or with its non-ASCII characters escaped; else the first line holding it at all (CSV)."""
    for needle in dict.fromkeys((json.dumps(record_id, ensure_ascii=False), json.dumps(record_id), record_id)):
        n = line_of(data, needle)
        if n is not None:
            return n
    return None


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of ``items`` of at most ``size`` (> 0) elements (queries with bounded
    ``IN`` lists, task fan-out)."""
    if size < 1:
        raise ValueError("chunk size must be at least 1")
    for i in range(0, len(items), size):
        yield items[i:i + size]
