"""Small helpers the foreign-format importers share: times, ids, JSON objects walked member by
member (so a 100 MB export is decoded one record at a time)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from interchange.fields import MAX_ID_LENGTH
from interchange.issues import Collector
from interchange.readers import iter_json_array, loads

_WS = " \t\r\n"


def rfc3339(value: Any) -> str | None:
    """An RFC 3339 time from what foreign stores write: ISO 8601 with or without a zone (no
    zone means UTC, as SQLite's CURRENT_TIMESTAMP and LangGraph write), or epoch seconds.
    None when absent or unreadable."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            dt = datetime.fromtimestamp(float(value), tz=UTC)
        elif isinstance(value, str):
            dt = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.isoformat()


def id_ok(value: str, file: str, line: int | None, col: Collector, fld: str = "id") -> bool:
    if not value:
        col.add(file, line, fld, "must not be empty")
        return False
    if len(value) > MAX_ID_LENGTH:
        col.add(file, line, fld, f"gives an id of {len(value)} characters; ids have at most {MAX_ID_LENGTH}")
        return False
    return True


def iter_object_members(text: str, filename: str, col: Collector, arrays: tuple[str, ...]
                        ) -> Iterator[tuple[str, Any]]:
    """Walk a top-level JSON object. Members named in ``arrays`` whose value is an array are
    yielded as ``(name, (line, element))`` one element at a time; other members as
    ``(name, value)`` whole. Syntax errors go to ``col``."""
    dec = json.JSONDecoder()
    i = 0
    n = len(text)

    def skip(k: int) -> int:
        while k < n and text[k] in _WS:
            k += 1
        return k

    def bad(k: int, why: str) -> None:
        col.add(filename, text.count("\n", 0, k) + 1, None, f"bad JSON: {why}")

    i = skip(i)
    if i >= n or text[i] != "{":
        bad(i, "expected a JSON object")
        return
    i = skip(i + 1)
    if i < n and text[i] == "}":
        return
    while True:
        try:
            key, i = dec.raw_decode(text, i)
        except ValueError:
            bad(i, "expected a member name")
            return
        i = skip(i)
        if i >= n or text[i] != ":" or not isinstance(key, str):
            bad(i, "expected ':'")
            return
        i = skip(i + 1)
        if key in arrays and i < n and text[i] == "[":
            end: list[int] = []
            for pair in iter_json_array(text, filename, col, start=i, end_at=end):
                yield key, pair
            if not end:
                return
            i = end[0]
        else:
            try:
                value, i = dec.raw_decode(text, i)
            except (ValueError, RecursionError):
                bad(i, "a member's value does not parse")
                return
            yield key, value
        i = skip(i)
        if i < n and text[i] == ",":
            i = skip(i + 1)
            continue
        if i < n and text[i] == "}":
            if text[i + 1:].strip():
                bad(i + 1, "data after the object")
            return
        bad(i, "expected ',' or '}'")
        return


def whole_json(text: str, filename: str, col: Collector) -> Any:
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        col.add(filename, exc.lineno, None, f"bad JSON: {exc.msg} (column {exc.colno})")
    except ValueError as exc:
        col.add(filename, 1, None, f"bad JSON: {exc}")
    return None


def text_of(content: Any) -> str:
    """The text of a chat message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
