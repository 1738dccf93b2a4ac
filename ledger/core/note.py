"""C2SP signed notes (https://c2sp.org/signed-note) with Ed25519 signatures, and C2SP
timestamped Ed25519 witness cosignatures (https://c2sp.org/tlog-cosignature, ``cosignature/v1``).

A note is a text ending in a newline, a blank line, then signature lines
``— <key name> base64(4-byte key ID || signature)``. The key ID is
``SHA-256(name || 0x0A || type || public key)[:4]`` with type 0x01 for a plain
Ed25519 note signature and 0x04 for a cosignature, whose signature is
``u64 timestamp (big-endian) || Ed25519 signature`` over
``"cosignature/v1\\ntime <timestamp>\\n" || note text``.

Key encodings follow golang.org/x/mod/sumdb/note: a verifier key is
``<name>+<hex key ID>+<base64(type || public key)>``, a signer key
``PRIVATE+KEY+<name>+<hex key ID>+<base64(type || seed)>``. Standard library +
PyNaCl only; the tests run the reference vectors of both.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass
from typing import Iterable, Sequence

import nacl.signing

from ledger.core.errors import BundleError, SignatureInvalidError
from ledger.core.keys import verify_signature

ED25519 = 0x01
COSIGNATURE_V1 = 0x04
SIG_PREFIX = "\u2014 "  # em dash, space
MAX_SIGNATURES = 100  # the note spec requires at least 16; golang.org/x/mod/sumdb/note accepts 100
COSIGNATURE_HEADER = "cosignature/v1\n"


class NoteError(BundleError):
    """A note, a key or a signature line is malformed."""


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_id: bytes  # 4 bytes
    signature: bytes  # what follows the key ID (64 bytes; 72 for a cosignature)

    def line(self) -> str:
        return f"{SIG_PREFIX}{self.name} {base64.b64encode(self.key_id + self.signature).decode()}\n"


@dataclass(frozen=True)
class Note:
    text: str  # ends with "\n", without the separating blank line
    signatures: tuple[NoteSignature, ...]

    def encode(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)


@dataclass(frozen=True)
class VerifierKey:
    name: str
    type: int
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.type, self.public_key)

    def encode(self) -> str:
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(bytes([self.type]) + self.public_key).decode()}"


def _check_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() for c in name):
        raise NoteError(f"key name {name!r} must be non-empty without spaces or '+'")


def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """``SHA-256(name || "\\n" || type || public key)[:4]`` (signed-note, tlog-cosignature)."""
    _check_name(name)
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key).digest()[:4]


def _b64(s: str, what: str) -> bytes:
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError(f"{what} is not standard base64") from None


def parse_verifier_key(vkey: str) -> VerifierKey:
    """``<name>+<8 hex>+<base64(type || key)>``; Ed25519 (0x01) or cosignature (0x04) keys only."""
    parts = vkey.strip().split("+", 2)  # the base64 key may itself hold '+'
    if len(parts) != 3:
        raise NoteError("verifier key must be <name>+<hex key id>+<base64 key>")
    name, hexid, b64 = parts
    _check_name(name)
    if len(hexid) != 8 or hexid != hexid.lower():
        raise NoteError("verifier key id must be 8 lowercase hex digits")
    raw = _b64(b64, "verifier key")
    if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE_V1):
        raise NoteError("verifier key must be type 0x01 or 0x04 followed by a 32-byte Ed25519 key")
    vk = VerifierKey(name, raw[0], raw[1:])
    if vk.key_id.hex() != hexid:
        raise NoteError(f"verifier key id {hexid} does not match the key (want {vk.key_id.hex()})")
    return vk


@dataclass(frozen=True)
class NoteSigner:
    """An Ed25519 note signer: ``sign(text)`` gives the signature line's payload."""

    name: str
    seed: bytes
    type: int = ED25519

    def __post_init__(self) -> None:
        _check_name(self.name)
        if len(self.seed) != 32:
            raise NoteError("Ed25519 seed must be 32 bytes")

    @property
    def public_key(self) -> bytes:
        return bytes(nacl.signing.SigningKey(self.seed).verify_key)

    @property
    def verifier(self) -> VerifierKey:
        return VerifierKey(self.name, self.type, self.public_key)

    def sign_raw(self, message: bytes) -> bytes:
        return nacl.signing.SigningKey(self.seed).sign(message).signature


def parse_signer_key(skey: str) -> NoteSigner:
    """``PRIVATE+KEY+<name>+<8 hex>+<base64(type || seed)>`` (golang.org/x/mod/sumdb/note)."""
    parts = skey.strip().split("+", 4)
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise NoteError("signer key must be PRIVATE+KEY+<name>+<hex key id>+<base64 key>")
    raw = _b64(parts[4], "signer key")
    if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE_V1):
        raise NoteError("signer key must be type 0x01 or 0x04 followed by a 32-byte seed")
    signer = NoteSigner(parts[2], raw[1:], raw[0])
    if signer.verifier.key_id.hex() != parts[3]:
        raise NoteError("signer key id does not match the key")
    return signer


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("note text must end with a newline")
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise NoteError("note text holds a control character other than newline")


