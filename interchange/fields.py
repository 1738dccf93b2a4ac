"""Field checks shared by every record parser: required strings, ids, unique ids."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interchange.issues import Collector

# Memory and incident ids are stored in 255-character columns.
MAX_ID_LENGTH = 255


def req_id(obj: Mapping[str, Any], file: str, line: int | None, col: Collector) -> str | None:
    v = req_str(obj, "id", file, line, col)
    if v is not None and len(v) > MAX_ID_LENGTH:
        col.add(file, line, "id", f"is {len(v)} characters long; ids have at most {MAX_ID_LENGTH}")
        return None
    return v


def req_str(obj: Mapping[str, Any], key: str, file: str, line: int | None, col: Collector,
             *, non_empty: bool = True) -> str | None:
    if key not in obj:
        col.add(file, line, key, "missing")
        return None
    v = obj[key]
    if not isinstance(v, str):
        col.add(file, line, key, f"must be a string, got {type(v).__name__}")
        return None
    if non_empty and not v.strip():
        col.add(file, line, key, "must not be empty")
        return None
    return v


def check_unique(ids: list[tuple[str, int | None]], file: str, col: Collector) -> None:
    seen: dict[str, int | None] = {}
    for i, line in ids:
        if i in seen:
            col.add(file, line, "id", f"duplicate id {i!r} (first on line {seen[i]})")
        else:
            seen[i] = line
