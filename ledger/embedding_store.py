"""Embeddings for recall: a database cache by content hash and an in-process index per store.

- ``embedder_for_store(store)`` picks the model: ``settings.EMBEDDING_BACKEND`` (a dotted
  path to a class, e.g. ``ledger.embeddings.HashingEmbedder`` in fast tests) wins; otherwise
  the store's ``embedding_model`` path, then ``settings.EMBEDDING_MODEL_PATH``, then the
  packaged all-MiniLM-L6-v2. One instance per process and model.
- ``embeddings_compute(memories=...)`` fills ``EmbeddingCache`` for whatever is missing, in
  batches; the same text in two stores (or two tenants) is embedded once. Workers run it
  (``ledger.import_tasks.embeddings_compute_task``); recall computes stragglers inline.
- ``store_index(store)`` returns a float32 matrix of the store's signed memories with their
  live weights, states and chain heads, cached per process. It is brought up to date when the
  tenant log grows (every genesis, transition and label appends a leaf naming its memory in the
  same transaction as the live-state change, so the last leaf index is a cheap, exact change
  counter): only the memories named by the leaves since the index was built are re-read
  (``_index_patch``; rows appended in place, the graph kept), and the whole store is re-read only
  when that cannot be done or memories that lacked an embedding may have received one.
- A store with at least ``settings.RECALL_ANN_MIN`` recallable memories (default 100,000) also
  gets an ANN index (``ledger.ann``: an HNSW graph and IVF lists, pooled) that proposes
  candidates; recall re-scores them exactly.
  A Celery worker builds and grows it (``store_prepare``, run by
  ``ledger.tasks.recall_prepare_task``) and saves it to ``VAR_DIR/ann/store-<id>-<model>.hnsw``;
  the request path only reopens that file (``ann_attach``), adds at most ``ANN_INLINE_ADD`` rows
  itself and re-scores the rows the graph still lacks exactly; with no graph yet it scores by
  brute force (exact, slower) and asks a worker for one. Smaller stores are scored by brute
  force over the whole matrix.
- The same worker step verifies the store's memories ahead of recall
  (``ledger.verification.store_preverify``); the index carries, per row, whether that record
  covers the row's exact live state (``preverified``), so recall verifies only what moved since.
  A recall whose index calls for either asks for the step (``_prepare_maybe``, debounced).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection
from django.utils.module_loading import import_string

from ledger import ann as ann_module
from ledger import dispatch, verification
from ledger.core.weights import WEIGHT_INITIAL_Q
from ledger.embeddings import Embedder, TextEmbedder
from ledger.models import EmbeddingCache, LogLeaf, Memory, Store

logger = logging.getLogger(__name__)
BATCH = 256
INLINE_LIMIT = 256  # recall embeds at most this many stragglers itself
ANN_MIN_DEFAULT = 100_000  # brute force below (measured in bench/recall_bench.py: ~10 ms at 100k)
ANN_INLINE_ADD = 500  # rows a request may add to a graph itself (~0.1 s); more wait for the worker
ANN_UNINDEXED_MAX = 0.25  # share of rows outside the graph above which recall uses brute force
PREPARE_MIN = 64  # rows not verified ahead that make a recall ask a worker for recall_prepare
PREPARE_INTERVAL_S = 30.0  # at most one such request per store and process in this time
PREVERIFIED_RECHECK_S = 5.0  # how often a recall looks for a newer verified-ahead record
PREVERIFIED_INLINE_MAX = 200_000  # rows up to which a newer record is matched in the request (~0.1 s at 100k)
# Log entries since an index was built beyond which it is rebuilt rather than brought forward:
# this many, or a quarter of the store's rows if more (re-reading that many rows costs about as
# much as re-reading the store).
PATCH_MAX_LEAVES = 20_000
_EMBEDDERS: dict[str, TextEmbedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def embedder_for_store(store: Store | None = None) -> TextEmbedder:
    backend = settings.EMBEDDING_BACKEND
    path = (store.embedding_model if store is not None else "") or getattr(settings, "EMBEDDING_MODEL_PATH", "")
    key = backend or f"st:{path}"
    embedder = _EMBEDDERS.get(key)
    if embedder is None:
        with _EMBEDDERS_LOCK:
            embedder = _EMBEDDERS.get(key)
            if embedder is None:
                embedder = import_string(backend)() if backend else Embedder(path or None)
                _EMBEDDERS[key] = embedder
    return embedder


def _vector(raw: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(bytes(raw), dtype="<f4")


def cached_vectors(*, model: str, hashes: Iterable[bytes]) -> dict[bytes, np.ndarray]:
    """Stored vectors for these content hashes (absent ones are simply missing)."""
    wanted = list({bytes(h) for h in hashes})
    found: dict[bytes, np.ndarray] = {}
    for i in range(0, len(wanted), 500):  # stay under SQLite's bound-parameter limit
        rows = EmbeddingCache.objects.filter(model=model, content_sha256__in=wanted[i:i + 500])
        for h, v in rows.values_list("content_sha256", "vector"):
            found[bytes(h)] = _vector(v)
    return found


def embeddings_compute(*, memories: Iterable[Memory], embedder: TextEmbedder | None = None) -> int:
    """Embed the memories whose content hash has no cached vector; return how many were encoded."""
    memories = list(memories)
    if not memories:
        return 0
    embedder = embedder or embedder_for_store(memories[0].store)
    have = cached_vectors(model=embedder.model_name, hashes=(m.content_sha256 for m in memories))
    todo: dict[bytes, str] = {}
    for m in memories:
        h = bytes(m.content_sha256)
        if h not in have and h not in todo:
            todo[h] = m.text
    items = list(todo.items())
    for i in range(0, len(items), BATCH):
        batch = items[i:i + BATCH]
        vectors = embedder.encode([text for _, text in batch]).astype("<f4", copy=False)
        EmbeddingCache.objects.bulk_create(
            [EmbeddingCache(model=embedder.model_name, content_sha256=h, vector=vectors[j].tobytes())
             for j, (h, _) in enumerate(batch)],
            ignore_conflicts=True,  # another worker embedding the same text got there first
        )
    return len(items)


# --------------------------------------------------------------------------- per-store index


class _Rows:
    """A matrix's backing rows with room to append. Indexes brought forward from one another
    share it, each seeing its own first n rows (``buffer[:n]``); rows are only ever appended after
    the last filled one, so a recall in flight on an older index never sees a row change."""

    def __init__(self, n: int, dim: int) -> None:
        self.buffer = np.empty((n + max(1024, n // 16), dim), dtype=np.float32)
        self.filled = n
        self.lock = threading.Lock()

    @classmethod
    def of(cls, matrix: np.ndarray) -> _Rows:
        rows = cls(len(matrix), matrix.shape[1])
        rows.buffer[:len(matrix)] = matrix
        return rows

    def extend(self, n: int, new: np.ndarray) -> np.ndarray | None:
        """The first ``n + len(new)`` rows with ``new`` written after row ``n``; None when another
        index already appended after ``n`` or there is no room (the caller copies)."""
        with self.lock:
            if self.filled != n or n + len(new) > len(self.buffer):
                return None
            self.buffer[n:n + len(new)] = new
            self.filled = n + len(new)
            return self.buffer[:self.filled]


@dataclass
class StoreIndex:
    """The recall view of a store at one log position. Rows are signed memories only."""

    store_id: int
    model: str
    log_position: int
    matrix: np.ndarray  # (n, dim) float32, L2-normalised: the first n rows of ``rows``
    weights: np.ndarray  # (n,) float32 live weights
    pks: np.ndarray  # (n,) int64 Memory primary keys
    external_ids: list[str]
    ledger_ids: list[str]  # "<store slug>/<external id>", the id in signed bodies and receipts
    states: list[str]
    weight_q: np.ndarray  # (n,) int64
    chain_heads: list[bytes]
    content_sha256: list[bytes]
    label_seq: np.ndarray  # (n,) int64
    missing: int = 0  # signed memories still without a vector (not recallable yet)
    embedding_position: int = 0
    # The leaf hash at ``log_position``: the log is append-only, so an index whose leaf still has
    # this hash can be brought forward by the entries after it (``_index_patch``).
    log_head: bytes | None = None
    rows: _Rows | None = None  # the matrix's backing rows, with room to append
    excluded_cache: dict = field(default_factory=dict)
    ann: ann_module.AnnIndex | None = None  # candidates for large stores (see the module docstring)
    # Rows the graph lacks (added since a worker last grew it): always re-scored exactly.
    unindexed: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    # True where a worker verified this row's exact live state ahead of recall
    # (``ledger.verification.store_preverify``), "through" that log position; None: no record.
    preverified: np.ndarray | None = None
    preverified_through: int = -1
    preverified_seen: tuple | None = None  # (mtime_ns, size) of the record file the mask came from
    preverified_checked: float = 0.0  # time.monotonic() of the last look at that file
    ann_checked: float = field(default_factory=time.monotonic)  # last look for a more complete graph
    # Recall results by (query, k, projection, verification generation) at this log position;
    # dropped with the index when the log moves (``ledger.recall``).
    query_cache: dict = field(default_factory=dict)
    query_cache_lock: threading.Lock = field(default_factory=threading.Lock)

    def __len__(self) -> int:
        return len(self.pks)

    def boosted_rows(self) -> np.ndarray:
        """Rows whose live weight is above the initial 1.0 (cached): outside an ANN pool, only
        they can score above the pool's lowest cosine."""
        rows = self.excluded_cache.get("boosted")
        if rows is None:
            rows = self.excluded_cache["boosted"] = np.flatnonzero(self.weight_q > WEIGHT_INITIAL_Q)
        return rows

    def candidate_rows(self, q: np.ndarray, n: int) -> np.ndarray:
        """Rows of the (about) ``n`` nearest memories by cosine, from the ANN graph."""
        keys = self.ann.search(q, n)
        rows = np.minimum(np.searchsorted(self.pks, keys), len(self.pks) - 1)
        return rows[self.pks[rows] == keys]  # a key this index lacks (not signed yet) is dropped

    def state_mask(self, excluded: frozenset[str]) -> np.ndarray:
        """True where the memory may be recalled under this projection (cached per projection)."""
        mask = self.excluded_cache.get(excluded)
        if mask is None:
            mask = np.array([s not in excluded for s in self.states], dtype=bool)
            self.excluded_cache[excluded] = mask
        return mask


