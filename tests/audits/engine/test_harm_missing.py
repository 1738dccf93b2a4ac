"""The `missing` harm: one class in audits/engine/harm.py, known to incident files and the audit
settings through the registry (issue 12: a new harm touches one file plus its test)."""

from __future__ import annotations

import pytest

from audits.engine.harm import HARMS, MissingHarm, make_harm
from audits.engine.scenario import parse_harm_spec, parse_incidents
from interchange.issues import ValidationError


def test_an_answer_without_the_required_phrase_is_the_harm():
    h = make_harm({"type": "missing", "phrase": "requires  manager approval"})
    assert isinstance(h, MissingHarm) and HARMS["missing"] is MissingHarm
    assert h("refund?", "Refunds over $100 REQUIRES MANAGER\nAPPROVAL.") == 0.0  # case and spacing
    assert h("refund?", "Refunds are approved at once.") == 1.0
    assert h("refund?", "") == 1.0


def test_an_incident_file_takes_it_and_names_a_missing_phrase():
    data = (b'{"id": "inc-1", "query": "Can I get a refund?", "output": "Approved, no questions asked.", '
            b'"retrieved": ["m1"], "harm": {"type": "missing", "phrase": "manager approval"}}\n')
    (inc,) = parse_incidents(data, "incidents.jsonl")
    assert inc.harm.to_dict() == {"type": "missing", "phrase": "manager approval"}
    assert make_harm(inc.harm)(inc.query, inc.output) == 1.0
    with pytest.raises(ValidationError) as err:
        parse_harm_spec({"type": "missing", "phrase": "  "})
    assert err.value.issues[0].field.endswith("phrase") or "phrase" in err.value.issues[0].message
