"""Failed-login throttling per (username, client address), shared across web processes
through the cache. Successful logins are never throttled by someone else's guesses for a
different address."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache


def _key(username: str, address: str) -> str:
    digest = hashlib.sha256(f"{username.lower()}|{address}".encode()).hexdigest()[:32]
    return f"login-failures:{digest}"


def client_address(request) -> str:
    if settings.SECURE_PROXY_SSL_HEADER:  # behind a trusted proxy: its X-Forwarded-For
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded:
            return forwarded.split(",")[0].strip()
    return request.META.get("REMOTE_ADDR", "")


def login_blocked(username: str, address: str) -> bool:
    return cache.get(_key(username, address), 0) >= settings.LOGIN_MAX_FAILURES


def login_failed(username: str, address: str) -> None:
    key = _key(username, address)
    if cache.add(key, 1, settings.LOGIN_LOCKOUT_SECONDS):
        return
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, settings.LOGIN_LOCKOUT_SECONDS)


def login_succeeded(username: str, address: str) -> None:
    cache.delete(_key(username, address))
