"""The secret box: secrets the product must use later but nobody may read back (agent endpoint
API keys, webhook signing secrets) are stored encrypted.

Fernet (AES-128-CBC + HMAC-SHA256) under the key(s) in ``AGENT_SECRETS_KEY`` (a comma list: the
first encrypts, all decrypt, so a key can be rotated); when that is empty a random key is
generated once into ``AGENT_SECRETS_KEY_PATH`` (``var/agent-secrets.key``, mode 600) — a random
key rather than one derived from ``SECRET_KEY``, so rotating the session key or running with the
development placeholder never exposes or loses the secrets. A database reader (a backup, a
replica) gets ciphertext only.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings as conf
from django.core.exceptions import ImproperlyConfigured

_FERNET: MultiFernet | None = None
_FERNET_LOCK = threading.Lock()


def _key_from_file(path: Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process generated it first
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as fh:
        fh.write(key + b"\n")
    return key


def _fernet() -> MultiFernet:
    global _FERNET
    with _FERNET_LOCK:
        if _FERNET is None:
            raw = [k.strip() for k in (conf.AGENT_SECRETS_KEY or "").split(",") if k.strip()]
            keys = [k.encode() for k in raw] or [_key_from_file(Path(conf.AGENT_SECRETS_KEY_PATH))]
            try:
                _FERNET = MultiFernet([Fernet(k) for k in keys])
            except ValueError:
                raise ImproperlyConfigured("AGENT_SECRETS_KEY: each key must be 32 url-safe base64 bytes "
                                           "(python -c 'from cryptography.fernet import Fernet; "
                                           "print(Fernet.generate_key().decode())')") from None
        return _FERNET


def secrets_reset() -> None:
    """Forget the loaded key (tests that change the settings, key rotation at runtime)."""
    global _FERNET
    with _FERNET_LOCK:
        _FERNET = None


def secret_encrypt(plaintext: str) -> bytes:
    return _fernet().encrypt(plaintext.encode("utf-8"))


def secret_decrypt(token: bytes) -> str:
    try:
        return _fernet().decrypt(bytes(token)).decode("utf-8")
    except InvalidToken:
        # No detail: the token and the key stay out of errors and logs.
        raise ImproperlyConfigured("a stored secret cannot be decrypted with AGENT_SECRETS_KEY "
                                   "(was the key changed? re-enter the secret)") from None
