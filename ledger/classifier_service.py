"""The ingest-time classifier wired into the ledger (DESIGN section 3, "Ingest-time classifier").

``ledger.classifier`` decides (pure, deterministic, versioned); this module feeds it the
store's passages and records each flag as a ``ClassifierFinding``; the housekeeper turns a finding
into a signed ``poison_likely`` label whose actor is ``ingest-classifier@<version>`` and whose
reason/evidence are the classifier's own, after re-checking it (``ledger.decisions``). The label
task carries the finding's id only, never a label.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import math
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path

import numpy as np
from django.conf import settings

from ledger import dispatch
from ledger.classifier import ACTOR, DEFAULT_PARAMS, Flag, Known, Params, classify
from ledger.classifier import learned as learned_detector
from ledger.classifier.instruction import instruction_markers
from ledger.classifier.learned import cue_features
from ledger.classifier.text import passage_facts
from ledger.dense import DenseIndex
from ledger.embedding_store import cached_vectors, embedder_for_store, embeddings_compute
from ledger.embeddings import HashingEmbedder
from ledger.models import ClassifierFinding, EpistemicLabel, Memory, Store
from ledger.services import decision_labels_sign

logger = logging.getLogger(__name__)


def signable_evidence(evidence: dict) -> dict:
    """Signed bodies hold no floats (DESIGN section 3): a float figure ``x`` becomes the integer
    ``x_milli`` = round(x * 1000); everything else is kept as it is."""
    out: dict = {}
    for key, value in evidence.items():
        if isinstance(value, float):
            out[f"{key}_milli"] = round(value * 1000)
        elif isinstance(value, dict):
            out[key] = signable_evidence(value)
        else:
            out[key] = value
    return out


# The import's pass (``memory_ids`` or ``pk_range`` given) is bounded independent of the store
# size: a store of at most WHOLE_STORE_MAX memories is classified whole (one corpus of that size);
# a larger one in windows of the import, each window with its neighbourhood in the store (the
# passages sharing informative words with it, the nearest ones by embedding) and a fixed
# background sample of the store (so idf weights keep the store's scale), at most about
# WINDOW_BUDGET + BACKGROUND passages per classifier call.
WHOLE_STORE_MAX = 10_000
WINDOW_BUDGET = 8_000
BACKGROUND = 2_000
BLOCK = 4_096  # import memories whose neighbours are looked up together
PAGE = 2_000  # store rows read per query while streaming
DENSE_PAGE = 1_024  # store vectors scored per step against a block (its scores: BLOCK x DENSE_PAGE floats)
DENSE_NEIGHBOURS = 16  # as ledger.dense.DenseIndex keeps per passage
DENSE_FLOOR = 0.5


def ingest_flags(*, store: Store, memory_ids: Sequence[int] | None = None,
                 pk_range: Sequence[int] | None = None) -> list[tuple[int, Flag]]:
    """Run the classifier for a batch of the store; return (memory pk, flag) for its memories.

    The batch is ``memory_ids``, or (a streamed import) the store's memories whose primary key
    is in ``pk_range`` = (first, last); with neither, the whole store is the batch and is read
    whole (the benchmarks' pass, unbounded). For a batch, the pattern is still sought across the
    store, so that a pattern split across two imports is still seen; only the batch gets flags.
    """
    if memory_ids is None and pk_range is None:
        return _whole_store_flags(store, None)
    if memory_ids is not None and not memory_ids:
        return []
    if Memory.objects.filter(store=store).count() <= WHOLE_STORE_MAX:
        wanted = set(memory_ids) if memory_ids is not None else set(
            Memory.objects.filter(store=store, pk__gte=pk_range[0], pk__lte=pk_range[1]).values_list("pk", flat=True))
        flags = _whole_store_flags(store, wanted)
    else:
        flags = _neighbourhood_flags(store, memory_ids=memory_ids, pk_range=pk_range)
    ingest_prepared_drop(store_id=store.pk)  # used (or, for the whole-store pass, not needed)
    return flags


def _whole_store_flags(store: Store, wanted: set[int] | None) -> list[tuple[int, Flag]]:
    rows = list(Memory.objects.filter(store=store).order_by("external_id").values_list(
        "pk", "external_id", "text", "content_sha256"))
    pk_of = {ext: pk for pk, ext, _, _ in rows}
    only = None if wanted is None else [ext for pk, ext, _, _ in rows if pk in wanted]
    flags = classify([(ext, text) for _, ext, text, _ in rows], only=only, dense=store_dense(store, rows))
    return [(pk_of[f.memory_id], f) for f in flags]


def store_dense(store: Store, rows: Sequence[tuple]) -> DenseIndex | None:
    """The store's embedding neighbourhoods from the vectors recall uses (embedding the few
    texts not embedded yet); None for an empty store, or when the store's embedder is the
    hashing test double (the classifier's embedding thresholds assume a sentence model)."""
    embedder = embedder_for_store(store)
    if not rows or isinstance(embedder, HashingEmbedder):
        return None
    embeddings_compute(memories=Memory.objects.filter(store=store).select_related("store"), embedder=embedder)
    vectors = cached_vectors(model=embedder.model_name, hashes=(bytes(h) for *_, h in rows))
    matrix = np.stack([vectors[bytes(h)] for *_, h in rows])
    return DenseIndex([ext for _, ext, _, _ in rows], matrix, model=embedder.model_name)


# --------------------------------------------------------------------------- the bounded pass


def _store_pages(store: Store, fields: tuple[str, ...], *, lo: int | None = None,
                 hi: int | None = None, size: int | None = None) -> Iterator[list[tuple]]:
    """The store's memories in primary key order, ``size`` rows a query (keyset pagination:
    nothing but one page is held). The first field must be ``pk``."""
    size = size or PAGE
    qs = Memory.objects.filter(store=store)
    if hi is not None:
        qs = qs.filter(pk__lte=hi)
    after = None if lo is None else lo - 1
    while True:
        page_qs = qs if after is None else qs.filter(pk__gt=after)
        page = list(page_qs.order_by("pk").values_list(*fields)[:size])
        if not page:
            return
        yield page
        after = page[-1][0]


def text_facts(text: str) -> tuple[str, str, str, str, str, str]:
    """What the bounded pass's step 1 keeps of one text, as it stores it: the classifier's step-1
    facts (``passage_facts``: content tokens, proper nouns and title tokens, each sorted and
    space-joined, and the first proper noun), the instruction rule's markers (JSON) and the
    learned detector's cues (``cue_features``, one "0"/"1" each). A function of the text alone."""
    tokens, proper, first, title = passage_facts(text)
    cues = "".join("1" if c else "0" for c in cue_features(text))
    return (" ".join(sorted(tokens)), " ".join(sorted(proper)), first, " ".join(sorted(title)),
            json.dumps(instruction_markers(text)), cues)


def _cues_of(prepared: str) -> tuple[float, ...]:
    return tuple(1.0 if c == "1" else 0.0 for c in prepared)


@cache
def _classifier_code() -> str:
    """A digest of the classifier's source and model file: prepared facts from other code are
    never read (a rule changed without a version bump must not be served old markers)."""
    h = hashlib.sha256(ACTOR.encode())
    folder = Path(learned_detector.__file__).parent
    for path in sorted([*folder.glob("*.py"), learned_detector.MODEL_FILE]):
        if path.exists():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:16]


