"""Memory consistency graph (MCG) and CAS (DESIGN section 4, MemAudit section "MCG").

1. Nodes: the scope (memories in any R*, plus group members) and their k nearest neighbours
   in the store (or the whole store). Edges: each node to its k nearest neighbours with
   cosine ≥ τ, weight = cosine.
2. Each edge is scored by a consistency backend (entailment, contradiction).
3. Per node, signals:
   - `contradiction`: similarity-weighted mean contradiction with neighbours outside the
     node's own near-duplicate cluster (a cluster speaks with one voice), raised by
     β·isolation for weakly connected nodes — the paper's CAS;
   - `isolation`: 1 − mean cosine to the k neighbours;
   - `tightness`: mean cosine to the 3 nearest neighbours;
   - `dup_count`: neighbours at cosine ≥ the duplicate threshold;
   - `cluster_gap`: how much more the node agrees with its nearest few than with the rest of
     its neighbourhood — records that agree with each other and with nothing else;
   - `relative_tightness`: tightness minus the median tightness of the neighbours outside
     its cluster — a cluster abnormally tight for its neighbourhood.
4. CAS = weighted mean of the signals, each min-max normalised over every graph node (the
   neighbourhood is the reference), weights from bench/cas_auc.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from .consistency import ConsistencyBackend

SIGNALS = ("contradiction", "isolation", "tightness", "dup_count", "cluster_gap",
           "relative_tightness")

# Weights of the normalised signals in CAS. Chosen from the AUCs that bench/cas_auc.py
# measures on PoisonedRAG NQ with all-MiniLM-L6-v2 (see that script's JSON): signals near
# chance get no weight.
# On PoisonedRAG the structural signals carry CAS (relative_tightness 0.98, tightness 0.97,
# dup_count 0.93, cluster_gap 0.91); rules contradiction is at chance there (0.47) but is the
# only signal for answer-slot conflicts between demonstration memories, so it keeps a small
# weight; isolation is inverted (0.14: poisons are *more* connected) and gets none.
DEFAULT_SIGNAL_WEIGHTS: dict[str, float] = {
    "relative_tightness": 1.0,
    "tightness": 1.0,
    "cluster_gap": 0.5,
    "dup_count": 0.5,
    "contradiction": 0.5,
}


@dataclass
class MemoryGraph:
    graph: nx.Graph
    scope: list[str]
    # node -> its k nearest store neighbours (id, cosine), best first, whether or not in graph
    knn: dict[str, list[tuple[str, float]]]
    dup_threshold: float
    params: dict[str, Any] = field(default_factory=dict)


def knn_over_store(query_idx: Sequence[int], embeddings: np.ndarray, k: int, *,
                   allowed: np.ndarray | None = None, chunk: int = 2048
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosines) of each query row's k nearest other rows, best first."""
    E = embeddings
    n = len(E)
    kk = min(k, max(n - 1, 0))
    out_i = np.zeros((len(query_idx), kk), dtype=np.int64)
    out_s = np.zeros((len(query_idx), kk), dtype=np.float32)
    if kk == 0:
        return out_i, out_s
    qi = np.asarray(query_idx, dtype=np.int64)
    for start in range(0, len(qi), chunk):
        rows = qi[start:start + chunk]
        S = E[rows] @ E.T
        S[np.arange(len(rows)), rows] = -np.inf
        if allowed is not None:
            S[:, ~allowed] = -np.inf
        part = np.argpartition(-S, kk - 1, axis=1)[:, :kk]
        ps = np.take_along_axis(S, part, axis=1)
        order = np.argsort(-ps, axis=1, kind="stable")
        out_i[start:start + len(rows)] = np.take_along_axis(part, order, axis=1)
        out_s[start:start + len(rows)] = np.take_along_axis(ps, order, axis=1)
    return out_i, out_s


def build_graph(ids: Sequence[str], embeddings: np.ndarray, scope_ids: Iterable[str], *,
                k: int = 10, tau: float = 0.3, dup_threshold: float = 0.8,
                full_store: bool = False, allowed: np.ndarray | None = None) -> MemoryGraph:
    """Build the kNN graph over the scope and its one-hop neighbourhood."""
    index = {m: i for i, m in enumerate(ids)}
    scope = [s for s in dict.fromkeys(scope_ids) if s in index]
    if full_store:
        node_idx = list(range(len(ids))) if allowed is None else list(np.nonzero(allowed)[0])
    else:
        si, _ = knn_over_store([index[s] for s in scope], embeddings, k, allowed=allowed)
        node_idx = sorted({index[s] for s in scope} | set(si.ravel().tolist()))
    ni, ns = knn_over_store(node_idx, embeddings, k, allowed=allowed)
    g = nx.Graph()
    knn: dict[str, list[tuple[str, float]]] = {}
    for row, a in enumerate(node_idx):
        g.add_node(ids[a])
        knn[ids[a]] = [(ids[b], float(s)) for b, s in zip(ni[row].tolist(), ns[row].tolist())
                       if np.isfinite(s)]
    node_set = set(g.nodes)
    for a, nbrs in knn.items():
        for b, s in nbrs:
            if s >= tau and b in node_set:
                g.add_edge(a, b, weight=s)
    scope_set = set(scope)
    for n in g.nodes:
        g.nodes[n]["in_scope"] = n in scope_set
    return MemoryGraph(g, scope, knn, dup_threshold,
                       {"k": k, "tau": tau, "dup_threshold": dup_threshold, "full_store": full_store})


