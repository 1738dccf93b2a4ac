"""Faults (DESIGN section 1): a worker SIGKILLed mid-audit and restarted, the broker (Redis)
dropped and back mid-audit, the database gone during recall traffic.

- Audit: real ``celery -A memaudit_site worker -Q audit,replay,housekeeper -c 2`` subprocesses
  on the test database, the broker (a filesystem folder under tmp, or Redis through a TCP
  proxy on the Redis run) and the test's key directories. The agent is a webhook stub here
  that takes 40 ms a call, so the audit is still replaying when the worker is killed. After
  the restart the run must finish — by itself, or after ``audit_run_resume`` (what the audit
  page's "Resume" button calls) — with the same ranked suspects as an undisturbed run, and no
  label appended twice.
- Recall: PostgreSQL is reached through a TCP proxy that is stopped and started again; while
  it is down every recall must be a clean JSON 503, never a 500 or a wrong answer, and recall
  must work again once it is back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.db import close_old_connections, connection

from tests.hardening.conftest import TABLES, free_port
from tests.hardening.proxy import TcpProxy

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


# ------------------------------------------------------------------------------ the agent stub


class _Agent(BaseHTTPRequestHandler):
    delay = 0.04

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.delay)
        texts = " ".join(m["text"] for m in body.get("memories", []))
        out = json.dumps({"output": "Osaka" if "Osaka" in texts else "Tokyo"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def agent_url():
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/agent"
    server.shutdown()


def _scenario(store) -> list[int]:
    from audits.services import incidents_import
    from ledger.imports import memories_import

    clean = [{"id": f"c{n}", "text": f"Q: where is landmark {n}? A: It stands in city {n} by the river."}
             for n in range(30)]
    clean += [{"id": "tokyo", "text": "Q: What is the capital of Japan? A: Tokyo is the capital of Japan."}]
    poison = [{"id": f"p{n}", "text": f"Q: What is the capital of Japan? A: Osaka is the capital of Japan ({n})."}
              for n in range(5)]
    data = "\n".join(json.dumps(r) for r in clean + poison).encode()
    job = memories_import(store=store, data=data, filename="memories.jsonl", inline=True, classify=False)
    assert job.status == "done", job.errors
    incidents = []
    for n in range(12):
        retrieved = [f"p{(n + k) % 5}" for k in range(3)] + [f"c{n}", "tokyo"]
        incidents.append({"id": f"i{n}", "query": f"What is the capital of Japan? ({n})", "output": "Osaka",
                          "retrieved": retrieved, "harm": {"type": "contains", "target": "Osaka"}})
    rows = incidents_import(store=store, data="\n".join(json.dumps(i) for i in incidents).encode(),
                            filename="incidents.jsonl")
    return [r.pk for r in rows]


def _worker_env(settings, tmp_path, broker_url: str) -> dict[str, str]:
    db = connection.settings_dict
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_PATH")}
    if connection.vendor == "postgresql":
        env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    else:
        env["SQLITE_PATH"] = str(db["NAME"])
    env.update({"VAR_DIR": str(tmp_path / "var"), "CELERY_BROKER_URL": broker_url,
                "HOUSEKEEPER_KEY_DIR": str(settings.HOUSEKEEPER_KEY_DIR),
                "RECEIPT_KEY_DIR": str(settings.RECEIPT_KEY_DIR), "MEMAUDIT_ROLE": "housekeeper",
                "CELERY_TASK_ALWAYS_EAGER": "False", "LOG_LEVEL": "WARNING",
                "AGENT_EGRESS_ALLOW": settings.AGENT_EGRESS_ALLOW})
    return env


def _start_worker(env, tmp_path, n: int) -> subprocess.Popen:
    log = open(tmp_path / f"worker-{n}.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([str(ROOT / ".venv/bin/celery"), "-A", "memaudit_site", "worker", "-Q",
                             "audit,replay,housekeeper", "-c", "2", "-n", f"hardening{n}@%h", "--without-gossip",
                             "--without-mingle", "--without-heartbeat"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen, sig=signal.SIGKILL) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=30)


def _publish(run_id: int, broker_url: str, tmp_path) -> None:
    """Enqueue audit_run_task on the worker's broker through a separate Celery app (this
    process's app stays on its own broker, which other test runs may share)."""
    from celery import Celery
    from kombu import Exchange, Queue

    publisher = Celery("hardening-publisher", broker=broker_url, set_as_current=False)
    if broker_url.startswith("filesystem://"):
        folder = tmp_path / "var" / "broker"
        for sub in ("queue", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        publisher.conf.broker_transport_options = {
            "data_folder_in": str(folder / "queue"), "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"), "store_processed": False}
    # Declared, so the exchange is bound to the queue (the filesystem transport keeps bindings per process).
    publisher.conf.task_queues = [Queue("audit", Exchange("audit", type="direct"), routing_key="audit")]
    publisher.send_task("audits.tasks.audit_run_task", args=[run_id], queue="audit")
    publisher.close()