def sign_note(text: str, signers: Iterable[NoteSigner]) -> Note:
    """A note over ``text`` with one Ed25519 (0x01) signature per signer."""
    _check_text(text)
    sigs = []
    for s in signers:
        if s.type != ED25519:
            raise NoteError("sign_note signs with Ed25519 (0x01) keys; cosign() makes cosignatures")
        sigs.append(NoteSignature(s.name, s.verifier.key_id, s.sign_raw(text.encode("utf-8"))))
    return Note(text, tuple(sigs))


def parse_note(data: str | bytes) -> Note:
    """Split a signed note into text and signature lines (structure only; nothing verified)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise NoteError("note is not UTF-8") from None
    if any(ord(c) < 0x20 and c != "\n" for c in data):
        raise NoteError("note holds a control character other than newline")
    if not data.endswith("\n"):
        raise NoteError("note must end with a newline")
    split = data.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line before its signatures")
    text, sig_block = data[: split + 1], data[split + 2:]
    sigs = []
    for line in sig_block.split("\n")[:-1]:
        if not line.startswith(SIG_PREFIX):
            raise NoteError(f"signature line does not start with an em dash and a space: {line[:40]!r}")
        fields = line[len(SIG_PREFIX):].split(" ")
        if len(fields) != 2:
            raise NoteError("signature line must be '— <name> <base64>'")
        name, b64 = fields
        _check_name(name)
        raw = _b64(b64, "signature")
        if len(raw) < 5:
            raise NoteError("signature too short")
        sigs.append(NoteSignature(name, raw[:4], raw[4:]))
        if len(sigs) > MAX_SIGNATURES:
            raise NoteError(f"more than {MAX_SIGNATURES} signatures")
    if not sigs:
        raise NoteError("note carries no signature")
    return Note(text, tuple(sigs))


def _matches(sig: NoteSignature, key: VerifierKey) -> bool:
    return sig.name == key.name and sig.key_id == key.key_id


def cosignature_message(text: str, timestamp: int) -> bytes:
    """The bytes a ``cosignature/v1`` signs: header line, ``time <ts>`` line, the note text."""
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{text}".encode("utf-8")


def cosign(note: Note, signer: NoteSigner, timestamp: int) -> NoteSignature:
    """A witness's timestamped Ed25519 cosignature (type 0x04) on a checkpoint note."""
    if not 0 <= timestamp < 2 ** 63:
        raise NoteError("cosignature timestamp out of range")
    vk = VerifierKey(signer.name, COSIGNATURE_V1, signer.public_key)
    sig = signer.sign_raw(cosignature_message(note.text, timestamp))
    return NoteSignature(signer.name, vk.key_id, struct.pack(">Q", timestamp) + sig)


def verify_note(note: Note, keys: Sequence[VerifierKey]) -> list[VerifierKey]:
    """The known Ed25519 (0x01) keys whose signature on the note verifies.

    Per the spec, signatures of unknown keys are ignored; a signature of a known key that
    fails is an error (the whole note is rejected), and so is a note no known key signed.
    """
    good = []
    for sig in note.signatures:
        for k in keys:
            if k.type == ED25519 and _matches(sig, k):
                try:
                    verify_signature(k.public_key, note.text.encode("utf-8"), sig.signature)
                except SignatureInvalidError:
                    raise SignatureInvalidError(f"note signature by {k.name} invalid") from None
                good.append(k)
    if not good:
        raise SignatureInvalidError("note carries no signature by a known key")
    return good


def verify_cosignature(note: Note, sig: NoteSignature, key: VerifierKey) -> int:
    """Check one cosignature line against a known witness key; return its timestamp."""
    if key.type != COSIGNATURE_V1 or not _matches(sig, key):
        raise SignatureInvalidError(f"cosignature by {sig.name} does not name witness key {key.name}")
    if len(sig.signature) != 72:
        raise SignatureInvalidError(f"cosignature by {sig.name} has {len(sig.signature)} bytes, want 8 + 64")
    (timestamp,) = struct.unpack(">Q", sig.signature[:8])
    if timestamp >= 2 ** 63:
        raise SignatureInvalidError("cosignature timestamp out of range")
    try:
        verify_signature(key.public_key, cosignature_message(note.text, timestamp), sig.signature[8:])
    except SignatureInvalidError:
        raise SignatureInvalidError(f"cosignature by {sig.name} invalid") from None
    return timestamp


def cosigned_by(note: Note, witnesses: Sequence[VerifierKey]) -> dict[str, int]:
    """Witness key (encoded) -> timestamp, for each known witness whose cosignature verifies.

    Unknown signature lines are ignored; a known witness's bad cosignature raises.
    """
    out: dict[str, int] = {}
    for sig in note.signatures:
        for w in witnesses:
            if w.type == COSIGNATURE_V1 and _matches(sig, w):
                out[w.encode()] = verify_cosignature(note, sig, w)
    return out
