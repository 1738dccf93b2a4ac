"""Recall with receipts, and the outcomes agents report against them (DESIGN section 3).

``recall(store, query, k)``:

1. Embed the query (``encode_query``: a bounded LRU by query text in front of the model);
   take the store's cached index (signed memories, live weights, states, chain heads; see
   ``ledger.embedding_store``).
2. Score = cosine x live weight, over the memories the epistemic projection allows
   (``excluded_states``, the one recall exclusion rule): ``poison_likely`` never;
   ``poison_suspect`` stays in, flagged, unless the organization has four-eyes off and the
   store ``exclude_suspect`` on.
3. Walk the candidates best first; adopt one only after its chains verify
   (``ledger.verification.memories_verify``: the candidates not yet verified in their current
   state are checked together, in one bundle, with findings per memory; the result is cached
   by memory, chain head, label seq, live weight and state, so a memory is verified once per
   state). A memory that fails is skipped, logged as an alert, counted, and listed in the
   response's ``excluded``.
4. Sign a receipt (``ledger.core.receipts.build_receipt``) over the ordered results, bound to
   the query hash, k, the latest signed tree head and the projection version; store it.

Brute force over a float32 matrix is measured in ``bench/recall_bench.py``; it keeps the p50
inside budget at 100k memories, so no ANN index is used.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from datetime import datetime

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from ledger.core.canonical import format_time, now_utc
from ledger.core.merkle import EMPTY_ROOT
from ledger.core.receipts import build_receipt
from ledger.embedding_store import StoreIndex, embedder_for_store, store_index
from ledger.models import EpistemicLabel, Memory, Outcome, Receipt, Store, TreeHead

logger = logging.getLogger(__name__)
alert_logger = logging.getLogger("ledger.alerts")

MAX_K = 100
PROJECTION = "memaudit-projection/1"
_VERIFIED_MAX = 200_000
# Candidates verified beyond the ones a recall needs, in the same batch (measured: bench/recall_bench.py).
VERIFY_AHEAD = 0
try:  # a transitive dependency of sentence-transformers; without it BLAS keeps its own threads
    from threadpoolctl import ThreadpoolController

    _blas = ThreadpoolController()
except ImportError:  # pragma: no cover
    _blas = None
_verified: OrderedDict[tuple, tuple[bool, str]] = OrderedDict()
_verified_lock = threading.Lock()
# Process-wide count of candidates excluded because their chains did not verify (an alert each).
verification_alerts = 0


def quarantine_states(*, four_eyes: bool, exclude_suspect: bool) -> frozenset[str]:
    """The recall exclusion rule: the one definition of "quarantined" (out of recall).

    ``poison_likely`` is always out: a reviewer approved it (or the ingest classifier, no
    person, labelled it). ``poison_suspect`` is one person's word, an analyst's proposal: on a
    four-eyes organization it stays in recall, flagged, until a second person decides; only
    where an org admin turned four-eyes off does the store's ``exclude_suspect`` take it out.
    """
    states = {EpistemicLabel.Label.LIKELY.value}
    if exclude_suspect and not four_eyes:
        states.add(EpistemicLabel.Label.SUSPECT.value)
    return frozenset(states)


def excluded_states(store: Store) -> frozenset[str]:
    """The states recall, the audit's replays and every "quarantined" count leave out for ``store``."""
    return quarantine_states(four_eyes=store.organization.four_eyes, exclude_suspect=store.exclude_suspect)


def quarantined_q(*, organization, prefix: str = "") -> Q:
    """``excluded_states`` as a filter over memories of any store of ``organization``
    (``prefix``: the path to the memory, e.g. ``"memory__"``)."""
    q = Q(**{f"{prefix}epistemic_state": EpistemicLabel.Label.LIKELY.value})
    if not organization.four_eyes:
        q |= Q(**{f"{prefix}epistemic_state": EpistemicLabel.Label.SUSPECT.value,
                  f"{prefix}store__exclude_suspect": True})
    return q


def is_quarantined(memory: Memory) -> bool:
    return (memory.epistemic_state or "") in excluded_states(memory.store)


