"""Canonical JSON, domain-separated entry hashes, quantized weights, UTC times.

Encoding (DESIGN section 3, "Encoding and hashing"): RFC 8785 (JCS) style.

1. Only ``str``, ``int`` (|n| <= 2**53 - 1, so every JCS implementation reads
   the same number), ``bool``, ``None``, ``list``/``tuple`` and ``dict`` with
   ``str`` keys are accepted. Floats, NaN, bytes and anything else raise
   :class:`CanonicalError` naming the JSON path of the bad value.
2. Object keys are sorted by their UTF-16 code units (RFC 8785 section 3.2.3);
   for keys inside the Basic Multilingual Plane this equals Python's order.
3. No insignificant whitespace, UTF-8 output, no ``\\uXXXX`` escapes except
   the control characters JSON requires (Python's encoder and RFC 8785 agree
   on these: ``\\b \\t \\n \\f \\r`` and lowercase ``\\u00xx``).

``entry_hash(tag, body) = SHA-256(tag || 0x00 || canonical_json(body))``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime, timezone
from typing import Any

from ledger.core.errors import CanonicalError

TAG_GENESIS = b"memaudit/genesis/v1"
TAG_PROVENANCE = b"memaudit/provenance/v1"
TAG_TRANSITION = b"memaudit/transition/v1"
TAG_LABEL = b"memaudit/label/v1"
TAG_TREE_HEAD = b"memaudit/tree-head/v1"
TAG_EPOCH = b"memaudit/epoch/v1"
TAG_RECEIPT = b"memaudit/receipt/v1"
TAG_KEY_ENDORSEMENT = b"memaudit/key-endorsement/v1"

ALL_TAGS = (
    TAG_GENESIS,
    TAG_PROVENANCE,
    TAG_TRANSITION,
    TAG_LABEL,
    TAG_TREE_HEAD,
    TAG_EPOCH,
    TAG_RECEIPT,
    TAG_KEY_ENDORSEMENT,
)

MAX_SAFE_INT = 2**53 - 1

_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _check(value: Any, path: str) -> bool:
    """Raise CanonicalError for a non-canonical value; True if a key needs UTF-16 sorting."""
    t = type(value)
    if t is str or t is bool or value is None:
        return False
    if t is int:
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return False
        raise CanonicalError(f"{path}: integer {value} outside the JSON safe range")
    if t is dict:
        needs_utf16 = False
        for k, v in value.items():
            if type(k) is not str:
                raise CanonicalError(f"{path}: key {k!r} is not a string")
            if not k.isascii():
                needs_utf16 = True
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            if tv is int and -MAX_SAFE_INT <= v <= MAX_SAFE_INT:
                continue
            if _check(v, f"{path}.{k}"):
                needs_utf16 = True
        return needs_utf16
    if t is list or t is tuple:
        needs_utf16 = False
        for i, v in enumerate(value):
            if _check(v, f"{path}[{i}]"):
                needs_utf16 = True
        return needs_utf16
    if t is float:
        what = "NaN/Infinity" if not math.isfinite(value) else "float"
        raise CanonicalError(f"{path}: {what} {value!r} not allowed (quantize to integer milli-units)")
    raise CanonicalError(f"{path}: type {t.__name__} not allowed in canonical JSON")


def _utf16_sorted(value: Any) -> Any:
    if type(value) is dict:
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return {k: _utf16_sorted(value[k]) for k in keys}
    if type(value) in (list, tuple):
        return [_utf16_sorted(v) for v in value]
    return value


def canonical_json(obj: Any) -> bytes:
    """Encode ``obj`` as canonical JSON bytes (see module docstring)."""
    if _check(obj, "$"):
        text = json.dumps(
            _utf16_sorted(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    else:
        text = _ENCODER.encode(obj)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError(f"$: string holds a lone surrogate at offset {exc.start}") from None


def canonical_json_checked(obj: dict) -> bytes:
    """:func:`canonical_json` of a value the caller has already checked holds only ``str`` and
    ``int`` (exact types, not subclasses; ints within the safe range), ``bool``, ``None`` and
    lists of those, under ASCII keys — as ``ledger.core.entries`` schemas pin the bodies of
    some entry kinds. Step 1's walk could only pass on such a value and no key needs UTF-16
    sorting, so it is skipped; the bytes are those :func:`canonical_json` writes, and a lone
    surrogate still refuses."""
    try:
        return _ENCODER.encode(obj).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError(f"$: string holds a lone surrogate at offset {exc.start}") from None


def entry_hash(tag: bytes | str, body: dict, *, checked: bool = False) -> bytes:
    """``SHA-256(tag || 0x00 || canonical_json(body))`` — domain-separated by tag.

    ``checked``: ``body`` is a value :func:`canonical_json_checked` takes (the caller's schema
    check vouches for it)."""
    if isinstance(tag, str):
        tag = tag.encode("ascii")
    if b"\x00" in tag:
        raise CanonicalError("tag must not contain a NUL byte")
    return hashlib.sha256(tag + b"\x00" + (canonical_json_checked(body) if checked else canonical_json(body))).digest()


def sha256_hex(data: bytes | str) -> str:
    """Hex SHA-256 of bytes, or of a string's UTF-8 encoding (content, query hashes)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def quantize_weight(w: float) -> int:
    """``round(w * 1000)`` as integer milli-units (Python's round: half to even)."""
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
        raise CanonicalError(f"weight {w!r} is not a finite number")
    return round(w * 1000)


_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?Z")


def format_time(dt: datetime) -> str:
    """RFC 3339 UTC, canonical: ``2025-01-02T03:04:05Z`` or ``...05.123456Z``.

    Naive datetimes are refused: a time without a zone is ambiguous evidence.
    """
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise CanonicalError(f"naive datetime {dt!r}; pass an aware UTC datetime")
    dt = dt.astimezone(timezone.utc)
    spec = "microseconds" if dt.microsecond else "seconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def parse_time(s: str) -> datetime:
    """Parse a canonical time string (as written by :func:`format_time`)."""
    if type(s) is not str or not _TIME_RE.fullmatch(s):
        raise CanonicalError(f"time {s!r} is not canonical RFC 3339 UTC (YYYY-MM-DDTHH:MM:SS[.ffffff]Z)")
    try:
        dt = datetime.fromisoformat(s[:-1]).replace(tzinfo=timezone.utc)
    except ValueError as exc:
        raise CanonicalError(f"time {s!r}: {exc}") from None
    if dt.microsecond == 0 and "." in s:
        raise CanonicalError(f"time {s!r}: zero fraction must be omitted")
    return dt


def now_utc() -> datetime:
    return datetime.now(timezone.utc)
