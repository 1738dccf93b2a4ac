"""Issue 11, "agent egress policy": an analyst must not read files, internal services or the
worker's environment through an audit connector, nor see another member's secret.

Reproductions (each failed on main): a ``file://`` webhook URL put a key file into the run's
``error``; ``http://127.0.0.1:<port>/`` reflected an internal reply's JSON keys into it; open
and closed ports gave different errors; ``api_key_env`` sent a worker variable as a Bearer
header; a plaintext ``api_key`` came back from ``GET /api/v1/audits/{id}/``; an analyst of
another organization could do the same. Now analysts pick an endpoint an org admin registered
(URL and encrypted, write-only secret), and every request goes through
``egress.client`` (http(s) only, internal addresses refused unless
``AGENT_EGRESS_ALLOW`` names them, no redirects, capped size and time, errors without bodies).

The local stub agents here listen on 127.0.0.1, so each test that reaches one sets
``AGENT_EGRESS_ALLOW`` to exactly that address:port.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audits import services
from audits.engine.agents import make_agent
from audits.models import AgentEndpoint, AuditRun
from egress import client as egress
from orgs.models import ActivityEvent, Role
from tests.conftest import _member

pytestmark = pytest.mark.django_db

INTERNAL_REPLY = {"internal_service_token": "tok-INTERNAL-7f3a", "db_password": "pw-INTERNAL"}
SECRET = "sk-ENDPOINT-SECRET-91c2"


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def _audit_env(settings):
    from ledger.embedding_store import index_invalidate
    from orgs.secret_box import secrets_reset

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    settings.AGENT_EGRESS_ALLOW = ""
    settings.AGENT_SECRETS_KEY = "3E0no6nyitZj9yQcoek3UihoPEU89SJEPtnW3ss-l0s="
    secrets_reset()
    index_invalidate()
    services._CONTEXTS.items.clear()
    yield
    secrets_reset()
    index_invalidate()
    services._CONTEXTS.items.clear()


class Stub:
    """An HTTP server on 127.0.0.1 answering every POST with ``reply`` (status, headers, body)."""

    def __init__(self, status=200, body=None, headers=None, delay=0.0, trickle=None):
        self.requests: list[tuple[str, dict, bytes]] = []
        stub = self
        payload = json.dumps(INTERNAL_REPLY if body is None else body).encode() if not isinstance(body, bytes) \
            else body

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                stub.requests.append((self.path, dict(self.headers), self.rfile.read(n)))
                if delay:
                    time.sleep(delay)
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                if trickle is None:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if trickle is not None:
                    for _ in range(trickle[0]):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(trickle[1])
                else:
                    self.wfile.write(payload)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that hangs up early (the size and time caps do) is expected here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stubs():
    made: list[Stub] = []

    def make(**kw) -> Stub:
        made.append(Stub(**kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture
def world(org_a, org_b, alice, dana, charlie, monkeypatch, django_capture_on_commit_callbacks):
    """Acme (org_a): Alice the analyst, Dana the admin; Globex (org_b): Charlie (admin) and
    Erin, an analyst. Both have a store with incidents."""
    from ledger.services import housekeeper_init
    from tests.audits.factories import poisoned_store_import

    monkeypatch.setenv("MEMAUDIT_ROLE", "housekeeper")
    housekeeper_init(organization=org_a)
    housekeeper_init(organization=org_b)
    erin = _member(org_b, "erin", Role.ANALYST)
    out = {}
    for org, user, key in ((org_a, alice, "a"), (org_b, erin, "b")):
        ps = poisoned_store_import(organization=org, slug=f"main-{key}", n_topics=4, n_targets=1)
        incidents = services.incidents_import(store=ps.store, data=ps.incidents_jsonl(), filename="i.jsonl",
                                              user=user)
        out[key] = (ps.store, [incidents[0].pk])
    return {"a": out["a"], "b": out["b"], "alice": alice, "dana": dana, "erin": erin, "charlie": charlie}


def _api(client, user, method, url, body=None):
    client.force_login(user)
    if body is None:
        return getattr(client, method)(url)
    return getattr(client, method)(url, json.dumps(body), content_type="application/json")


def _start(client, user, store_and_incidents, agent, capture):
    store, incident_ids = store_and_incidents
    with capture(execute=True):
        return _api(client, user, "post", "/api/v1/audits/create/",
                    {"store": store.pk, "incident_ids": incident_ids, "settings": {"agent": agent}})


def _register(client, admin, **fields):
    body = {"name": "agent", "connector": "webhook", **fields}
    r = _api(client, admin, "post", "/api/v1/agent-endpoints/", body)
    assert r.status_code == 201, r.content
    return r.json()


def _everything_a_member_sees(client, user, run_id) -> str:
    """The run as the API and the audit page show it to a member."""
    client.force_login(user)
    return (client.get(f"/api/v1/audits/{run_id}/").content.decode()
            + client.get(f"/api/v1/audits/{run_id}/progress/").content.decode()
            + client.get(f"/audits/{run_id}/").content.decode())


# ----------------------------------------------------------------------------- reproductions


@pytest.mark.parametrize("who", ["alice", "erin"])
def test_a_file_url_never_reaches_a_connector(client, world, who, tmp_path, django_capture_on_commit_callbacks):
    key = tmp_path / "epoch-1.key"
    key.write_text("PRIVATE-SEED-0123456789abcdef")
    store = world["a"] if who == "alice" else world["b"]
    r = _start(client, world[who], store, {"connector": "webhook", "url": f"file://{key}"},
               django_capture_on_commit_callbacks)
    # main: 201 and the key file's text in the run's error (API and page). Now: a clear 400.
    assert r.status_code == 400, r.content
    assert "url: not accepted in audit settings" in r.content.decode()
    assert not AuditRun.objects.exists()
    # An admin cannot register one either, and the client itself refuses the scheme.
    r = _api(client, world["dana"], "post", "/api/v1/agent-endpoints/",
             {"name": "f", "connector": "webhook", "base_url": f"file://{key}"})
    assert r.status_code == 400 and "base_url" in r.json()
    with pytest.raises(egress.EgressError) as exc:
        egress.post_json(f"file://{key}", {}, headers={}, timeout=2, policy=egress.EgressPolicy())
    assert exc.value.category == egress.BLOCKED and "PRIVATE-SEED" not in str(exc.value)


def test_an_internal_service_is_refused_and_its_reply_never_reflected(client, world, stubs, settings,
                                                                      django_capture_on_commit_callbacks):
    internal = stubs()
    # main: the analyst's raw URL was accepted and the reply's keys landed in the error.
    r = _start(client, world["alice"], world["a"], {"connector": "webhook", "url": internal.url + "/"},
               django_capture_on_commit_callbacks)
    assert r.status_code == 400 and "url: not accepted" in r.content.decode()

    # An admin registers it (a typo, or an insider admin): not in AGENT_EGRESS_ALLOW -> blocked
    # before any packet is sent.
    _register(client, world["dana"], name="internal", base_url=internal.url + "/")
    r = _start(client, world["alice"], world["a"], {"endpoint": "internal"}, django_capture_on_commit_callbacks)
    assert r.status_code == 201, r.content
    run = AuditRun.objects.get(pk=r.json()["id"])
    assert run.status == AuditRun.Status.FAILED
    assert "agent request blocked" in run.error and internal.requests == []

    # Allowed by the operator, the reply has no "output": the error says so without the body.
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{internal.port}"
    AuditRun.objects.all().delete()
    services._CONTEXTS.items.clear()
    r = _start(client, world["alice"], world["a"], {"endpoint": "internal", "top_k": 4},
               django_capture_on_commit_callbacks)
    run = AuditRun.objects.get(pk=r.json()["id"])
    assert run.status == AuditRun.Status.FAILED and internal.requests
    assert re.fullmatch(r"agent error: agent request bad-response, request id [0-9a-f]{12}", run.error), run.error
    seen = _everything_a_member_sees(client, world["alice"], run.pk)
    for leaked in ("internal_service_token", "tok-INTERNAL", "db_password", "pw-INTERNAL", str(internal.port)):
        assert leaked not in seen, leaked


def test_error_bodies_stay_in_the_server_log(stubs, caplog):
    internal = stubs(status=500, body={"trace": "Traceback SECRET-TRACE"})
    policy = egress.EgressPolicy.from_setting(f"127.0.0.1:{internal.port}")
    agent = make_agent({"connector": "webhook", "url": internal.url, "retries": 0}, egress=policy)
    with caplog.at_level("WARNING", logger="memaudit.egress"), pytest.raises(Exception) as exc:
        agent.answer("q", [])
    assert "SECRET-TRACE" not in str(exc.value) and "HTTP 500" in str(exc.value)
    rid = re.search(r"request id ([0-9a-f]{12})", str(exc.value)).group(1)
    assert any(rid in r.getMessage() and "SECRET-TRACE" in r.getMessage() for r in caplog.records)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _open_non_http_port():
    """A listener that accepts and hangs up: what a database or Redis port looks like to HTTP."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def loop():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                c.close()
            except OSError:
                pass

    threading.Thread(target=loop, daemon=True).start()
    return srv, stop


