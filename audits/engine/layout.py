"""Views of an audit's consistency graph that a person can read (issue 15): pure, no Django.

The worker's ``graph.graph_for_plot`` lays out every memory in scope (hundreds of nodes and
edges). Three views are cut from that plain ``{"nodes", "edges"}`` dict here:

- ``focus_view``: the batch and its one-hop neighbours; neighbours that hang together (a
  connected group among themselves of at least ``cluster_min``) collapse into one cluster
  node with a count; laid out afresh (spring layout, fixed seed) so the few nodes fill the
  plot. This is the results page's default.
- ``full_view``: every node and edge with the worker's layout, for "show the whole graph".
- ``ego_view``: one memory and its strongest neighbours on a circle (contradictions first),
  in a unit box, for the evidence panel's small static drawing.

All three are computed once per finished run by the caller and cached there.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

Graph = Mapping[str, Any]


def _adjacency(graph: Graph) -> dict[str, dict[str, Mapping[str, Any]]]:
    adj: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for e in graph.get("edges") or []:
        if e["source"] != e["target"]:
            adj[e["source"]][e["target"]] = e
            adj[e["target"]][e["source"]] = e
    return adj


def _scaled(pos: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """Positions moved into [-1, 1] on both axes (a single node sits at the origin)."""
    if not pos:
        return {}
    xs = [float(p[0]) for p in pos.values()]
    ys = [float(p[1]) for p in pos.values()]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0
    cx, cy = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2
    return {n: (round(2 * (float(p[0]) - cx) / span, 4), round(2 * (float(p[1]) - cy) / span, 4))
            for n, p in pos.items()}


def full_view(graph: Graph) -> dict[str, Any]:
    """Every node and edge, with the worker's positions as they are."""
    nodes = [dict(n, kind="memory") for n in graph.get("nodes") or []]
    ids = {n["id"] for n in nodes}
    edges = [dict(e) for e in graph.get("edges") or [] if e["source"] in ids and e["target"] in ids]
    return {"nodes": nodes, "edges": edges, "hidden": 0, "clusters": 0}


def focus_view(graph: Graph, *, focus: Iterable[str], cluster_min: int = 3, seed: int = 7) -> dict[str, Any]:
    """The ``focus`` memories (the batch) and their one-hop neighbours, clusters collapsed.

    A neighbour that is itself in ``focus`` or flagged ``suspect`` always stays a node. The
    other neighbours are grouped by the edges among them; a group of ``cluster_min`` or more
    becomes one node ``{"kind": "cluster", "count", "members"}`` whose edges to the focus
    carry how many edges they stand for (``"count"``) and whether any is a contradiction.
    ``hidden`` counts the memories of the full graph left out of the view."""
    by_id = {n["id"]: n for n in graph.get("nodes") or []}
    focus = [f for f in dict.fromkeys(focus) if f in by_id]
    adj = _adjacency(graph)
    keep = set(focus)
    neighbours = {m for f in focus for m in adj.get(f, {})} - keep
    single = {m for m in neighbours if by_id.get(m, {}).get("suspect")}
    rest = neighbours - single
    among = nx.Graph()
    among.add_nodes_from(sorted(rest))
    among.add_edges_from((a, b) for a in rest for b in adj.get(a, {}) if b in rest)
    cluster_of: dict[str, str] = {}
    clusters: list[list[str]] = []
    for comp in sorted((sorted(c) for c in nx.connected_components(among)), key=lambda c: (-len(c), c[0])):
        if len(comp) >= cluster_min:
            cid = f"cluster:{len(clusters) + 1}"
            clusters.append(comp)
            cluster_of.update({m: cid for m in comp})
        else:
            single.update(comp)
    shown = [*focus, *sorted(single)]
    visible = set(shown) | set(cluster_of.values())
    agg: dict[tuple[str, str], dict[str, Any]] = {}
    for e in graph.get("edges") or []:
        a, b = cluster_of.get(e["source"], e["source"]), cluster_of.get(e["target"], e["target"])
        if a == b or not {a, b} <= visible:
            continue
        if e["source"] in cluster_of and e["target"] in cluster_of:
            continue  # two clusters: both are only there as neighbours of the focus
        key = (a, b) if a <= b else (b, a)
        cur = agg.setdefault(key, {"source": key[0], "target": key[1], "weight": 0.0, "contradict": 0.0,
                                   "conflict": False, "count": 0})
        cur["weight"] = max(cur["weight"], float(e.get("weight") or 0))
        cur["contradict"] = max(cur["contradict"], float(e.get("contradict") or 0))
        cur["conflict"] = cur["conflict"] or bool(e.get("conflict"))
        cur["count"] += 1
    g = nx.Graph()
    g.add_nodes_from(shown)
    g.add_nodes_from(f"cluster:{i}" for i in range(1, len(clusters) + 1))
    g.add_edges_from((e["source"], e["target"], {"weight": 1.0 + e["weight"]}) for e in agg.values())
    pos = _scaled(nx.spring_layout(g, seed=seed, weight="weight")) if len(g) else {}
    nodes = [dict(by_id[n], kind="memory", focus=n in keep, x=pos[n][0], y=pos[n][1]) for n in shown]
    for i, members in enumerate(clusters, start=1):
        cid = f"cluster:{i}"
        nodes.append({"id": cid, "kind": "cluster", "count": len(members), "members": members,
                      "in_scope": any(by_id[m].get("in_scope") for m in members), "suspect": False,
                      "focus": False, "x": pos[cid][0], "y": pos[cid][1]})
    return {"nodes": nodes, "edges": sorted(agg.values(), key=lambda e: (e["source"], e["target"])),
            "hidden": len(by_id) - len(shown) - sum(len(c) for c in clusters), "clusters": len(clusters)}


def ego_view(graph: Graph, node: str, *, limit: int = 12) -> dict[str, Any] | None:
    """``node`` at the centre and up to ``limit`` neighbours on a circle, contradictions first,
    then by edge weight; coordinates in the unit box [0, 1] (for an SVG viewBox). None when
    ``node`` is not in the graph. ``more``: neighbours left out."""
    by_id = {n["id"]: n for n in graph.get("nodes") or []}
    if node not in by_id:
        return None
    around = _adjacency(graph).get(node, {})
    ranked = sorted(around.items(), key=lambda kv: (not kv[1].get("conflict"), -float(kv[1].get("contradict") or 0),
                                                    -float(kv[1].get("weight") or 0), kv[0]))
    picked = ranked[:limit]
    neighbours = []
    for i, (other, e) in enumerate(picked):
        angle = 2 * math.pi * i / max(1, len(picked)) - math.pi / 2
        neighbours.append({**{k: by_id.get(other, {}).get(k) for k in ("memory_pk", "suspect", "in_scope")},
                           "id": other, "x": round(0.5 + 0.38 * math.cos(angle), 4),
                           "y": round(0.5 + 0.38 * math.sin(angle), 4), "conflict": bool(e.get("conflict")),
                           "contradict": float(e.get("contradict") or 0), "weight": float(e.get("weight") or 0)})
    return {"center": {**by_id[node], "x": 0.5, "y": 0.5}, "neighbours": neighbours,
            "conflicts": sum(1 for e in around.values() if e.get("conflict")), "degree": len(around),
            "more": max(0, len(around) - len(picked))}
