from audits.engine.baselines import (
    frequency_removal,
    nn_contradiction_removal,
    random_removal,
    run_baselines,
    top_by,
)
from audits.engine.cmis import AuditEvent
from audits.engine.consistency import RulesBackend
from audits.engine.graph import build_graph, score_edges


def _ev(i, retrieved):
    return AuditEvent(f"e{i}", "q", "y", retrieved, lambda q, y, harmful_output=None: 1.0, 1.0)


def test_random_removal_is_seeded():
    pool = [f"m{i}" for i in range(50)]
    assert random_removal(pool, 5, seed=3) == random_removal(pool, 5, seed=3)
    assert random_removal(pool, 5, seed=3) != random_removal(pool, 5, seed=4)
    assert len(random_removal(pool[:3], 5)) == 3


def test_frequency_removal_takes_the_most_retrieved_first():
    evs = [_ev(1, ["a", "b"]), _ev(2, ["b", "c"]), _ev(3, ["c", "b"])]
    assert frequency_removal(evs, 2) == ["b", "c"]


def test_nn_contradiction_removes_the_most_contradicted(hashing_embedder):
    texts = ["The tower is 300 metres tall and made of iron.",
             "The tower is 120 metres tall and made of iron.",
             "The tower is made of iron and painted brown."]
    ids = ["a", "b", "c"]
    mg = build_graph(ids, hashing_embedder.encode(texts), ids, k=2, tau=0.0)
    score_edges(mg, RulesBackend(), dict(zip(ids, texts)))
    assert set(nn_contradiction_removal(mg, ids, 2)) == {"a", "b"}


def test_every_baseline_removes_the_same_number(hashing_embedder):
    ids = [f"m{i}" for i in range(8)]
    texts = [f"memory {i} says {i}" for i in range(8)]
    mg = build_graph(ids, hashing_embedder.encode(texts), ids, k=3, tau=0.0)
    sets = run_baselines(n=3, candidates=ids, events=[_ev(1, ids[:5])],
                         cmis={}, cas={m: float(i) for i, m in enumerate(ids)}, mg=mg)
    assert set(sets) == {"random", "frequency", "nn-contradiction", "cmis", "mcg"}
    assert all(len(v) == 3 for k, v in sets.items() if k != "cmis")
    assert sets["mcg"] == ["m7", "m6", "m5"]
    assert top_by({"a": 1.0, "b": 2.0}, 1) == ["b"]
