"""Failed-login throttling, shared across web processes through the cache.

Two counters, both checked before a password is tried:

* per (username, client address): guessing one account's password. Someone else's guesses from
  another address never lock a user out.
* per password, across all usernames and addresses (password spraying: one common password tried
  on many accounts). The key is an HMAC of the password under SECRET_KEY, so the cache never
  holds a password or a plain hash of one. A success does not reset it (an attacker holding one
  account could otherwise keep spraying).
"""

from __future__ import annotations

import hashlib
import hmac

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


def _password_key(password: str) -> str:
    digest = hmac.new(settings.SECRET_KEY.encode(), password.encode("utf-8", "surrogatepass"),
                      hashlib.sha256).hexdigest()[:32]
    return f"login-password-failures:{digest}"


def password_blocked(password: str) -> bool:
    return bool(password) and cache.get(_password_key(password), 0) >= settings.LOGIN_MAX_PASSWORD_FAILURES


def password_failed(password: str) -> None:
    if not password:
        return
    key = _password_key(password)
    if cache.add(key, 1, settings.LOGIN_LOCKOUT_SECONDS):
        return
    try:
        cache.incr(key)
    except ValueError:
        cache.set(key, 1, settings.LOGIN_LOCKOUT_SECONDS)


def request_blocked(key: str, address: str, limit: int, seconds: int) -> bool:
    """A plain per-address budget (password-reset mails): True once ``limit`` is spent."""
    full = f"budget:{key}:{hashlib.sha256(address.encode()).hexdigest()[:24]}"
    if cache.add(full, 1, seconds):
        return False
    try:
        return cache.incr(full) > limit
    except ValueError:
        cache.set(full, 1, seconds)
        return False
