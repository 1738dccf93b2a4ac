import json

import pytest

from audits.engine.scenario import (
    ValidationError,
    load_scenario,
    parse_memories,
    parse_scenario_files,
)


def _jsonl(*rows) -> bytes:
    return ("\n".join(json.dumps(r) for r in rows) + "\n").encode()


def _issues(exc: pytest.ExceptionInfo) -> list:
    return exc.value.issues


def test_it_parses_jsonl_json_array_and_csv_alike():
    rows = [{"id": "a", "text": "alpha", "metadata": {"answer": "x"}}, {"id": "b", "text": "beta"}]
    jl = parse_memories(_jsonl(*rows), "memories.jsonl")
    arr = parse_memories(json.dumps(rows, indent=2).encode(), "memories.json")
    csv = parse_memories(b'id,text,metadata,answer\na,alpha,,x\nb,beta,,\n', "memories.csv")
    for parsed in (jl, arr, csv):
        assert [m.id for m in parsed] == ["a", "b"]
        assert parsed[0].metadata["answer"] == "x"


def test_it_reports_duplicate_ids_with_both_lines():
    with pytest.raises(ValidationError) as exc:
        parse_memories(_jsonl({"id": "a", "text": "x"}, {"id": "a", "text": "y"}), "memories.jsonl")
    (issue,) = _issues(exc)
    assert (issue.file, issue.line, issue.field) == ("memories.jsonl", 2, "id")
    assert "first on line 1" in issue.message


def test_it_rejects_empty_text_and_wrong_types_naming_field_and_line():
    data = _jsonl({"id": "a", "text": "  "}, {"id": 7, "text": "ok"}, {"id": "c", "text": "t",
                                                                        "metadata": [1]})
    with pytest.raises(ValidationError) as exc:
        parse_memories(data, "memories.jsonl")
    got = {(i.line, i.field) for i in _issues(exc)}
    assert got == {(1, "text"), (2, "id"), (3, "metadata")}


def test_it_rejects_bad_json_with_the_line_of_the_error():
    data = b'{"id": "a", "text": "x"}\n{"id": "b", "text": \n'
    with pytest.raises(ValidationError) as exc:
        parse_memories(data, "memories.jsonl")
    assert _issues(exc)[0].line == 2 and "bad JSON" in _issues(exc)[0].message


def test_it_gives_json_array_elements_their_starting_line():
    data = b'[\n  {"id": "a", "text": "x"},\n  {"id": "b", "text": ""}\n]'
    with pytest.raises(ValidationError) as exc:
        parse_memories(data, "memories.json")
    assert (_issues(exc)[0].line, _issues(exc)[0].field) == (3, "text")


def test_it_rejects_non_utf8_with_the_line():
    with pytest.raises(ValidationError) as exc:
        parse_memories(b'{"id": "a", "text": "x"}\n{"id": "b", "text": "\xff"}\n', "memories.jsonl")
    assert _issues(exc)[0].line == 2 and "UTF-8" in _issues(exc)[0].message


def test_it_rejects_a_bad_created_at():
    with pytest.raises(ValidationError) as exc:
        parse_memories(_jsonl({"id": "a", "text": "x", "created_at": "yesterday"}), "m.jsonl")
    assert _issues(exc)[0].field == "created_at"
    ok = parse_memories(_jsonl({"id": "a", "text": "x", "created_at": "2024-05-01T10:00:00Z"}),
                        "m.jsonl")
    assert ok[0].created_at == "2024-05-01T10:00:00Z"


def test_it_rejects_incidents_retrieving_unknown_memories_and_imports_nothing():
    files = {
        "memories.jsonl": _jsonl({"id": "a", "text": "x"}),
        "incidents.jsonl": _jsonl({"id": "i1", "query": "q", "output": "o",
                                   "retrieved": ["a", "zzz"], "harm": 1}),
    }
    with pytest.raises(ValidationError) as exc:
        parse_scenario_files(files)
    (issue,) = _issues(exc)
    assert (issue.file, issue.line, issue.field) == ("incidents.jsonl", 1, "retrieved")
    assert "'zzz'" in issue.message


def test_it_collects_issues_across_files():
    files = {
        "memories.jsonl": _jsonl({"id": "a", "text": "x"}),
        "probes.jsonl": _jsonl({"id": "p", "query": "q", "harm": {"type": "nope"}}),
        "agent.json": b'{"connector": "builtin-vote", "top_k": 0}',
        "truth.json": b'{"poisoned": ["b"]}',
    }
    with pytest.raises(ValidationError) as exc:
        parse_scenario_files(files)
    assert {i.file for i in _issues(exc)} == {"probes.jsonl", "agent.json", "truth.json"}


def test_it_loads_a_scenario_folder(tmp_path):
    (tmp_path / "memories.jsonl").write_bytes(_jsonl({"id": "a", "text": "Q: x?\nA: y"}))
    (tmp_path / "probes.jsonl").write_bytes(_jsonl(
        {"id": "p1", "query": "x?", "harm": {"type": "contains", "target": "y"}, "observed": True,
         "candidates": ["y", "z"]}))
    (tmp_path / "agent.json").write_text('{"connector": "builtin-reader", "top_k": 3}')
    (tmp_path / "truth.json").write_text('{"poisoned": ["a"]}')
    sc = load_scenario(tmp_path)
    assert sc.incidents is None
    assert sc.probes[0].candidates == ["y", "z"] and sc.probes[0].observed
    assert sc.agent.connector == "builtin-reader" and sc.agent.top_k == 3
    assert sc.truth == {"a"}


def test_it_needs_a_memories_file(tmp_path):
    with pytest.raises(ValidationError) as exc:
        load_scenario(tmp_path)
    assert "memories" in _issues(exc)[0].message


def test_parse_incidents_reads_a_json_array_and_names_the_line_of_a_bad_element():
    from audits.engine.scenario import ValidationError, parse_incidents

    good = b'[{"id": "e1", "query": "q", "output": "y", "retrieved": ["m1"]}]'
    assert [i.id for i in parse_incidents(good, "incidents.json")] == ["e1"]
    bad = b'[\n{"id": "e1", "query": "q", "output": "y", "retrieved": ["m1"]},\n{"id": "e2", "query": "q"}\n]'
    with pytest.raises(ValidationError) as exc:
        parse_incidents(bad, "incidents.json")
    assert {(i.line, i.field) for i in exc.value.issues} >= {(3, "retrieved")}


def test_parse_agent_config_and_harm_spec_raise_validation_errors_with_the_field():
    from audits.engine.scenario import ValidationError, parse_agent_config, parse_harm_spec

    assert parse_agent_config({"connector": "builtin-vote", "top_k": 3}).top_k == 3
    with pytest.raises(ValidationError) as exc:
        parse_agent_config({"connector": "builtin-vote", "top_k": 0})
    assert exc.value.issues[0].field == "top_k"
    assert parse_harm_spec({"type": "contains", "target": "x"}).to_dict()["target"] == "x"
    with pytest.raises(ValidationError) as exc:
        parse_harm_spec({"type": "regex", "pattern": "("})
    assert exc.value.issues[0].field == "harm.pattern"


def test_incident_issues_in_a_one_line_json_array_name_line_1():
    from audits.engine.scenario import ValidationError, parse_incidents

    data = b'[null, {"id": "a", "query": "q", "output": "o", "retrieved": ["m1"]}, 3]'
    with pytest.raises(ValidationError) as exc:
        parse_incidents(data, "incidents.json")
    assert {(i.file, i.line) for i in exc.value.issues} == {("incidents.json", 1)}
