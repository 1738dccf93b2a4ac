"""Approximate nearest neighbours for large stores (no Django import).

Two indexes over the same (primary key, L2-normalised float32 vector) rows, inner product (so the
score is the cosine), whose candidates are pooled: an HNSW graph (``hnswlib``; Malkov and
Yashunin, "Efficient and robust approximate nearest neighbor search using Hierarchical Navigable
Small World graphs", IEEE TPAMI 42(4), 2020) and an inverted file (faiss ``IndexIVFFlat``; Jégou,
Douze, Schmid, "Product quantization for nearest neighbor search", IEEE TPAMI 33(1), 2011,
section IV.A, without quantized codes). They only propose candidates: recall re-scores them
exactly (cosine x live weight against the store's matrix), applies the projection (quarantine
states) and widens the pool until it has k allowed results, so no index decides what a receipt
lists, only which rows are looked at.

Why both (bench/recall_bench.py ``--memories N --real-subset K --compare``, docs/benchmarks.md
section 11, "A million memories"): the graph finds the neighbours of real, distinct texts (exact
top 5 in its 64 candidates 0.99-1.00 over 20,000 real passages alone) but not inside a dense
cluster of near-identical rows, where which copies are nearest is decided by high-dimensional
noise (0.45-0.53 at 1M among 300 clusters of ~3,300 copies, whatever ef); the inverted file scans
whole lists, so it finds those (1.00), but the neighbours of distinct texts are spread over many
lists (0.90-0.96 at nprobe 32 of 284 over the real passages alone). Pooled at 1M (M 32, ef 256,
nprobe 8): 0.99-1.00 on both kinds of held-out query; nprobe 16 for queries with no near neighbour (NPROBE).

1. ``add``: a new key goes into the graph (incremental insertion) and into the list of its
   nearest centroid. The lists' centroids are trained (spherical k-means over ``TRAIN_PER_LIST``
   rows per list, ``nlist_for(n)`` = ``NLIST_PER_SQRT`` x sqrt(n) lists) on the first add, and
   again on every row once the store has grown ``RETRAIN_GROWTH`` x since, by an add of at least
   ``RETRAIN_MIN_ADD`` rows (a worker's: a request adds at most
   ``ledger.embedding_store.ANN_INLINE_ADD`` = 500 rows itself), so the lists stay ~sqrt(n) long.
2. ``search``: the graph's ``n`` nearest (ef ``EF_SEARCH``) and the best ``n`` of the ``NPROBE``
   lists whose centroids are nearest the query (each scanned exactly; more lists when they hold
   fewer than ``n`` rows); the pool is the best ``n`` of their union by inner product, nearest first.
3. ``save``: the lists to ``<path>.ivf``, then the graph to ``<path>`` (the format the graph alone
   had, so a graph saved before the lists existed is reused and only the lists are built), each
   written to a temporary name and renamed. ``open`` reloads both and checks that their keys are
   the store's and a sample of their vectors equals the matrix (a file from another database, or
   another model, is rebuilt rather than trusted). A key is "in the index" (``missing``,
   ``len``) only when it is in both, so a row one of them lacks is re-scored exactly by recall.

Memories are append-only and a memory's content never changes, so a key's vector never changes
either: nothing is ever removed or replaced.
"""

from __future__ import annotations

import math
import os
import struct
import threading

import numpy as np

# Chosen at 1M (bench/recall_bench.py --memories 1000000 --real-subset 20000 --split-real) on
# half the NQ and StrategyQA questions and the even-seed synthetic queries: the cheapest setting
# whose pool holds >= 0.98 of the exact top 5 on each; M 16 / ef 128 held 0.85-0.90 of the real ones.
M = 32  # graph degree
EF_CONSTRUCTION = 200
EF_SEARCH = 256
NLIST_PER_SQRT = 2  # lists = 2 x sqrt(n): 2,000 at 1M
# Lists scanned per search: 8 was chosen on the search-step sets above, where every query has
# real neighbours. On a store of near-copies whose queries have none (the end-to-end 1M store of
# bench/recall_bench.py: the exact top 5 are near-ties at cosine 0.25-0.41 spread over several
# clusters' lists) 8 held 0.926 of the exact top 5 on the tune questions; 16 is the fewest that
# holds 0.98 there (--sweep-nprobe, docs/benchmarks.md section 11, "This session").
NPROBE = 16
TRAIN_PER_LIST = 40  # k-means sample per list (faiss asks for at least 39)
MIN_PER_LIST = 39  # fewer rows than this per list: fewer lists (one list: an exact scan)
RETRAIN_GROWTH = 4  # retrain the lists once n has grown x4 since they were trained
RETRAIN_MIN_ADD = 1000  # only an add this large retrains (never a request's or a write's few rows)
SAMPLE = 32  # vectors compared with the matrix when a saved index is reopened
LISTS_SUFFIX = ".ivf"