def score_edges(mg: MemoryGraph, backend: ConsistencyBackend, items: Mapping[str, Any],
                *, batch: int = 512) -> None:
    """Attach `entail` and `contradict` to every edge (items: id -> text or MemoryRecord)."""
    edges = list(mg.graph.edges)
    for start in range(0, len(edges), batch):
        chunk = edges[start:start + batch]
        scores = backend.pair_scores([(items[a], items[b]) for a, b in chunk])
        for (a, b), (e, c) in zip(chunk, scores):
            mg.graph.edges[a, b]["entail"] = float(e)
            mg.graph.edges[a, b]["contradict"] = float(c)


def _gap(s: np.ndarray) -> float:
    """max over j of mean(s[:j]) − mean(s[j:]): the step between a tight core and the rest."""
    if len(s) < 2:
        return 0.0
    c = np.cumsum(s)
    j = np.arange(1, len(s))
    head = c[:-1] / j
    tail = (c[-1] - c[:-1]) / (len(s) - j)
    return float(np.max(head - tail))


def structural_signals(mg: MemoryGraph, nodes: Iterable[str] | None = None,
                       *, beta: float = 0.5) -> dict[str, dict[str, float]]:
    """Every signal of the module docstring for `nodes` (default: the scope)."""
    targets = list(mg.scope if nodes is None else nodes)
    dup = mg.dup_threshold
    tight: dict[str, float] = {}

    def tightness(n: str) -> float:
        if n not in tight:
            s = [x for _, x in mg.knn.get(n, [])[:3]]
            tight[n] = float(np.mean(s)) if s else 0.0
        return tight[n]

    out: dict[str, dict[str, float]] = {name: {} for name in SIGNALS}
    g = mg.graph
    for n in targets:
        nbrs = mg.knn.get(n, [])
        sims = np.array([s for _, s in nbrs], dtype=np.float64)
        out["isolation"][n] = float(1.0 - sims.mean()) if len(sims) else 1.0
        out["tightness"][n] = tightness(n)
        out["dup_count"][n] = float((sims >= dup).sum())
        out["cluster_gap"][n] = _gap(sims)
        outside = [m for m, s in nbrs if s < dup]
        if outside:
            out["relative_tightness"][n] = tightness(n) - float(
                np.median([tightness(m) for m in outside if m in mg.knn] or [tightness(n)]))
        else:
            out["relative_tightness"][n] = 0.0
        # Paper CAS: similarity-weighted contradiction, own duplicate cluster excluded.
        num = den = 0.0
        if n in g:
            for m in g.neighbors(n):
                d = g.edges[n, m]
                w = d["weight"]
                if w >= dup:
                    continue
                num += w * d.get("contradict", 0.0)
                den += w
        mean_c = num / den if den > 0 else 0.0
        out["contradiction"][n] = mean_c + beta * out["isolation"][n] * mean_c
    return out


def minmax(values: Mapping[str, float]) -> dict[str, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    if hi - lo <= 1e-12:
        return {k: 0.0 for k in values}
    return {k: (v - lo) / (hi - lo) for k, v in values.items()}


def combine_signals(signals: Mapping[str, Mapping[str, float]],
                    weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """CAS = weighted mean of min-max normalised signals."""
    w = dict(DEFAULT_SIGNAL_WEIGHTS if weights is None else weights)
    used = {k: v for k, v in w.items() if v > 0 and k in signals}
    if not used:
        return {}
    nodes: set[str] = set()
    for k in used:
        nodes.update(signals[k])
    normed = {k: minmax(signals[k]) for k in used}
    total = sum(used.values())
    return {n: sum(used[k] * normed[k].get(n, 0.0) for k in used) / total for n in nodes}


def compute_cas(mg: MemoryGraph, backend: ConsistencyBackend | None, items: Mapping[str, Any],
                *, weights: Mapping[str, float] | None = None, beta: float = 0.5
                ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Score edges (when a backend is given), then CAS for the scope. Returns (cas, signals)."""
    if backend is not None:
        score_edges(mg, backend, items)
    signals = structural_signals(mg, list(mg.graph.nodes), beta=beta)
    return combine_signals(signals, weights), signals


def graph_for_plot(mg: MemoryGraph, *, suspects: Iterable[str] = (),
                   contradiction_edge: float = 0.5, max_nodes: int = 2000) -> dict[str, Any]:
    """Nodes and edges as plain lists, with a spring layout, for Plotly."""
    g = mg.graph
    keep = list(mg.scope) + [n for n in g.nodes if n not in set(mg.scope)]
    keep = keep[:max_nodes]
    sub = g.subgraph(keep)
    pos = nx.spring_layout(sub, seed=7, weight="weight") if len(sub) else {}
    sus = set(suspects)
    nodes = [{"id": n, "x": float(pos[n][0]), "y": float(pos[n][1]),
              "in_scope": bool(sub.nodes[n].get("in_scope")), "suspect": n in sus}
             for n in sub.nodes]
    edges = [{"source": a, "target": b, "weight": float(d["weight"]),
              "contradict": float(d.get("contradict", 0.0)),
              "conflict": float(d.get("contradict", 0.0)) >= contradiction_edge}
             for a, b, d in sub.edges(data=True)]
    return {"nodes": nodes, "edges": edges}
