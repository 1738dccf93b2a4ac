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
           "finish_listing_honest_errors", "load_strategyqa", "padding_memories", "rho_tolerance",
           "split_counts", "write_scenario"]


def finish_listing_honest_errors(scenario: Scenario, size: int, pad, rng) -> Scenario:
    """`finish` (which maps the injected records to truth), then ``meta["honest_errors"]``: the
    ids of the records written with role ``honest_error``, sorted. `finish` shuffles the
    scenario's record list in place and numbers it in that order, so each record's id is read
    from its own place, not looked up by its text."""
    mems = scenario.memories
    out = finish(scenario, size, pad, rng)
    out.meta["honest_errors"] = sorted(out.memories[i]["id"] for i, m in enumerate(mems)
                                       if m.get("_role") == "honest_error")
    return out
