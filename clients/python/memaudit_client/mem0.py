"""A mem0-shaped facade: ``search``, ``add``, ``get_all``, ``history`` like ``mem0.Memory``, so
``memory = Mem0Facade(client)`` replaces ``memory = Memory()`` and every search is a MemAudit
recall with a signed receipt (quarantined memories never come back)."""

from __future__ import annotations

import uuid
from typing import Any

from memaudit_client.client import MemAuditClient

_PEOPLE = ("user_id", "agent_id", "run_id")


def _who(filters: dict | None, kw: dict) -> dict:
    given = {k: v for k, v in kw.items() if v is not None}
    return {k: v for k, v in {**(filters or {}), **given}.items() if k in _PEOPLE and v is not None}


class Mem0Facade:
    def __init__(self, client: MemAuditClient) -> None:
        self.client = client

    def add(self, messages: str | list[dict], *, user_id: str | None = None, agent_id: str | None = None,
            run_id: str | None = None, metadata: dict | None = None, infer: bool = False, **_: Any) -> dict:
        """Store the text (or each user/assistant message) as it is: MemAudit never rewrites a
        memory with an LLM, so ``infer`` is accepted and ignored."""
        texts = [messages] if isinstance(messages, str) else [
            m["content"] for m in messages if isinstance(m, dict) and isinstance(m.get("content"), str)]
        who = _who(None, {"user_id": user_id, "agent_id": agent_id, "run_id": run_id})
        records = [{"id": str(uuid.uuid4()), "text": t, "metadata": {**(metadata or {}), **who, "source": "mem0-facade"}}
                   for t in texts if t.strip()]
        if records:
            self.client.add_many(records)
        return {"results": [{"id": r["id"], "memory": r["text"], "event": "ADD"} for r in records]}

    def search(self, query: str, *, filters: dict | None = None, limit: int = 5, user_id: str | None = None,
               **kw: Any) -> dict:
        """Recall through MemAudit. People filters (user_id...) are applied to what recall returns."""
        who = _who(filters, {"user_id": user_id, **kw})
        got = self.client.recall(query, k=limit if not who else min(100, limit * 4))
        out = []
        for r in got.results:
            meta = self._metadata(r["external_id"]) if who else {}
            if who and any(meta.get(k) != v for k, v in who.items()):
                continue
            out.append({"id": r["external_id"], "memory": r["text"], "score": r["score"],
                        "receipt_id": got.receipt_id, "state": r.get("state")})
        return {"results": out[:limit], "receipt_id": got.receipt_id}

    def _metadata(self, external_id: str) -> dict:
        for m in self.client.memories(q=external_id, limit=20):
            if m["external_id"] == external_id:
                return m.get("metadata") or {}
        return {}

    def get_all(self, *, filters: dict | None = None, limit: int = 100, **kw: Any) -> dict:
        who = _who(filters, kw)
        rows = self.client.memories(limit=limit if not who else 1000)
        out = [{"id": m["external_id"], "memory": m["text"], "metadata": m.get("metadata") or {},
                "created_at": m["created_at"], "weight": m["weight"], "state": m.get("state"),
                **{k: (m.get("metadata") or {}).get(k) for k in _PEOPLE if (m.get("metadata") or {}).get(k)}}
               for m in rows if all((m.get("metadata") or {}).get(k) == v for k, v in who.items())]
        return {"results": out[:limit]}

    def history(self, memory_id: str) -> list[dict]:
        """mem0's history shape from the ledger: the ADD, then one UPDATE per later version
        (``<id>#v<n>``, linked by ``supersedes``)."""
        versions = sorted((m for m in self.client.memories(q=memory_id, limit=100)
                           if m["external_id"] == memory_id or m["external_id"].startswith(f"{memory_id}#v")),
                          key=lambda m: (m.get("metadata") or {}).get("version", 1 if "#v" not in m["external_id"]
                                                                        else int(m["external_id"].rsplit("#v", 1)[1])))
        out, prev = [], None
        for m in versions:
            out.append({"memory_id": memory_id, "old_memory": prev, "new_memory": m["text"],
                        "event": "ADD" if prev is None else "UPDATE", "created_at": m["created_at"],
                        "weight": m["weight"]})
            prev = m["text"]
        return out
