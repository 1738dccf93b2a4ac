"""The one HTTP client for every outgoing request (issue 11, "agent egress policy").

An audit connector sends the store's memories to a URL and reads an answer back, and a
notification webhook posts to a URL an admin typed, on workers that also hold database
credentials and sit next to internal services. So every request:

- speaks ``http`` or ``https`` only (``file:``, ``ftp:``, ``gopher:``... are refused);
- resolves the host once, refuses any address that is not globally routable — loopback,
  RFC 1918 private, link-local, CGNAT (100.64/10), multicast, unspecified, reserved, the cloud
  metadata addresses, and the same inside IPv6 (IPv4-mapped, 6to4, NAT64, ULA) — unless the
  operator's allow-list names it, and then connects to *that* checked address (TLS still
  verifies the certificate against the host name), so a DNS answer that changes between the
  check and the connection (rebinding) cannot steer the request;
- follows no redirect (a 3xx is an error);
- caps the response at ``max_bytes`` and the whole exchange at a deadline;
- fails with an ``EgressError`` whose text carries only a category, the HTTP status, the byte
  count and a request id. The detail (body excerpt, socket error, address) goes to the server
  log under that request id, never to the user: a reflected body or a distinguishable socket
  error would turn the connector into a file reader or a port scanner.

Pure: no Django. The allow-list is an argument (``EgressPolicy``); the Django side builds it
from the ``AGENT_EGRESS_ALLOW`` setting.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger("memaudit.egress")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_TIMEOUT = 60.0

# Addresses that are global by the IANA tables but serve instance metadata on some clouds
# (Alibaba 100.100.100.200 is inside CGNAT anyway; listed so the intent is explicit).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "169.254.169.253", "100.100.100.200", "192.0.0.192",
    "fd00:ec2::254", "fd00:ec2::23"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")

# Categories users see. Connection refused, reset, timeout, DNS and TLS failures all read
# "unreachable": telling them apart is what makes a port scanner.
BLOCKED = "blocked"            # refused by the policy before any packet: scheme, address, URL
UNREACHABLE = "unreachable"    # DNS, connect, TLS, timeout, connection dropped
HTTP_ERROR = "http-error"      # a non-2xx status (3xx included: redirects are not followed)
TOO_LARGE = "too-large"        # the response exceeded max_bytes
BAD_RESPONSE = "bad-response"  # not JSON, not an object, or not the shape the connector needs


class EgressError(Exception):
    """A failed agent request. ``str()`` is safe to show to users; the detail is in the log."""

    def __init__(self, category: str, *, request_id: str, status: int | None = None,
                 nbytes: int | None = None, transient: bool = False) -> None:
        self.category = category
        self.request_id = request_id
        self.status = status
        self.nbytes = nbytes
        self.transient = transient
        super().__init__(self.public_message())

    def public_message(self) -> str:
        parts = [f"agent request {self.category}"]
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.nbytes is not None:
            parts.append(f"{self.nbytes} bytes")
        parts.append(f"request id {self.request_id}")
        return ", ".join(parts)


@dataclass(frozen=True)
class AllowRule:
    """One allow-list entry: an address or network, or a host name; optionally one port."""

    network: IPNetwork | None = None
    host: str | None = None
    port: int | None = None

    def matches(self, host: str, address: IPAddress, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address in self.network
        return self.host == host.lower().rstrip(".")


def parse_allow(spec: str | Iterable[str]) -> tuple[AllowRule, ...]:
    """``"127.0.0.1:8088, 10.0.0.0/8, [::1]:8088, llm.internal:443"`` -> rules (ValueError if bad)."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    rules = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, port = item, None
        if item.startswith("["):  # [v6]:port or [v6]
            end = item.find("]")
            if end < 0:
                raise ValueError(f"AGENT_EGRESS_ALLOW: unbalanced brackets in {item!r}")
            host, rest = item[1:end], item[end + 1:]
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"AGENT_EGRESS_ALLOW: bad entry {item!r}")
                port = rest[1:]
        elif item.count(":") == 1:  # v4:port or name:port (a bare v6 has several colons)
            host, port = item.split(":")
        port_n = None
        if port is not None:
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"AGENT_EGRESS_ALLOW: bad port in {item!r}")
            port_n = int(port)
        try:
            rules.append(AllowRule(network=ipaddress.ip_network(host, strict=False), port=port_n))
        except ValueError:
            if not host or "/" in host or " " in host:
                raise ValueError(f"AGENT_EGRESS_ALLOW: bad entry {item!r}") from None
            rules.append(AllowRule(host=host.lower().rstrip("."), port=port_n))
    return tuple(rules)


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if address.version != 6:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_internal(address: IPAddress) -> bool:
    """True for every address a connector must not reach unless the operator allows it."""
    inner = _embedded_ipv4(address)
    if inner is not None and is_internal(inner):
        return True
    if address in METADATA_ADDRESSES:
        return True
    if address.version == 4 and address in _CGNAT:
        return True
    if address.version == 6 and address in _NAT64_LOCAL:
        return True
    return (address.is_loopback or address.is_private or address.is_link_local or address.is_multicast
            or address.is_unspecified or address.is_reserved or not address.is_global)