def test_open_and_closed_ports_read_the_same(client, world, settings, django_capture_on_commit_callbacks):
    srv, stop = _open_non_http_port()
    try:
        open_port, closed_port = srv.getsockname()[1], _closed_port()
        errors = {}
        for allow in ("", "127.0.0.0/8"):
            settings.AGENT_EGRESS_ALLOW = allow
            for name, port in (("open", open_port), ("closed", closed_port)):
                AgentEndpoint.objects.filter(name=name).delete()
                _register(client, world["dana"], name=name, base_url=f"http://127.0.0.1:{port}/",
                          options={"retries": 0, "timeout": 2})
                AuditRun.objects.all().delete()
                services._CONTEXTS.items.clear()
                r = _start(client, world["alice"], world["a"], {"endpoint": name},
                           django_capture_on_commit_callbacks)
                errors[(allow, name)] = re.sub(r"request id [0-9a-f]{12}", "request id X",
                                               AuditRun.objects.get(pk=r.json()["id"]).error)
        assert errors[("", "open")] == errors[("", "closed")] == "agent error: agent request blocked, request id X"
        assert errors[("127.0.0.0/8", "open")] == errors[("127.0.0.0/8", "closed")] \
            == "agent error: agent request unreachable, request id X"
    finally:
        stop.set()
        srv.close()


