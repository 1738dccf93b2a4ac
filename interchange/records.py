"""Neutral records every memory importer produces.

``MemoryRecord`` is one memory as MemAudit stores it (id, text, metadata, creation time).
``HistoryEvent`` is one change a foreign store recorded after a memory was added (mem0's
UPDATE and DELETE): the ledger turns each into a signed entry on the memory's chain, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class MemoryRecord:
    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None


@dataclass(frozen=True)
class HistoryEvent:
    """``kind`` is ``"update"`` (``memory`` was superseded by the record ``new_memory``) or
    ``"delete"`` (``memory`` was retired; its text stays). ``source_id`` is the foreign event's
    id, ``source`` the system that recorded it (``mem0``, ``client``); ``at`` its time as the
    source wrote it."""

    kind: str
    memory: str
    source_id: str
    at: str | None = None
    new_memory: str | None = None
    source: str = "mem0"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "memory": self.memory, "source_id": self.source_id, "at": self.at,
                "new_memory": self.new_memory, "source": self.source}


@dataclass
class Parsed:
    """What a memory importer returns: the records, then the history to sign after them."""

    records: list[MemoryRecord]
    events: list[HistoryEvent] = field(default_factory=list)
