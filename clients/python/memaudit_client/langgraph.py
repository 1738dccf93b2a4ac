"""A LangGraph ``BaseStore`` backed by a MemAudit store.

``store = MemAuditStore(MemAuditClient(url, store_id, token))`` where the agent had
``InMemoryStore()``: ``put`` appends a signed memory (``<namespace joined by '.'>:<key>``; a
second ``put`` of the key appends the next version ``...#v<n>`` superseding the last, a signed
provenance entry), ``search`` with a query is a MemAudit recall with a signed receipt (the
quarantined never come back), ``get`` reads the newest version. Nothing is ever deleted:
``delete`` is refused (MemAudit retires memories through review, not by an agent).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memaudit_client.client import MemAuditClient, Recall


def _key_id(namespace: tuple[str, ...], key: str) -> str:
    return f"{'.'.join(namespace)}:{key}"


def _split(external_id: str) -> tuple[tuple[str, ...], str, int]:
    base, _, version = external_id.partition("#v")
    ns, _, key = base.rpartition(":")
    return tuple(ns.split(".")) if ns else (), key, int(version) if version.isdigit() else 1


def _when(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)


def _value(memory: dict) -> dict:
    meta = memory.get("metadata") or {}
    if isinstance(meta.get("value"), dict):
        return meta["value"]
    return {"text": memory["text"]}


class MemAuditStore(BaseStore):
    def __init__(self, client: MemAuditClient) -> None:
        self.client = client
        self.last_recall: Recall | None = None

    # BaseStore routes every call through batch().
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            if op.value is None:
                raise NotImplementedError("MemAudit keeps every memory; retire one through review, not delete")
            self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, SearchOp):
            return self._search(op.namespace_prefix, op.query, op.limit, op.filter)
        if isinstance(op, ListNamespacesOp):
            seen = sorted({_split(m["external_id"])[0] for m in self.client.memories(limit=1000)})
            return seen[op.offset:op.offset + op.limit]
        raise NotImplementedError(f"unsupported store operation {type(op).__name__}")

    def _versions(self, namespace: tuple[str, ...], key: str) -> list[dict]:
        kid = _key_id(namespace, key)
        rows = [m for m in self.client.memories(q=kid, limit=200)
                if m["external_id"] == kid or m["external_id"].startswith(f"{kid}#v")]
        return sorted(rows, key=lambda m: _split(m["external_id"])[2])

    def _item(self, m: dict, score: float | None = None) -> Item | SearchItem:
        ns, key, _ = _split(m["external_id"])
        created = _when(m.get("created_at"))
        if score is None:
            return Item(value=_value(m), key=key, namespace=ns, created_at=created, updated_at=created)
        return SearchItem(namespace=ns, key=key, value=_value(m), created_at=created, updated_at=created, score=score)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        versions = self._versions(namespace, key)
        if not versions or versions[-1].get("state") == "poison_likely":  # quarantined: not served
            return None
        return self._item(versions[-1])

    def _put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        versions = self._versions(namespace, key)
        kid = _key_id(namespace, key)
        text = next((value[k] for k in ("text", "content", "memory", "data") if isinstance(value.get(k), str)), None)
        text = text or json.dumps(value, sort_keys=True)
        meta = {"source": "langgraph-client", "namespace": list(namespace), "key": key, "value": value}
        if not versions:
            self.client.add(text, id=kid, metadata=meta)
        else:
            n = _split(versions[-1]["external_id"])[2] + 1
            self.client.add(text, id=f"{kid}#v{n}", metadata=meta, supersedes=versions[-1]["external_id"])

    def _search(self, prefix: tuple[str, ...], query: str | None, limit: int, flt: dict | None) -> list[SearchItem]:
        def wanted(ns: tuple[str, ...]) -> bool:
            return ns[:len(prefix)] == tuple(prefix)

        if query:
            got = self.client.recall(query, k=min(100, max(limit * 4, limit)))
            self.last_recall = got
            out = []
            for r in got.results:
                ns, key, _ = _split(r["external_id"])
                if wanted(ns):
                    out.append(SearchItem(namespace=ns, key=key, value={"text": r["text"]}, created_at=datetime.now(UTC),
                                          updated_at=datetime.now(UTC), score=r["score"]))
            return out[:limit]
        rows = [m for m in self.client.memories(q=".".join(prefix) if prefix else None, limit=1000)
                if wanted(_split(m["external_id"])[0]) and (m.get("state") != "poison_likely")]
        if flt:
            rows = [m for m in rows if all(_value(m).get(k) == v for k, v in flt.items())]
        return [self._item(m, 0.0) for m in rows][:limit]
