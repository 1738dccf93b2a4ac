"""Ledger write/verify benchmark: durable signed transitions through ``ledger.services``.

    .venv/bin/python bench/ledger_bench.py --db postgres --n 2000 --json artifacts/ledger_bench_pg.json
    .venv/bin/python bench/ledger_bench.py --db sqlite --n 2000 --json artifacts/ledger_bench_sqlite.json

Measures, on a fresh organization in its own database (PostgreSQL: database ``memaudit_bench``
at 127.0.0.1:5432 as user postgres, created when missing; SQLite: a temporary file):

* ``median_ms``/``p95_ms``: one ``transition_append`` call each (sign node + commitment, verify
  both against the stored chain and the DB epochs, insert, two log leaves, live-state update,
  COMMIT) — wall time per durable transition, MutMem's unit;
* ``bytes_per_transition``: logical row storage as MutMem counts it — the sum of the column
  value sizes of the provenance node and transition commitment rows (integers 4 bytes, ids and
  foreign keys 8, blobs/strings/JSON their encoded length); log leaves reported separately;
* ``batch_transitions_per_s``: ``transitions_append`` in batches of 500 (one transaction each);
* ``verify_entries_per_s``: the portable verifier over the exported bundle, one core.

Because a shared machine's load moves these wall-clock figures a lot, the run also records what
explains them: ``commit_floor_ms`` (median of durable one-row INSERT commits on the same
database: the disk flush every durable append pays at least once), ``round_trips_per_append``
(round trips one append makes, BEGIN and COMMIT included), and client CPU time
(``cpu_ms_per_append``, ``batch_transitions_per_cpu_s``, ``verify_entries_per_cpu_s``: seconds
this process ran, which other processes' load does not inflate; the database server's CPU is
reported apart: ``server_cpu_ms_per_append`` and ``batch_transitions_per_cpu_s_client_and_server``,
read from ``/proc/<backend pid>/stat`` when the server runs on this host). ``--concurrency K`` adds durable appends from K processes at once (each to its
own memories): PostgreSQL flushes the WAL of commits that arrive together once (group commit),
so the aggregate rate is not bounded by one flush per transition.

``--ab-root DIR`` runs none of that: it compares this checkout's write path with another
checkout's (``git worktree add DIR <rev>``, or ``git archive <rev> | tar -x -C DIR``) in the same
minutes, one worker process per version, interleaved round by round (``--ab-rounds``): client
CPU per single append and its ratio to the crypto floor, server CPU per append, and batched
transitions/s with their client and server CPU, each the median of the rounds:

    .venv/bin/python bench/ledger_bench.py --db postgres --pg-db h_lb_ab --ab-root /tmp/old --ab-rounds 8 --json ab.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

MUTMEM = {"median_ms": 4.865, "p95_ms": 5.674, "bytes_per_transition": 966.35}
TARGETS = {"median_ms": 1.0, "p95_ms": 2.0, "bytes_per_transition": 500, "batch_transitions_per_s": 5000,
           "verify_entries_per_s": 12000}
PG_DB = "memaudit_bench"


def _db_name(value: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a plain lowercase database name")
    return value


def _setup(db: str, workdir: Path, pg_db: str = PG_DB, root: Path | None = None, migrate: bool = True) -> None:
    sys.path.insert(0, str(root or Path(__file__).resolve().parent.parent))
    os.environ["DJANGO_SETTINGS_MODULE"] = "memaudit_site.settings"
    os.environ["MEMAUDIT_ROLE"] = "housekeeper"  # this process is the housekeeper
    os.environ["HOUSEKEEPER_KEY_DIR"] = str(workdir / "keys")
    os.environ["RECEIPT_KEY_DIR"] = str(workdir / "receipt-keys")
    if db == "postgres":
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [pg_db]).fetchone():
                conn.execute(f'CREATE DATABASE "{pg_db}"')
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{pg_db}"
        os.environ["DB_CONN_MAX_AGE"] = "600"
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(workdir / "bench.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command

    if migrate:
        call_command("migrate", verbosity=0)


def _row_bytes(values: dict, ints4: set[str]) -> int:
    total = 0
    for name, v in values.items():
        if v is None:
            continue
        if isinstance(v, (bytes, memoryview)):
            total += len(bytes(v))
        elif isinstance(v, bool):
            total += 1
        elif isinstance(v, int):
            total += 4 if name in ints4 else 8
        elif isinstance(v, str):
            total += len(v.encode("utf-8"))
        else:
            total += len(json.dumps(v, separators=(",", ":")).encode("utf-8"))
    return total


def _commit_floor_ms(connection, n: int = 200) -> float:
    """Median wall time of a one-row INSERT committed on its own (autocommit): the flush floor."""
    with connection.cursor() as c:
        c.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (x integer)")
        lat = []
        for i in range(n):
            t0 = time.perf_counter()
            c.execute("INSERT INTO bench_commit_probe (x) VALUES (%s)", [i])
            lat.append((time.perf_counter() - t0) * 1000)
        c.execute("DROP TABLE bench_commit_probe")
    return statistics.median(lat)


def _server_cpu_s(connection) -> float | None:
    """CPU seconds (user + system) the PostgreSQL backend serving ``connection`` has used so far,
    from ``/proc/<pid>/stat`` (the server runs on this host); None where that is not readable."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as c:
        c.execute("SELECT pg_backend_pid()")
        pid = c.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _crypto_floor_ms(n: int = 400) -> float:
    """Median wall time of the crypto one transition needs at least: 2 Ed25519 signatures and 2
    verifications over bodies of a transition's size (PyNaCl, as ``ledger.core`` uses)."""
    from nacl.signing import SigningKey

    key = SigningKey.generate()
    verify = key.verify_key
    body = json.dumps({"kind": "provenance", "tenant": "bench", "memory": "bench/b1", "seq": 17,
                       "prev": "ab" * 32, "evidence": ["outcome:17"], "prev_weight_q": 1000,
                       "new_weight_q": 1133, "valence_q": 250, "eta_q": 500, "epoch": 1,
                       "time": "2026-11-30T20:00:00.000000Z"}, separators=(",", ":")).encode()
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        a, b = key.sign(body), key.sign(body[::-1])
        verify.verify(a)
        verify.verify(b)
        lat.append((time.perf_counter() - t0) * 1000)
    return statistics.median(lat)


