"""Shared pieces of the scenario generators: they live in the product (``audits.demo.common``),
which builds the demo store from them; the benches' generators import them from here."""

from audits.demo.common import (
    DEFAULT_DATA,
    SIMULATION_NOTE,
    Scenario,
    ScenarioError,
    achieved_rho,
    finish,
    load_strategyqa,
    padding_memories,
    rho_tolerance,
    split_counts,
    write_scenario,
)

__all__ = ["DEFAULT_DATA", "SIMULATION_NOTE", "Scenario", "ScenarioError", "achieved_rho", "finish",
           "load_strategyqa", "padding_memories", "rho_tolerance", "split_counts", "write_scenario"]