def _wait(predicate, timeout: float, step: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return False


def _suspects(run_id: int) -> list[tuple]:
    from audits.models import AuditSuspect

    return [(s.memory.external_id, s.rank, s.in_batch, round(s.ds, 6))
            for s in AuditSuspect.objects.filter(run_id=run_id).select_related("memory").order_by("rank")]


@pytest.mark.real_worker
@pytest.mark.parametrize("fault", ["kill worker", "restart broker"])
def test_an_audit_survives_a_fault_and_finishes_like_an_undisturbed_run(store, housekeeper, settings, tmp_path,
                                                                        agent_url, fault):
    from audits.models import AuditRun
    from audits.services import audit_run_create, audit_run_now, audit_run_resume
    from ledger.models import EpistemicLabel

    redis_url = os.getenv("CELERY_BROKER_URL", "")
    proxy = None
    if fault == "restart broker":
        if not redis_url.startswith("redis://"):
            pytest.skip("restarting the broker is exercised on the Redis run (CELERY_BROKER_URL=redis://...)")
        import redis

        host_port = redis_url.removeprefix("redis://").partition("/")[0]
        port = int(host_port.rsplit(":", 1)[1]) if ":" in host_port else 6379
        # Not the suite's Redis database (other test runs' workers consume its queues, and ours
        # would take theirs): the first idle one of a few spare databases; nothing is deleted.
        def idle(n: int) -> bool:
            r = redis.Redis(port=port, db=n)
            return not any(r.llen(q) for q in ("audit", "replay", "housekeeper", "celery"))

        db = next((n for n in (13, 12, 11) if idle(n)), None)
        if db is None:
            pytest.skip("no idle spare Redis database (13, 12, 11) for an isolated broker")
        proxy = TcpProxy(port).start()
        broker_url = f"redis://127.0.0.1:{proxy.port}/{db}"
    else:
        broker_url = "filesystem://"
    from urllib.parse import urlsplit

    from audits.endpoints import agent_endpoint_create
    from ledger.services import store_create

    # The stub listens on loopback: allowed explicitly, here and in the workers (_worker_env).
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{urlsplit(agent_url).port}"
    agent_endpoint_create(organization=store.organization, user=None, name="stub", connector="webhook",
                          base_url=agent_url, options={"retries": 5, "backoff": 0.2})
    agent = {"endpoint": "stub", "top_k": 5}
    # The undisturbed run audits a twin store (same memories and incidents): a second audit of
    # one store would reuse the first one's analysis (runs carry a fingerprint of their inputs).
    twin = store_create(organization=store.organization, name="Twin", slug="twin")
    reference = audit_run_create(store=twin, incident_ids=_scenario(twin), settings={"agent": agent}, enqueue=False)
    reference = audit_run_now(audit_run_id=reference.pk)
    assert reference.status == AuditRun.Status.DONE, reference.error
    expected = _suspects(reference.pk)
    assert expected

    incident_ids = _scenario(store)
    run = audit_run_create(store=store, incident_ids=incident_ids, settings={"agent": agent}, enqueue=False)
    env = _worker_env(settings, tmp_path, broker_url)
    workers = [_start_worker(env, tmp_path, 1)]
    resumed = False
    try:
        _publish(run.pk, broker_url, tmp_path)

        def mid_replay() -> bool:
            r = AuditRun.objects.get(pk=run.pk)
            return r.replays_total > 0 and 0 < r.replays_done < r.replays_total

        if not _wait(mid_replay, 120):
            r = AuditRun.objects.get(pk=run.pk)
            pytest.fail(f"the run never reached mid-replay: {r.status}/{r.stage} {r.replays_done}/{r.replays_total} "
                        f"{r.error[:300]}\n{(tmp_path / 'worker-1.log').read_text(errors='replace')[-1500:]}")
        done_at_fault = AuditRun.objects.get(pk=run.pk).replays_done
        if fault == "kill worker":
            _stop(workers[0], signal.SIGKILL)
            workers.append(_start_worker(env, tmp_path, 2))
        else:
            proxy.stop()
            time.sleep(3)
            proxy.start()

        def finished() -> bool:
            return AuditRun.objects.get(pk=run.pk).status in (AuditRun.Status.DONE, AuditRun.Status.FAILED)

        if not _wait(finished, 30):
            resumed = True
            audit_run_resume(audit_run_id=run.pk)
            _publish(run.pk, broker_url, tmp_path)
            assert _wait(finished, 120), AuditRun.objects.get(pk=run.pk).__dict__
        run.refresh_from_db()
        logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in tmp_path.glob("worker-*.log"))
        assert run.status == AuditRun.Status.DONE, (run.error, logs)
        assert _suspects(run.pk) == expected
        assert run.replays_done == run.replays_total
        keys = [lab.evidence.get("idempotency_key") for lab in EpistemicLabel.objects.filter(memory__store=store)]
        assert len([k for k in keys if k]) == len({k for k in keys if k}), "a label was appended twice"
        TABLES["faults: audit (fault | replays done at the fault | resumed by | suspects)"].append(
            (f"{fault} ({connection.vendor})", f"{done_at_fault}/{run.replays_total}",
             "audit_run_resume" if resumed else "itself", f"same {len(expected)}"))
    finally:
        for w in workers:
            _stop(w)
        if proxy is not None:
            proxy.stop()


