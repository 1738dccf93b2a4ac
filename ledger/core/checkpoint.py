"""C2SP transparency-log checkpoints (https://c2sp.org/tlog-checkpoint) of a tenant's log.

A checkpoint is a signed note (``ledger.core.note``) whose text is three lines:
the origin, the decimal tree size, the base64 RFC 6962 root. MemAudit signs it
with the same housekeeper epoch key as its JSON tree heads (Ed25519, note type
0x01, key name = origin), so an auditor who pinned the epoch-1 anchor can check
it, and any C2SP witness configured with the log's verifier key can cosign it.
The origin is ``<prefix>/<tenant>``; no extension lines are written.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from ledger.core.errors import SignatureInvalidError
from ledger.core.note import ED25519, Note, NoteError, NoteSignature, VerifierKey, key_id, parse_note, verify_note

_SIZE_RE = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @property
    def tenant(self) -> str:
        """The last path segment of the origin (``<prefix>/<tenant>``)."""
        return self.origin.rsplit("/", 1)[-1]


def checkpoint_origin(prefix: str, tenant: str) -> str:
    origin = f"{prefix.rstrip('/')}/{tenant}"
    if "+" in origin or any(c.isspace() for c in origin):
        raise NoteError(f"origin {origin!r} must hold no spaces or '+'")
    return origin


def parse_checkpoint_text(text: str) -> Checkpoint:
    """The note text of a checkpoint: origin, size (no leading zeros), base64 32-byte root, extensions."""
    if not text.endswith("\n"):
        raise NoteError("checkpoint text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise NoteError("checkpoint needs origin, size and root lines")
    origin, size, root_b64, *ext = lines
    if not origin:
        raise NoteError("checkpoint origin is empty")
    if not _SIZE_RE.fullmatch(size):
        raise NoteError(f"checkpoint size {size[:24]!r} is not a decimal without leading zeros")
    try:
        root = base64.b64decode(root_b64, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError("checkpoint root is not base64") from None
    if len(root) != 32:
        raise NoteError(f"checkpoint root has {len(root)} bytes, want 32")
    if any(not e for e in ext):
        raise NoteError("checkpoint extension lines must be non-empty")
    return Checkpoint(origin, int(size), root, tuple(ext))


def log_key(origin: str, public_key: bytes) -> VerifierKey:
    """The note verifier key of the log signing with ``public_key`` under name ``origin``."""
    return VerifierKey(origin, ED25519, public_key)


def sign_checkpoint(cp: Checkpoint, *, public_key: bytes, sign: Callable[[bytes], bytes]) -> Note:
    """Sign with any Ed25519 signer (a housekeeper ``Signer.sign``: key file, KMS, HSM)."""
    text = cp.text()
    sig = sign(text.encode("utf-8"))
    return Note(text, (NoteSignature(cp.origin, key_id(cp.origin, ED25519, public_key), sig),))


@dataclass(frozen=True)
class OpenedCheckpoint:
    checkpoint: Checkpoint
    note: Note
    signed_by: tuple[VerifierKey, ...]


def open_checkpoint(data: str | bytes, public_keys: Sequence[bytes]) -> OpenedCheckpoint:
    """Parse a checkpoint note and verify it is signed by one of ``public_keys`` under its origin."""
    note = parse_note(data)
    cp = parse_checkpoint_text(note.text)
    keys = [log_key(cp.origin, k) for k in public_keys]
    try:
        good = verify_note(note, keys)
    except SignatureInvalidError as exc:
        raise SignatureInvalidError(f"checkpoint {cp.origin} size {cp.size}: {exc}") from None
    return OpenedCheckpoint(cp, note, tuple(good))
