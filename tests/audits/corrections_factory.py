"""A clean store whose incident comes from outdated records (issue 16's clean control in
miniature): two old notes give a stale answer, a newer note corrects them. Imported through the
ledger's own path, so the audit sees signed, embedded memories."""

from __future__ import annotations

import json
from dataclasses import dataclass

from audits.engine.retriever import Retriever
from audits.engine.scenario import MemoryRecord
from ledger.embeddings import HashingEmbedder
from ledger.imports import memories_import
from ledger.models import Store
from ledger.services import store_create

QUESTION = "how many moons does the planet Zorb have?"
STALE = "Olu"


@dataclass
class OutdatedStore:
    store: Store
    stale: set[str]
    correcting: str
    incidents: list[dict]

    def incidents_jsonl(self) -> bytes:
        return "".join(json.dumps(i) + "\n" for i in self.incidents).encode()


def outdated_store_import(*, organization, slug: str = "notes") -> OutdatedStore:
    q = QUESTION
    rows = [{"id": f"f{i}", "text": f"Q: what colour is item {i}?\nA: colour{i}",
             "metadata": {"query": f"what colour is item {i}?", "answer": f"colour{i}", "written_at": 100.0 + i,
                          "source": f"s{i}"}} for i in range(60)]
    rows += [
        {"id": "old1", "text": f"Q: {q}\nA: {STALE}", "metadata": {"query": q, "answer": STALE, "written_at": 110.0}},
        {"id": "old2", "text": f"Question: {q}\nA: {STALE}",
         "metadata": {"query": q, "answer": STALE, "written_at": 125.0}},
        {"id": "new", "text": f"Q: {q} (update)\nA: Ama\nCorrection: earlier notes said {STALE}; outdated.",
         "metadata": {"query": q, "answer": "Ama", "written_at": 150.0}},
    ]
    store = store_create(organization=organization, name=slug.title(), slug=slug)
    job = memories_import(store=store, data="".join(json.dumps(r) + "\n" for r in rows).encode(),
                          filename="memories.jsonl", inline=True)
    assert job.status == "done", job.errors
    emb = HashingEmbedder()
    texts = [r["text"] for r in rows]
    recs = [MemoryRecord(r["id"], r["text"], r["metadata"]) for r in rows]
    got = Retriever(recs, emb.encode(texts), embedder=emb).retrieve(q, 5)
    incident = {"id": "inc-moons", "query": q, "output": f"The planet Zorb has {STALE} moons.",
                "retrieved": [m.id for m in got], "harm": {"type": "contains", "target": STALE}}
    return OutdatedStore(store, {"old1", "old2"}, "new", [incident])
