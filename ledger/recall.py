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
   response's ``excluded``. A candidate that moved (a write committed after the index read it:
   its row no longer has the indexed state, or it changed while the check read its rows in one
   snapshot) is no evidence of anything when the log moved too: the recall reads the log state
   and index again, up to ``RECALL_ATTEMPTS`` times, then answers without it (``excluded``, no
   alert). A row that moved while the log did not (a write's row and its leaf commit together)
   was edited outside the ledger: it fails, with an alert.
4. Sign a receipt (``ledger.core.receipts.build_receipt``) over the ordered results, bound to
   the query hash, k, the latest signed tree head and the projection version; store it.

Brute force over a float32 matrix up to ``settings.RECALL_ANN_MIN`` memories (100,000); above
it an ANN index (``ledger.ann``: HNSW graph and IVF lists) proposes a pool of nearest rows that is re-scored exactly and
widened until k allowed, verified results are found (``_search``). A recall's results are kept
per store index (``QUERY_CACHE_SIZE``, keyed by query, k and projection): the index is replaced
whenever the log moves, so a repeated query at the same log position skips encoding and scoring
and still gets a freshly signed receipt. Measured in ``bench/recall_bench.py``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from datetime import datetime
from functools import cache

import numpy as np
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from ledger import dispatch, verification
from ledger.core.canonical import format_time, now_utc
from ledger.core.merkle import EMPTY_ROOT
from ledger.core.receipts import build_receipt
from ledger.core.weights import WEIGHT_MIN_Q
from ledger.embedding_store import StoreIndex, embedder_for_store, store_index
from ledger.models import EpistemicLabel, LogLeaf, Memory, Outcome, Receipt, Store, TreeHead
from ledger.signing import receipt_signer

logger = logging.getLogger(__name__)
alert_logger = logging.getLogger("ledger.alerts")

MAX_K = 100
PROJECTION = "memaudit-projection/1"
_VERIFIED_MAX = 200_000
# Candidates verified beyond the ones a recall needs, in the same batch (measured: bench/recall_bench.py).
VERIFY_AHEAD = 0
# Large stores (an ANN graph, ``ledger.embedding_store``): the first candidate pool, re-scored
# exactly; widened x4 while it yields fewer than k verified, allowed results.
ANN_POOL_MIN = 64
ANN_POOL_PER_K = 8
QUERY_CACHE_SIZE = 256  # recall results per store index (same query, k and projection)
# A recall whose candidates moved (a concurrent write) reads the log state and index again, up to
# this many times in all; then it answers without them (``excluded``, reason MOVED; no alert).
RECALL_ATTEMPTS = 3
MOVED = "changed by a concurrent write during this recall: not served"
# A row that moved while the log did not: no logged write explains it (a raw edit of the row).
UNLOGGED = "live state changed with no log entry since the index was read (an edit outside the ledger)"
try:  # a transitive dependency of sentence-transformers; without it BLAS keeps its own threads
    from threadpoolctl import ThreadpoolController  # local: optional dependency

    _blas = ThreadpoolController()
except ImportError:  # pragma: no cover
    _blas = None
_verified: OrderedDict[tuple, tuple[bool, str]] = OrderedDict()
_verified_lock = threading.Lock()
_verified_generation = 0
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
    always = quarantine_states(four_eyes=organization.four_eyes, exclude_suspect=False)
    if_store_excludes = quarantine_states(four_eyes=organization.four_eyes, exclude_suspect=True) - always
    q = Q(**{f"{prefix}epistemic_state__in": sorted(always)})
    if if_store_excludes:
        q |= Q(**{f"{prefix}epistemic_state__in": sorted(if_store_excludes), f"{prefix}store__exclude_suspect": True})
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
            index.states[row], index.content_sha256[row])