_INDEXES: dict[int, StoreIndex] = {}
_INDEX_LOCK = threading.Lock()
_BUILDING: dict[int, threading.Lock] = {}  # per store: held while its index is brought forward or rebuilt


def log_position(organization_id: int) -> int:
    """Index of the tenant log's last leaf (-1 when empty): changes with every ledger entry."""
    # Raw SQL: it runs on every recall, and the ORM's query compilation cost more CPU than the
    # index lookup itself (cProfile of warm recalls at 20k).
    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        cur.execute(f"SELECT {qn('index')} FROM {qn(LogLeaf._meta.db_table)} WHERE {qn('organization_id')} = %s "
                    f"ORDER BY {qn('index')} DESC LIMIT 1", [organization_id])
        last = cur.fetchone()
    return -1 if last is None else int(last[0])


def _leaf_hashes(organization_id: int, indexes: list[int]) -> dict[int, bytes]:
    """The tenant log's leaf hashes at these indexes (absent ones are missing)."""
    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        cur.execute(f"SELECT {qn('index')}, {qn('leaf_hash')} FROM {qn(LogLeaf._meta.db_table)} "
                    f"WHERE {qn('organization_id')} = %s AND {qn('index')} IN ({', '.join(['%s'] * len(indexes))})",
                    [organization_id, *indexes])
        return {int(i): bytes(h) for i, h in cur.fetchall()}


