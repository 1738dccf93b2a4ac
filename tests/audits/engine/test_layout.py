"""The readable views of the consistency graph (issue 15): the batch with its one-hop
neighbours and collapsed clusters, the whole graph, and one memory's ego view."""

from __future__ import annotations

import pytest

from audits.engine.layout import ego_view, focus_view, full_view


def _node(i: str, **kw):
    return {"id": i, "x": 0.0, "y": 0.0, "in_scope": True, "suspect": False, **kw}


def _edge(a: str, b: str, *, conflict: bool = False, weight: float = 0.8):
    return {"source": a, "target": b, "weight": weight, "contradict": 0.9 if conflict else 0.0, "conflict": conflict}


@pytest.fixture
def graph():
    """p1 (batch) contradicts a family f1..f5 (tied to each other), is similar to s1 (a suspect)
    and to a lone n1; far1..far3 hang off f1 only (two hops away); x1-x2 are disconnected."""
    fam = [f"f{i}" for i in range(1, 6)]
    nodes = [_node("p1", suspect=True), _node("s1", suspect=True), _node("n1"), *[_node(f) for f in fam],
             *[_node(f"far{i}") for i in range(1, 4)], _node("x1"), _node("x2")]
    edges = [_edge("p1", f, conflict=True) for f in fam]
    edges += [_edge(a, b) for a, b in zip(fam, fam[1:])]
    edges += [_edge("p1", "s1"), _edge("p1", "n1"), _edge("x1", "x2")]
    edges += [_edge("f1", f"far{i}") for i in range(1, 4)]
    return {"nodes": nodes, "edges": edges}


def test_the_focus_view_keeps_the_batch_and_its_neighbours_and_collapses_a_family(graph):
    v = focus_view(graph, focus=["p1"])

    kinds = {n["id"]: n["kind"] for n in v["nodes"]}
    assert kinds == {"p1": "memory", "s1": "memory", "n1": "memory", "cluster:1": "cluster"}
    cluster = next(n for n in v["nodes"] if n["kind"] == "cluster")
    assert cluster["count"] == 5 and cluster["members"] == ["f1", "f2", "f3", "f4", "f5"]
    to_cluster = next(e for e in v["edges"] if "cluster:1" in (e["source"], e["target"]))
    assert to_cluster["conflict"] and to_cluster["count"] == 5
    assert v["clusters"] == 1 and v["hidden"] == 5  # far1..far3, x1, x2
    assert next(n for n in v["nodes"] if n["id"] == "p1")["focus"]


def test_the_focus_view_is_laid_out_afresh_in_the_unit_square_and_the_same_every_time(graph):
    a, b = focus_view(graph, focus=["p1"]), focus_view(graph, focus=["p1"])

    assert a == b
    assert all(-1 <= n["x"] <= 1 and -1 <= n["y"] <= 1 for n in a["nodes"])
    assert len({(n["x"], n["y"]) for n in a["nodes"]}) == len(a["nodes"])


def test_small_groups_stay_single_and_a_suspect_neighbour_never_hides_in_a_cluster(graph):
    v = focus_view(graph, focus=["p1"], cluster_min=6)
    assert {n["id"] for n in v["nodes"]} == {"p1", "s1", "n1", "f1", "f2", "f3", "f4", "f5"}
    assert all(e["count"] == 1 for e in v["edges"])

    graph["nodes"][3]["suspect"] = True  # f1
    v = focus_view(graph, focus=["p1"])
    assert "f1" in {n["id"] for n in v["nodes"]}
    assert next(n for n in v["nodes"] if n["kind"] == "cluster")["count"] == 4


def test_an_empty_or_unknown_focus_gives_an_empty_view(graph):
    assert focus_view(graph, focus=[])["nodes"] == []
    assert focus_view(graph, focus=["nope"])["nodes"] == []
    assert focus_view({"nodes": [], "edges": []}, focus=["p1"]) == {"nodes": [], "edges": [], "hidden": 0,
                                                                   "clusters": 0}


def test_the_full_view_keeps_every_node_and_edge_where_the_worker_put_them(graph):
    graph["nodes"][0]["x"] = 0.25
    v = full_view(graph)
    assert len(v["nodes"]) == len(graph["nodes"]) and len(v["edges"]) == len(graph["edges"])
    assert v["nodes"][0]["x"] == 0.25


def test_the_ego_view_puts_contradictions_first_and_counts_what_it_leaves_out(graph):
    v = ego_view(graph, "p1", limit=4)

    assert v["center"]["id"] == "p1" and (v["center"]["x"], v["center"]["y"]) == (0.5, 0.5)
    assert [n["conflict"] for n in v["neighbours"]] == [True] * 4
    assert v["degree"] == 7 and v["conflicts"] == 5 and v["more"] == 3
    assert all(0 <= n["x"] <= 1 and 0 <= n["y"] <= 1 for n in v["neighbours"])
    assert ego_view(graph, "nope") is None
    assert ego_view(graph, "x1")["neighbours"][0]["id"] == "x2"
