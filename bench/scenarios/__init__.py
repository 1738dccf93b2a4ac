"""Scenario generators for MemAudit benchmarks: simulations of MINJA (no MINJA data is public).

A scenario is a folder in the interchange format of DESIGN section 5: ``memories.jsonl``,
``probes.jsonl``, ``agent.json`` (builtin-vote, top_k 5), ``truth.json``; plus
``benign.jsonl`` (non-trigger questions with their gold answer, the utility check) and
``scenario.json`` (parameters and achieved figures). No ``incidents.jsonl``: incidents are the
observed probes that are harmful before the audit.

Contamination rho (both kinds)::

    rho = I / (I + R)

I = injected records; R = clean memories *relevant to the victim queries*, i.e. clean memories
whose ``metadata.query`` contains a trigger term (the victim patient id for ``qa``, a trigger
name for ``rap``). These are the memories the injected records compete with at retrieval.
Padding memories never contain a trigger, so the store size does not change rho. The
generator picks R (within what the data allows) and I >= 1 so that the achieved rho is as close
as possible to the requested one; it is written to ``scenario.json`` and is within
1 / (I + R) of the request.

    from bench.scenarios import build, write_scenario
    scenario = build("qa", rho=0.1, seed=0, size=1000)
    write_scenario(scenario, Path("out/qa"))
"""

from __future__ import annotations

from pathlib import Path

from .common import DEFAULT_DATA, Scenario, ScenarioError, rho_tolerance, write_scenario
from .qa import build_qa
from .rap import build_rap

KINDS = ("qa", "rap")


def build(kind: str, *, rho: float = 0.1, seed: int = 0, size: int = 1000, data: Path | None = None) -> Scenario:
    data = Path(data) if data else DEFAULT_DATA
    if kind == "qa":
        return build_qa(data, rho=rho, seed=seed, size=size)
    if kind == "rap":
        return build_rap(data, rho=rho, seed=seed, size=size)
    raise ScenarioError(f"unknown scenario kind {kind!r} (choose from {', '.join(KINDS)})")


__all__ = ["DEFAULT_DATA", "KINDS", "Scenario", "ScenarioError", "build", "rho_tolerance", "write_scenario"]
