"""Agent connectors for replay: `f(q, R(q, M'))` (DESIGN sections 4 and 5).

Every connector answers `answer(query, retrieved, candidates=None) -> AgentOutput` and has a
`config_hash()` that keys the replay cache. `builtin-vote` and `builtin-reader` are
deterministic **simulations** of an agent (labelled `simulation = True`), for tests and offline
benchmarks; `openai-chat` and `webhook` reach a real agent over HTTP through one narrow
function, `_post_json`, which is the only thing tests mock. `_post_json` goes through
`egress.post_json` under the operator's `EgressPolicy` (http(s) only, no internal address
unless allowed, no redirects, capped size and time), and every error it raises carries a
category, a status, a byte count and a request id — never the response body or a socket error.
Secrets come in the config (`api_key`, from a registered endpoint); never from the worker's
environment by name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from egress import client as egress
from egress.client import EgressError, EgressPolicy

from .retriever import RetrievedMemory
from .words import whole

logger = logging.getLogger("memaudit.egress")

# Config keys that do not change what the agent answers: kept out of the replay cache key.
_UNHASHED = ("api_key", "headers", "timeout", "retries", "backoff", "endpoint", "endpoint_id", "endpoint_rev",
             "max_in_flight")
DEFAULT_MAX_IN_FLIGHT = 16

DONT_KNOW = "I don't know"

DEFAULT_PROMPT = (
    "Answer the question using the memories below. Reply with the answer only.\n\n"
    "Memories:\n{memories}\n\nQuestion: {query}\nAnswer:"
)


@dataclass
class AgentOutput:
    text: str
    samples: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.samples:
            self.samples = [self.text]

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "samples": list(self.samples)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AgentOutput:
        return cls(text=str(d["text"]), samples=[str(s) for s in d.get("samples") or [d["text"]]])


class AgentError(RuntimeError):
    """The agent could not be reached or answered something unusable."""


def canonical_hash(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- settings schema

_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "text": (str,), "int": (int,), "float": (int, float),
                                       "bool": (bool,)}


@dataclass(frozen=True)
class Setting:
    """One setting of a connector or a harm type: what the form, the API and the settings
    cleaner render and check. ``type``: str, text (a long str), int, float or bool.
    ``analyst``: an analyst may give it in audit settings; False for what only an org admin's
    registered endpoint carries (where requests go, credentials)."""

    name: str
    type: str = "str"
    required: bool = False
    default: Any = None
    help: str = ""
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None
    analyst: bool = True
    form: bool = False  # shown on the audit form (the rest stay API / file settings)
    endpoint_option: bool = True  # an option an org admin may store on a registered endpoint

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not acceptable (None: it is)."""
        kinds = _TYPES[self.type]
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            return f"must be {_TYPE_WORDS[self.type]}, got {value!r}"
        if self.type in ("str", "text") and self.required and not value:
            return "must not be empty"
        if self.choices is not None and value not in self.choices:
            return f"one of {', '.join(map(str, self.choices))}"
        if self.min is not None and value < self.min or self.max is not None and value > self.max:
            lo = "" if self.min is None else f"at least {self.min:g}"
            hi = "" if self.max is None else f"at most {self.max:g}"
            return f"must be {' and '.join(x for x in (lo, hi) if x)}, got {value!r}"
        return None


_TYPE_WORDS = {"str": "a string", "text": "a string", "int": "an integer", "float": "a number",
               "bool": "true or false"}


