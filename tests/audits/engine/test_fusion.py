import pytest

from audits.engine.cmis import AuditEvent, CmisScore
from audits.engine.fusion import decide_batch, fuse, residual_harm, select_batch


def _c(v):
    return CmisScore("x", v, v, v, v, 0.0, 1, [])


def test_ds_is_alpha_weighted_over_normalised_cmis_and_cas():
    ranked = fuse({"a": _c(1.0), "b": _c(0.5), "c": _c(0.0)}, {"a": 0.2, "b": 1.0, "c": 0.0},
                  alpha=0.6)
    ds = {s.id: s.ds for s in ranked}
    assert ds["a"] == pytest.approx(0.6 + 0.4 * 0.2)
    assert ds["b"] == pytest.approx(0.6 * 0.5 + 0.4 * 1.0)
    assert ds["c"] == 0.0
    assert [s.rank for s in ranked] == [1, 2, 3] and ranked[0].id == "b"


def test_cmis_keeps_its_floor_at_zero_when_every_candidate_is_causal():
    ranked = fuse({"a": _c(1.0), "b": _c(1.0)}, {"a": 0.5, "b": 0.9})
    assert all(s.cmis_hat == 1.0 for s in ranked)


def test_alpha_outside_the_unit_interval_is_rejected():
    with pytest.raises(ValueError):
        fuse({}, {}, alpha=1.5)


def test_batch_is_top_n_or_a_ds_threshold():
    ranked = fuse({"a": _c(1.0), "b": _c(0.0)}, {"a": 1.0, "b": 0.5})
    assert select_batch(ranked, top_n=1) == ["a"]
    assert select_batch(ranked, threshold=0.7) == ["a"]


class _Replayer:
    """Harmful while any memory starting with 'p' is allowed."""

    def __init__(self, retrieved):
        self.retrieved = retrieved

    def replay(self, query, exclude=(), candidates=None):
        from audits.engine.agents import AgentOutput
        from audits.engine.retriever import RetrievedMemory

        left = [m for m in self.retrieved if m not in exclude]
        out = "Evilton" if any(m.startswith("p") for m in left) else "Paris"
        return [RetrievedMemory(m, m, 1.0, i + 1) for i, m in enumerate(left)], AgentOutput(out)


def _harm(q, y, harmful_output=None):
    return 1.0 if "Evilton" in y else 0.0


def test_residual_check_grows_the_batch_until_the_harm_is_gone():
    ev = AuditEvent("e", "q", "Evilton", ["p1", "p2", "c1"], _harm, 1.0)
    rep = _Replayer(["p1", "p2", "c1"])
    ranked = fuse({"p1": _c(1.0), "p2": _c(0.4), "c1": _c(0.0)},
                  {"p1": 0.5, "p2": 0.9, "c1": 0.0})
    assert select_batch(ranked) == ["p1"]
    batch, residual, rounds = decide_batch(ranked, [ev], rep)
    assert batch == ["p1", "p2"] and residual["harmful"] == 0 and len(rounds) == 2
    assert residual_harm([ev], rep, [])["harmful"] == 1