def test_api_key_env_cannot_send_a_worker_variable(client, world, stubs, settings, monkeypatch,
                                                   django_capture_on_commit_callbacks):
    sink = stubs(body={"choices": [{"message": {"content": "ok"}}]})
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{sink.port}"
    monkeypatch.setenv("MEMAUDIT_TEST_WORKER_SECRET", "WORKER-ENV-SECRET")
    r = _start(client, world["alice"], world["a"],
               {"connector": "openai-chat", "base_url": sink.url + "/v1", "model": "m",
                "api_key_env": "MEMAUDIT_TEST_WORKER_SECRET"}, django_capture_on_commit_callbacks)
    assert r.status_code == 400
    body = r.content.decode()
    assert "api_key_env: not accepted in audit settings" in body and "base_url: not accepted" in body
    r = _start(client, world["alice"], world["a"],
               {"connector": "openai-chat", "model": "m", "api_key_env": "MEMAUDIT_TEST_WORKER_SECRET"},
               django_capture_on_commit_callbacks)
    assert r.status_code == 400 and "api_key_env" in r.content.decode()
    assert sink.requests == [] and not AuditRun.objects.exists()
    with pytest.raises(ValueError, match="api_key_env"):  # the engine itself refuses to read it
        make_agent({"connector": "openai-chat", "base_url": sink.url, "api_key_env": "HOME"})


