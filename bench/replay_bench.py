"""Replays in flight (issue 17): replays/s and calls in flight against a remote-like model.

    .venv/bin/python bench/replay_bench.py --json artifacts/replay_bench.json
    .venv/bin/python bench/replay_bench.py --latency 0.3 --replays 1000 --levels 1,2,4,16 --workers 1,2,4

A stub OpenAI-compatible model (its own process, ``ThreadingHTTPServer`` on 127.0.0.1) answers
every chat completion after ``--latency`` seconds and counts the calls it has in flight (its
peak is the figure "calls in flight": measured at the model, not inferred by the client). The
client is the product's replay path without Celery and the database: ``Replayer.replay_iter``
(what ``audit_run_replay`` runs per chunk) over a synthetic store, the ``openai-chat``
connector, and the egress client with ``AGENT_EGRESS_ALLOW`` naming the stub only. Every replay
has its own cache key (distinct queries), so every replay is one model call.

Two tables: one worker process at in-flight bounds ``--levels`` (``AGENT_MAX_IN_FLIGHT``), and
``--workers`` processes (as Celery worker processes: each with its own pool, bounded at
``--worker-in-flight``) sharing ``--replays``. Small levels get proportionally fewer replays
(``--seconds-per-level``) so the whole bench stays short; the ideal is ``bound / latency``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from audits.engine.agents import make_agent  # noqa: E402
from audits.engine.cmis import replay_chunk  # noqa: E402
from audits.engine.replay import Replayer  # noqa: E402
from audits.engine.retriever import Retriever  # noqa: E402
from audits.engine.scenario import MemoryRecord  # noqa: E402
from egress.client import EgressPolicy  # noqa: E402

# ----------------------------------------------------------------------------- the stub model


def _serve(latency: float, port_out, ready) -> None:
    state = {"now": 0, "peak": 0, "calls": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # /stats
            with lock:
                self._send(dict(state))

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/reset":
                with lock:
                    state.update(now=0, peak=0, calls=0)
                self._send({})
                return
            with lock:
                state["now"] += 1
                state["calls"] += 1
                state["peak"] = max(state["peak"], state["now"])
            try:
                time.sleep(latency)
                q = json.loads(body)["messages"][-1]["content"][-12:]
            finally:
                with lock:  # before the answer leaves: the client may send its next call at once
                    state["now"] -= 1
            self._send({"choices": [{"message": {"content": f"answer to {q}"}}]})

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256

    srv = Server(("127.0.0.1", 0), Handler)
    port_out.value = srv.server_address[1]
    ready.set()
    srv.serve_forever()


def _stub_call(port: int, method: str, path: str) -> dict:
    import http.client

    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=b"{}" if method == "POST" else None)
    out = json.loads(c.getresponse().read() or b"{}")
    c.close()
    return out


# ----------------------------------------------------------------------------- the client


class _Embedder:
    """Deterministic bag-of-words vectors: retrieval is not what is measured here."""

    dim = 64

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                out[i, hash(w) % self.dim] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(n, 1e-9)


def _replayer(port: int, in_flight: int) -> Replayer:
    mems = [MemoryRecord(f"m{i}", f"fact {i} about topic {i % 37} and place {i % 11}", {}) for i in range(300)]
    emb = _Embedder()
    retriever = Retriever(mems, emb.encode([m.text for m in mems]), embedder=emb)
    agent = make_agent({"connector": "openai-chat", "base_url": f"http://127.0.0.1:{port}/v1", "model": "stub",
                        "retries": 0, "timeout": 30},
                       egress=EgressPolicy.from_setting(f"127.0.0.1:{port}"), max_in_flight=in_flight)
    return Replayer(agent, retriever, 5, {})


def _run(port: int, in_flight: int, queries: list[str], chunk: int) -> tuple[float, int]:
    """Replay ``queries`` as a worker does: one ``replay_iter`` per chunk of ``chunk`` jobs
    (``audit_run_replay`` gets one Celery task's chunk at a time), 0 = all in one batch."""
    replayer = _replayer(port, in_flight)
    step = chunk or len(queries)
    t0 = time.perf_counter()
    for i in range(0, len(queries), step):
        for o in replayer.replay_iter([(q, (), None) for q in queries[i:i + step]]):
            if o.error is not None:
                raise o.error
    return time.perf_counter() - t0, replayer.calls


def _worker(port: int, in_flight: int, queries: list[str], chunk: int, start, out) -> None:
    start.wait()
    out.put(_run(port, in_flight, queries, chunk))


def _chunk(chunk: int | None, in_flight: int) -> int:
    return replay_chunk(in_flight) if chunk is None else chunk


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--replays", type=int, default=1000, help="replays at the largest level and per worker row")
    ap.add_argument("--levels", default="1,2,4,16", help="in-flight bounds of one worker process")
    ap.add_argument("--workers", default="1,2,4", help="worker processes sharing --replays")
    ap.add_argument("--worker-in-flight", type=int, default=16, help="AGENT_MAX_IN_FLIGHT of each worker")
    ap.add_argument("--seconds-per-level", type=float, default=6.0,
                    help="levels below the largest run about this long (fewer replays)")
    ap.add_argument("--chunk", type=int, default=None,
                    help="jobs per replay_iter call, as a Celery chunk (default: the product's, "
                         "2 x the bound for HTTP agents; 0 = one batch)")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()

    ctx = mp.get_context("fork")
    port_v, ready = ctx.Value("i", 0), ctx.Event()
    server = ctx.Process(target=_serve, args=(args.latency, port_v, ready), daemon=True)
    server.start()
    ready.wait(10)
    port = port_v.value
    load_before = os.getloadavg()
    levels = [int(x) for x in args.levels.split(",") if x]
    rows = []
    try:
        for lvl in levels:
            n = args.replays if lvl == max(levels) else max(lvl * 4, int(args.seconds_per_level * lvl / args.latency))
            queries = [f"level {lvl} question {i}?" for i in range(n)]
            _stub_call(port, "POST", "/reset")
            wall, calls = _run(port, lvl, queries, _chunk(args.chunk, lvl))
            stats = _stub_call(port, "GET", "/stats")
            rows.append({"mode": "one worker", "workers": 1, "in_flight_bound": lvl, "replays": n, "calls": calls,
                         "wall_s": round(wall, 2), "replays_per_s": round(n / wall, 1),
                         "peak_in_flight_at_model": stats["peak"],
                         "ideal_replays_per_s": round(lvl / args.latency, 1),
                         "efficiency": round(n / wall / (lvl / args.latency), 3)})
            print(json.dumps(rows[-1]), flush=True)
        for w in [int(x) for x in args.workers.split(",") if x]:
            n = args.replays
            shares = [[f"workers {w} question {i}?" for i in range(j, n, w)] for j in range(w)]
            _stub_call(port, "POST", "/reset")
            start, out = ctx.Event(), ctx.Queue()
            procs = [ctx.Process(target=_worker, args=(port, args.worker_in_flight, s,
                                                       _chunk(args.chunk, args.worker_in_flight), start, out))
                     for s in shares]
            for p in procs:
                p.start()
            time.sleep(0.5)  # every worker has imported and built its retriever
            t0 = time.perf_counter()
            start.set()
            results = [out.get(timeout=600) for _ in procs]
            wall = time.perf_counter() - t0
            for p in procs:
                p.join()
            stats = _stub_call(port, "GET", "/stats")
            rows.append({"mode": "workers", "workers": w, "in_flight_bound": args.worker_in_flight, "replays": n,
                         "calls": sum(c for _, c in results), "wall_s": round(wall, 2),
                         "replays_per_s": round(n / wall, 1), "peak_in_flight_at_model": stats["peak"],
                         "ideal_replays_per_s": round(w * args.worker_in_flight / args.latency, 1),
                         "efficiency": round(n / wall / (w * args.worker_in_flight / args.latency), 3)})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        server.terminate()
    report = {"latency_s": args.latency, "chunk": args.chunk if args.chunk is not None else "product default", "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(), "rows": rows}
    print()
    print(f"stub model latency {args.latency * 1000:.0f} ms; load before {report['load_average_before']}, "
          f"after {report['load_average_after']}")
    print(f"{'mode':<11} {'workers':>7} {'bound':>5} {'replays':>7} {'wall s':>7} {'replays/s':>9} "
          f"{'peak in flight':>14} {'ideal/s':>7} {'eff':>5}")
    for r in rows:
        print(f"{r['mode']:<11} {r['workers']:>7} {r['in_flight_bound']:>5} {r['replays']:>7} {r['wall_s']:>7} "
              f"{r['replays_per_s']:>9} {r['peak_in_flight_at_model']:>14} {r['ideal_replays_per_s']:>7} "
              f"{r['efficiency']:>5}")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