def _prepared_path(store_id: int) -> Path:
    return Path(settings.IMPORT_STAGING_DIR) / f"classifier-store-{store_id}-{_classifier_code()}.sqlite3"


class _Prepared:
    """``text_facts`` computed ahead of the bounded pass, by content hash, in a SQLite file beside
    the staged uploads (owner-only): an import computes them for each chunk while the encoder
    embeds it (``ingest_prepare``, on the core the encoder leaves idle), the pass's step 1 reads
    them instead of computing them, and the pass removes the file when it has finished. It is a
    cache of pure functions of the text: a missing, partial or unreadable file only means that
    step 1 computes what it lacks (a resumed job, or a pass on another machine than the import)."""

    def __init__(self, path: Path, *, create: bool) -> None:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        self.con = sqlite3.connect(f"{path.resolve().as_uri()}?mode={'rwc' if create else 'ro'}", uri=True,
                                   timeout=30, check_same_thread=False)
        if create:
            self.con.execute("PRAGMA synchronous=OFF")
            self.con.execute("CREATE TABLE IF NOT EXISTS facts (sha BLOB PRIMARY KEY, tokens TEXT NOT NULL, "
                             "proper TEXT NOT NULL, first TEXT NOT NULL, title TEXT NOT NULL, markers TEXT NOT NULL, "
                             "cues TEXT NOT NULL) WITHOUT ROWID")

    @classmethod
    def open(cls, store_id: int) -> _Prepared | None:
        path = _prepared_path(store_id)
        try:
            return cls(path, create=False) if path.exists() else None
        except sqlite3.Error:
            return None

    def get(self, shas: Sequence[bytes]) -> dict[bytes, tuple]:
        found: dict[bytes, tuple] = {}
        try:
            for i in range(0, len(shas), 500):
                chunk = list(shas[i:i + 500])
                for sha, *rest in self.con.execute(
                        "SELECT sha, tokens, proper, first, title, markers, cues FROM facts WHERE sha IN (%s)"
                        % ",".join("?" * len(chunk)), chunk):
                    found[bytes(sha)] = tuple(rest)
        except sqlite3.Error as exc:  # a cache: step 1 computes what it cannot read
            logger.warning("prepared classifier facts unreadable, computing them: %r", exc)
            return {}
        return found

    def close(self) -> None:
        self.con.close()