def projection_version(store: Store) -> str:
    """Names the projection a receipt was served under (which states were excluded)."""
    return f"{PROJECTION};exclude={'+'.join(sorted(excluded_states(store)))}"


def query_sha256(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


def _row_key(index: StoreIndex, row: int) -> tuple:
    return (int(index.pks[row]), index.chain_heads[row], int(index.label_seq[row]), int(index.weight_q[row]),
            index.states[row])


def _verify_rows(index: StoreIndex, rows: list[int]) -> dict[int, tuple[bool, str]]:
    """(verified, why not) per row: from the cache, keyed by (memory, chain head, label seq, live
    weight, state), or by ``memories_verify`` on all the rows missing from it at once (one bundle)."""
    from ledger.verification import memories_verify

    out: dict[int, tuple[bool, str]] = {}
    keys = {row: _row_key(index, row) for row in rows}
    todo = []
    for row, key in keys.items():
        hit = _verified.get(key)
        if hit is None:
            todo.append(row)
        else:
            out[row] = hit
    if not todo:
        return out
    memories = Memory.objects.select_related("store", "organization").in_bulk([keys[row][0] for row in todo])
    check = []
    for row in todo:
        memory = memories.get(keys[row][0])
        if memory is None:
            out[row] = (False, "memory no longer in the database")
        elif (bytes(memory.chain_head or b""), memory.label_seq, memory.live_weight_q,
              memory.epistemic_state or "") != keys[row][1:]:
            # The row moved since the index was built: not what we would be vouching for.
            out[row] = (False, "live state changed during recall")
        else:
            check.append(row)
    if check:
        findings = memories_verify([memories[keys[row][0]] for row in check])
        with _verified_lock:
            for row in check:
                found = findings[keys[row][0]]
                out[row] = _verified[keys[row]] = (not found, "; ".join(str(f) for f in found[:3]))
            while len(_verified) > _VERIFIED_MAX:
                _verified.popitem(last=False)
    return out


def _matvec(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix @ q`` on one BLAS thread: a matrix-vector product is memory-bound, and waking
    BLAS worker threads costs more than it saves (measured: 20 ms instead of 0.07 ms for 2k rows
    on a busy 2-core host)."""
    if _blas is None:
        return matrix @ q
    with _blas.limit(limits=1, user_api="blas"):
        return matrix @ q


def verification_cache_clear() -> None:
    with _verified_lock:
        _verified.clear()


def _latest_tree_head(organization_id: int) -> tuple[int, str]:
    sth = TreeHead.objects.filter(organization_id=organization_id).order_by("-size").values_list(
        "size", "root").first()
    if sth is None:
        return 0, EMPTY_ROOT.hex()
    return int(sth[0]), bytes(sth[1]).hex()


def recall(*, store: Store, query: str, k: int, now: datetime | None = None) -> dict:
    """Top-k memories for ``query`` with a signed receipt; see the module docstring."""
    global verification_alerts
    from ledger.signing import receipt_signer

    if not isinstance(query, str) or not query.strip():
        raise ValidationError({"query": ["must be a non-empty string"]})
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValidationError({"k": [f"must be an integer from 1 to {MAX_K}"]})
    started = time.perf_counter()
    now = now or now_utc()
    embedder = embedder_for_store(store)
    index = store_index(store, embedder=embedder)
    excluded_set = excluded_states(store)
    adopted: list[int] = []
    excluded: list[dict] = []
    scores = np.empty(0, dtype=np.float32)
    if len(index):
        q = embedder.encode_query(query)
        cosine = _matvec(index.matrix, q)
        scores = cosine * index.weights
        allowed = index.state_mask(excluded_set)
        masked = np.where(allowed, scores, -np.inf)
        n_allowed = int(allowed.sum())
        want = min(k, n_allowed)
        take = min(n_allowed, max(2 * k, k + 8))
        while len(adopted) < want:
            top = np.argpartition(-masked, take - 1)[:take] if take < len(masked) else np.arange(len(masked))
            order = top[np.argsort(-masked[top], kind="stable")]
            checked: dict[int, tuple[bool, str]] = {}
            for pos, row in enumerate(order.tolist()):
                if len(adopted) >= want or not np.isfinite(masked[row]):
                    break
                if row not in checked:
                    # The rows this walk adopts if all verify, checked together (those not cached).
                    ahead = order[pos:pos + want - len(adopted) + VERIFY_AHEAD].tolist()
                    checked.update(_verify_rows(index, [r for r in ahead if r not in checked and np.isfinite(masked[r])]))
                ok, why = checked[row]
                masked[row] = -np.inf  # never look at this row again in this recall
                if ok:
                    adopted.append(int(row))
                else:
                    verification_alerts += 1
                    excluded.append({"memory": index.ledger_ids[row], "reason": f"chain verification failed: {why}"})
                    alert_logger.error("recall alert: memory %s of tenant %s excluded, chain verification failed: %s",
                                       index.ledger_ids[row], store.organization.slug, why)
            remaining = int(np.isfinite(masked).sum())
            want = min(want, len(adopted) + remaining)
            take = min(remaining, take * 2) if remaining else 0
            if not take:
                break
        cosine_of = {row: float(cosine[row]) for row in adopted}
    else:
        cosine_of = {}
    results = [{
        "memory": index.ledger_ids[row],
        "content_sha256": index.content_sha256[row].hex(),
        "weight_q": int(index.weight_q[row]),
        "state": index.states[row] or None,
        "chain_head": index.chain_heads[row].hex(),
    } for row in adopted]
    sth_size, sth_root = _latest_tree_head(store.organization_id)
    organization = store.organization
    receipt_body = build_receipt(
        results, tenant=organization.slug, store=store.slug, query_sha256=query_sha256(query), k=k,
        sth_size=sth_size, sth_root_hex=sth_root, projection_version=projection_version(store),
        time=format_time(now), signer=receipt_signer(organization),
    )
    receipt = Receipt.objects.create(organization=organization, store=store, body=receipt_body)
    texts = dict(Memory.objects.filter(pk__in=[int(index.pks[r]) for r in adopted]).values_list("pk", "text"))
    return {
        "receipt_id": receipt.pk,
        "store": store.pk,
        "k": k,
        "results": [{
            "rank": i + 1,
            "id": int(index.pks[row]),
            "memory": index.ledger_ids[row],
            "external_id": index.external_ids[row],
            "text": texts.get(int(index.pks[row]), ""),
            "score": float(scores[row]),
            "cosine": cosine_of[row],
            "weight": int(index.weight_q[row]) / 1000,
            "state": index.states[row] or None,
        } for i, row in enumerate(adopted)],
        "excluded": excluded,
        "receipt": receipt_body,
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 3),
    }


# --------------------------------------------------------------------------- outcomes


def outcome_record(*, receipt: Receipt, memory: str, reward: float) -> Outcome:
    """Append an agent's reward for one memory it was given under ``receipt``.

    The memory must be among the receipt's results; a memory gets at most one outcome per
    receipt (a second report would let an agent push a weight by repetition). The housekeeper
    folds outcomes into signed weight transitions (``outcomes_apply_task``).
    """
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not -1.0 <= float(reward) <= 1.0:
        raise ValidationError({"reward": ["must be a number from -1 to 1"]})
    given = [r["memory"] for r in receipt.body.get("results", [])]
    if not isinstance(memory, str):
        raise ValidationError({"memory": ["must be a string"]})
    prefix = f"{receipt.body['body']['store']}/"
    ledger_id = memory if memory in given else prefix + memory  # the receipt's id, or the external id
    if ledger_id not in given:
        raise ValidationError({"memory": [f"memory {memory!r} is not among this receipt's results"]})
    target = Memory.objects.get(store_id=receipt.store_id, external_id=ledger_id.removeprefix(prefix))
    with transaction.atomic():
        if Outcome.objects.filter(receipt=receipt, memory=target).exists():
            raise ValidationError({"memory": [f"an outcome for memory {memory!r} was already reported on this receipt"]})
        outcome = Outcome.objects.create(organization_id=receipt.organization_id, receipt=receipt, memory=target,
                                         reward_q=round(float(reward) * 1000))

    def enqueue() -> None:
        from ledger.tasks import outcomes_apply_task

        outcomes_apply_task.delay(receipt.organization_id)

    transaction.on_commit(enqueue)
    return outcome
