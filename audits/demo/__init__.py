"""The demo data builder (``manage.py seed_demo``): a poisoned clinical-assistant memory, a
simulation of MINJA built from EHRAgent's records (``qa.build_qa``), written as a scenario
folder (``common.write_scenario``). Part of the product so the demo never imports ``bench``;
the benches' generators (``bench.scenarios``) import these modules."""

from __future__ import annotations

from pathlib import Path

from audits.demo.common import DEFAULT_DATA, Scenario, ScenarioError, write_scenario
from audits.demo.qa import build_qa

__all__ = ["DEFAULT_DATA", "ScenarioError", "build_demo", "write_scenario"]


def build_demo(*, size: int, seed: int = 0, rho: float = 0.1, data: Path | None = None) -> Scenario:
    """The demo store's scenario: ``size`` memories, contamination ``rho``."""
    return build_qa(Path(data) if data else DEFAULT_DATA, rho=rho, seed=seed, size=size)