def schema_problems(schema: Sequence[Setting], obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for each setting of ``schema`` that ``obj`` lacks or gets wrong."""
    out = []
    for st in schema:
        if st.name not in obj or obj[st.name] is None:
            if st.required:
                out.append((st.name, "required"))
            continue
        why = st.problem(obj[st.name])
        if why:
            out.append((st.name, why))
    return out


TOP_K = Setting("top_k", "int", default=5, min=1, max=100, help="memories the agent retrieves per query")


@dataclass
class AgentConfig:
    connector: str
    top_k: int = 5
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AgentConfig:
        rest = {k: v for k, v in d.items() if k not in ("connector", "top_k")}
        return cls(connector=str(d["connector"]), top_k=int(d.get("top_k", 5)), settings=rest)

    def to_dict(self) -> dict[str, Any]:
        return {"connector": self.connector, "top_k": self.top_k, **self.settings}


# ----------------------------------------------------------------------------- registry

CONNECTORS: dict[str, type[Agent]] = {}


def register(registry: dict[str, type], name: str, cls: type, what: str) -> type:
    """Add ``cls`` to ``registry`` under ``name``; a second class under one name is an error."""
    if registry.get(name, cls) is not cls:
        raise ValueError(f"{what} {name!r} is registered twice")
    registry[name] = cls
    return cls


def register_connector(cls: type[Agent]) -> type[Agent]:
    """Class decorator: the connector becomes known to agent.json, the audit settings, the
    audit form and the API (they all read ``CONNECTORS``)."""
    return register(CONNECTORS, cls.connector, cls, "connector")


def endpoint_connectors() -> list[str]:
    """Connectors an org admin registers endpoints for: those that reach an agent over HTTP."""
    return [name for name, cls in CONNECTORS.items() if cls.url_setting]


def connector_class(name: Any) -> type[Agent]:
    if name not in CONNECTORS:
        raise ValueError(f"unknown connector {name!r}; one of {', '.join(CONNECTORS)}")
    return CONNECTORS[name]


class Agent:
    """A connector. A subclass declares its ``connector`` name, a ``title`` for pages, its
    ``settings`` schema and, for an HTTP agent, ``url_setting`` (the setting that says where
    requests go: agent.json needs it, an analyst never gives it; an org admin registers it as an
    agent endpoint). ``analyst_title``: offered by that title on the audit form without an
    endpoint (None: only through a registered endpoint). ``check`` adds checks the schema cannot
    say. Register it with ``@register_connector``."""

    connector = "abstract"
    title = "abstract"
    analyst_title: str | None = None
    analyst_noun = ""  # how form errors name it ("required for this server's LLM"); default: the title
    simulation = False
    settings: tuple[Setting, ...] = ()
    url_setting: str | None = None

    @classmethod
    def endpoint_config(cls, *, url: str, model: str, secret: str | None) -> dict[str, Any]:
        """An HTTP connector's config from a registered endpoint: where to go, with what secret."""
        raise NotImplementedError(f"connector {cls.connector!r} does not reach an agent over HTTP")

    @classmethod
    def check(cls, config: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(field, message) for every problem of ``config`` (an agent.json object)."""
        problems = schema_problems((TOP_K, *cls.settings), config)
        if cls.url_setting and not (isinstance(config.get(cls.url_setting), str) and config[cls.url_setting]):
            problems.append((cls.url_setting, f"required for connector {cls.connector!r}"))
        return problems

    def __init__(self, config: Mapping[str, Any], *, egress: EgressPolicy | None = None,
                 max_in_flight: int | None = None) -> None:
        self.config = dict(config)
        if "api_key_env" in self.config:
            # Reading a variable the config names sends any secret of the worker anywhere.
            raise ValueError("api_key_env is not supported: register an agent endpoint with its secret")
        # No policy given = nothing internal is reachable.
        self.egress = egress if egress is not None else EgressPolicy()
        # Calls this agent may have in flight at once (replays run concurrently up to it);
        # 1 for the simulations, which are CPU-bound.
        self.max_in_flight = 1 if self.simulation else max(1, int(max_in_flight or DEFAULT_MAX_IN_FLIGHT))

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        raise NotImplementedError

    def config_hash(self) -> str:
        # Secrets do not change what the agent answers; keep them out of cache keys.
        public = {k: v for k, v in self.config.items() if k not in _UNHASHED}
        return canonical_hash({"connector": self.connector, **public})

    @property
    def label(self) -> str:
        return f"{self.connector} (simulation)" if self.simulation else self.connector


# ----------------------------------------------------------------------------- built-ins

_ANSWER_LINE = re.compile(r"^\s*A:\s*(.*)$")


def memory_answer(mem: RetrievedMemory) -> str | None:
    """A memory's answer: `metadata.answer`, else the text after the last line starting `A:`."""
    ans = mem.metadata.get("answer") if mem.metadata else None
    if isinstance(ans, (str, int, float)) and not isinstance(ans, bool) and str(ans).strip():
        return str(ans).strip()
    found = None
    for line in mem.text.splitlines():
        m = _ANSWER_LINE.match(line)
        if m:
            found = m.group(1).strip()
    return found or None


@register_connector
class BuiltinVoteAgent(Agent):
    """Simulation: the answer with the largest sum of retrieval scores wins.

    Answers are compared case-insensitively; a tie goes to the answer of the higher-ranked
    memory. No memory with an answer -> "I don't know".
    """

    connector = "builtin-vote"
    title = analyst_title = "Built-in vote (majority of the retrieved)"
    simulation = True

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        totals: dict[str, float] = {}
        best_rank: dict[str, int] = {}
        shown: dict[str, str] = {}
        for mem in retrieved:
            ans = memory_answer(mem)
            if ans is None:
                continue
            key = ans.casefold()
            totals[key] = totals.get(key, 0.0) + mem.score
            if key not in best_rank or mem.rank < best_rank[key]:
                best_rank[key] = mem.rank
                shown[key] = ans
        if not totals:
            return AgentOutput(DONT_KNOW)
        win = min(totals, key=lambda k: (-round(totals[k], 9), best_rank[k]))
        return AgentOutput(shown[win])


@register_connector
class BuiltinReaderAgent(Agent):
    """Simulation: the candidate with the largest score-weighted count of mentions wins.

    With `candidates` (from the probe): count case-insensitive mentions of each candidate in
    every retrieved text, weight by that memory's score; none mentioned -> "I don't know"; a
    tie goes to the candidate mentioned by the higher-ranked memory. Without candidates (our
    extension, for incidents that carry none) it reads the top-ranked memory's text.
    """

    connector = "builtin-reader"
    title = analyst_title = "Built-in reader (incident's candidates)"
    simulation = True

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        if not candidates:
            return AgentOutput(retrieved[0].text if retrieved else DONT_KNOW)
        totals: dict[str, float] = {}
        first: dict[str, int] = {}
        for mem in retrieved:
            low = mem.text.casefold()
            for cand in candidates:
                c = cand.casefold().strip()
                if not c:
                    continue
                n = len(re.findall(whole(c), low))
                if n:
                    totals[cand] = totals.get(cand, 0.0) + n * mem.score
                    first.setdefault(cand, mem.rank)
        if not totals:
            return AgentOutput(DONT_KNOW)
        return AgentOutput(min(totals, key=lambda c: (-round(totals[c], 9), first[c])))


# ----------------------------------------------------------------------------- HTTP


# How an HTTP connector retries: the operator's concern, set on a registered endpoint only.
_HTTP_SETTINGS = (
    Setting("timeout", "float", min=0, max=1e6, analyst=False, help="seconds (60)"),
    Setting("retries", "int", min=0, max=1e6, analyst=False, help="on timeouts, 429 and 5xx (3)"),
    Setting("backoff", "float", min=0, max=1e6, analyst=False, help="seconds, doubled per retry (0.5)"),
)


class TransientHTTPError(AgentError):
    """A failure worth retrying: timeout, connection refused, HTTP 429 or 5xx."""


def _post_json(url: str, payload: Mapping[str, Any], *, headers: Mapping[str, str],
               timeout: float, policy: EgressPolicy, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
               ) -> dict[str, Any]:
    """POST JSON, return the decoded JSON object. The one network edge of the engine.

    Errors name a category, status, byte count and request id only (``egress``)."""
    try:
        with egress.GATES.gate(url, max_in_flight):
            return egress.post_json(url, payload, headers=headers, timeout=timeout, policy=policy).json_object()
    except EgressError as exc:
        if exc.transient:
            raise TransientHTTPError(str(exc)) from None
        raise AgentError(str(exc)) from None


def bad_shape(what: str, data: Any) -> AgentError:
    """An answer without the field a connector needs: its keys go to the log, not to the user."""
    rid = egress.new_request_id()
    logger.warning("egress %s: %s: %s", rid, what, str(data)[:300])
    return AgentError(f"agent request {egress.BAD_RESPONSE}, request id {rid}")


def post_with_retries(url: str, payload: Mapping[str, Any], *, headers: Mapping[str, str],
                      timeout: float, retries: int, backoff: float, policy: EgressPolicy,
                      max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> dict[str, Any]:
    """`_post_json` with exponential backoff (backoff · 2^attempt, with jitter) on transient errors."""
    attempt = 0
    while True:
        try:
            return _post_json(url, payload, headers=headers, timeout=timeout, policy=policy,
                              max_in_flight=max_in_flight)
        except TransientHTTPError:
            if attempt >= retries:
                raise
            time.sleep(backoff * (2 ** attempt) * (1.0 + 0.1 * random.random()))
            attempt += 1


def format_memories(retrieved: Sequence[RetrievedMemory], max_chars: int | None = None) -> str:
    lines = []
    for mem in retrieved:
        text = mem.text if max_chars is None else mem.text[:max_chars]
        lines.append(f"[{mem.rank}] {text}")
    return "\n".join(lines)


@register_connector
class OpenAIChatAgent(Agent):
    """Any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp, hosted APIs).

    Settings: `base_url` (…/v1), `model`, `api_key` (from a registered endpoint), `prompt_template`
    (with {query} and {memories}), `system`, `temperature` (0), `seed` (0), `n_samples` (1),
    `max_tokens` (64), `timeout` (s, 60), `retries` (3), `backoff` (s, 0.5),
    `max_memory_chars`. Samples are separate requests with seeds seed, seed+1, …, because many
    local servers ignore `n`.
    """

    connector = "openai-chat"
    title = "OpenAI-compatible chat"
    analyst_title = "This server's LLM (OpenAI-compatible chat)"
    analyst_noun = "this server's LLM"
    url_setting = "base_url"
    settings = (
        Setting("model", "str", help="This server's LLM: model name.", form=True, endpoint_option=False),
        Setting("prompt_template", "text", help="with {query} and {memories}"),
        Setting("system", "text"),
        Setting("temperature", "float", min=0, max=1e6),
        Setting("seed", "int", min=0, max=1e6),
        Setting("n_samples", "int", min=1, max=1e6),
        Setting("max_tokens", "int", min=1, max=1e6),
        Setting("max_memory_chars", "int", min=1, max=1e6),
        *_HTTP_SETTINGS,
    )

    @classmethod
    def endpoint_config(cls, *, url: str, model: str, secret: str | None) -> dict[str, Any]:
        return {"base_url": url, "model": model, **({"api_key": secret} if secret else {})}

    def __init__(self, config: Mapping[str, Any], **kw: Any) -> None:
        super().__init__(config, **kw)
        c = self.config
        if not c.get("base_url"):
            raise ValueError("openai-chat needs base_url")
        self.base_url = str(c["base_url"]).rstrip("/")
        self.model = str(c.get("model", "default"))
        self.template = str(c.get("prompt_template", DEFAULT_PROMPT))
        self.system = c.get("system")
        self.temperature = float(c.get("temperature", 0.0))
        self.seed = int(c.get("seed", 0))
        self.n_samples = max(1, int(c.get("n_samples", 1)))
        self.max_tokens = int(c.get("max_tokens", 64))
        self.timeout = float(c.get("timeout", 60.0))
        self.retries = int(c.get("retries", 3))
        self.backoff = float(c.get("backoff", 0.5))
        self.max_memory_chars = c.get("max_memory_chars")
        key = c.get("api_key")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}

    @property
    def url(self) -> str:
        return self.base_url + "/chat/completions"

    def chat(self, prompt: str) -> list[str]:
        """Send one prompt, return `n_samples` completions."""
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + [
            {"role": "user", "content": prompt}]
        outs = []
        for i in range(self.n_samples):
            payload = {"model": self.model, "messages": messages, "temperature": self.temperature,
                       "seed": self.seed + i, "max_tokens": self.max_tokens}
            data = post_with_retries(self.url, payload, headers=self._headers,
                                     timeout=self.timeout, retries=self.retries,
                                     backoff=self.backoff, policy=self.egress,
                                     max_in_flight=self.max_in_flight)
            try:
                content = data["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise bad_shape("not a chat-completions response", data) from None
            if content is not None and not isinstance(content, str):
                raise bad_shape("chat-completions content is not a string", data)
            outs.append((content or "").strip())
        return outs

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        mems = format_memories(retrieved, self.max_memory_chars)
        prompt = self.template.replace("{memories}", mems).replace("{query}", query)
        samples = self.chat(prompt)
        return AgentOutput(samples[0], samples)


@register_connector
class WebhookAgent(Agent):
    """POST the query and the allowed memories to the customer's own agent.

    Request: {"query", "memories": [{"id", "text", "score", "rank", "metadata"}], "candidates"?}.
    Response: {"output": str} or {"outputs": [str, ...]} (several samples).
    """

    connector = "webhook"
    title = "Webhook (your agent)"
    url_setting = "url"
    settings = _HTTP_SETTINGS

    @classmethod
    def endpoint_config(cls, *, url: str, model: str, secret: str | None) -> dict[str, Any]:
        return {"url": url, **({"headers": {"Authorization": f"Bearer {secret}"}} if secret else {})}

    def __init__(self, config: Mapping[str, Any], **kw: Any) -> None:
        super().__init__(config, **kw)
        if not self.config.get("url"):
            raise ValueError("webhook needs url")
        self.url = str(self.config["url"])
        self.timeout = float(self.config.get("timeout", 60.0))
        self.retries = int(self.config.get("retries", 3))
        self.backoff = float(self.config.get("backoff", 0.5))
        self._headers = {str(k): str(v) for k, v in (self.config.get("headers") or {}).items()}

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        payload: dict[str, Any] = {
            "query": query,
            "memories": [{"id": m.id, "text": m.text, "score": m.score, "rank": m.rank,
                          "metadata": m.metadata} for m in retrieved],
        }
        if candidates:
            payload["candidates"] = list(candidates)
        data = post_with_retries(self.url, payload, headers=self._headers, timeout=self.timeout,
                                 retries=self.retries, backoff=self.backoff, policy=self.egress,
                                 max_in_flight=self.max_in_flight)
        if isinstance(data.get("outputs"), list) and data["outputs"]:
            samples = [str(s) for s in data["outputs"]]
            return AgentOutput(samples[0], samples)
        if "output" not in data:
            raise bad_shape("webhook response has no 'output'", data)
        return AgentOutput(str(data["output"]))


@register_connector
class EchoAgent(Agent):
    """Simulation for tests of the connector seam: answers with ``reply`` when set, else the
    query itself. Adding it took this class and its test, nothing else."""

    connector = "echo"
    title = analyst_title = "Echo (answers with the query or a fixed reply)"
    simulation = True
    settings = (Setting("reply", "str", help="Echo: a fixed answer (empty: the query).", form=True),)

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        return AgentOutput(str(self.config.get("reply") or query))


def make_agent(config: Mapping[str, Any] | AgentConfig, *, egress: EgressPolicy | None = None,
               max_in_flight: int | None = None) -> Agent:
    """Build a connector from an agent.json-style dict (`connector`, `top_k`, settings).

    `egress` is the operator's policy for HTTP connectors (default: nothing internal)."""
    cfg = config.to_dict() if isinstance(config, AgentConfig) else dict(config)
    return connector_class(cfg.get("connector"))(cfg, egress=egress, max_in_flight=max_in_flight)
