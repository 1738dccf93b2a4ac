"""The plain client: one MemAudit store, one agent token, httpx only."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx


class MemAuditError(Exception):
    """The server refused a call; ``status`` and the server's ``detail`` (never a secret)."""

    def __init__(self, status: int, detail: Any) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"MemAudit answered {status}: {detail}")


@dataclass
class Recall:
    """One recall: the results (quarantined memories are never among them) and its receipt."""

    receipt_id: int
    results: list[dict[str, Any]]
    receipt: dict[str, Any]
    excluded: list[dict[str, Any]] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return [r["text"] for r in self.results]

    @property
    def ids(self) -> list[str]:
        return [r["external_id"] for r in self.results]


class MemAuditClient:
    """``MemAuditClient("https://memaudit.example", store_id=3, token="mat_...")``.

    ``transport`` (an ``httpx`` transport) lets tests and in-process callers skip the network.
    """

    def __init__(self, base_url: str, store_id: int, token: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None, headers: dict[str, str] | None = None) -> None:
        hdrs = {"Accept": "application/json", **(headers or {})}
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        self.store_id = store_id
        self.receipts: list[Recall] = []
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=hdrs, timeout=timeout, transport=transport,
                                  follow_redirects=False)

    # ------------------------------------------------------------------ http

    def _call(self, method: str, path: str, **kw) -> Any:
        r = self._http.request(method, f"/api/v1{path}", **kw)
        if r.status_code >= 400:
            try:
                detail = r.json()
            except ValueError:
                detail = r.reason_phrase
            raise MemAuditError(r.status_code, detail)
        return r.json() if r.content else None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemAuditClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ recall

    def recall(self, query: str, k: int = 5) -> Recall:
        """Top-k memories over the quarantine-aware projection, with a signed receipt (kept)."""
        body = self._call("POST", f"/stores/{self.store_id}/recall", json={"query": query, "k": k})
        got = Recall(body["receipt_id"], body["results"], body["receipt"], body.get("excluded", []))
        self.receipts.append(got)
        return got

    def outcome(self, recall: Recall | int, memory: str, reward: float) -> dict:
        """Report how a recalled memory served (reward in [-1, 1]); the housekeeper turns outcomes
        into signed weight transitions."""
        rid = recall.receipt_id if isinstance(recall, Recall) else int(recall)
        return self._call("POST", f"/receipts/{rid}/outcomes", json={"memory": memory, "reward": reward})

    def receipt(self, receipt_id: int) -> dict:
        """The stored receipt with the receipt key's public key (hex) and its outcomes."""
        return self._call("GET", f"/receipts/{receipt_id}/")

    def verify(self, recall: Recall) -> None:
        """Check a kept receipt: its signature under the organization's receipt key and every
        result's Merkle inclusion. Raises on any mismatch. The check is MemAudit's portable
        verifier (``ledger.core``: stdlib + PyNaCl), which must be importable."""
        try:
            from ledger.core.receipts import verify_receipt  # local: optional, outside the client package
        except ImportError as exc:  # pragma: no cover - depends on the caller's environment
            raise RuntimeError("verifying receipts needs MemAudit's portable verifier (ledger.core) on the path") from exc
        stored = self.receipt(recall.receipt_id)
        if stored["receipt"] != recall.receipt:
            raise MemAuditError(409, "the server's copy of this receipt differs from the one kept")
        verify_receipt(recall.receipt, bytes.fromhex(stored["receipt_public_key"]))

    # ------------------------------------------------------------------ writes

    def add(self, text: str, *, id: str | None = None, metadata: dict | None = None,  # noqa: A002 - the API's name
            created_at: str | None = None, supersedes: str | None = None) -> dict:
        """Append one memory (signed genesis by the housekeeper); ``supersedes`` names the memory
        this one replaces, which then gets a signed provenance entry. Returns the import job."""
        return self.add_many([{"id": id or f"mem-{uuid.uuid4().hex}", "text": text, "metadata": metadata or {},
                               **({"created_at": created_at} if created_at else {}),
                               **({"supersedes": supersedes} if supersedes else {})}])

    def add_many(self, records: list[dict]) -> dict:
        return self._call("POST", f"/stores/{self.store_id}/memories/", json=records)

    def memories(self, q: str | None = None, *, limit: int = 100, offset: int = 0) -> list[dict]:
        """The store's memories (text, metadata, weight, state), optionally matching ``q``."""
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if q:
            params["q"] = q
        body = self._call("GET", f"/stores/{self.store_id}/memories/", params=params)
        return body["results"] if isinstance(body, dict) else body

    def import_job(self, job_id: int) -> dict:
        return self._call("GET", f"/imports/{job_id}/")