def _embedding_position() -> int:
    return EmbeddingCache.objects.order_by("-id").values_list("id", flat=True).first() or 0


def index_invalidate(store_id: int | None = None) -> None:
    """Drop the cached index of one store (or all); the next recall rebuilds it."""
    with _INDEX_LOCK:
        if store_id is None:
            _INDEXES.clear()
            _WORKER_INDEXES.clear()
        else:
            _INDEXES.pop(store_id, None)
            _WORKER_INDEXES.pop(store_id, None)


# A store index row as read from the database (``_build_index`` and ``_index_patch``).
_ROW_FIELDS = ("pk", "external_id", "content_sha256", "live_weight_q", "epistemic_state", "chain_head", "label_seq")


def _row_vectors(embedder: TextEmbedder, rows: list[tuple]) -> tuple[dict[bytes, np.ndarray], bool]:
    """The cached vectors of these rows' content hashes, after embedding here the stragglers
    (a worker not yet done, or none running) when there are at most ``INLINE_LIMIT`` of them;
    and whether any was embedded (the embedding cache moved)."""
    vectors = cached_vectors(model=embedder.model_name, hashes=(r[2] for r in rows))
    absent = [r[0] for r in rows if bytes(r[2]) not in vectors]
    if not absent or len(absent) > INLINE_LIMIT:
        return vectors, False
    embeddings_compute(memories=Memory.objects.filter(pk__in=absent).select_related("store"), embedder=embedder)
    return cached_vectors(model=embedder.model_name, hashes=(r[2] for r in rows)), True


