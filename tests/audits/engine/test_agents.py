import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audits.engine import agents
from audits.engine.agents import AgentError, TransientHTTPError
from audits.engine.agents import make_agent as _make_agent
from audits.engine.retriever import RetrievedMemory
from egress.client import EgressPolicy

# The stub servers below listen on 127.0.0.1: the policy must allow loopback explicitly.
LOOPBACK = EgressPolicy.from_setting("127.0.0.0/8")


def make_agent(config):
    return _make_agent(config, egress=LOOPBACK)


def mem(i, text, score, **meta):
    return RetrievedMemory(f"m{i}", text, score, i, meta)


def test_vote_picks_the_answer_with_the_largest_score_sum():
    agent = make_agent({"connector": "builtin-vote"})
    out = agent.answer("q", [mem(1, "x", 0.9, answer="Paris"), mem(2, "Q: q\nA: Lyon", 0.6),
                             mem(3, "Q: q\nA: lyon", 0.5)])
    assert out.text == "Lyon" and agent.simulation and "simulation" in agent.label


def test_vote_tie_goes_to_the_higher_ranked_memory():
    agent = make_agent({"connector": "builtin-vote"})
    out = agent.answer("q", [mem(1, "A: Rome", 0.5), mem(2, "A: Oslo", 0.5)])
    assert out.text == "Rome"


def test_vote_uses_the_last_answer_line_and_says_it_does_not_know_without_one():
    agent = make_agent({"connector": "builtin-vote"})
    assert agent.answer("q", [mem(1, "A: first\nthen\nA: last", 1.0)]).text == "last"
    assert agent.answer("q", [mem(1, "no answer here", 1.0)]).text == "I don't know"


def test_reader_counts_score_weighted_mentions_of_candidates():
    agent = make_agent({"connector": "builtin-reader"})
    r = [mem(1, "Paris is nice. Paris!", 0.4), mem(2, "It is Berlin", 0.7)]
    assert agent.answer("q", r, ["Paris", "Berlin"]).text == "Paris"
    assert agent.answer("q", r, ["Madrid"]).text == "I don't know"
    # A candidate number is counted whole, not inside a longer number.
    n = [mem(1, "It was 20.0 ml, then 20.0 again", 0.9), mem(2, "The value was 0.", 0.3)]
    assert agent.answer("q", n, ["0", "20.0"]).text == "20.0"
    assert agent.answer("q", n[:1], ["0"]).text == "I don't know"


def test_config_hash_ignores_secrets_but_not_the_model():
    a = make_agent({"connector": "openai-chat", "base_url": "http://x/v1", "model": "m",
                    "api_key": "s1"})
    b = make_agent({"connector": "openai-chat", "base_url": "http://x/v1", "model": "m",
                    "api_key": "s2"})
    c = make_agent({"connector": "openai-chat", "base_url": "http://x/v1", "model": "n"})
    assert a.config_hash() == b.config_hash() != c.config_hash()


def test_make_agent_rejects_an_unknown_connector():
    with pytest.raises(ValueError):
        make_agent({"connector": "telepathy"})


