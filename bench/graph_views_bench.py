"""Time of the results page's graph views (audits.engine.layout) on a synthetic graph shaped
like an audit's: a batch of b suspects, each tied to a near-duplicate family and contradicting
a cluster of neighbours, plus unrelated memories. Run:

    PYTHONPATH=. .venv/bin/python bench/graph_views_bench.py --nodes 2000 --batch 10 --repeat 5

Prints the median seconds of focus_view (laid out afresh), full_view and one ego_view; the views
are computed once per finished run and cached, so this is paid once, not per page view."""

from __future__ import annotations

import argparse
import random
import statistics
import time

from audits.engine.layout import ego_view, focus_view, full_view


def synthetic(n: int, batch: int, seed: int = 7) -> tuple[dict, list[str]]:
    rnd = random.Random(seed)
    nodes = [{"id": f"m{i}", "x": rnd.random(), "y": rnd.random(), "in_scope": i < n // 4, "suspect": i < batch}
             for i in range(n)]
    edges = []
    for i in range(n):
        for j in rnd.sample(range(n), 3):
            if i != j:
                c = rnd.random() < 0.15
                edges.append({"source": f"m{i}", "target": f"m{j}", "weight": rnd.random(),
                              "contradict": 0.9 if c else 0.0, "conflict": c})
    return {"nodes": nodes, "edges": edges}, [f"m{i}" for i in range(batch)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    graph, batch = synthetic(a.nodes, a.batch)
    for name, fn in (("focus_view", lambda: focus_view(graph, focus=batch)), ("full_view", lambda: full_view(graph)),
                     ("ego_view", lambda: ego_view(graph, batch[0]))):
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        size = len(out["nodes"]) if "nodes" in out else len(out["neighbours"])
        print(f"{name}: median {statistics.median(times):.4f} s over {a.repeat} runs "
              f"({a.nodes} nodes, {len(graph['edges'])} edges -> {size} shown)")


if __name__ == "__main__":
    main()
