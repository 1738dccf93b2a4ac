"""The small shared helpers of ``interchange``: chunks, line_of, issues_as_dicts."""

import json

import pytest

from interchange.issues import Issue, issues_as_dicts
from interchange.readers import chunks, line_of, line_of_id


def test_chunks_cuts_a_sequence_into_slices_of_at_most_size():
    assert list(chunks(list(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    assert list(chunks([], 3)) == []
    assert list(chunks("abcd", 4)) == ["abcd"]


def test_chunks_refuses_a_size_below_one():
    with pytest.raises(ValueError, match="at least 1"):
        list(chunks([1], 0))


def test_line_of_names_the_first_line_holding_the_needle():
    data = b'{"id": "a"}\n{"id": "ab"}\n{"id": "b"}\n'
    assert line_of(data, json.dumps("ab")) == 2
    assert line_of(data, b'"b"') == 3
    assert line_of(data, "zz") is None


def test_line_of_matches_text_beyond_ascii():
    assert line_of('x\n{"id": "caf\u00e9"}\n'.encode(), "caf\u00e9") == 2


def test_issues_as_dicts_gives_what_the_api_returns_sorted_by_line():
    issues = [Issue("m.jsonl", 3, "text", "missing"), Issue("m.jsonl", None, None, "empty"),
              Issue("m.jsonl", 2, "id", "duplicate")]
    assert issues_as_dicts(issues) == [
        {"file": "m.jsonl", "line": None, "field": None, "message": "empty"},
        {"file": "m.jsonl", "line": 2, "field": "id", "message": "duplicate"},
        {"file": "m.jsonl", "line": 3, "field": "text", "message": "missing"},
    ]


def test_line_of_id_matches_an_id_as_a_whole_json_string_then_anywhere():
    data = b'{"id": "x", "text": "about ab"}\n{"id": "ab"}\nab,plain csv\n'
    assert line_of_id(data, "ab") == 2  # not line 1, where "ab" is inside another record's text
    assert line_of_id('{"id": "caf\\u00e9"}\n'.encode(), "caf\u00e9") == 1  # escaped in the file
    assert line_of_id(b"id,text\nm1,hello\n", "m1") == 2  # CSV: no JSON quoting
    assert line_of_id(data, "zz") is None
