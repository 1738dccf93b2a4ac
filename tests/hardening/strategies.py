"""Hypothesis strategies for the fuzz suites: upload files (memories, incidents) and JSON bodies.

The awkward strings are the ones that broke things elsewhere: NUL (PostgreSQL text refuses it),
lone surrogates (not encodable as UTF-8), a BOM, line and paragraph separators, CSV quoting,
very long values; the awkward numbers: NaN/Infinity (not JSON), huge integers, floats for ints.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from hypothesis import strategies as st

NASTY_STRINGS = [
    "", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "\ufeff", "\u2028\u2029", "😀", "\r\n", "\"", "'", ",", "\\",
    "a" * 300, "0", "-1", "null", "true", "NaN", "1e999", "<script>alert(1)</script>", "'; DROP TABLE x; --",
    "2024-01-01T00:00:00Z", "../../etc/passwd", "%s%n", "m0", "main/m0",
]

texts = st.one_of(st.text(max_size=40), st.sampled_from(NASTY_STRINGS),
                  st.text(alphabet=st.characters(codec="utf-8"), max_size=20))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**63, 10**40, 0.5, 1e308, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True), texts,
)
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(texts, c, max_size=4),
                           max_leaves=12)
# What a strict JSON encoder can send (the API's parser refuses NaN/Infinity before any view).
strict_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                           st.floats(allow_nan=False, allow_infinity=False), texts)
strict_json = st.recursive(strict_scalars,
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(texts, c, max_size=4), max_leaves=12)

TIMES = ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00+02:00", "2024-05-01 12:00:00Z", "2024-05-01",
         "2024-13-01T00:00:00Z", "2024-01-01T00:00:00+25:00", "yesterday", "", "20240101T000000Z",
         "2024-01-01T00:00:00.1234567+00:00", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"]


@st.composite
def memory_record(draw) -> dict[str, Any]:
    """Mostly well-formed, sometimes missing or wrong fields."""
    rec: dict[str, Any] = {}
    mode = draw(st.sampled_from(["good", "good", "good", "odd"]))
    if mode == "good":
        rec["id"] = draw(st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True))
        rec["text"] = draw(st.text(min_size=1, max_size=60).filter(str.strip))
    else:
        if draw(st.booleans()):
            rec["id"] = draw(st.one_of(texts, json_values))
        if draw(st.booleans()):
            rec["text"] = draw(st.one_of(texts, json_values))
    if draw(st.booleans()):
        rec["metadata"] = draw(st.one_of(st.dictionaries(texts, json_values, max_size=3), json_values))
    if draw(st.integers(0, 3)) == 0:
        rec["created_at"] = draw(st.one_of(st.sampled_from(TIMES), json_values))
    if draw(st.integers(0, 5)) == 0:
        rec[draw(texts)] = draw(json_values)
    return rec


def _dumps(obj: Any, ascii_only: bool) -> str:
    return json.dumps(obj, ensure_ascii=ascii_only)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes UTF-8 decoders refuse


def serialize_records(records: list, fmt: str, ascii_only: bool) -> bytes:
    if fmt == "jsonl":
        return _encode("\n".join(_dumps(r, ascii_only) for r in records) + "\n")
    if fmt == "json":
        return _encode(_dumps(records, ascii_only))
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["id", "text", "metadata", "created_at", "source"])
    for r in records:
        if not isinstance(r, dict):
            writer.writerow([_dumps(r, ascii_only)])
            continue
        meta = r.get("metadata")
        writer.writerow([r.get("id", ""), r.get("text", ""), "" if meta is None else _dumps(meta, ascii_only),
                         r.get("created_at", ""), r.get("source", "")])
    return _encode(buf.getvalue())


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """Byte-level damage: truncation, a splice of random bytes, a dropped slice, a BOM."""
    kind = draw(st.sampled_from(["none", "none", "truncate", "insert", "delete", "bom", "crlf", "nul"]))
    if not data or kind == "none":
        return data
    at = draw(st.integers(0, len(data)))
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    if kind == "delete":
        return data[:at] + data[at + draw(st.integers(1, 8)):]
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n")
    return data[:at] + b"\x00" + data[at:]


@st.composite
def memory_file(draw) -> tuple[str, bytes, int]:
    """(filename, bytes, number of records written) for a memories upload."""
    fmt = draw(st.sampled_from(["jsonl", "json", "csv"]))
    records = draw(st.lists(st.one_of(memory_record(), memory_record(), json_values), min_size=0, max_size=6))
    data = serialize_records(records, fmt, draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0:  # deep nesting or a huge number: parser limits
        data = draw(st.sampled_from([
            b'{"id": "deep", "text": "x", "metadata": ' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}\n",
            b'{"id": "big", "text": "x", "metadata": {"n": 1' + b"0" * 5000 + b"}}\n",
            b"id,text\nwide," + b"x" * 200_000 + b"\n",
            b'[{"id": "a", "text": "x"}, ' * 3 + b"]",
        ]))
        fmt = "csv" if data.startswith(b"id,") else "jsonl"
    filename = draw(st.sampled_from([f"memories.{fmt}", f"upload.{fmt}", f"M.{fmt.upper()}"]))
    return filename, draw(mutated(data)), len(records)


@st.composite
def incident_record(draw, memory_ids: list[str]) -> Any:
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    rec: dict[str, Any] = {}
    good = draw(st.booleans())
    rec["id"] = draw(st.from_regex(r"inc-[a-z0-9]{1,8}", fullmatch=True)) if good else draw(json_values)
    rec["query"] = draw(st.text(min_size=1, max_size=40).filter(str.strip)) if good else draw(texts)
    rec["output"] = draw(texts)
    rec["retrieved"] = draw(st.one_of(st.lists(st.sampled_from(memory_ids), min_size=1, max_size=3),
                                      st.lists(texts, max_size=3), json_values))
    if draw(st.booleans()):
        rec["harm"] = draw(st.one_of(
            st.floats(allow_nan=True), st.booleans(), st.none(), st.integers(-2, 2),
            st.fixed_dictionaries({"type": st.sampled_from(["contains", "regex", "similarity", "llm-judge", "x"])},
                                  optional={"target": texts, "pattern": st.sampled_from(["(", "a+", "[", "x"])}),
            json_values))
    if draw(st.integers(0, 3)) == 0:
        rec["candidates"] = draw(st.one_of(st.lists(texts, max_size=3), json_values))
    return rec


@st.composite
def incident_file(draw, memory_ids: list[str]) -> tuple[str, bytes]:
    fmt = draw(st.sampled_from(["jsonl", "json"]))
    records = draw(st.lists(incident_record(memory_ids), min_size=0, max_size=5))
    ascii_only = draw(st.booleans())
    if fmt == "jsonl":
        data = _encode("\n".join(_dumps(r, ascii_only) for r in records) + "\n")
    else:
        data = _encode(_dumps(records, ascii_only))
    filename = draw(st.sampled_from([f"incidents.{fmt}", f"upload.{fmt}"]))
    return filename, draw(mutated(data))