def test_a_plaintext_api_key_is_refused_and_an_endpoint_secret_is_write_only(
        client, world, stubs, settings, django_capture_on_commit_callbacks):
    r = _start(client, world["alice"], world["a"], {"connector": "openai-chat", "model": "m", "api_key": "sk-PLAIN"},
               django_capture_on_commit_callbacks)
    assert r.status_code == 400 and "api_key: not accepted" in r.content.decode()

    agent = stubs(body={"output": "The answer is Paris."})
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{agent.port}"
    created = _register(client, world["dana"], name="ours", base_url=agent.url + "/hook", secret=SECRET)
    assert SECRET not in json.dumps(created) and created["has_secret"] is True
    ep = AgentEndpoint.objects.get(name="ours")
    assert SECRET.encode() not in bytes(ep.secret_encrypted)

    r = _start(client, world["alice"], world["a"], {"endpoint": "ours"}, django_capture_on_commit_callbacks)
    assert r.status_code == 201, r.content
    run = AuditRun.objects.get(pk=r.json()["id"])
    assert run.status == AuditRun.Status.DONE, run.error
    # The secret works (it reached the agent) ...
    assert agent.requests and all(h.get("Authorization") == f"Bearer {SECRET}" for _, h, _ in agent.requests)
    # ... and no member, the admin included, ever reads it back.
    for user in (world["alice"], world["dana"]):
        client.force_login(user)
        pages = [client.get(u).content.decode() for u in (
            "/api/v1/agent-endpoints/", f"/api/v1/agent-endpoints/{ep.pk}/", "/agents/",
            f"/api/v1/audits/{run.pk}/", f"/audits/{run.pk}/", "/api/v1/audits/")]
        if user == world["dana"]:
            pages.append(client.get(f"/agents/{ep.pk}/").content.decode())
            pages.append(client.post(f"/agents/{ep.pk}/", {"name": "ours", "connector": "webhook",
                                                            "base_url": "not a url"}).content.decode())
        for page in pages:
            assert SECRET not in page
    assert SECRET not in json.dumps(run.settings)
    assert not any(SECRET in json.dumps(e.detail) or SECRET in e.target for e in ActivityEvent.objects.all())
    assert {"agent_endpoint.create"} <= set(ActivityEvent.objects.values_list("verb", flat=True))


def test_another_organizations_analyst_gets_nothing(client, world, stubs, settings,
                                                    django_capture_on_commit_callbacks):
    agent = stubs(body={"output": "x"})
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{agent.port}"
    created = _register(client, world["dana"], name="acme-agent", base_url=agent.url, secret=SECRET)
    erin = world["erin"]
    r = _start(client, erin, world["b"], {"connector": "webhook", "url": "file:///etc/passwd"},
               django_capture_on_commit_callbacks)
    assert r.status_code == 400
    r = _start(client, erin, world["b"], {"endpoint": "acme-agent"}, django_capture_on_commit_callbacks)
    assert r.status_code == 400 and "no agent endpoint named 'acme-agent'" in r.content.decode()
    assert _api(client, erin, "get", f"/api/v1/agent-endpoints/{created['id']}/").status_code == 404
    assert "acme-agent" not in _api(client, erin, "get", "/api/v1/agent-endpoints/").content.decode()
    assert _api(client, world["charlie"], "patch", f"/api/v1/agent-endpoints/{created['id']}/",
                {"base_url": "http://evil.example/"}).status_code == 404
    assert agent.requests == []