def ingest_prepare(*, store_id: int, texts: Sequence[tuple[bytes, str]]) -> int:
    """Compute the bounded pass's per-text step 1 (``text_facts``) for these ``(content hash,
    text)`` pairs ahead of the pass and keep it for the pass (``_Prepared``); return how many
    were computed. Standard library and SQLite only, no ORM, so an import runs it on a thread
    beside the encoder (which releases the GIL). Any failure is logged and leaves the pass to
    compute the facts itself."""
    try:
        prepared = _Prepared(_prepared_path(store_id), create=True)
        try:
            have = set(prepared.get([sha for sha, _ in texts]))
            rows = [(sha, *text_facts(text or "")) for sha, text in dict(texts).items() if sha not in have]
            with prepared.con:
                prepared.con.executemany("INSERT OR IGNORE INTO facts VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            return len(rows)
        finally:
            prepared.close()
    except Exception:  # noqa: BLE001 - a cache on a helper thread: the pass computes what is missing
        logger.exception("could not prepare the classifier's facts for store %s", store_id)
        return 0


def ingest_prepared_drop(*, store_id: int) -> None:
    """Remove the facts prepared for a store's pass (the pass has used them)."""
    _prepared_path(store_id).unlink(missing_ok=True)


def ingest_prepare_wanted(*, store_id: int, total: int = 0) -> bool:
    """Whether an import of ``total`` memories into this store will be classified by the bounded
    pass (the store past WHOLE_STORE_MAX), so that its facts are worth preparing."""
    return Memory.objects.filter(store_id=store_id).count() + total > WHOLE_STORE_MAX


class _LexicalIndex:
    """The store's content tokens (the classifier's own ``passage_facts``) as postings in a
    temporary SQLite file on disk, so that a passage's candidates (store passages sharing
    informative tokens with it, the classifier's step 3) are found without holding the store in
    memory. The same file keeps each memory's row (external id, text, content hash), what the
    classifier's step 1 made of its text and the learned detector's score of its vector: every
    window reads its passages from here instead of the database, and none is tokenised or
    scored again however many windows it joins (the flags are the same: ``ledger.classifier.Known``)."""

    def __init__(self, directory: str, *, params: Params) -> None:
        self.params = params
        self.con = sqlite3.connect(os.path.join(directory, "postings.sqlite3"))
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=FILE", "cache_size=-8000"):
            self.con.execute(f"PRAGMA {pragma}")
        self.con.create_function("ln", 1, math.log, deterministic=True)
        self.con.execute("CREATE TABLE post (token TEXT NOT NULL, pk INTEGER NOT NULL)")
        self.con.execute("CREATE TABLE row (pk INTEGER PRIMARY KEY, ext TEXT NOT NULL, text TEXT NOT NULL, "
                         "sha BLOB NOT NULL, tokens TEXT, proper TEXT, first TEXT, title TEXT, score REAL, vec BLOB, "
                         "markers TEXT)")
        self.n = 0
        self.max_df = params.max_df_floor

    def add(self, rows: Iterable[tuple[int, str, str, bytes]], scores: dict[int, float] | None = None,
            vectors: dict[int, np.ndarray] | None = None, prepared: dict[bytes, tuple] | None = None) -> None:
        """Index ``(pk, external_id, text, content_sha256)`` store rows; ``scores``: the learned
        detector's score of some of them, ``vectors`` their cached vectors (by pk); ``prepared``:
        ``text_facts`` of some of them computed ahead (by content hash; the rest are computed here)."""
        pairs = []
        facts = []
        scores = scores or {}
        vectors = vectors or {}
        prepared = prepared or {}
        for pk, ext, text, sha in rows:
            found = prepared.get(bytes(sha))
            tokens, proper, first, title, markers, _ = found if found is not None else text_facts(text or "")
            pairs.extend((t, pk) for t in tokens.split())
            facts.append((pk, ext, text or "", bytes(sha), tokens, proper, first, title, scores.get(pk),
                          None if pk not in vectors else np.asarray(vectors[pk], dtype="<f4").tobytes(), markers))
            self.n += 1
        self.con.executemany("INSERT INTO post VALUES (?, ?)", pairs)
        self.con.executemany("INSERT INTO row VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", facts)

    def rows(self, pks: Sequence[int]) -> Iterator[tuple]:
        """The stored ``(pk, external_id, text, content_sha256, facts, score, vector, markers)``
        of those of ``pks`` that were indexed (facts as ``ledger.classifier.text.passage_facts``
        gives them, markers as ``instruction_markers``; score and vector None where there is none)."""
        for i in range(0, len(pks), 500):
            chunk = pks[i:i + 500]
            for pk, ext, text, sha, tokens, proper, first, title, score, vec, marks in self.con.execute(
                    "SELECT pk, ext, text, sha, tokens, proper, first, title, score, vec, markers FROM row "
                    "WHERE pk IN (%s)"
                    % ",".join("?" * len(chunk)), chunk):
                yield (pk, ext, text, sha, (frozenset(tokens.split()), frozenset(proper.split()), first,
                                            frozenset(title.split())), score,
                       None if vec is None else np.frombuffer(vec, dtype="<f4"),
                       [tuple(m) for m in json.loads(marks)])

    def finish(self) -> None:
        """Index the postings and note each token's document frequency and idf in the store;
        informative tokens are those of the classifier's rule (2 <= df <= its cap at this size)."""
        self.max_df = max(self.params.max_df_floor, int(self.n * self.params.max_df_share))
        self.con.executescript(
            "CREATE TABLE df AS SELECT token, COUNT(*) AS n FROM post GROUP BY token HAVING n >= 2 AND n <= %d;"
            "CREATE UNIQUE INDEX df_token ON df (token);"
            "CREATE TABLE informative AS SELECT post.token AS token, post.pk AS pk FROM post JOIN df USING (token);"
            "DROP TABLE post;"
            "CREATE INDEX informative_pk ON informative (pk, token);"
            "CREATE INDEX informative_token ON informative (token, pk);"
            "CREATE TEMP TABLE win (pk INTEGER PRIMARY KEY);" % self.max_df)
        self.con.commit()

    def neighbours(self, pks: Sequence[int], k: int) -> dict[int, list[int]]:
        """For each of ``pks``, up to ``k`` store passages sharing at least ``min_shared``
        informative tokens with it, most shared idf weight first (ties by primary key)."""
        con = self.con
        con.execute("DELETE FROM win")
        con.executemany("INSERT INTO win VALUES (?)", ((pk,) for pk in pks))
        best: dict[int, list[tuple[float, int]]] = {}
        rows = con.execute(
            "SELECT a.pk, b.pk, SUM(ln(? * 1.0 / d.n)) FROM win JOIN informative a ON a.pk = win.pk "
            "JOIN df d ON d.token = a.token JOIN informative b ON b.token = a.token AND b.pk <> a.pk "
            "GROUP BY a.pk, b.pk HAVING COUNT(*) >= ?", (self.n, self.params.min_shared))
        for a, b, weight in rows:
            heap = best.setdefault(a, [])
            item = (round(weight, 9), -b)
            if len(heap) < k:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
        return {a: [-nb for _, nb in sorted(heap, reverse=True)] for a, heap in best.items()}

    def close(self) -> None:
        self.con.close()


class _VectorFile:
    """The store's vectors (float32) and their primary keys, in two temporary files on disk:
    written once, a page at a time, by the streamed read of step 1, then read back DENSE_PAGE
    rows at a time for every block (the database is read once, not once per block; memory is
    one page whatever the store's size)."""

    def __init__(self, directory: str) -> None:
        self._vec_path = os.path.join(directory, "vectors.f32")
        self._pk_path = os.path.join(directory, "pks.i64")
        self._vec = open(self._vec_path, "wb")  # noqa: SIM115 - closed by finish()
        self._pk = open(self._pk_path, "wb")  # noqa: SIM115 - closed by finish()
        self.dim = 0
        self.n = 0

    def add_page(self, page: Sequence[tuple], embedder) -> dict[int, np.ndarray]:
        """Write one page of ``(pk, ..., content_sha256)`` store rows: the vectors recall uses,
        embedding (with ``embedder``) the few texts not embedded yet. Returns them by pk."""
        embeddings_compute(memories=Memory.objects.filter(pk__in=[r[0] for r in page]).select_related("store"),
                           embedder=embedder)
        vectors = cached_vectors(model=embedder.model_name, hashes=(r[-1] for r in page))
        kept = [(r[0], vectors[bytes(r[-1])]) for r in page if bytes(r[-1]) in vectors]
        if not kept:
            return {}
        matrix = np.ascontiguousarray(np.stack([v for _, v in kept]), dtype="<f4")
        if self.dim and matrix.shape[1] != self.dim:
            raise ValueError(f"vector width {matrix.shape[1]} differs from the store's {self.dim}")
        self.dim = matrix.shape[1]
        self._vec.write(matrix.tobytes())
        self._pk.write(np.asarray([pk for pk, _ in kept], dtype="<i8").tobytes())
        self.n += len(kept)
        return dict(kept)

    def finish(self) -> None:
        self._vec.close()
        self._pk.close()

    def pages(self, size: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(primary keys, vectors) ``size`` (DENSE_PAGE) rows at a time, in the order written."""
        size = size or DENSE_PAGE
        if not self.n:
            return
        with open(self._vec_path, "rb") as vec, open(self._pk_path, "rb") as pk:
            while True:
                pks = np.fromfile(pk, dtype="<i8", count=size)
                if not len(pks):
                    return
                yield pks, np.fromfile(vec, dtype="<f4", count=len(pks) * self.dim).reshape(len(pks), self.dim)


def dense_neighbours(*, pks: Sequence[int], model: str, store_vectors: _VectorFile, k: int = DENSE_NEIGHBOURS,
                     floor: float = DENSE_FLOOR) -> dict[int, list[tuple[int, float]]]:
    """For each of ``pks``, its ``k`` nearest store memories by the cosine of their cached
    vectors (at least ``floor``; best first, ties by primary key), found by streaming the
    store's vectors (``store_vectors``, on disk) a page at a time against the block's (exact;
    memory is the block's and a page's, whatever the store's size). Memories without a vector
    are skipped."""
    hashes = dict(Memory.objects.filter(pk__in=list(pks)).values_list("pk", "content_sha256"))
    vectors = cached_vectors(model=model, hashes=hashes.values())
    rows = [pk for pk in pks if bytes(hashes[pk]) in vectors]
    if not rows:
        return {}
    query = np.stack([vectors[bytes(hashes[pk])] for pk in rows]).astype(np.float32)
    best_sims = np.full((len(rows), k), -np.inf, dtype=np.float32)
    best_pks = np.full((len(rows), k), np.iinfo(np.int64).max, dtype=np.int64)
    own = np.asarray(rows, dtype=np.int64)
    for page_pks, page_vectors in store_vectors.pages():
        sims = query @ page_vectors.T
        sims[own[:, None] == page_pks[None, :]] = -np.inf  # a passage is not its own neighbour
        top_sims, top_pks = _page_top(sims, page_pks, k)
        sims = np.concatenate([best_sims, top_sims], axis=1)
        cand = np.concatenate([best_pks, top_pks], axis=1)
        order = np.lexsort((cand, -sims), axis=1)[:, :k]  # best first, ties by primary key
        best_sims = np.take_along_axis(sims, order, axis=1)
        best_pks = np.take_along_axis(cand, order, axis=1)
    out: dict[int, list[tuple[int, float]]] = {}
    for i, pk in enumerate(rows):
        out[pk] = [(int(n), float(s)) for n, s in zip(best_pks[i], best_sims[i], strict=True)
                   if np.isfinite(s) and s >= floor]
    return out


def _page_top(sims: np.ndarray, page_pks: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` best columns of one page (by cosine, ties by primary key): a partition,
    not a sort of the page; a row whose k-th value is tied outside the partition is redone
    exactly, so the result never depends on how the partition broke the tie."""
    if sims.shape[1] <= k:
        return sims, np.broadcast_to(page_pks, sims.shape)
    part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(sims, part, axis=1)
    kth = top.min(axis=1, keepdims=True)
    for r in np.flatnonzero((sims == kth).sum(axis=1) > (top == kth).sum(axis=1)):
        part[r] = np.lexsort((page_pks, -sims[r]))[:k]
        top[r] = sims[r, part[r]]
    return top, page_pks[part]


def _neighbourhood_flags(store: Store, *, memory_ids: Sequence[int] | None,
                         pk_range: Sequence[int] | None, params: Params = DEFAULT_PARAMS) -> list[tuple[int, Flag]]:
    """The bounded pass (module constants above):

    1. One streamed read of the store (PAGE rows a query) writes its content tokens to the
       lexical index on disk, picks BACKGROUND memories evenly spaced by key (so idf weights in
       a window keep the store's scale) and, with a sentence model, embeds what lacks a vector
       and writes every vector to a file on disk (``_VectorFile``). A text's step-1 facts
       (``text_facts``) are read from those the import prepared while it was encoding
       (``_Prepared``) and computed for the rest.
    2. A BLOCK of the batch at a time: each memory's lexical candidates (step 3 of
       ``ledger.classifier``: sharing ``min_shared`` informative tokens, at most
       ``max_neighbours``) and, with a sentence model, its DENSE_NEIGHBOURS nearest by cosine
       (exact, the file read back DENSE_PAGE vectors at a time: the database is read once).
    3. Each memory joins the current window with its neighbours; a window of WINDOW_BUDGET
       passages is classified with the background (``only``: the batch's memories in it).
    4. A memory keeps its first flag; the result is sorted by primary key.
    """
    embedder = embedder_for_store(store)
    dense = not isinstance(embedder, HashingEmbedder)
    if memory_ids is not None:
        batch_ids = sorted(set(memory_ids))
        in_batch: Callable[[int], bool] = set(batch_ids).__contains__
        blocks: Iterator[list[int]] = (batch_ids[i:i + BLOCK] for i in range(0, len(batch_ids), BLOCK))
    else:
        lo, hi = pk_range[0], pk_range[1]

        def in_batch(pk: int) -> bool:
            return lo <= pk <= hi

        blocks = ([pk for (pk,) in page] for page in _store_pages(store, ("pk",), lo=lo, hi=hi, size=BLOCK))
    total = Memory.objects.filter(store=store).count()
    stride = max(1, total // BACKGROUND)
    background: list[int] = []
    flagged: dict[int, Flag] = {}
    with tempfile.TemporaryDirectory(prefix="memaudit-classify-") as tmp:
        lexical = _LexicalIndex(tmp, params=params)
        store_vectors = _VectorFile(tmp) if dense else None
        prepared = _Prepared.open(store.pk)
        try:
            seen = 0
            detector = _detector_for(embedder) if dense else None
            for page in _store_pages(store, ("pk", "external_id", "text", "content_sha256")):
                scores, vectors = {}, {}
                found = {} if prepared is None else prepared.get([bytes(r[3]) for r in page])
                if store_vectors is not None:
                    vectors = store_vectors.add_page(page, embedder)
                    if detector is not None:  # the score the detector gives this vector in every window
                        scores = {pk: _score(detector, vectors[pk], text, found.get(bytes(sha)))
                                  for pk, _, text, sha in page if pk in vectors}
                lexical.add(page, scores, vectors, found)
                for pk, *_ in page:
                    if seen % stride == 0 and len(background) < BACKGROUND:
                        background.append(pk)
                    seen += 1
            if store_vectors is not None:
                store_vectors.finish()  # written: from here on it is read a page at a time
            lexical.finish()
            window: dict[int, None] = {}  # insertion-ordered set
            for block in blocks:
                near = lexical.neighbours(block, params.max_neighbours)
                close = ({} if store_vectors is None else
                         dense_neighbours(pks=block, model=embedder.model_name, store_vectors=store_vectors))
                for pk in block:
                    window[pk] = None
                    window.update(dict.fromkeys(near.get(pk, ())))
                    window.update(dict.fromkeys(n for n, _ in close.get(pk, ())))
                    if len(window) >= WINDOW_BUDGET:
                        _window_classify(lexical, window, background, in_batch, flagged, embedder if dense else None)
                        window = {}
            if window:
                _window_classify(lexical, window, background, in_batch, flagged, embedder if dense else None)
        finally:
            lexical.close()
            if store_vectors is not None:
                store_vectors.finish()
            if prepared is not None:
                prepared.close()
    return sorted(flagged.items())


def _score(detector, vector: np.ndarray, text: str, prepared: tuple | None) -> float:
    """The learned detector's score of a vector and its text (with the text's cues when prepared)."""
    v = np.asarray(vector, dtype=np.float32).tolist()
    return detector.score(v, text) if prepared is None else detector.score_cues(v, _cues_of(prepared[5]))


def _detector_for(embedder):
    """The learned instruction detector's model when it scores this embedder's vectors, else None."""
    model = learned_detector.load_model()
    return model if model is not None and model.model == embedder.model_name else None


def _window_classify(lexical: _LexicalIndex, window: dict[int, None], background: Sequence[int],
                     in_batch: Callable[[int], bool], flagged: dict[int, Flag], embedder) -> None:
    """Classify one window (with the background sample); record each batch memory's first flag.
    Its rows, their step-1 facts and detector scores come from the pass's own file (step 1)."""
    pks = list(dict.fromkeys([*window, *background]))
    rows: list[tuple] = []
    facts: dict[str, tuple] = {}
    scores: dict[str, float] = {}
    vector_of: dict[int, np.ndarray] = {}
    markers: dict[str, list] = {}
    for pk, ext, text, sha, fact, score, vec, marks in lexical.rows(pks):
        markers[text] = marks
        rows.append((pk, ext, text, sha))
        facts[ext] = fact
        if score is not None:
            scores[text] = score
        if vec is not None:
            vector_of[pk] = vec
    missing = sorted(set(pks).difference(r[0] for r in rows))  # not in the store when step 1 read it
    for i in range(0, len(missing), 500):  # stay under SQLite's bound-parameter limit
        more = list(Memory.objects.filter(pk__in=missing[i:i + 500]).values_list(
            "pk", "external_id", "text", "content_sha256"))
        rows += more
        if embedder is not None:
            found = cached_vectors(model=embedder.model_name, hashes=(h for *_, h in more))
            vector_of.update((r[0], found[bytes(r[3])]) for r in more if bytes(r[3]) in found)
    rows.sort(key=lambda r: r[1])
    pk_of = {ext: pk for pk, ext, _, _ in rows}
    dense = None
    if embedder is not None:  # the vectors recall uses, as step 1 read them (or the database, for the missing)
        rows = [r for r in rows if r[0] in vector_of]
        if rows:
            dense = DenseIndex([r[1] for r in rows], np.stack([vector_of[r[0]] for r in rows]),
                               model=embedder.model_name)
    only = [ext for pk, ext, _, _ in rows if in_batch(pk) and pk not in flagged]
    if not only:
        return
    known = Known(facts=facts, scores=scores, markers=markers)
    for f in classify([(ext, text) for _, ext, text, _ in rows], only=only, dense=dense, known=known):
        flagged.setdefault(pk_of[f.memory_id], f)


def ingest_classify(*, store: Store, memory_ids: Sequence[int] | None = None, pk_range: Sequence[int] | None = None,
                    inline: bool = False) -> int:
    """Flag the batch: record one ``ClassifierFinding`` per flag and have the housekeeper sign
    a ``poison_likely`` label from each (it re-checks the finding; ``ledger.decisions``).

    Memories already labelled ``poison_likely`` keep their label; a finding is recorded once per
    memory and classifier version, and its label's idempotency key makes a retried task
    harmless. ``inline`` signs in this process (the caller holds the housekeeper role).
    Returns the number of flags.
    """
    flagged = ingest_flags(store=store, memory_ids=memory_ids, pk_range=pk_range)
    already = set(Memory.objects.filter(pk__in=[pk for pk, _ in flagged],
                                        epistemic_state=EpistemicLabel.Label.LIKELY).values_list("pk", flat=True))
    hashes = dict(Memory.objects.filter(pk__in=[pk for pk, _ in flagged]).values_list("pk", "content_sha256"))
    for pk, flag in flagged:
        if pk in already:
            continue
        finding, _ = ClassifierFinding.objects.get_or_create(
            memory_id=pk, classifier=ACTOR,
            defaults={"organization_id": store.organization_id, "reason": flag.reason,
                      "evidence": signable_evidence(flag.evidence), "content_sha256": bytes(hashes[pk])})
        if inline:
            decision_labels_sign(decision=f"finding:{finding.pk}")
        else:
            dispatch.finding_label(finding.pk)
    if flagged:
        logger.warning("ingest classifier %s flagged %d memories in store %s", ACTOR, len(flagged), store.pk)
    return len(flagged)
