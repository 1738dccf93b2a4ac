"""Canonical JSON, entry hashes, weight quantization and time formatting."""

import hashlib
import json
from datetime import datetime, timedelta, timezone

import pytest

from ledger.core.canonical import (
    ALL_TAGS,
    TAG_GENESIS,
    canonical_json,
    entry_hash,
    format_time,
    parse_time,
    quantize_weight,
)
from ledger.core.errors import CanonicalError


def test_it_sorts_keys_and_drops_whitespace():
    assert canonical_json({"b": [1, True, None], "a": {"d": "x", "c": -2}}) == b'{"a":{"c":-2,"d":"x"},"b":[1,true,null]}'


def test_it_writes_utf8_not_escapes():
    assert canonical_json({"k": "Zürich €"}) == '{"k":"Zürich €"}'.encode()


def test_it_escapes_control_characters_like_rfc8785():
    assert canonical_json(["\n\t\x0f\"\\\x7f"]) == b'["\\n\\t\\u000f\\"\\\\\x7f"]'


def test_it_sorts_keys_by_utf16_code_units():
    # RFC 8785 section 3.2.3: U+1F600 (surrogates D83D DE00) sorts before U+FB33.
    obj = {"\ufb33": 1, "\U0001f600": 2, "\u20ac": 3, "\r": 4, "1": 5, "\u0080": 6, "\u00f6": 7}
    out = canonical_json(obj)
    assert list(json.loads(out)) == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"w": 1.5}, "$.w"),
        ({"a": [1, {"b": 0.1}]}, "$.a[1].b"),
        ({"x": float("nan")}, "$.x"),
        ({"x": float("inf")}, "$.x"),
        ({"x": b"raw"}, "$.x"),
        ({1: "int key"}, "$"),
        ({"big": 2**53}, "$.big"),
        ({"s": {1, 2}}, "$.s"),
    ],
)
def test_it_rejects_non_canonical_values_naming_the_path(value, path):
    with pytest.raises(CanonicalError) as err:
        canonical_json(value)
    assert str(err.value).startswith(path + ":")


def test_it_rejects_lone_surrogates():
    with pytest.raises(CanonicalError):
        canonical_json({"s": "\ud800"})


def test_entry_hash_is_sha256_of_tag_nul_body():
    # printf 'memaudit/genesis/v1\x00{"a":1}' | sha256sum
    want = "f5f55dde414abaf490a7bad0e55243315a8d61d1527fea5c06b2989c12a3113b"
    assert entry_hash(TAG_GENESIS, {"a": 1}).hex() == want
    assert hashlib.sha256(b'memaudit/genesis/v1\x00{"a":1}').hexdigest() == want


def test_entry_hashes_are_domain_separated_by_tag():
    body = {"tenant": "acme", "seq": 0}
    assert len({entry_hash(tag, body) for tag in ALL_TAGS}) == len(ALL_TAGS)


@pytest.mark.parametrize(("w", "q"), [(0.1, 100), (1.0, 1000), (3.0, 3000), (1.2345, 1234), (1.2355, 1236), (2, 2000)])
def test_quantize_weight_rounds_to_milli_units(w, q):
    assert quantize_weight(w) == q


def test_quantize_weight_rejects_nan():
    with pytest.raises(CanonicalError):
        quantize_weight(float("nan"))


def test_time_round_trips_in_canonical_utc_form():
    dt = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(dt) == "2025-03-04T03:06:07Z"
    assert format_time(dt.replace(microsecond=120)) == "2025-03-04T03:06:07.000120Z"
    assert parse_time("2025-03-04T03:06:07.000120Z") == dt.replace(microsecond=120)


@pytest.mark.parametrize("s", ["2025-03-04T03:06:07+00:00", "2025-03-04 03:06:07Z", "2025-03-04T03:06:07.000000Z",
                               "2025-13-04T03:06:07Z", "2025-03-04T03:06:07.12Z", 20250304])
def test_it_rejects_non_canonical_times(s):
    with pytest.raises(CanonicalError):
        parse_time(s)


def test_it_refuses_naive_datetimes():
    with pytest.raises(CanonicalError):
        format_time(datetime(2025, 1, 1))