def test_only_org_admins_register_change_or_delete_endpoints(client, world):
    alice, dana = world["alice"], world["dana"]
    body = {"name": "x", "connector": "webhook", "base_url": "https://agent.example/hook"}
    assert _api(client, alice, "post", "/api/v1/agent-endpoints/", body).status_code == 403
    client.force_login(alice)
    assert client.post("/agents/", body).status_code == 403
    ep = _register(client, dana, **{**body, "name": "y"})
    assert _api(client, alice, "patch", f"/api/v1/agent-endpoints/{ep['id']}/", {"model": "z"}).status_code == 403
    assert _api(client, alice, "delete", f"/api/v1/agent-endpoints/{ep['id']}/").status_code == 403
    assert _api(client, alice, "get", f"/api/v1/agent-endpoints/{ep['id']}/").status_code == 200
    r = _api(client, dana, "patch", f"/api/v1/agent-endpoints/{ep['id']}/", {"secret": "new-secret-1"})
    assert r.status_code == 200 and r.json()["has_secret"] and "new-secret-1" not in r.content.decode()
    assert _api(client, dana, "delete", f"/api/v1/agent-endpoints/{ep['id']}/").status_code == 204
    verbs = list(ActivityEvent.objects.filter(verb__startswith="agent_endpoint.").values_list("verb", flat=True))
    assert sorted(verbs) == ["agent_endpoint.create", "agent_endpoint.delete", "agent_endpoint.update"]


def test_the_audit_page_offers_registered_endpoints_and_no_url_field(client, world, stubs, settings,
                                                                     django_capture_on_commit_callbacks):
    agent = stubs(body={"output": "x"})
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{agent.port}"
    _register(client, world["dana"], name="ours", base_url=agent.url)
    client.force_login(world["alice"])
    store, incident_ids = world["a"]
    page = client.get(f"/audits/new/?store={store.pk}").content.decode()
    assert 'value="endpoint:ours"' in page and 'name="url"' not in page and 'name="base_url"' not in page
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post("/audits/new/", {"store": store.pk, "incidents": incident_ids, "connector": "endpoint:ours",
                                         "top_k": 5, "alpha": 0.6})
    assert r.status_code == 302, r.content.decode()[:2000]
    run = AuditRun.objects.get()
    assert run.settings["agent"]["endpoint"] == "ours" and run.status == AuditRun.Status.DONE, run.error
    assert "url" not in run.settings["agent"] and agent.requests


# ----------------------------------------------------------------------------- the client


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "100.100.100.200",
    "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "192.0.0.192",
])
def test_internal_addresses_are_refused(address):
    assert egress.is_internal(ipaddress.ip_address(address))
    assert not egress.EgressPolicy().allowed("h", ipaddress.ip_address(address), 80)


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address):
    assert not egress.is_internal(ipaddress.ip_address(address))


def test_the_allow_list_names_addresses_networks_and_ports():
    p = egress.EgressPolicy.from_setting("127.0.0.1:8088, 10.0.0.0/8, [::1]:9000, llm.internal:443")
    ip = ipaddress.ip_address
    assert p.allowed("x", ip("127.0.0.1"), 8088) and not p.allowed("x", ip("127.0.0.1"), 8089)
    assert p.allowed("x", ip("10.9.9.9"), 1) and p.allowed("x", ip("::1"), 9000)
    assert p.allowed("llm.internal", ip("192.168.0.5"), 443) and not p.allowed("llm.internal", ip("192.168.0.5"), 80)
    assert not p.allowed("x", ip("169.254.169.254"), 80)
    for bad in ("127.0.0.1:http", "[::1", "a b", "10.0.0.0/33:1"):
        with pytest.raises(ValueError):
            egress.parse_allow(bad)


def test_a_rebinding_name_is_refused_and_the_checked_address_is_the_one_connected(stubs):
    agent = stubs(body={"output": "pinned"})
    answers = iter([[ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("127.0.0.1")]])

    def rebinding(host, port):
        return next(answers)

    policy = egress.EgressPolicy(resolver=rebinding)
    with pytest.raises(egress.EgressError) as exc:  # a public and an internal answer: refused
        egress.post_json(f"http://rebind.example:{agent.port}/", {}, headers={}, timeout=2, policy=policy)
    assert exc.value.category == egress.BLOCKED and agent.requests == []

    calls = []

    def pinned(host, port):
        calls.append(host)
        return [ipaddress.ip_address("127.0.0.1")]

    policy = egress.EgressPolicy(allow=egress.parse_allow(f"127.0.0.1:{agent.port}"), resolver=pinned)
    resp = egress.post_json(f"http://rebind.example:{agent.port}/x", {"a": 1}, headers={}, timeout=2, policy=policy)
    assert resp.json_object() == {"output": "pinned"} and calls == ["rebind.example"]
    assert agent.requests[0][1]["Host"] == f"rebind.example:{agent.port}"  # resolved once, connected to it


