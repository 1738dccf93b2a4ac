import pytest

from audits.engine.cmis import AuditEvent, CmisScore
from audits.engine.fusion import decide_batch, fit_alpha, fuse, residual_harm, select_batch


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

    def replay_each(self, requests):
        return [self.replay(q, exclude, candidates) for q, exclude, candidates in requests]


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


def _store(cas_of_causal: list[float], cas_of_clean: list[float]):
    cmis = {f"p{i}": 1.0 for i in range(len(cas_of_causal))}
    cas = {**{f"p{i}": a for i, a in enumerate(cas_of_causal)},
           **{f"c{i}": a for i, a in enumerate(cas_of_clean)}}
    return fuse(cmis, cas, alpha=0.6)


def test_cas_that_separates_causal_from_clean_memories_keeps_the_papers_weight():
    fit = fit_alpha(_store([0.9, 0.95, 1.0], [0.1 * (i % 5) for i in range(40)]), default=0.6, threshold=0.7)
    assert fit["alpha"] == 0.6 and fit["cas_auc"] == 1.0
    assert (fit["seeds"], fit["reference"]) == (3, 40)


def test_cas_no_better_than_chance_on_the_stores_own_evidence_loses_its_weight():
    clean = [0.1 * (i % 10) for i in range(40)]
    fit = fit_alpha(_store([0.0, 0.5, 0.9], clean), default=0.6, threshold=0.7)
    assert fit["cas_auc"] <= 0.6 and fit["alpha"] == 1.0 and "no better than chance" in fit["why"]
    # In between, CAS gets part of the paper's weight: linear in its AUC above chance.
    part = fit_alpha(_store([0.3, 0.85, 0.95], clean), default=0.6, threshold=0.7)
    assert 0.6 < part["alpha"] < 1.0
    assert part["alpha"] == pytest.approx(1 - 0.4 * (part["cas_auc"] - 0.6) / 0.4, abs=1e-3)


def test_without_causal_evidence_the_papers_default_stands():
    ranked = fuse({"a": 0.0}, {"a": 0.9, "b": 0.1, "c": 0.3}, alpha=0.6)  # no removal changed anything
    fit = fit_alpha(ranked, default=0.6, threshold=0.7)
    assert fit["alpha"] == 0.6 and fit["cas_auc"] is None and "as set" in fit["why"]
