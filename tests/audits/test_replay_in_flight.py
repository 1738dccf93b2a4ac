"""Issue 17, "replays in flight", through the product path: an audit against a registered
webhook endpoint sends a chunk's replays together, at most ``AGENT_MAX_IN_FLIGHT`` at once, and
ranks exactly what the same audit ranks one call at a time."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audits import services
from audits.endpoints import agent_endpoint_create
from audits.models import AuditRun
from tests.audits.factories import poisoned_store_import


class SlowAgent:
    """A webhook agent on 127.0.0.1: answers like the built-in vote's reading of the top memory
    (its "A:" line), after 30 ms; counts the calls it has in flight."""

    def __init__(self):
        self.now = self.peak = self.calls = 0
        lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    stub.now += 1
                    stub.calls += 1
                    stub.peak = max(stub.peak, stub.now)
                time.sleep(0.03)
                with lock:
                    stub.now -= 1
                answer = "I don't know"
                for m in body["memories"]:
                    lines = [ln[2:].strip() for ln in m["text"].splitlines() if ln.startswith("A:")]
                    if lines:
                        answer = lines[-1]
                        break
                data = json.dumps({"output": answer}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slow_agent(settings):
    agent = SlowAgent()
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{agent.port}"
    yield agent
    agent.close()


def _audit(org, alice, slug, bound, settings, slow_agent, capture):
    settings.AGENT_MAX_IN_FLIGHT = bound
    services._CONTEXTS.items.clear()
    ps = poisoned_store_import(organization=org, slug=slug)
    incidents = services.incidents_import(store=ps.store, data=ps.incidents_jsonl(), filename="i.jsonl", user=alice)
    slow_agent.peak = slow_agent.calls = 0
    with capture(execute=True):
        run = services.audit_run_create(store=ps.store, incident_ids=[i.pk for i in incidents], user=alice,
                                        settings={"agent": {"endpoint": "slow", "top_k": 5}})
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    ranked = [(s.memory.external_id, round(s.ds, 9)) for s in run.suspects.select_related("memory").order_by("rank")]
    return run, ranked, slow_agent.peak, slow_agent.calls


def test_replays_go_out_together_bounded_with_the_same_ranking(acme, alice, housekeeping, slow_agent, settings,
                                                               django_capture_on_commit_callbacks):
    cap = django_capture_on_commit_callbacks
    agent_endpoint_create(organization=acme, user=None, name="slow", connector="webhook",
                          base_url=f"http://127.0.0.1:{slow_agent.port}/agent", options={"retries": 0})
    one_run, one, one_peak, one_calls = _audit(acme, alice, "one", 1, settings, slow_agent, cap)
    par_run, par, par_peak, par_calls = _audit(acme, alice, "par", 4, settings, slow_agent, cap)
    assert one_peak == 1 and 1 < par_peak <= 4
    assert par == one and par and par_calls == one_calls
    assert par_run.results["agent_calls"] == one_run.results["agent_calls"]
    assert par_run.replays_done == par_run.replays_total == one_run.replays_total