class _Stub:
    """A tiny OpenAI-compatible server on 127.0.0.1 scripted by a list of behaviours."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, body, dict(self.headers)))
                action = stub.script.pop(0) if stub.script else ("ok", "default")
                if action[0] == "sleep":
                    time.sleep(action[1])
                    action = ("ok", "late")
                if action[0] == "status":
                    self.send_response(action[1])
                    self.end_headers()
                    self.wfile.write(b"busy")
                    return
                if "chat" in self.path:
                    payload = {"choices": [{"message": {"content": f" {action[1]} s{body['seed']}"}}]}
                else:
                    payload = {"output": f"{action[1]}:{len(body['memories'])}"}
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub(request):
    s = _Stub(getattr(request, "param", []))
    yield s
    s.close()


@pytest.mark.parametrize("stub", [[("ok", "Paris"), ("ok", "Lyon")]], indirect=True)
def test_openai_chat_fills_the_template_and_draws_n_seeded_samples(stub):
    agent = make_agent({"connector": "openai-chat", "base_url": stub.url + "/v1", "model": "smol",
                        "api_key": "k", "n_samples": 2, "seed": 7,
                        "prompt_template": "Q={query}\n{memories}"})
    out = agent.answer("capital?", [mem(1, "France: Paris", 0.9)])
    assert out.samples == ["Paris s7", "Lyon s8"] and out.text == "Paris s7"
    path, body, headers = stub.requests[0]
    assert path == "/v1/chat/completions" and body["temperature"] == 0.0
    assert body["messages"][-1]["content"] == "Q=capital?\n[1] France: Paris"
    assert headers["Authorization"] == "Bearer k"


@pytest.mark.parametrize("stub", [[("status", 503), ("status", 429), ("ok", "Paris")]],
                         indirect=True)
def test_openai_chat_retries_transient_errors_with_backoff(stub):
    agent = make_agent({"connector": "openai-chat", "base_url": stub.url + "/v1",
                        "retries": 3, "backoff": 0.01})
    assert agent.answer("q", []).text == "Paris s0"
    assert len(stub.requests) == 3


@pytest.mark.parametrize("stub", [[("status", 400)]], indirect=True)
def test_openai_chat_does_not_retry_a_client_error(stub):
    agent = make_agent({"connector": "openai-chat", "base_url": stub.url + "/v1",
                        "retries": 3, "backoff": 0.01})
    with pytest.raises(AgentError):
        agent.answer("q", [])
    assert len(stub.requests) == 1


@pytest.mark.parametrize("stub", [[("sleep", 0.5), ("sleep", 0.5)]], indirect=True)
def test_openai_chat_times_out_and_gives_up_after_its_retries(stub):
    agent = make_agent({"connector": "openai-chat", "base_url": stub.url + "/v1",
                        "timeout": 0.1, "retries": 1, "backoff": 0.01})
    with pytest.raises(TransientHTTPError):
        agent.answer("q", [])
    assert len(stub.requests) == 2


def test_openai_chat_reports_an_unreachable_server():
    agent = make_agent({"connector": "openai-chat", "base_url": "http://127.0.0.1:9/v1",
                        "retries": 0, "timeout": 1})
    with pytest.raises(TransientHTTPError):
        agent.answer("q", [])


def test_webhook_posts_the_allowed_memories_and_reads_output(stub):
    agent = make_agent({"connector": "webhook", "url": stub.url + "/agent"})
    out = agent.answer("q", [mem(1, "a", 0.9), mem(2, "b", 0.8)], ["x"])
    assert out.text == "default:2"
    body = stub.requests[0][1]
    assert body["query"] == "q" and [m["id"] for m in body["memories"]] == ["m1", "m2"]
    assert body["candidates"] == ["x"]


def test_post_json_is_the_one_network_edge(monkeypatch):
    calls = []

    def fake(url, payload, *, headers, timeout, policy, max_in_flight):
        calls.append(url)
        return {"choices": [{"message": {"content": "ok"}}]}

    monkeypatch.setattr(agents, "_post_json", fake)
    agent = make_agent({"connector": "openai-chat", "base_url": "http://nowhere/v1"})
    assert agent.answer("q", []).text == "ok" and calls == ["http://nowhere/v1/chat/completions"]


def test_without_a_policy_loopback_is_refused_before_any_request(stub):
    agent = _make_agent({"connector": "webhook", "url": stub.url + "/agent", "retries": 0})
    with pytest.raises(AgentError, match="blocked"):
        agent.answer("q", [])
    assert stub.requests == []


@pytest.mark.parametrize("stub", [[("status", 400)]], indirect=True)
def test_an_http_error_names_the_status_but_not_the_body(stub):
    agent = make_agent({"connector": "openai-chat", "base_url": stub.url + "/v1", "retries": 0})
    with pytest.raises(AgentError) as exc:
        agent.answer("q", [])
    assert "HTTP 400" in str(exc.value) and "busy" not in str(exc.value) and "127.0.0.1" not in str(exc.value)


def test_the_cache_key_follows_where_an_endpoint_points_not_its_name_or_secret():
    base = {"connector": "webhook", "url": "https://agent.example/hook", "top_k": 5}
    a = make_agent({**base, "endpoint": "ours", "endpoint_id": 1, "endpoint_rev": "t1",
                    "headers": {"Authorization": "Bearer s1"}})
    b = make_agent({**base, "endpoint": "renamed", "endpoint_id": 1, "endpoint_rev": "t2",
                    "headers": {"Authorization": "Bearer s2"}})
    c = make_agent({**base, "url": "https://other.example/hook", "endpoint": "ours"})
    assert a.config_hash() == b.config_hash() != c.config_hash()
