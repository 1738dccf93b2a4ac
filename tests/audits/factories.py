"""A MINJA-shaped poisoned store (the engine tests' toy QA scenario), imported through
``ledger.imports.memories_import`` so the audit sees signed, embedded memories, with the
incidents an analyst would find in the agent's logs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from audits.engine.retriever import Retriever
from ledger.embeddings import HashingEmbedder
from ledger.imports import memories_import
from ledger.models import Store
from ledger.services import store_create
from tests.audits.engine.conftest import EVIL, qa_scenario

HARM = {"type": "contains", "target": EVIL}


@dataclass
class PoisonedStore:
    store: Store
    poisoned: set[str]
    incidents: list[dict] = field(default_factory=list)

    def incidents_jsonl(self) -> bytes:
        return "".join(json.dumps(i) + "\n" for i in self.incidents).encode()


def poisoned_store_import(*, organization, slug: str, seed: int = 0, n_topics: int = 12, n_targets: int = 3,
                          poisons_per_target: int = 3, store: Store | None = None) -> PoisonedStore:
    """``store``: import into this (already created) store instead of a new one named ``slug``."""
    scenario = qa_scenario(n_topics=n_topics, n_targets=n_targets, poisons_per_target=poisons_per_target,
                           seed=seed)
    if store is None:
        store = store_create(organization=organization, name=slug.title(), slug=slug)
    data = "".join(json.dumps({"id": m.id, "text": m.text, "metadata": m.metadata}) + "\n"
                   for m in scenario.memories).encode()
    job = memories_import(store=store, data=data, filename="memories.jsonl", inline=True)
    assert job.status == "done", job.errors
    # The incidents: what the agent retrieved and answered for the observed harmful probes.
    emb = HashingEmbedder()
    retriever = Retriever(scenario.memories, emb.encode([m.text for m in scenario.memories]), embedder=emb)
    incidents = []
    for probe in scenario.probes:
        if not probe.observed:
            continue
        got = retriever.retrieve(probe.query, 5)
        incidents.append({"id": f"inc-{probe.id}", "query": probe.query, "output": f"The answer is {EVIL}.",
                          "retrieved": [m.id for m in got], "harm": HARM})
    return PoisonedStore(store, set(scenario.truth or ()), incidents)