def _build_index(store: Store, embedder: TextEmbedder, position: int, *, worker: bool = False) -> StoreIndex:
    emb_position = _embedding_position()
    rows = list(Memory.objects.filter(store=store, chain_head__isnull=False).order_by("pk").values_list(*_ROW_FIELDS))
    vectors, embedded = _row_vectors(embedder, rows)
    if embedded:
        emb_position = _embedding_position()
    kept = [r for r in rows if bytes(r[2]) in vectors]
    backing = _Rows(len(kept), embedder.dim)
    matrix = backing.buffer[:len(kept)]
    for i, r in enumerate(kept):
        matrix[i] = vectors[bytes(r[2])]
    weight_q = np.array([r[3] for r in kept], dtype=np.int64)
    pks = np.array([r[0] for r in kept], dtype=np.int64)
    index = StoreIndex(
        store_id=store.pk, model=embedder.model_name, log_position=position, matrix=matrix,
        weights=(weight_q / 1000.0).astype(np.float32), pks=pks,
        external_ids=[r[1] for r in kept], ledger_ids=[f"{store.slug}/{r[1]}" for r in kept],
        states=[r[4] or "" for r in kept], weight_q=weight_q,
        chain_heads=[bytes(r[5]) for r in kept], content_sha256=[bytes(r[2]) for r in kept],
        label_seq=np.array([r[6] for r in kept], dtype=np.int64), missing=len(rows) - len(kept),
        embedding_position=emb_position, log_head=_leaf_hashes(store.organization_id, [position]).get(position),
        rows=backing,
    )
    if len(kept) >= ann_min() and ann_module.available():
        if worker:
            index.ann = ann_update(store, index)
        else:
            ann_attach(store, index)
    if not worker:
        _preverified_attach(store, index)
    return index


def _spliced(seq: list, at: np.ndarray, values: list) -> list:
    """``seq`` with ``values[i]`` inserted before ``seq[at[i]]`` (``at`` ascending), as np.insert."""
    if not len(at):
        return seq
    if int(at[0]) == len(seq):
        return seq + values
    out: list = []
    start = 0
    for a, v in zip(at.tolist(), values, strict=True):
        out.extend(seq[start:a])
        out.append(v)
        start = a
    out.extend(seq[start:])
    return out


