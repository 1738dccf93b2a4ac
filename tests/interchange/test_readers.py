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


@pytest.mark.parametrize("name", ["mem0-export", "memaudit-jsonl", "memaudit-json"])
def test_the_workers_second_pass_keeps_nothing_per_record(name, monkeypatch):
    """Pass 1 (validation) refuses duplicate ids, so the insert pass streams with ``unique=False``
    and keeps no id per record: what stays allocated while the stream is open does not grow with
    the file (the ~0.2 KB a row creep of the 100 MB import, docs/benchmarks.md section 10)."""
    import io
    import itertools
    import json
    import tracemalloc

    from interchange import streams
    from interchange.importers import REGISTRY
    from interchange.issues import Collector

    monkeypatch.setattr(streams, "PIECE", 1 << 12)  # the read buffer small beside 20,000 records

    rows = [{"id": f"memory-{i:08d}-{'x' * 24}", "text": f"Fact number {i} about the office."} for i in range(20_000)]
    if name == "mem0-export":
        import hashlib

        rows = [{"id": r["id"], "memory": r["text"], "hash": hashlib.md5(r["text"].encode()).hexdigest()}  # noqa: S324
                for r in rows]
        data = json.dumps({"results": rows}).encode()
    elif name == "memaudit-json":
        data = json.dumps(rows).encode()
    else:
        data = "\n".join(json.dumps(r) for r in rows).encode()
    importer = REGISTRY[name]

    def retained(unique: bool) -> int:
        tracemalloc.start()
        stream = importer.stream(io.BytesIO(data), "f", Collector(), [], unique=unique)
        start = tracemalloc.get_traced_memory()[0]
        count = sum(1 for _ in itertools.islice(stream, 19_999))  # the stream still open
        held = tracemalloc.get_traced_memory()[0] - start
        count += sum(1 for _ in stream)
        tracemalloc.stop()
        assert count == 20_000
        return held

    assert retained(unique=True) > 1_000_000  # the duplicate check's ids (pass 1)
    assert retained(unique=False) < 200_000