def _verify_rows(index: StoreIndex, rows: list[int], tally: dict | None = None) -> dict[int, tuple[bool | None, str]]:
    """(verified, why not) per row: from a worker's verified-ahead record when it covers the
    row's exact live state (``index.preverified``), from this process's cache, keyed by (memory,
    chain head, label seq, live weight, state), or by ``memories_verify`` on all the rows missing
    from both at once (one bundle). ``tally`` counts the rows verified in this call ("now").

    Verified is None for a row that moved: a write committed since the index was built (or
    while the check read it) changed the memory's live state, so the state this index would
    serve is not the one in the database, and nothing was verified; never cached."""
    out: dict[int, tuple[bool | None, str]] = {}
    pre = index.preverified
    if pre is not None:
        for row in rows:
            if pre[row]:
                out[row] = (True, "")
                if tally is not None:
                    tally.setdefault("ahead_rows", set()).add(row)
    keys = {row: _row_key(index, row) for row in rows if row not in out}
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
        elif verification.live_state(memory) != keys[row][1:]:
            out[row] = (None, MOVED)  # since the index was built: not what we would be vouching for
        else:
            check.append(row)
    if check:
        if tally is not None:
            tally["now"] = tally.get("now", 0) + len(check)
            tally.setdefault("now_rows", set()).update(check)
        findings = verification.memories_verify([memories[keys[row][0]] for row in check])
        with _verified_lock:
            for row in check:
                found = findings[keys[row][0]]
                if found is None:  # moved while the check read it
                    out[row] = (None, MOVED)
                    continue
                out[row] = _verified[keys[row]] = (not found, "; ".join(str(f) for f in found[:3]))
            while len(_verified) > _VERIFIED_MAX:
                _verified.popitem(last=False)
    return out


@cache
def _faiss():
    """faiss (a requirement, for ``ledger.ann``), loaded on the first score rather than when this
    module is (every process that loads the URLs imports it: ~50 ms and ~15 MB each); None
    without it, and the product scores through numpy's BLAS."""
    try:
        import faiss  # local: optional library, only a recall needs it
    except ImportError:  # pragma: no cover
        return None
    return faiss