Resolver = Callable[[str, int], list[IPAddress]]


def system_resolver(host: str, port: int) -> list[IPAddress]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if addr not in out:
            out.append(addr)
    return out


@dataclass
class EgressPolicy:
    """The operator's rules for agent requests: the allow-list and the caps."""

    allow: tuple[AllowRule, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    resolver: Resolver = field(default=system_resolver, repr=False)
    # None = the system's trust store; a context with a private CA for internal agents.
    tls_context: ssl.SSLContext | None = field(default=None, repr=False)

    @classmethod
    def from_setting(cls, spec: str | Iterable[str], **kw: Any) -> EgressPolicy:
        return cls(allow=parse_allow(spec), **kw)

    def allowed(self, host: str, address: IPAddress, port: int) -> bool:
        if not is_internal(address):
            return True
        return any(r.matches(host, address, port) for r in self.allow)


def policy_for_url(url: str, **kw: Any) -> EgressPolicy:
    """A policy that allows exactly ``url``'s host:port (besides public addresses): for operator
    tools (benches, management commands) that were given the agent's URL on their command line."""
    parts = urlsplit(url)
    if not parts.hostname:
        return EgressPolicy(**kw)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return EgressPolicy.from_setting(f"{host}:{port}", **kw)


@dataclass
class Response:
    status: int
    body: bytes
    request_id: str

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object, or a ``bad-response`` error (the body goes to the log)."""
        try:
            data = json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        if not isinstance(data, dict):
            logger.warning("egress %s: response is not a JSON object: %r", self.request_id, self.body[:300])
            raise EgressError(BAD_RESPONSE, request_id=self.request_id, status=self.status,
                              nbytes=len(self.body))
        return data

    def bad_shape(self, what: str) -> EgressError:
        """The error for a JSON object that lacks what the connector needs (keys go to the log)."""
        logger.warning("egress %s: %s; body %r", self.request_id, what, self.body[:300])
        return EgressError(BAD_RESPONSE, request_id=self.request_id, status=self.status, nbytes=len(self.body))


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the address the policy checked, whatever DNS says now."""

    def __init__(self, host: str, port: int, address: IPAddress, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((str(self._address), self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: IPAddress, timeout: float,
                 context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((str(self._address), self.port), self.timeout)
        # SNI and certificate checks against the host name, the bytes to the checked address.
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


_TLS_CONTEXT = ssl.create_default_context()


def new_request_id() -> str:
    return uuid.uuid4().hex[:12]


def _redact(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def post_json(url: str, payload: Mapping[str, Any], *, headers: Mapping[str, str], timeout: float,
              policy: EgressPolicy) -> Response:
    """POST ``payload`` as JSON under ``policy``; a 2xx ``Response`` or an ``EgressError``."""
    return post(url, json.dumps(payload).encode("utf-8"), headers={"Accept": "application/json", **headers},
                timeout=timeout, policy=policy)


def post(url: str, body: bytes, *, headers: Mapping[str, str], timeout: float, policy: EgressPolicy) -> Response:
    """POST ``body`` (JSON unless ``headers`` say otherwise) under ``policy``; a 2xx ``Response``
    or an ``EgressError``."""
    rid = new_request_id()
    deadline = time.monotonic() + timeout

    def fail(category: str, detail: str, *, status: int | None = None, nbytes: int | None = None,
             transient: bool = False) -> EgressError:
        logger.warning("egress %s: %s %s: %s", rid, category, _redact(url) if category != BLOCKED else url[:200],
                       detail)
        return EgressError(category, request_id=rid, status=status, nbytes=nbytes, transient=transient)

    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError as exc:
        raise fail(BLOCKED, f"unparsable URL: {exc}") from None
    if scheme not in ("http", "https"):
        raise fail(BLOCKED, f"scheme {scheme!r} is not http(s)")
    if not host:
        raise fail(BLOCKED, "no host")
    if parts.username or parts.password:
        raise fail(BLOCKED, "credentials in the URL")
    try:
        addresses = policy.resolver(host, port)
    except (OSError, UnicodeError, ValueError) as exc:
        raise fail(UNREACHABLE, f"cannot resolve {host!r}: {exc}", transient=True) from None
    if not addresses:
        raise fail(UNREACHABLE, f"{host!r} has no address", transient=True)
    refused = [a for a in addresses if not policy.allowed(host, a, port)]
    if refused:
        # Any internal answer refuses the host: a name that resolves to both a public and an
        # internal address is what a rebinding attack looks like.
        raise fail(BLOCKED, f"{host!r} resolves to {', '.join(map(str, refused))}, not in AGENT_EGRESS_ALLOW")
    address = addresses[0]

    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    remaining = max(0.001, deadline - time.monotonic())
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = _PinnedHTTPSConnection(host, port, address, remaining, policy.tls_context or _TLS_CONTEXT)
    else:
        conn = _PinnedHTTPConnection(host, port, address, remaining)
    try:
        try:
            conn.request("POST", path, body=body, headers={
                "Content-Type": "application/json", "User-Agent": "MemAudit-agent/1", **headers})
            resp = conn.getresponse()
            chunks: list[bytes] = []
            size = 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("total deadline passed while reading the response")
                if conn.sock is not None:
                    conn.sock.settimeout(left)
                chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > policy.max_bytes:
                    raise fail(TOO_LARGE, f"over {policy.max_bytes} bytes", status=resp.status, nbytes=size)
                chunks.append(chunk)
        except EgressError:
            raise
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            raise fail(UNREACHABLE, f"{type(exc).__name__}: {exc}", transient=True) from None
    finally:
        conn.close()
    raw = b"".join(chunks)
    if not 200 <= resp.status < 300:
        transient = resp.status == 429 or resp.status >= 500
        raise fail(HTTP_ERROR, f"HTTP {resp.status}; body {raw[:300]!r}", status=resp.status, nbytes=len(raw),
                   transient=transient)
    return Response(resp.status, raw, rid)


class InFlightGate:
    """At most ``limit`` requests in flight per endpoint (scheme, host, port) in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[tuple[str, int], tuple[int, threading.BoundedSemaphore]] = {}
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    def _key(self, url: str) -> str:
        p = urlsplit(url)
        return f"{p.scheme}://{p.hostname}:{p.port or ''}"

    def gate(self, url: str, limit: int) -> _Held:
        key = self._key(url)
        with self._lock:
            held = self._gates.get((key, limit))
            if held is None:
                held = (limit, threading.BoundedSemaphore(max(1, limit)))
                self._gates[(key, limit)] = held
        return _Held(self, key, held[1])

    def _enter(self, key: str) -> None:
        with self._lock:
            n = self.in_flight.get(key, 0) + 1
            self.in_flight[key] = n
            self.peak[key] = max(self.peak.get(key, 0), n)

    def _exit(self, key: str) -> None:
        with self._lock:
            self.in_flight[key] -= 1


class _Held:
    def __init__(self, owner: InFlightGate, key: str, sem: threading.BoundedSemaphore) -> None:
        self.owner, self.key, self.sem = owner, key, sem

    def __enter__(self) -> None:
        self.sem.acquire()
        self.owner._enter(self.key)

    def __exit__(self, *exc: object) -> None:
        self.owner._exit(self.key)
        self.sem.release()


GATES = InFlightGate()
