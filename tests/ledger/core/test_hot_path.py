"""The write path's shortcuts in the core give the same bytes and the same refusals as the long
way: canonical JSON of schema-checked bodies, signing through the libsodium binding, the kept
answer of ``EpochSet.signature_keys``."""

from __future__ import annotations

import nacl.signing
import pytest

from ledger.core.canonical import canonical_json, canonical_json_checked, entry_hash
from ledger.core.entries import (
    GENESIS,
    KIND_TAGS,
    PROVENANCE,
    TRANSITION,
    EntryFormatError,
    checked_body_hash,
    genesis_body,
    label_body,
    provenance_body,
    sign_checked_body,
    transition_body,
    verify_entry,
)
from ledger.core.errors import CanonicalError, EpochExpiredError, UnknownEpochError
from ledger.core.keys import Ed25519Key, Ed25519Signer, Epoch, EpochSet, generate_keypair

T = "2026-03-01T12:00:00.123456Z"
HEX = "ab" * 32


def _bodies() -> list[tuple[str, dict]]:
    evidence = ["outcome:1", "ünï©ødé € 😀", 'a"b\\c', "\n\t\x0f\x7f", "x" * 5000, ""]
    return [
        (GENESIS, genesis_body("acme", "main", "main/m0", HEX, 1000, 1, T)),
        (PROVENANCE, provenance_body("acme", "main/m0", 7, 1000, 1133, 250, evidence, HEX, 1, T, eta_q=500)),
        (PROVENANCE, provenance_body("acme", "main/m0", 2**53 - 1, 100, 100, -1000, [], HEX, 2**31, T)),
        (TRANSITION, transition_body("acme", "main/m0", 7, 1133, HEX, 1, T)),
    ]


@pytest.mark.parametrize(("kind", "body"), _bodies())
def test_a_checked_body_encodes_and_hashes_as_the_full_canonical_encoder_does(kind, body):
    assert canonical_json_checked(body) == canonical_json(body)
    assert checked_body_hash(kind, body) == entry_hash(KIND_TAGS[kind], body)


def test_a_label_body_keeps_the_full_check_its_evidence_is_free_json():
    body = label_body("acme", "main/m0", 0, "poison_suspect", "r", {"é": 1, "\U0001f600": [1], "a": None},
                      "user:a", "0" * 64, 1, T)
    assert checked_body_hash("label", body) == entry_hash(KIND_TAGS["label"], body)
    with pytest.raises(CanonicalError):  # a float in the evidence: only the full walk finds it
        checked_body_hash("label", label_body("acme", "main/m0", 0, "poison_suspect", "r", {"w": 0.5},
                                              "user:a", "0" * 64, 1, T))


def test_a_lone_surrogate_is_still_refused_without_the_walk():
    with pytest.raises(CanonicalError, match="surrogate"):
        canonical_json_checked({"evidence": ["ok", "\ud800"]})


def test_the_schema_still_refuses_what_the_walk_would_have():
    for bad in (1.5, True, 2**53):
        with pytest.raises(EntryFormatError):
            provenance_body("acme", "main/m0", 1, 1000, 1000, bad, [], HEX, 1, T)
    with pytest.raises(EntryFormatError):
        provenance_body("acme", "main/m0", 1, 1000, 1000, 0, [b"bytes"], HEX, 1, T)


def test_signing_through_the_binding_gives_pynacl_s_signature():
    seed, _ = generate_keypair()
    key = Ed25519Key(seed)
    for message in (b"", b"x" * 32, bytes(range(256))):
        assert key.sign(message) == nacl.signing.SigningKey(seed).sign(message).signature
    signer = Ed25519Signer(seed, 1)
    entry, digest = sign_checked_body(PROVENANCE, _bodies()[1][1], signer)
    epochs = [Epoch("acme", 1, signer.public_key, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z")]
    assert verify_entry(entry, kind=PROVENANCE, tenant="acme", memory="main/m0", epochs=epochs) == digest


def _ring() -> EpochSet:
    return EpochSet([Epoch("acme", 1, b"\x01" * 32, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z")])


def test_signature_keys_keeps_its_last_answer_and_never_a_refusal():
    ring = _ring()
    assert ring.signature_keys(tenant="acme", number=1, time=T) == (b"\x01" * 32,)
    assert ring.signature_keys(tenant="acme", number=1, time=T) == (b"\x01" * 32,)  # the kept answer
    with pytest.raises(UnknownEpochError):  # True == 1, but a bool names no epoch
        ring.signature_keys(tenant="acme", number=True, time=T)
    for _ in range(2):
        with pytest.raises(EpochExpiredError):
            ring.signature_keys(tenant="acme", number=1, time="2028-01-01T00:00:00Z")
    assert ring.signature_keys(tenant="acme", number=1, time=T) == (b"\x01" * 32,)
    with pytest.raises(Exception, match="tenant"):
        ring.signature_keys(tenant="globex", number=1, time=T)