def _matvec(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix @ q``, every row's inner product with the query, on this thread. Through faiss's
    SIMD kernel (``fvec_inner_products_ny``) for float32 rows: numpy's single-thread OpenBLAS
    ``sgemv`` took 6.7 ms for 20k x 384 here, faiss 1.2 ms, the same sums within float32 rounding
    (docs/benchmarks.md section 11); otherwise on one BLAS thread: a matrix-vector product is
    memory-bound, and waking BLAS worker threads costs more than it saves (measured: 20 ms
    instead of 0.07 ms for 2k rows on a busy 2-core host)."""
    if (matrix.ndim == 2 and len(matrix) and matrix.dtype == np.float32 and matrix.flags.c_contiguous
            and q.dtype == np.float32 and q.shape == matrix.shape[1:] and (faiss := _faiss()) is not None):
        q = np.ascontiguousarray(q)
        out = np.empty(len(matrix), dtype=np.float32)
        faiss.fvec_inner_products_ny(faiss.swig_ptr(out), faiss.swig_ptr(q), faiss.swig_ptr(matrix),
                                     matrix.shape[1], len(matrix))
        return out
    if _blas is None:
        return matrix @ q
    with _blas.limit(limits=1, user_api="blas"):
        return matrix @ q


def verification_cache_clear() -> None:
    global _verified_generation
    with _texts_lock:
        _texts_cache.clear()  # keyed by primary key, which a rolled-back test database reuses
    with _verified_lock:
        _verified.clear()
        _verified_generation += 1  # recall results cached per store index are dropped too


def _log_state(organization_id: int) -> tuple[int, int, str]:
    """The tenant log's last leaf index (-1 when empty) and its latest signed tree head (size,
    root hex), in one round trip. Raw SQL: compiling the ORM queries cost more CPU than the
    database spends answering them (cProfile of warm recalls at 20k), and it runs on every recall."""
    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        cur.execute(f"SELECT (SELECT {qn('index')} FROM {qn(LogLeaf._meta.db_table)} "
                    f"WHERE {qn('organization_id')} = %s ORDER BY {qn('index')} DESC LIMIT 1), "
                    f"s.{qn('size')}, s.{qn('root')} FROM (SELECT 1) AS one LEFT JOIN "
                    f"(SELECT {qn('size')}, {qn('root')} FROM {qn(TreeHead._meta.db_table)} "
                    f"WHERE {qn('organization_id')} = %s ORDER BY {qn('size')} DESC LIMIT 1) AS s ON TRUE",
                    [organization_id, organization_id])
        last, size, root = cur.fetchone()
    position = -1 if last is None else int(last)
    if size is None:
        return position, 0, EMPTY_ROOT.hex()
    return position, int(size), bytes(root).hex()


def _receipt_insert(*, organization_id: int, store_id: int, body: dict) -> int:
    """Store a signed receipt (durably: committed before the recall answers) and return its id.
    One INSERT ... RETURNING with the fields' own database adaptation; ``Receipt.objects.create``
    spent more CPU building the statement than the database spends on it (cProfile, 20k recall)."""
    meta = Receipt._meta
    qn = connection.ops.quote_name
    values = [organization_id, store_id, meta.get_field("body").get_db_prep_save(body, connection),
              meta.get_field("created_at").get_db_prep_save(timezone.now(), connection)]  # as auto_now_add
    with connection.cursor() as cur:
        cur.execute(f"INSERT INTO {qn(meta.db_table)} ({qn('organization_id')}, {qn('store_id')}, {qn('body')}, "
                    f"{qn('created_at')}) VALUES (%s, %s, %s, %s) RETURNING {qn('id')}", values)
        return int(cur.fetchone()[0])


_TEXTS_MAX = 50_000
_texts_cache: OrderedDict[int, str] = OrderedDict()
_texts_lock = threading.Lock()


def _texts(pks: list[int]) -> dict[int, str]:
    """Memory texts by primary key, from a bounded in-process cache (a memory's text never
    changes: its hash is in the signed genesis), reading only the missing ones."""
    out: dict[int, str] = {}
    with _texts_lock:
        for pk in pks:
            text = _texts_cache.get(pk)
            if text is not None:
                out[pk] = text
    missing = [pk for pk in pks if pk not in out]
    if missing:
        found = dict(Memory.objects.filter(pk__in=missing).values_list("pk", "text"))
        out.update(found)
        with _texts_lock:
            _texts_cache.update(found)
            while len(_texts_cache) > _TEXTS_MAX:
                _texts_cache.popitem(last=False)
    return out


def _search(store: Store, index: StoreIndex, embedder, query: str, k: int, excluded_set: frozenset[str],
            tally: dict | None = None, unlogged: frozenset[int] = frozenset(),
            ) -> tuple[list[int], list[dict], dict[int, float], dict[int, float], list[int]]:
    """Steps 1-3 of the module docstring: the adopted rows best first, the excluded candidates,
    each adopted row's cosine and score, and the withheld rows: the quarantined memories that
    would have been among the top k (scoring above the k-th adopted row), best first.

    Brute force over the whole matrix; or, for a store with an ANN graph, over a pool of its
    nearest rows by cosine plus every row whose live weight exceeds the initial 1.0 (the graph
    ranks by cosine, the score is cosine x weight, so only those rows can overtake from outside
    the pool) and every row the graph does not hold yet (``index.unindexed``), all re-scored exactly. The pool is accepted when it yields ``min(k, allowed)``
    verified results whose last score is at least the best any row outside it can reach (the
    pool's lowest cosine x 1.0); otherwise it is widened x4 and walked again (verification
    results are cached, alerts are raised once), up to the whole store."""
    global verification_alerts
    n = len(index)
    if not n:
        return [], [], {}, {}, []
    q = embedder.encode_query(query)
    allowed = index.state_mask(excluded_set)
    want_all = min(k, int(allowed.sum()))
    pool = n if index.ann is None else min(n, max(ANN_POOL_MIN, ANN_POOL_PER_K * k))
    alerted: set[int] = set()
    while True:
        adopted: list[int] = []
        excluded: list[dict] = []
        cosine_of: dict[int, float] = {}
        score_of: dict[int, float] = {}
        want = want_all
        bound = -np.inf
        if pool >= n:
            rows = None  # position == row
            cosine = _matvec(index.matrix, q)
            scores = cosine * index.weights
            masked = np.where(allowed, scores, -np.inf)
        else:
            near = index.candidate_rows(q, pool)
            if len(near) < min(pool, len(index.ann)):  # the graph could not fill the pool: brute force
                pool = n
                continue
            rows = np.union1d(np.union1d(near, index.boosted_rows()), index.unindexed)
            rows = rows[allowed[rows]]
            cosine = _matvec(index.matrix[rows], q)  # exact re-rank of the candidates
            scores = cosine * index.weights[rows]
            masked = scores.astype(np.float32, copy=True)
            if len(near):
                floor = float(_matvec(index.matrix[near], q).min())  # the graph's farthest proposal
                bound = floor if floor >= 0 else floor * WEIGHT_MIN_Q / 1000
        row_of = (lambda p: p) if rows is None else (lambda p, rows=rows: int(rows[p]))
        remaining = int(np.isfinite(masked).sum())
        take = min(remaining, max(2 * k, k + 8))
        while len(adopted) < want and take:
            top = np.argpartition(-masked, take - 1)[:take] if take < len(masked) else np.arange(len(masked))
            order = top[np.argsort(-masked[top], kind="stable")]
            checked: dict[int, tuple[bool, str]] = {}
            for pos, p in enumerate(order.tolist()):
                if len(adopted) >= want or not np.isfinite(masked[p]):
                    break
                row = row_of(p)
                if row not in checked:
                    # The rows this walk adopts if all verify, checked together (those not cached).
                    ahead = [row_of(x) for x in order[pos:pos + want - len(adopted) + VERIFY_AHEAD].tolist()
                             if np.isfinite(masked[x])]
                    checked.update(_verify_rows(index, [r for r in ahead if r not in checked], tally))
                ok, why = checked[row]
                if ok is None and row in unlogged:  # moved again, and still nothing logged
                    ok, why = False, UNLOGGED
                masked[p] = -np.inf  # never look at this row again in this walk
                if ok:
                    adopted.append(row)
                    cosine_of[row], score_of[row] = float(cosine[p]), float(scores[p])
                    continue
                if ok is None:  # moved: no evidence of anything; recall() reads the index again
                    if tally is not None:
                        tally.setdefault("moved", set()).add(row)
                    continue
                excluded.append({"memory": index.ledger_ids[row], "reason": f"chain verification failed: {why}"})
                if row not in alerted:
                    alerted.add(row)
                    verification_alerts += 1
                    alert_logger.error("recall alert: memory %s of tenant %s excluded, chain verification failed: %s",
                                       index.ledger_ids[row], store.organization.slug, why)
            remaining = int(np.isfinite(masked).sum())
            if rows is None:
                want = min(want, len(adopted) + remaining)
            take = min(remaining, take * 2) if remaining else 0
        if pool >= n or (len(adopted) >= want and score_of[adopted[-1]] >= bound):
            out = np.flatnonzero(~allowed)
            held = _matvec(index.matrix[out], q) * index.weights[out] if len(out) else np.zeros(0)
            floor = score_of[adopted[-1]] if len(adopted) >= k else -np.inf
            withheld = [int(out[p]) for p in np.argsort(-held, kind="stable")[:k] if held[p] > floor]
            return adopted, excluded, cosine_of, score_of, withheld
        pool = min(n, pool * 4)


def recall(*, store: Store, query: str, k: int, now: datetime | None = None) -> dict:
    """Top-k memories for ``query`` with a signed receipt; see the module docstring."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError({"query": ["must be a non-empty string"]})
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValidationError({"k": [f"must be an integer from 1 to {MAX_K}"]})
    started = time.perf_counter()
    now = now or now_utc()
    embedder = embedder_for_store(store)
    excluded_set = excluded_states(store)
    attempts = 0
    unlogged: frozenset[int] = frozenset()
    previous = None  # the last attempt's (log position, index, moved rows)
    while attempts < RECALL_ATTEMPTS:
        attempts += 1
        position, sth_size, sth_root = _log_state(store.organization_id)
        index = store_index(store, embedder=embedder, position=position)
        if previous is not None and previous[0] == position and previous[1] is index:
            unlogged = previous[2]  # a write's row and its leaf commit together: no leaf, no write
        key = (query, k, excluded_set, _verified_generation)
        tally: dict = {}
        with index.query_cache_lock:
            hit = index.query_cache.get(key)
        if hit is not None:
            adopted, excluded, cosine_of, score_of, withheld, first = hit
            tally = {"ahead_rows": first.get("ahead_rows", set())}  # nothing verified in this call
            break
        adopted, excluded, cosine_of, score_of, withheld = _search(store, index, embedder, query, k, excluded_set,
                                                                   tally, unlogged)
        previous = (position, index, frozenset(tally.get("moved", ())))
        if "moved" not in tally:
            if not excluded:  # a recall that excluded a memory runs (and alerts) again next time
                with index.query_cache_lock:
                    index.query_cache[key] = (adopted, excluded, cosine_of, score_of, withheld, tally)
                    while len(index.query_cache) > QUERY_CACHE_SIZE:
                        index.query_cache.pop(next(iter(index.query_cache)))
            break
    excluded = excluded + [{"memory": index.ledger_ids[row], "reason": MOVED} for row in sorted(tally.get("moved", ()))]
    results = [{
        "memory": index.ledger_ids[row],
        "content_sha256": index.content_sha256[row].hex(),
        "weight_q": int(index.weight_q[row]),
        "state": index.states[row] or None,
        "chain_head": index.chain_heads[row].hex(),
    } for row in adopted]
    organization = store.organization
    receipt_body = build_receipt(
        results, tenant=organization.slug, store=store.slug, query_sha256=query_sha256(query), k=k,
        sth_size=sth_size, sth_root_hex=sth_root, projection_version=projection_version(store),
        time=format_time(now), signer=receipt_signer(organization),
    )
    receipt_id = _receipt_insert(organization_id=organization.pk, store_id=store.pk, body=receipt_body)
    texts = _texts([int(index.pks[r]) for r in adopted])
    ahead_rows = tally.get("ahead_rows", set())
    return {
        "receipt_id": receipt_id,
        "store": store.pk,
        "k": k,
        "results": [{
            "rank": i + 1,
            "id": int(index.pks[row]),
            "memory": index.ledger_ids[row],
            "external_id": index.external_ids[row],
            "text": texts.get(int(index.pks[row]), ""),
            "score": score_of[row],
            "cosine": cosine_of[row],
            "weight": int(index.weight_q[row]) / 1000,
            "state": index.states[row] or None,
        } for i, row in enumerate(adopted)],
        # Chain failures, then what the projection withheld: ids and labels, never the text.
        "excluded": excluded + [{
            "memory": index.ledger_ids[row], "id": int(index.pks[row]), "external_id": index.external_ids[row],
            "label": index.states[row], "reason": f"quarantined ({index.states[row]}): out of recall",
        } for row in withheld],
        "receipt": receipt_body,
        # How the results were verified (not signed): "ahead" = by a worker's record covering the
        # result's exact live state, made at log position ``verified_through``; "earlier" = by an
        # earlier recall in this process (same state); "now" = candidates verified in this call.
        "verification": {
            "ahead": sum(1 for row in adopted if row in ahead_rows),
            "earlier": sum(1 for row in adopted if row not in ahead_rows and row not in tally.get("now_rows", ())),
            "now": tally.get("now", 0),
            "verified_through": index.preverified_through if ahead_rows else None,
            "log_position": index.log_position,
            "attempts": attempts,  # more than 1: candidates moved under a concurrent write, read again
        },
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

    transaction.on_commit(lambda: dispatch.outcomes_apply(receipt.organization_id))
    return outcome