# ------------------------------------------------------------------------------ recall outage


def test_recall_during_a_database_outage_answers_clean_503s_never_wrong_answers(recall_env, store, housekeeper):
    """Set up through the real server, then route the connection through the proxy."""
    from django.test import Client

    from ledger.agent_tokens import agent_token_create
    from ledger.imports import memories_import

    if connection.vendor != "postgresql":
        pytest.skip("the database outage is simulated in front of PostgreSQL (DATABASE_URL=postgres://...)")
    data = "\n".join(json.dumps({"id": f"m{n}", "text": f"Fact number {n} about rivers and towns."})
                     for n in range(20)).encode()
    assert memories_import(store=store, data=data, filename="m.jsonl", inline=True, classify=False).status == "done"
    _, token = agent_token_create(store=store, name="agent")
    proxy = TcpProxy(int(connection.settings_dict["PORT"] or 5432)).start()
    original = connection.settings_dict["HOST"], connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["HOST"], connection.settings_dict["PORT"] = "127.0.0.1", str(proxy.port)
    client = Client(raise_request_exception=False)
    url = f"/api/v1/stores/{store.pk}/recall"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    outcomes: dict[str, list[int]] = {"before": [], "during": [], "after": []}
    try:
        for phase in ("before", "during", "after"):
            if phase == "during":
                proxy.stop()
            if phase == "after":
                proxy.start()
            for n in range(5):
                resp = client.post(url, json.dumps({"query": f"rivers {n}", "k": 3}), content_type="application/json",
                                   **auth)
                outcomes[phase].append(resp.status_code)
                # What Django runs at the end of every request in production (the test client
                # disconnects it): an unusable connection is closed, the next request reconnects.
                close_old_connections()
                if resp.status_code == 200:
                    assert phase != "during", "an answer while the database was down"
                    assert len(resp.json()["results"]) == 3
                elif phase == "during":
                    assert resp["Content-Type"].startswith("application/json"), resp.content[:200]
                    assert resp.status_code == 503, (resp.status_code, resp.content[:300])
    finally:
        proxy.stop()
        connection.close()
        connection.settings_dict["HOST"], connection.settings_dict["PORT"] = original
        TABLES["faults: recall through a database outage (phase: status codes)"].append(
            tuple(f"{k}: {v}" for k, v in outcomes.items()))
    assert outcomes["before"] == [200] * 5 and outcomes["after"] == [200] * 5, outcomes