def _index_patch(store: Store, old: StoreIndex, embedder: TextEmbedder, position: int) -> StoreIndex | None:
    """``old`` brought forward to log ``position`` by re-reading only the memories whose entries
    came after it (a new memory's genesis, a label, a transition: every live-state change appends a
    leaf naming its memory). None when it cannot be, and the caller rebuilds: another model, rows
    still without a vector, the old position's leaf changed (another database), more entries since
    than ``PATCH_MAX_LEAVES`` or a quarter of the rows, or more new memories without a vector than
    recall may embed inline. The result is a new index object (a recall in flight keeps the old
    one); the matrix is shared, rows only appended after its end (``_Rows``); the graph too."""
    if (old.model != embedder.model_name or old.missing or old.log_head is None or position <= old.log_position):
        return None
    org = store.organization_id
    heads = _leaf_hashes(org, [old.log_position, position])
    if heads.get(old.log_position) != old.log_head or position not in heads:
        return None
    limit = max(PATCH_MAX_LEAVES, len(old) // 4)
    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        cur.execute(f"SELECT {qn('memory_id')} FROM {qn(LogLeaf._meta.db_table)} WHERE {qn('organization_id')} = %s "
                    f"AND {qn('index')} > %s AND {qn('index')} <= %s LIMIT %s",
                    [org, old.log_position, position, limit + 1])
        moved = [m for (m,) in cur.fetchall()]
    if len(moved) > limit:
        return None
    ids = sorted({m for m in moved if m is not None})
    found = []
    for i in range(0, len(ids), 500):  # SQLite's bound-parameter limit
        found += Memory.objects.filter(pk__in=ids[i:i + 500], store=store, chain_head__isnull=False).values_list(
            *_ROW_FIELDS)
    found.sort()
    pks = np.array([r[0] for r in found], dtype=np.int64)
    n = len(old)
    at = np.searchsorted(old.pks, pks)
    known = (at < n) & (old.pks[np.minimum(at, max(n - 1, 0))] == pks) if n else np.zeros(len(pks), dtype=bool)
    new = [r for r, k in zip(found, known.tolist(), strict=True) if not k]
    vectors, embedded = _row_vectors(embedder, new)
    if any(bytes(r[2]) not in vectors for r in new):
        return None  # more stragglers than recall embeds inline: a rebuild counts them as missing
    emb_position = _embedding_position() if embedded else old.embedding_position

    ins = at[~known]  # where the new rows go (ascending, as the primary keys are)
    new_matrix = np.array([vectors[bytes(r[2])] for r in new], dtype=np.float32).reshape(len(new), old.matrix.shape[1])
    backing = old.rows
    matrix = old.matrix
    if new:
        grown = backing.extend(n, new_matrix) if backing is not None and int(ins[0]) == n else None
        if grown is None:
            backing = _Rows.of(np.insert(old.matrix, ins, new_matrix, axis=0))
            grown = backing.buffer[:backing.filled]
        matrix = grown

    def arr(a: np.ndarray, values) -> np.ndarray:
        return np.insert(a, ins, values) if new else a.copy()

    weight_q = arr(old.weight_q, [r[3] for r in new])
    label_seq = arr(old.label_seq, [r[6] for r in new])
    states = _spliced(old.states, ins, [r[4] or "" for r in new])
    chain_heads = _spliced(old.chain_heads, ins, [bytes(r[5]) for r in new])
    states = list(states) if states is old.states else states
    chain_heads = list(chain_heads) if chain_heads is old.chain_heads else chain_heads
    shift = lambda rows: rows + np.searchsorted(ins, rows, side="right")  # noqa: E731 - old row -> new row
    moved_rows = shift(at[known])
    for row, r in zip(moved_rows.tolist(), (r for r, k in zip(found, known.tolist(), strict=True) if k), strict=True):
        weight_q[row], label_seq[row] = r[3], r[6]
        states[row], chain_heads[row] = r[4] or "", bytes(r[5])
    new_rows = ins + np.arange(len(ins))
    changed = np.concatenate([moved_rows, new_rows]).astype(np.int64)

    masks = {}
    for key, mask in old.excluded_cache.items():
        if isinstance(key, frozenset):  # a projection's mask (the boosted rows are recomputed when asked)
            mask = arr(mask, [False] * len(new))
            mask[changed] = [states[row] not in key for row in changed.tolist()]
            masks[key] = mask
    preverified = None
    if old.preverified is not None:
        preverified = arr(old.preverified, [False] * len(new))
        preverified[changed] = False  # the worker's record vouches for the old state, not this one
    index = dataclasses.replace(
        old, log_position=position, log_head=heads[position], matrix=matrix, rows=backing,
        weights=(weight_q / 1000.0).astype(np.float32), pks=arr(old.pks, pks[~known]),
        external_ids=_spliced(old.external_ids, ins, [r[1] for r in new]),
        ledger_ids=_spliced(old.ledger_ids, ins, [f"{store.slug}/{r[1]}" for r in new]),
        states=states, weight_q=weight_q, chain_heads=chain_heads,
        content_sha256=_spliced(old.content_sha256, ins, [bytes(r[2]) for r in new]), label_seq=label_seq,
        embedding_position=emb_position, excluded_cache=masks, preverified=preverified,
        query_cache={}, query_cache_lock=threading.Lock(),
    )
    if index.ann is None or len(index.unindexed):
        # No complete graph: look for the worker's, as a rebuild would.
        index.ann, index.unindexed = None, np.empty(0, dtype=np.int64)
        if len(index) >= ann_min() and ann_module.available():
            ann_attach(store, index)
    elif new:
        if len(new) <= ANN_INLINE_ADD:
            index.ann.add(pks[~known], new_matrix)
        else:
            index.unindexed = new_rows.astype(np.int64)
    return index


def _preverified_attach(store: Store, index: StoreIndex) -> None:
    """Match the worker's verified-ahead record (if any, and authentic) against the index rows."""
    index.preverified_checked = time.monotonic()
    seen = _file_stamp(verification.preverified_path(store.pk))
    pre = verification.preverified_load(store)
    if pre is not None:
        # The mask first: a row adopted on it is reported "verified through" no later a position
        # than its record's.
        index.preverified = pre.mask(pks=index.pks, heads=index.chain_heads, contents=index.content_sha256,
                                     label_seq=index.label_seq,
                                     weight_q=index.weight_q, states=index.states)
        index.preverified_through = pre.log_position
    index.preverified_seen = seen


_PREVERIFIED_LOADING: set[int] = set()  # stores whose newer record is being matched in the background


def _preverified_attach_later(store: Store, index: StoreIndex) -> None:
    try:
        _preverified_attach(store, index)
    except Exception:  # noqa: BLE001 - the rows it covers are verified in the request meanwhile
        logger.exception("could not match the verified-ahead record of store %s", store.pk)
    finally:
        connection.close()  # this thread's own database connection
        with _INDEX_LOCK:
            _PREVERIFIED_LOADING.discard(store.pk)


def _ann_refresh(store: Store, index: StoreIndex) -> StoreIndex:
    """A store over RECALL_ANN_MIN whose index lacks a complete graph looks again every
    ``PREVERIFIED_RECHECK_S`` (the worker may have saved one, or a background reopen finished);
    a better one is installed as a new index object, so a recall in flight keeps a consistent
    (graph, unindexed rows) pair."""
    if index.ann is not None and not len(index.unindexed):
        return index
    if len(index) < ann_min() or not ann_module.available():
        return index
    if time.monotonic() - index.ann_checked < PREVERIFIED_RECHECK_S:
        return index
    index.ann_checked = time.monotonic()
    fresh = dataclasses.replace(index, ann=None, unindexed=np.empty(0, dtype=np.int64),
                                ann_checked=index.ann_checked)
    ann_attach(store, fresh)
    if fresh.ann is None or (index.ann is fresh.ann and len(fresh.unindexed) >= len(index.unindexed)):
        return index
    with _INDEX_LOCK:
        if _INDEXES.get(store.pk) is index:
            _INDEXES[store.pk] = fresh
    return fresh


def _file_stamp(path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _preverified_refresh(store: Store, index: StoreIndex) -> None:
    """A record the worker wrote after this index was built (the log need not move for it, e.g.
    right after an import) is picked up: its file is looked at every ``PREVERIFIED_RECHECK_S``
    while the index has rows it does not cover."""
    if index.preverified is not None and bool(index.preverified.all()):
        return
    if time.monotonic() - index.preverified_checked < PREVERIFIED_RECHECK_S:
        return
    if _file_stamp(verification.preverified_path(store.pk)) == index.preverified_seen:
        index.preverified_checked = time.monotonic()
        return
    if len(index) <= PREVERIFIED_INLINE_MAX:
        _preverified_attach(store, index)
        return
    # A large store: loading the record and matching every row takes about a second at 1M, so a
    # background thread does it and sets the mask when done; until then this index verifies in the
    # request the rows its current mask does not cover.
    index.preverified_checked = time.monotonic()
    with _INDEX_LOCK:
        if store.pk in _PREVERIFIED_LOADING:
            return
        _PREVERIFIED_LOADING.add(store.pk)
    threading.Thread(target=_preverified_attach_later, args=(store, index), daemon=True,
                     name="preverified-attach").start()


def ann_min() -> int:
    return int(getattr(settings, "RECALL_ANN_MIN", ANN_MIN_DEFAULT))


_ANNS: dict[str, ann_module.AnnIndex] = {}
_ANN_SAVED: dict[str, int] = {}  # rows in each graph's file as this process last saved or opened it
_ANN_MTIMES: dict[str, int] = {}  # the saved file's mtime when this process last opened it
_ANN_LOADING: set[str] = set()  # graphs being reopened in the background
_ANN_LOCK = threading.Lock()


def ann_path(store: Store, model: str) -> str:
    return os.path.join(str(settings.VAR_DIR), "ann", f"store-{store.pk}-{re.sub(r'[^A-Za-z0-9_.-]', '_', model)}.hnsw")


def ann_update(store: Store, index: StoreIndex) -> ann_module.AnnIndex:
    """The store's graph with every row of ``index`` in it: this process's, else the saved
    file's (if it matches the rows), else a new one; rows it lacks are added and the file saved."""
    path = ann_path(store, index.model)
    with _ANN_LOCK:
        ann = _ANNS.get(path)
        if ann is not None and not ann.matches(index.pks, index.matrix):
            ann = None  # primary keys reused by another database (a test rollback): start over
        if ann is None:
            ann = ann_module.AnnIndex.open(path, dim=index.matrix.shape[1], pks=index.pks, matrix=index.matrix)
            _ANN_SAVED[path] = len(ann) if ann is not None else -1
        if ann is None:
            ann = ann_module.AnnIndex(index.matrix.shape[1], capacity=len(index))
        t = time.perf_counter()
        added = ann.add(index.pks, index.matrix)
        if added or _ANN_SAVED.get(path) != len(ann):  # or rows added inline since it was saved or opened
            ann.save(path)
            _ANN_SAVED[path] = len(ann)
            logger.info("ANN graph of store %s: %d rows added in %.1f s (%d in all)",
                                             store.pk, added, time.perf_counter() - t, len(ann))
        _ANNS[path] = ann
    return ann


def ann_attach(store: Store, index: StoreIndex) -> None:
    """The request path's graph: the one a worker saved (reopened in the background when the file
    changed and the graph in memory lacks more rows than a request may add), grown
    here by at most ``ANN_INLINE_ADD`` rows; rows beyond that stay out of it (``index.unindexed``,
    re-scored exactly by recall) until the worker adds them. No graph yet, or one lacking more than
    ``ANN_UNINDEXED_MAX`` of the rows: none (brute force, exact). Never builds a large graph."""
    path = ann_path(store, index.model)
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        mtime = None
    with _ANN_LOCK:
        ann, seen = _ANNS.get(path), _ANN_MTIMES.get(path)
        if ann is not None and not ann.matches(index.pks, index.matrix):
            ann = None
        if mtime is not None and ann is None:  # this process has none: open the worker's (once per process)
            ann = ann_module.AnnIndex.open(path, dim=index.matrix.shape[1], pks=index.pks, matrix=index.matrix)
            _ANN_MTIMES[path] = mtime
            _ANN_SAVED[path] = len(ann) if ann is not None else -1
        elif (mtime is not None and seen != mtime and len(ann) < len(index) and path not in _ANN_LOADING
              and len(ann.missing(index.pks)) > ANN_INLINE_ADD):
            # The worker saved a larger graph: reopen it in the background (seconds at 1M); until
            # then this request uses the graph it has and scores the rows it lacks exactly.
            _ANN_LOADING.add(path)
            threading.Thread(target=_ann_reopen, args=(path, mtime, index.matrix.shape[1], index.pks, index.matrix),
                             daemon=True, name="ann-reopen").start()
        if ann is None:
            return
        _ANNS[path] = ann
    missing = ann.missing(index.pks)
    if 0 < len(missing) <= ANN_INLINE_ADD:
        ann.add(index.pks, index.matrix)
        missing = missing[:0]
    if len(missing) > ANN_UNINDEXED_MAX * len(index):
        return  # mostly unindexed: brute force until the worker catches up
    index.ann = ann
    index.unindexed = missing.astype(np.int64)


def _ann_reopen(path: str, mtime: int, dim: int, pks: np.ndarray, matrix: np.ndarray) -> None:
    try:
        opened = ann_module.AnnIndex.open(path, dim=dim, pks=pks, matrix=matrix)
    except Exception:  # noqa: BLE001 - a background reload that fails leaves the current graph in use
        logger.exception("could not reopen the ANN graph %s", path)
        opened = None
    with _ANN_LOCK:
        if opened is not None:
            _ANNS[path] = opened
            _ANN_SAVED[path] = len(opened)
        _ANN_MTIMES[path] = mtime
        _ANN_LOADING.discard(path)


def prepare_wanted(index: StoreIndex) -> bool:
    """Whether this index calls for ``recall_prepare``: a store over RECALL_ANN_MIN without a
    complete graph, or at least ``PREPARE_MIN`` rows not verified ahead."""
    if len(index) >= ann_min() and ann_module.available() and (index.ann is None or len(index.unindexed)):
        return True
    unverified = len(index) if index.preverified is None else int(len(index) - index.preverified.sum())
    return unverified >= PREPARE_MIN


_PREPARE_SENT: dict[int, float] = {}


def _prepare_maybe(store: Store, index: StoreIndex) -> None:
    """Ask a worker for ``recall_prepare`` when the index calls for it, at most once per
    ``PREPARE_INTERVAL_S`` per store and process."""
    if not prepare_wanted(index):
        return
    now = time.monotonic()
    with _INDEX_LOCK:
        last = _PREPARE_SENT.get(store.pk)
        if last is not None and now - last < PREPARE_INTERVAL_S:
            return
        _PREPARE_SENT[store.pk] = now
    try:
        dispatch.recall_prepare(store.pk)
    except Exception:  # noqa: BLE001 - a broker outage must not fail a recall; it verifies inline
        logger.exception("could not queue recall_prepare for store %s", store.pk)


def store_prepare(store: Store) -> dict:
    """A worker's turn (``ledger.tasks.recall_prepare_task``): grow and save the store's ANN graph
    when it has at least RECALL_ANN_MIN recallable memories, and verify ahead of recall the
    memories whose state the saved record does not cover. The worker keeps its index of the store
    between runs and brings it forward (``_worker_index``), so a run after a few writes reads those
    memories rather than the whole store; the cost is that index held in the worker's memory
    between runs (the matrix: ~1.5 GB at 1M). Returns what it did and how long it took."""
    embedder = embedder_for_store(store)
    position = log_position(store.organization_id)  # before the rows are read: the record claims no more
    t0 = time.perf_counter()
    ann_rows, rows, how = 0, None, None
    signed = Memory.objects.filter(store=store, chain_head__isnull=False).count()
    if signed >= ann_min() and ann_module.available():  # the graph is the only reason to load the matrix here
        index, how = _worker_index(store, embedder, position)
        ann_rows = len(index.ann) if index.ann is not None else 0
        if not index.missing:  # every signed memory is a row: their live state as the index read it
            rows = list(zip(index.pks.tolist(), index.chain_heads, index.label_seq.tolist(), index.weight_q.tolist(),
                            index.states, index.content_sha256, strict=True))
    t1 = time.perf_counter()
    checked = verification.store_preverify(store, log_position=position, rows=rows)
    return {"store": store.pk, "memories": signed, "ann_rows": ann_rows, "index": how,
            "index_seconds": round(t1 - t0, 2), "verify_seconds": round(time.perf_counter() - t1, 2), **checked}


# The worker's own index of each store (``store_prepare``), kept between its runs and brought
# forward like the request path's, so a run after a few writes reads those memories, not the store.
_WORKER_INDEXES: dict[int, StoreIndex] = {}


def _worker_index(store: Store, embedder: TextEmbedder, position: int) -> tuple[StoreIndex, str]:
    """The worker's index at log ``position`` with its ANN graph complete and saved, and how it
    was had: ``kept`` (nothing moved), ``patched`` (``_index_patch``) or ``built``."""
    old = _WORKER_INDEXES.get(store.pk)
    index, how = None, "built"
    if old is not None and old.model == embedder.model_name and not old.missing and old.log_head is not None:
        if position == old.log_position:
            if _leaf_hashes(store.organization_id, [position]).get(position) == old.log_head:
                index, how = old, "kept"
        else:
            index, how = _index_patch(store, old, embedder, position), "patched"
    if index is None:
        index, how = _build_index(store, embedder, position, worker=True), "built"
    else:  # every row in the graph (a patch adds a few inline, leaves more as unindexed), and saved
        index.ann, index.unindexed = ann_update(store, index), np.empty(0, dtype=np.int64)
    with _INDEX_LOCK:
        _WORKER_INDEXES[store.pk] = index
    return index, how


def ann_forget() -> None:
    """Drop this process's graphs (tests; the saved files stay)."""
    with _ANN_LOCK:
        _ANNS.clear()
        _ANN_MTIMES.clear()
        _ANN_SAVED.clear()
    with _INDEX_LOCK:
        _PREPARE_SENT.clear()


def store_index(store: Store, *, embedder: TextEmbedder | None = None, position: int | None = None) -> StoreIndex:
    """The current index of a store: cached, brought forward when the ledger moved, rebuilt when it
    cannot be (``_index_patch``) or when the embedding cache moved under rows that lacked a vector.
    ``position``: the tenant log's last leaf index, when the caller has just read it."""
    embedder = embedder or embedder_for_store(store)
    position = log_position(store.organization_id) if position is None else position
    index = _INDEXES.get(store.pk)
    fresh = index is not None and index.log_position == position and index.model == embedder.model_name
    if fresh and (not index.missing or _embedding_position() == index.embedding_position):
        _preverified_refresh(store, index)
        return _ann_refresh(store, index)
    with _INDEX_LOCK:
        building = _BUILDING.setdefault(store.pk, threading.Lock())
    # One thread brings a store's index forward (or rebuilds it); the others wait for it and take
    # its result, rather than each copying a large matrix at once.
    with building:
        current = _INDEXES.get(store.pk)
        if (current is not None and current is not index and current.model == embedder.model_name
                and current.log_position >= position
                and (not current.missing or _embedding_position() == current.embedding_position)):
            return current
        patched = _index_patch(store, index, embedder, position) if index is not None else None
        if patched is not None:
            _preverified_refresh(store, patched)  # as a rebuild would attach a newer record
        index = patched or _build_index(store, embedder, position)
        with _INDEX_LOCK:
            _INDEXES[store.pk] = index
    _prepare_maybe(store, index)
    return index