def test_redirects_are_not_followed(stubs):
    target = stubs(body={"output": "followed"})
    redirect = stubs(status=307, headers={"Location": target.url + "/"}, body={})
    policy = egress.EgressPolicy.from_setting("127.0.0.0/8")
    with pytest.raises(egress.EgressError) as exc:
        egress.post_json(redirect.url, {}, headers={}, timeout=2, policy=policy)
    assert exc.value.category == egress.HTTP_ERROR and exc.value.status == 307 and target.requests == []


def test_responses_are_capped_in_size_and_time(stubs):
    big = stubs(body=b"x" * 300_000)
    policy = egress.EgressPolicy(allow=egress.parse_allow("127.0.0.0/8"), max_bytes=100_000)
    with pytest.raises(egress.EgressError) as exc:
        egress.post_json(big.url, {}, headers={}, timeout=5, policy=policy)
    assert exc.value.category == egress.TOO_LARGE and exc.value.nbytes > 100_000

    slow = stubs(trickle=(50, 0.1))  # one byte every 100 ms: no read ever times out alone
    t0 = time.monotonic()
    with pytest.raises(egress.EgressError) as exc:
        egress.post_json(slow.url, {}, headers={}, timeout=1.0, policy=policy)
    assert exc.value.category == egress.UNREACHABLE and time.monotonic() - t0 < 2.5


def test_settings_reject_a_bad_allow_list(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from memaudit_site.settings import envallow

    monkeypatch.setenv("AGENT_EGRESS_ALLOW_TEST", "127.0.0.1:notaport")
    with pytest.raises(ImproperlyConfigured):
        envallow("AGENT_EGRESS_ALLOW_TEST", "")


def test_the_development_secret_key_is_generated_once_owner_only_and_keys_rotate(settings, tmp_path):
    import stat

    from cryptography.fernet import Fernet

    from orgs import secret_box as endpoints

    settings.AGENT_SECRETS_KEY = ""
    settings.AGENT_SECRETS_KEY_PATH = tmp_path / "var" / "agent-secrets.key"
    endpoints.secrets_reset()
    token = endpoints.secret_encrypt("s3cret")
    path = settings.AGENT_SECRETS_KEY_PATH
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and b"s3cret" not in token
    endpoints.secrets_reset()
    assert endpoints.secret_decrypt(token) == "s3cret"  # the same key, read back

    old = path.read_text().strip()
    settings.AGENT_SECRETS_KEY = f"{Fernet.generate_key().decode()},{old}"  # a new key first, the old one still reads
    endpoints.secrets_reset()
    assert endpoints.secret_decrypt(token) == "s3cret"
    settings.AGENT_SECRETS_KEY = Fernet.generate_key().decode()  # the old key gone: a clear error, no detail
    endpoints.secrets_reset()
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="cannot be decrypted") as exc:
        endpoints.secret_decrypt(token)
    assert "s3cret" not in str(exc.value)


def test_operator_tools_allow_exactly_the_url_they_were_given():
    p = egress.policy_for_url("http://127.0.0.1:8088/v1")
    ip = ipaddress.ip_address
    assert p.allowed("127.0.0.1", ip("127.0.0.1"), 8088) and not p.allowed("127.0.0.1", ip("127.0.0.1"), 6379)
    assert egress.policy_for_url("http://[::1]:9000/").allowed("::1", ip("::1"), 9000)


