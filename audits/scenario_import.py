"""Load a scenario folder (DESIGN section 5) into a store the way an analyst would: signed
import of the memories, then the incidents exactly as they would appear in the agent's logs.

Used by ``manage.py evaluate --through-ledger`` and by the demo (``manage.py seed_demo``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audits import services
from audits.engine.evaluate import ProbeRunner, incidents_from_probes
from audits.engine.replay import Replayer
from audits.engine.retriever import Retriever
from audits.engine.scenario import Scenario
from audits.models import Incident
from ledger.imports import memories_import
from ledger.models import Store
from ledger.services import store_create
from ledger.signing import housekeeper_role
from orgs.models import Organization

MEMORY_FILES = ("memories.jsonl", "memories.json", "memories.csv")


class ScenarioImportError(Exception):
    pass


@dataclass
class ScenarioImport:
    store: Store
    runner: ProbeRunner  # replays the scenario's probes over the imported store
    before: list[dict[str, Any]]  # probe rows before any removal
    incidents: list[Incident]


def scenario_import(*, organization: Organization, path: Path, scenario: Scenario, store_name: str,
                    store_slug: str, user=None) -> ScenarioImport:
    """1. create the store and import ``memories.*`` inline as the housekeeper (signed genesis,
    embeddings, ingest classifier); 2. replay every probe with the scenario's agent; 3. the
    incidents are the scenario's own, else the observed probes that were harmful, with the
    agent's output and retrieved ids (what the analyst finds in the logs); 4. import them."""
    mem_file = next((n for n in MEMORY_FILES if (path / n).is_file()), None)
    if mem_file is None:
        raise ScenarioImportError(f"{path} has no {' / '.join(MEMORY_FILES)}")
    with housekeeper_role():
        store = store_create(organization=organization, name=store_name, slug=store_slug)
        job = memories_import(store=store, data=(path / mem_file).read_bytes(), filename=mem_file, user=user,
                              inline=True)
    if job.status != "done":
        raise ScenarioImportError(f"import of {mem_file} failed: {job.errors[:5]}")
    view = services.store_view(store)
    agent = services.agent_for(scenario.agent.to_dict())
    retriever = Retriever(view.records, view.embeddings, view.weights, embedder=view.embedder, blocked=view.blocked)
    runner = ProbeRunner(scenario, Replayer(agent, retriever, scenario.agent.top_k, {}), view.embedder)
    before = runner.run(())
    found = scenario.incidents if scenario.incidents is not None else incidents_from_probes(before)
    rows = [{"id": i.id, "query": i.query, "output": i.output, "retrieved": i.retrieved,
             "harm": i.harm.to_dict() if i.harm else (i.harm_value if i.harm_value is not None else True),
             **({"candidates": i.candidates} if i.candidates else {})} for i in found]
    incidents = []
    if rows:
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        incidents = services.incidents_import(store=store, data=data, filename="incidents.jsonl", user=user)
    return ScenarioImport(store=store, runner=runner, before=before, incidents=incidents)