def available() -> bool:
    try:
        import faiss  # noqa: F401  # local: optional library, probed
        import hnswlib  # noqa: F401  # local: optional library, probed
    except ImportError:
        return False
    return True


def nlist_for(n: int) -> int:
    """Lists for ``n`` rows: NLIST_PER_SQRT x sqrt(n), at least MIN_PER_LIST rows each."""
    return max(1, min(round(NLIST_PER_SQRT * math.sqrt(max(n, 1))), n // MIN_PER_LIST))


class AnnIndex:
    """One store's graph and inverted lists over (primary key, vector); safe to share between threads."""

    def __init__(self, dim: int, *, capacity: int = 1024, index=None, lists=None) -> None:
        import hnswlib  # local: optional library, only stores over RECALL_ANN_MIN need it

        self.dim = dim
        if index is None:
            index = hnswlib.Index(space="ip", dim=dim)
            index.init_index(max_elements=max(capacity, 1024), ef_construction=EF_CONSTRUCTION, M=M)
        index.set_num_threads(1)
        self._index = index
        self._lists = lists  # None until the first add trains it
        self._lock = threading.Lock()
        self._graph_keys = np.sort(np.asarray(index.get_ids_list(), dtype=np.int64)) if index.get_current_count() \
            else np.empty(0, dtype=np.int64)
        self._list_keys = np.sort(_ids_of(lists)) if lists is not None else np.empty(0, dtype=np.int64)
        self._keys = np.intersect1d(self._graph_keys, self._list_keys, assume_unique=True)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def nlist(self) -> int:
        return 0 if self._lists is None else int(self._lists.nlist)

    def missing(self, pks: np.ndarray) -> np.ndarray:
        """Positions in ``pks`` whose key is not in the index yet (in both parts): a binary search
        of each in the sorted keys, O(k log n) for k keys."""
        return _absent(self._keys, pks)

    def add(self, pks: np.ndarray, vectors: np.ndarray, *, threads: int = 1) -> int:
        """Insert the rows whose key is absent (into the graph, and into the list of its nearest
        centroid); returns how many keys are new to the index. Trains the lists on the first add,
        and again on every row when the store has outgrown them (module docstring, step 1)."""
        import faiss  # local: optional library, only stores over RECALL_ANN_MIN need it

        pks = np.asarray(pks, dtype=np.int64)
        todo = self.missing(pks)
        if not len(todo):
            return 0
        with self._lock:
            for_graph = todo[_absent(self._graph_keys, pks[todo])]
            for_lists = todo[_absent(self._list_keys, pks[todo])]
            if len(for_graph):
                new, first = np.unique(pks[for_graph], return_index=True)  # a key given twice: once
                need = len(self._graph_keys) + len(new)
                if need > self._index.get_max_elements():
                    self._index.resize_index(max(need, 2 * self._index.get_max_elements()))
                self._index.add_items(np.ascontiguousarray(vectors[for_graph[first]], dtype=np.float32), new,
                                      num_threads=threads)
                self._graph_keys = _inserted(self._graph_keys, new)
            if len(for_lists):
                new, first = np.unique(pks[for_lists], return_index=True)
                x = np.ascontiguousarray(vectors[for_lists[first]], dtype=np.float32)
                saved_threads = faiss.omp_get_max_threads()
                faiss.omp_set_num_threads(max(1, threads))  # this thread's OpenMP setting only
                try:
                    total = len(self._list_keys) + len(new)
                    if self._lists is None or (len(new) >= RETRAIN_MIN_ADD
                                               and total > RETRAIN_GROWTH * _trained_for(self._lists.nlist)):
                        keys = new
                        if self._lists is not None:  # trained again on every row: the stored and the new
                            old_keys, old_x = _contents(self._lists)
                            keys, x = np.concatenate([old_keys, new]), np.concatenate([old_x, x])
                        lists = _trained(x, nlist_for(total))
                        lists.add_with_ids(x, keys)
                        self._lists = lists
                    else:
                        self._lists.add_with_ids(x, new)
                finally:
                    faiss.omp_set_num_threads(saved_threads)
                self._list_keys = _inserted(self._list_keys, new)
            # Keys now in both parts, found by binary search (O(k log n), no pass over all keys).
            candidates = np.unique(pks[todo])
            both = candidates[np.setdiff1d(np.arange(len(candidates)), np.concatenate([
                _absent(self._graph_keys, candidates), _absent(self._list_keys, candidates)]), assume_unique=False)]
            self._keys = _inserted(self._keys, both)
        return len(both)

    def search(self, q: np.ndarray, n: int, *, ef: int | None = None, nprobe: int | None = None) -> np.ndarray:
        """Keys of (about) the ``n`` nearest rows by cosine, nearest first (module docstring, step 2);
        ``ef`` and ``nprobe`` default to the module's ``EF_SEARCH`` and ``NPROBE`` as they are now."""
        import faiss  # local: optional library, only stores over RECALL_ANN_MIN need it

        ef = EF_SEARCH if ef is None else ef
        nprobe = NPROBE if nprobe is None else nprobe
        n = min(n, len(self._keys))
        if n <= 0:
            return np.empty(0, dtype=np.int64)
        q = np.ascontiguousarray(np.asarray(q, dtype=np.float32).reshape(1, -1))
        with self._lock:
            self._index.set_ef(max(ef, n))
            try:
                labels, dist = self._index.knn_query(q, k=min(n, len(self._graph_keys)), num_threads=1)
                keys, score = [labels[0].astype(np.int64)], [1.0 - dist[0]]
            except RuntimeError:  # fewer than n reachable in the graph: the lists still answer
                keys, score = [], []
            lists = self._lists
            probe = min(nprobe, lists.nlist)
            faiss.omp_set_num_threads(1)  # this thread only (an OpenMP ICV): a recall runs on one core
            while True:
                sims, ids = lists.search(q, n, params=faiss.SearchParametersIVF(nprobe=probe))
                if int((ids[0] >= 0).sum()) >= n or probe >= lists.nlist:
                    break
                probe = min(lists.nlist, probe * 4)  # the probed lists held fewer than n rows
        keys.append(ids[0][ids[0] >= 0])
        score.append(sims[0][ids[0] >= 0])
        keys, first = np.unique(np.concatenate(keys), return_index=True)
        best = np.argsort(-np.concatenate(score)[first], kind="stable")[:n]
        return keys[best]

    def save(self, path: str) -> None:
        import faiss  # local: optional library, only stores over RECALL_ANN_MIN need it

        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with self._lock:
            if self._lists is not None:  # the lists first: a reader reopens when the graph's file changes
                faiss.write_index(self._lists, tmp)
                os.replace(tmp, path + LISTS_SUFFIX)
            self._index.save_index(tmp)
        os.replace(tmp, path)

    @classmethod
    def open(cls, path: str, *, dim: int, pks: np.ndarray, matrix: np.ndarray) -> AnnIndex | None:
        """The index saved at ``path`` if it describes these rows (its keys are among ``pks`` and
        a sample of its vectors equals the matrix's rows with the same key), else None. A graph
        saved without lists (before they existed, or lists that do not match) is returned alone:
        its rows are all ``missing`` until a worker's ``add`` builds the lists. A graph of another
        degree than ``M`` is not reused: the worker builds a new one (recall scores exactly until then)."""
        import faiss  # local: optional library, only stores over RECALL_ANN_MIN need it
        import hnswlib  # local: optional library, only stores over RECALL_ANN_MIN need it

        if not os.path.exists(path) or _graph_dim(path) != dim:
            return None
        try:
            index = hnswlib.Index(space="ip", dim=dim)
            index.load_index(path)
        except (RuntimeError, OSError, ValueError):
            return None
        if index.M != M:  # built under an older setting (M 16 before the pooled index): rebuilt by the worker
            return None
        lists = None
        if os.path.exists(path + LISTS_SUFFIX):
            try:
                lists = faiss.read_index(path + LISTS_SUFFIX)
            except (RuntimeError, OSError, ValueError):
                lists = None
            if lists is not None and (not isinstance(lists, faiss.IndexIVFFlat) or lists.d != dim):
                lists = None
        ann = cls(dim, index=index, lists=lists)
        if not ann._graph_matches(pks, matrix):
            return None
        if lists is not None and not ann._lists_match(pks, matrix):
            ann = cls(dim, index=index)
        return ann

    def matches(self, pks: np.ndarray, matrix: np.ndarray) -> bool:
        """Every key of the index is among ``pks`` and a sample of its vectors equals those rows
        (an index from a database that was reset, or from another model, does not)."""
        return self._graph_matches(pks, matrix) and self._lists_match(pks, matrix)

    def _graph_matches(self, pks: np.ndarray, matrix: np.ndarray) -> bool:
        with self._lock:
            return _sample_matches(self._graph_keys, pks, matrix,
                                   lambda keys: np.asarray(self._index.get_items(keys.tolist()), dtype=np.float32))

    def _lists_match(self, pks: np.ndarray, matrix: np.ndarray) -> bool:
        with self._lock:
            return _sample_matches(self._list_keys, pks, matrix, lambda keys: _vectors_of(self._lists, keys))


def _graph_dim(path: str) -> int | None:
    """The vector width of a saved hnswlib graph, read from its header (hnswalg.h ``saveIndex``:
    offsetLevel0, max_elements, cur_element_count, size_data_per_element, label_offset,
    offset_data, as little-endian size_t; the vector sits between offset_data and label_offset).
    hnswlib itself loads a file of another width without complaint."""
    try:
        with open(path, "rb") as f:
            head = f.read(48)
    except OSError:
        return None
    if len(head) < 48:
        return None
    _, _, _, _, label_offset, offset_data = struct.unpack("<6Q", head)
    width = label_offset - offset_data
    return width // 4 if 0 < width and width % 4 == 0 else None


def _absent(keys: np.ndarray, pks: np.ndarray) -> np.ndarray:
    """Positions in ``pks`` not among the sorted ``keys`` (binary search: O(k log n))."""
    pks = np.asarray(pks, dtype=np.int64)
    if not len(keys):
        return np.arange(len(pks))
    at = np.minimum(np.searchsorted(keys, pks), len(keys) - 1)
    return np.flatnonzero(keys[at] != pks)


def _inserted(keys: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The sorted ``keys`` with the sorted, absent ``new`` keys put in place."""
    return np.insert(keys, np.searchsorted(keys, new), new)


def _sample_matches(keys: np.ndarray, pks: np.ndarray, matrix: np.ndarray, stored) -> bool:
    """Every one of ``keys`` is among ``pks``, and ``stored(sample of keys)`` equals their rows."""
    if not len(keys):
        return True
    pks = np.asarray(pks, dtype=np.int64)
    order = np.argsort(pks, kind="stable")
    rows = order[np.minimum(np.searchsorted(pks[order], keys), len(pks) - 1)]
    if not np.array_equal(pks[rows], keys):
        return False
    pick = np.random.default_rng(len(keys)).choice(len(keys), size=min(SAMPLE, len(keys)), replace=False)
    saved = stored(keys[pick])
    want = np.asarray(matrix[rows[pick]], dtype=np.float32)
    return saved.shape == want.shape and bool(np.allclose(saved, want, atol=1e-5))


def _trained_for(nlist: int) -> int:
    """The row count ``nlist`` lists were chosen for (the inverse of ``nlist_for``)."""
    return max(nlist * MIN_PER_LIST, round((nlist / NLIST_PER_SQRT) ** 2))


def _trained(x: np.ndarray, nlist: int):
    """An empty IVF-flat index whose ``nlist`` centroids are trained on a sample of ``x``."""
    import faiss  # local: optional library, only stores over RECALL_ANN_MIN need it

    lists = faiss.IndexIVFFlat(faiss.IndexFlatIP(x.shape[1]), x.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    lists.cp.spherical = True  # centroids on the unit sphere: nearest by cosine
    lists.set_direct_map_type(faiss.DirectMap.Hashtable)  # vectors by key (open's check)
    sample = x
    if len(x) > TRAIN_PER_LIST * nlist:
        pick = np.random.default_rng(len(x)).choice(len(x), TRAIN_PER_LIST * nlist, replace=False)
        sample = x[np.sort(pick)]
    lists.train(np.ascontiguousarray(sample))
    return lists


def _ids_of(lists) -> np.ndarray:
    """Every key stored in an IVF index, read from its inverted lists."""
    import faiss  # local: optional library, only stores over RECALL_ANN_MIN need it

    inv = lists.invlists
    parts = [faiss.rev_swig_ptr(inv.get_ids(i), inv.list_size(i)).copy()
             for i in range(lists.nlist) if inv.list_size(i)]
    return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)


def _contents(lists) -> tuple[np.ndarray, np.ndarray]:
    """(keys, vectors) of every row of an IVF-flat index, list by list (its codes are the
    float32 vectors themselves)."""
    import faiss  # local: optional library, only stores over RECALL_ANN_MIN need it

    inv, keys, vectors = lists.invlists, [], []
    for i in range(lists.nlist):
        size = inv.list_size(i)
        if size:
            keys.append(faiss.rev_swig_ptr(inv.get_ids(i), size).astype(np.int64))
            codes = faiss.rev_swig_ptr(inv.get_codes(i), size * lists.code_size)
            vectors.append(np.frombuffer(codes.tobytes(), dtype=np.float32).reshape(size, lists.d))
    if not keys:
        return np.empty(0, dtype=np.int64), np.empty((0, lists.d), dtype=np.float32)
    return np.concatenate(keys), np.concatenate(vectors)


def _vectors_of(lists, keys: np.ndarray) -> np.ndarray:
    """The stored vectors of ``keys`` (IVF-flat keeps them exactly)."""
    out = np.empty((len(keys), lists.d), dtype=np.float32)
    for i, key in enumerate(np.asarray(keys, dtype=np.int64).tolist()):
        out[i] = lists.reconstruct(key)
    return out