def _self_signed(tmp_path, name: str):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_https_is_pinned_to_the_checked_address_and_verifies_the_host_name(stubs, tmp_path):
    import ssl

    agent = stubs(body={"output": "over tls"})
    cert, key = _self_signed(tmp_path, "agent.internal")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    agent.server.socket = server_ctx.wrap_socket(agent.server.socket, server_side=True)
    trust = ssl.create_default_context(cafile=str(cert))
    loopback = [ipaddress.ip_address("127.0.0.1")]
    policy = egress.EgressPolicy(allow=egress.parse_allow(f"127.0.0.1:{agent.port}"), tls_context=trust,
                                 resolver=lambda host, port: loopback)
    resp = egress.post_json(f"https://agent.internal:{agent.port}/", {}, headers={}, timeout=3, policy=policy)
    assert resp.json_object() == {"output": "over tls"}
    with pytest.raises(egress.EgressError) as exc:  # the certificate names another host
        egress.post_json(f"https://other.internal:{agent.port}/", {}, headers={}, timeout=3, policy=policy)
    assert exc.value.category == egress.UNREACHABLE and "certificate" not in str(exc.value).lower()


def test_the_llm_judge_is_a_registered_endpoint_or_the_servers_llm_never_a_url_from_the_analyst(
        client, world, stubs, settings, django_capture_on_commit_callbacks):
    judge = stubs(body={"choices": [{"message": {"content": "NO"}}]})
    server_llm = stubs(body={"choices": [{"message": {"content": "NO"}}]})
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{judge.port},127.0.0.1:{server_llm.port}"
    settings.LLM_BASE_URL = server_llm.url + "/v1"
    _register(client, world["dana"], name="judge", connector="openai-chat", base_url=judge.url + "/v1", model="j",
              secret=SECRET)
    store, incident_ids = world["a"]
    with django_capture_on_commit_callbacks(execute=True):
        r = _api(client, world["alice"], "post", "/api/v1/audits/create/", {
            "store": store.pk, "incident_ids": incident_ids,
            "settings": {"harm": {"type": "llm-judge", "goal": "x", "base_url": "http://evil.example/v1"}}})
    assert r.status_code == 400 and "base_url: not accepted" in r.content.decode()

    # An incident whose own llm-judge spec carries a URL and api_key_env: both are dropped.
    from audits.models import Incident

    some = Incident.objects.get(pk=incident_ids[0])
    inc = services.incident_create(store=store, query="q?", output="o", retrieved=some.retrieved, user=world["alice"],
                                   harm={"type": "llm-judge", "goal": "x", "base_url": "http://evil.example/v1",
                                         "api_key_env": "SECRET_KEY"})
    with django_capture_on_commit_callbacks(execute=True):
        r = _api(client, world["alice"], "post", "/api/v1/audits/create/", {
            "store": store.pk, "incident_ids": [inc.pk], "settings": {"harm": {"type": "contains", "target": "x"}}})
    run = AuditRun.objects.get(pk=r.json()["id"])
    assert run.status == AuditRun.Status.DONE, run.error
    assert server_llm.requests and not any("Authorization" in h for _, h, _ in server_llm.requests)

    # The run's default harm (for incidents without their own) judged by a registered endpoint.
    plain = services.incident_create(store=store, query="q2?", output="o", retrieved=some.retrieved,
                                     user=world["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        r = _api(client, world["alice"], "post", "/api/v1/audits/create/", {
            "store": store.pk, "incident_ids": [plain.pk],
            "settings": {"harm": {"type": "llm-judge", "goal": "say EvilTon", "endpoint": "judge"}}})
    assert r.status_code == 201, r.content
    run = AuditRun.objects.get(pk=r.json()["id"])
    assert run.status == AuditRun.Status.DONE, run.error
    assert judge.requests and all(h.get("Authorization") == f"Bearer {SECRET}" for _, h, _ in judge.requests)
    assert SECRET not in _everything_a_member_sees(client, world["alice"], run.pk)