def _appender(memory_ids: list[int], n: int, no_fsync_wait: bool, barrier, out) -> None:
    from django.db import connection, connections

    from ledger.services import transition_append

    connections["default"].close()  # never share the parent's socket
    if no_fsync_wait:
        with connection.cursor() as c:
            c.execute("SET synchronous_commit = off")
    transition_append(memory_id=memory_ids[0], valence_q=100, evidence=["warm-up"])
    barrier.wait()
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        transition_append(memory_id=memory_ids[i % len(memory_ids)], valence_q=100 if i % 2 else -100,
                          evidence=[f"c:{os.getpid()}:{i}"])
        lat.append((time.perf_counter() - t0) * 1000)
    connections.close_all()
    out.put(lat)


def _concurrent(ids: list[int], n: int, k: int, no_fsync_wait: bool) -> dict:
    """Durable single appends from ``k`` processes at once, each to its own memories."""
    import multiprocessing

    from django.db import connections

    connections.close_all()
    ctx = multiprocessing.get_context("fork")  # children inherit settings, key dir and role
    barrier, out = ctx.Barrier(k + 1), ctx.Queue()
    share = [ids[w::k] for w in range(k)]
    procs = [ctx.Process(target=_appender, args=(share[w], n // k, no_fsync_wait, barrier, out)) for w in range(k)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    lat = sorted(x for _ in procs for x in out.get(timeout=600))
    wall = time.perf_counter() - t0
    for p in procs:
        p.join(60)
    return {"concurrent_appenders": k, "concurrent_transitions_per_s": round(len(lat) / wall),
            "concurrent_median_ms": round(statistics.median(lat), 3),
            "concurrent_p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 3)}


# --------------------------------------------------------------------------- code A/B
#
# Two versions of the code compared in the same minutes: one worker process per version (its
# own checkout on sys.path, its own organization and memories in the same database), driven in
# alternating order, round after round, so that the host's drift falls on both alike. The
# database is migrated by this checkout's worker, which starts first (the other version's
# migrations must be a prefix of these: it does not migrate).


def _signed_store(name: str, slug: str, prefix: str, text: str, n: int):
    """A new organization with its housekeeper, one store and ``n`` memories with signed
    genesis entries: (the organization, the memories' ids)."""
    from ledger.services import housekeeper_init, memories_create, memory_genesis_sign, store_create
    from orgs.models import Organization

    org = Organization.objects.create(name=name, slug=slug)
    housekeeper_init(organization=org)
    store = store_create(organization=org, name=name, slug=name.lower())
    mems = memories_create(store=store, records=[{"id": f"{prefix}{i}", "text": f"{text} {i}"} for i in range(n)])
    memory_genesis_sign(memory_ids=[m.pk for m in mems])
    return org, [m.pk for m in mems]


def _ab_worker(args) -> int:
    root = Path(args.ab_code).resolve()
    workdir = Path(tempfile.mkdtemp(prefix="ledger-ab-"))
    _setup("postgres", workdir, args.pg_db, root=root, migrate=not args.ab_no_migrate)
    from django.db import connection

    from ledger.services import (
        transition_append,
        transitions_append,
    )

    _, ids = _signed_store("AB", f"ab-{os.getpid()}-{int(time.time() * 1000)}", "a", "a/b memory", args.memories)
    k = 0
    for _ in range(100):  # warm-up: connection, signer and weight caches, both paths
        transition_append(memory_id=ids[k % len(ids)], valence_q=100, evidence=[f"w:{k}"])
        k += 1
    transitions_append(items=[{"memory_id": ids[j % len(ids)], "valence_q": 100, "evidence": [f"wb:{j}"]}
                              for j in range(500)])
    print(json.dumps({"ready": str(root)}), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "single":
            n = int(cmd[1])
            server0 = _server_cpu_s(connection)
            cpu0 = time.process_time()
            for i in range(n):
                transition_append(memory_id=ids[k % len(ids)], valence_q=(250 if i % 3 else -250),
                                  evidence=[f"outcome:{k}"])
                k += 1
            cpu = (time.process_time() - cpu0) * 1000 / n
            server = (_server_cpu_s(connection) - server0) * 1000 / n if server0 is not None else None
            out = {"cpu_ms_per_append": cpu, "server_cpu_ms_per_append": server, "crypto_floor_ms": _crypto_floor_ms(200)}
        elif cmd[0] == "batch":
            items = [{"memory_id": ids[(k + j) % len(ids)], "valence_q": 100, "evidence": [f"outcome:b{k + j}"]}
                     for j in range(500)]
            k += 500
            server0 = _server_cpu_s(connection)
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            transitions_append(items=items)
            wall = time.perf_counter() - t0
            out = {"batch_per_s": 500 / wall, "batch_cpu_us": (time.process_time() - cpu0) * 1e6 / 500,
                   "batch_server_cpu_us": (_server_cpu_s(connection) - server0) * 1e6 / 500
                   if server0 is not None else None}
        else:
            out = {"error": f"unknown command {cmd[0]!r}"}
        print(json.dumps(out), flush=True)
    return 0


def _code_ab(args) -> int:
    import subprocess

    here = Path(__file__).resolve()
    roots = {"new": here.parent.parent, "old": Path(args.ab_root).resolve()}
    workers = {}
    for arm in ("new", "old"):  # the new code first: it migrates the database
        cmd = [sys.executable, str(here), "--ab-worker", "--ab-code", str(roots[arm]), "--pg-db", args.pg_db,
               "--memories", str(args.memories)] + (["--ab-no-migrate"] if arm == "old" else [])
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(roots[arm]))
        ready = json.loads(p.stdout.readline())
        assert "ready" in ready, ready
        workers[arm] = p

    def ask(arm: str, command: str) -> dict:
        workers[arm].stdin.write(command + "\n")
        workers[arm].stdin.flush()
        return json.loads(workers[arm].stdout.readline())

    runs: dict[str, dict[str, list]] = {arm: {"cpu_ms_per_append": [], "crypto_floor_ms": [],
                                              "server_cpu_ms_per_append": [], "batch_per_s": [],
                                              "batch_cpu_us": [], "batch_server_cpu_us": []} for arm in workers}
    loads = [round(os.getloadavg()[0], 2)]
    try:
        for rnd in range(args.ab_rounds):
            order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
            for arm in order:
                r = ask(arm, f"single {args.ab_singles}")
                runs[arm]["cpu_ms_per_append"].append(r["cpu_ms_per_append"])
                runs[arm]["crypto_floor_ms"].append(r["crypto_floor_ms"])
                runs[arm]["server_cpu_ms_per_append"].append(r["server_cpu_ms_per_append"])
            for arm in order:
                r = ask(arm, "batch")
                for key in ("batch_per_s", "batch_cpu_us", "batch_server_cpu_us"):
                    runs[arm][key].append(r[key])
            loads.append(round(os.getloadavg()[0], 2))
    finally:
        for p in workers.values():
            p.stdin.write("quit\n")
            p.stdin.close()
            p.wait(60)
    result = {"ab_root": str(roots["old"]), "rounds": args.ab_rounds, "singles_per_round": args.ab_singles,
              "load_average_1m": loads,
              "median": {arm: {k: round(statistics.median(v), 4) for k, v in r.items() if None not in v}
                         for arm, r in runs.items()},
              "runs": {arm: {k: [round(x, 4) for x in v] for k, v in r.items() if None not in v}
                       for arm, r in runs.items()}}
    med = result["median"]
    # One floor for both arms (it is the same crypto; measured in both processes, every round):
    # each arm's median client CPU over the median of all the floors.
    floor = statistics.median(runs["old"]["crypto_floor_ms"] + runs["new"]["crypto_floor_ms"])
    result["crypto_floor_ms"] = round(floor, 4)
    for arm in med:
        med[arm]["cpu_per_append_over_crypto"] = round(med[arm]["cpu_ms_per_append"] / floor, 3)
    print(f"code A/B, {args.ab_rounds} interleaved rounds ({args.ab_singles} single appends + one batch of 500 per "
          f"arm each), load {min(loads)}-{max(loads)}; old = {roots['old']}; crypto floor (2 signs + 2 verifies, "
          f"median of both arms' rounds) {floor:.4f} ms")
    for key, label in (("cpu_ms_per_append", "client CPU ms per single append"),
                       ("cpu_per_append_over_crypto", "client CPU per append / crypto floor"),
                       ("server_cpu_ms_per_append", "server CPU ms per single append"),
                       ("batch_per_s", "batched transitions/s (500)"),
                       ("batch_cpu_us", "client CPU us per batched transition"),
                       ("batch_server_cpu_us", "server CPU us per batched transition")):
        if key in med["old"] and key in med["new"]:
            print(f"  {label:<42} old {med['old'][key]:>10.4g}   new {med['new'][key]:>10.4g}")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--pg-db", default=PG_DB, type=_db_name, help="PostgreSQL database to use (created when missing)")
    ap.add_argument("--memories", type=int, default=100)
    ap.add_argument("--json", dest="json_out", help="write the figures here")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of 300 single appends")
    ap.add_argument("--concurrency", type=int, default=0,
                    help="also run durable single appends from this many processes at once (group commit)")
    ap.add_argument("--signature-ab", type=int, default=0, metavar="ROUNDS",
                    help="also time ROUNDS interleaved triples of 500-item batches: signatures made and checked on "
                         "worker threads, made inline and checked on threads, both inline (writes.SIGNING_BATCH_MIN, "
                         "writes.SIGNATURE_BATCH_MIN), batched transitions/s each")
    ap.add_argument("--no-fsync-wait", action="store_true",
                    help="PostgreSQL synchronous_commit=off: NOT durable; isolates the cost of the code from the "
                         "disk flush (reported as durable=false)")
    ap.add_argument("--ab-root", metavar="DIR",
                    help="instead of the bench: compare this checkout's write path with the one in DIR (another "
                         "checkout, e.g. `git worktree add DIR <rev>`), interleaved (PostgreSQL)")
    ap.add_argument("--ab-rounds", type=int, default=8, help="rounds of the code A/B")
    ap.add_argument("--ab-singles", type=int, default=300, help="single appends per arm and round of the code A/B")
    ap.add_argument("--ab-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ab-code", help=argparse.SUPPRESS)
    ap.add_argument("--ab-no-migrate", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ab_worker:
        return _ab_worker(args)
    if args.ab_root:
        return _code_ab(args)
    workdir = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    _setup(args.db, workdir, args.pg_db)

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from ledger.core.bundle import parse_bundle
    from ledger.core.verify import verify_parsed
    from ledger.export import bundle_build
    from ledger.models import LogLeaf, ProvenanceNode, TransitionCommitment
    from ledger.services import (
        transition_append,
        transitions_append,
        tree_head_issue,
    )

    if args.no_fsync_wait and args.db == "postgres":
        with connection.cursor() as c:
            c.execute("SET synchronous_commit = off")
    org, ids = _signed_store("Bench", f"bench-{int(time.time() * 1000)}", "b", "benchmark memory", args.memories)
    for i in range(50):  # warm-up: connection, signer and weight caches
        transition_append(memory_id=ids[i % len(ids)], valence_q=100, evidence=[f"outcome:{i}"])

    commit_floor_ms = _commit_floor_ms(connection)
    crypto_ms = _crypto_floor_ms()
    with CaptureQueriesContext(connection) as queries:
        transition_append(memory_id=ids[0], valence_q=100, evidence=["outcome:count"])
    statements = len(queries.captured_queries)
    statement_heads = [q["sql"][:40] for q in queries.captured_queries]

    lat = []
    server0 = _server_cpu_s(connection)
    cpu0 = time.process_time()
    for i in range(args.n):
        t0 = time.perf_counter()
        transition_append(memory_id=ids[i % len(ids)], valence_q=(250 if i % 3 else -250), evidence=[f"outcome:{i}"])
        lat.append((time.perf_counter() - t0) * 1000)
    cpu_ms_per_append = (time.process_time() - cpu0) * 1000 / args.n
    server1 = _server_cpu_s(connection)
    server_ms_per_append = (server1 - server0) * 1000 / args.n if server0 is not None and server1 is not None else None
    lat.sort()
    median_ms = statistics.median(lat)
    p95_ms = lat[int(0.95 * (len(lat) - 1))]

    profile_text = ""
    if args.profile:
        pr = cProfile.Profile(time.process_time)  # CPU of this process: what load does not inflate
        pr.enable()
        for i in range(300):
            transition_append(memory_id=ids[i % len(ids)], valence_q=100, evidence=[f"p:{i}"])
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
        pr = cProfile.Profile(time.process_time)  # CPU of this process: what load does not inflate
        pr.enable()
        transitions_append(items=[{"memory_id": ids[j % len(ids)], "valence_q": 100, "evidence": [f"pb:{j}"]}
                                  for j in range(500)])
        pr.disable()
        s.write("\none batch of 500 (transitions_append):\n")
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(20)
        profile_text = s.getvalue()

    batch = 500
    server0 = _server_cpu_s(connection)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    done = 0
    while done < args.n:
        size = min(batch, args.n - done)
        transitions_append(items=[{"memory_id": ids[(done + j) % len(ids)], "valence_q": 100,
                                   "evidence": [f"outcome:b{done + j}"]} for j in range(size)])
        done += size
    batch_per_s = args.n / (time.perf_counter() - t0)
    batch_cpu_s = time.process_time() - cpu0
    batch_per_cpu_s = args.n / batch_cpu_s
    server1 = _server_cpu_s(connection)
    batch_server_cpu_s = server1 - server0 if server0 is not None and server1 is not None else None

    node_fields = [f.attname for f in ProvenanceNode._meta.concrete_fields]
    tc_fields = [f.attname for f in TransitionCommitment._meta.concrete_fields]
    ints4 = {"seq", "prev_weight_q", "new_weight_q", "valence_q", "eta_q", "epoch"}
    nodes = list(ProvenanceNode.objects.filter(organization=org).values(*node_fields)[:1000])
    tcs = list(TransitionCommitment.objects.filter(organization=org).values(*tc_fields)[:1000])
    node_b = statistics.mean(_row_bytes(r, ints4) for r in nodes)
    tc_b = statistics.mean(_row_bytes(r, ints4) for r in tcs)
    leaf_fields = [f.attname for f in LogLeaf._meta.concrete_fields]
    leaf_b = statistics.mean(_row_bytes(r, {"seq"}) for r in LogLeaf.objects.filter(organization=org)
                             .values(*leaf_fields)[:1000])

    # The same batches with the signatures made and checked on the worker threads ("threads"),
    # made here and checked on the threads ("sign_inline"), and both here ("inline"), interleaved
    # (the order rotating each round) so that the host's drift falls on all alike.
    signature_ab: dict = {}
    if args.signature_ab:
        from ledger.services import writes

        modes = {"threads": (None, None), "sign_inline": (10**9, None), "inline": (10**9, 10**9)}
        rates: dict[str, list[float]] = {mode: [] for mode in modes}
        thresholds = (writes.SIGNING_BATCH_MIN, writes.SIGNATURE_BATCH_MIN)
        try:
            for rnd in range(args.signature_ab):
                order = list(modes)[rnd % 3:] + list(modes)[:rnd % 3]
                for mode in order:
                    sign_min, check_min = modes[mode]
                    writes.SIGNING_BATCH_MIN = sign_min or thresholds[0]
                    writes.SIGNATURE_BATCH_MIN = check_min or thresholds[1]
                    t0 = time.perf_counter()
                    transitions_append(items=[{"memory_id": ids[j % len(ids)], "valence_q": 100,
                                               "evidence": [f"ab{rnd}{mode}{j}"]} for j in range(batch)])
                    rates[mode].append(batch / (time.perf_counter() - t0))
        finally:
            writes.SIGNING_BATCH_MIN, writes.SIGNATURE_BATCH_MIN = thresholds
        signature_ab = {mode: {"median_per_s": round(statistics.median(v)), "runs": [round(x) for x in v]}
                        for mode, v in rates.items()}

    tree_head_issue(organization=org)  # the verifier requires every leaf under a signed tree head
    parsed = parse_bundle(bundle_build(org))
    cpu0 = time.process_time()
    report = verify_parsed(parsed)
    verify_per_cpu_s = report.entries / (time.process_time() - cpu0)
    assert not report.findings, report.findings[:3]
    verify_per_s = report.entries / report.seconds

    # Last: the appenders are forked from this process and append to the same memories, so what
    # ran after them measured the fallback from the tips they moved (a first batch signed twice)
    # and the parent's memory after the fork (one batch paid ~0.14 s of system time).
    concurrent = _concurrent(ids, args.n, args.concurrency, args.no_fsync_wait and args.db == "postgres") \
        if args.concurrency > 1 else {}

    result = {
        "db": args.db,
        "db_version": str(connection.pg_version) if args.db == "postgres" else __import__("sqlite3").sqlite_version,
        "durable": not (args.no_fsync_wait and args.db == "postgres"), "n": args.n, "median_ms": round(median_ms, 3), "p95_ms": round(p95_ms, 3),
        "bytes_per_transition": round(node_b + tc_b, 1),
        "bytes_provenance_node": round(node_b, 1), "bytes_transition_commitment": round(tc_b, 1),
        "bytes_log_leaves_per_transition": round(2 * leaf_b, 1),
        "batch_transitions_per_s": round(batch_per_s), "verify_entries_per_s": round(verify_per_s),
        "signature_ab": signature_ab,
        "verified_entries": report.entries,
        "commit_floor_ms": round(commit_floor_ms, 3), "round_trips_per_append": statements,
        "statements_of_one_append": statement_heads, "crypto_floor_ms": round(crypto_ms, 4),
        "median_over_floor": round(median_ms / (commit_floor_ms + crypto_ms), 2),
        "cpu_per_append_over_crypto": round(cpu_ms_per_append / crypto_ms, 2),
        "batch_per_s_over_crypto_per_s": round(batch_per_s / (1000 / crypto_ms), 3),
        "cpu_ms_per_append": round(cpu_ms_per_append, 3), "batch_transitions_per_cpu_s": round(batch_per_cpu_s),
        "verify_entries_per_cpu_s": round(verify_per_cpu_s), "load_average_1m": round(os.getloadavg()[0], 2),
        "server_cpu_ms_per_append": round(server_ms_per_append, 3) if server_ms_per_append is not None else None,
        "batch_transitions_per_cpu_s_client_and_server": round(args.n / (batch_cpu_s + batch_server_cpu_s))
        if batch_server_cpu_s is not None else None,
        "cpu_count": os.cpu_count(), **concurrent, "mutmem": MUTMEM, "targets": TARGETS,
    }
    print(f"{'metric':<28}{'this run':>14}{'MutMem':>12}{'target':>12}")
    for k in ("median_ms", "p95_ms", "bytes_per_transition", "batch_transitions_per_s", "verify_entries_per_s"):
        print(f"{k:<28}{result[k]:>14}{MUTMEM.get(k, '-'):>12}{TARGETS[k]:>12}")
    print(f"({args.db}; {args.n} single appends over {args.memories} memories, log leaves add "
          f"{result['bytes_log_leaves_per_transition']} B per transition)")
    print(f"durable commit floor {result['commit_floor_ms']} ms; {statements} round trips per append; client CPU "
          f"{result['cpu_ms_per_append']} ms per append, {result['batch_transitions_per_cpu_s']} batched transitions "
          f"and {result['verify_entries_per_cpu_s']} verified entries per CPU second; load average "
          f"{result['load_average_1m']} on {result['cpu_count']} CPUs")
    print(f"floors measured in this run: commit flush {result['commit_floor_ms']} ms + crypto (2 signs + 2 verifies) "
          f"{result['crypto_floor_ms']} ms; median / floor {result['median_over_floor']}x, client CPU / crypto "
          f"{result['cpu_per_append_over_crypto']}x, batched rate / crypto-only rate "
          f"{result['batch_per_s_over_crypto_per_s']}")
    if server_ms_per_append is not None:
        print(f"server (PostgreSQL backend) CPU {result['server_cpu_ms_per_append']} ms per append; batched transitions "
              f"per CPU second of client and server together {result['batch_transitions_per_cpu_s_client_and_server']}")
    if concurrent:
        print(f"{args.concurrency} concurrent appenders: {concurrent['concurrent_transitions_per_s']} durable "
              f"transitions/s, median {concurrent['concurrent_median_ms']} ms, p95 {concurrent['concurrent_p95_ms']} ms")
    if profile_text:
        print(profile_text)
    if signature_ab:
        print("batches of 500, signatures made and checked on threads / made here, checked on threads / both here "
              f"(interleaved): {signature_ab['threads']['median_per_s']} / {signature_ab['sign_inline']['median_per_s']}"
              f" / {signature_ab['inline']['median_per_s']} transitions/s")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
