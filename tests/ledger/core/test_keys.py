"""Housekeeper key epochs, the key directory and signature checks."""

import os
import stat
from dataclasses import replace
from datetime import timedelta

import pytest

from ledger.core.canonical import entry_hash, format_time
from ledger.core.errors import (
    ChainBrokenError,
    EpochExpiredError,
    EpochRevokedError,
    SignatureInvalidError,
    TenantMismatchError,
    UnknownEpochError,
)
from ledger.core.keys import (
    Ed25519Key,
    Ed25519Signer,
    EpochSet,
    check_epoch_at,
    epoch_valid_at,
    generate_keypair,
    verify_epoch_chain,
    verify_signature,
)
from ledger.keystore import KeyDirectory
from tests.ledger.core.factories import START


@pytest.fixture
def keydir(tmp_path):
    kd = KeyDirectory(tmp_path / "keys")
    kd.init("acme", now=START)
    return kd


def test_init_writes_private_keys_readable_only_by_the_owner(keydir, tmp_path):
    key_file = tmp_path / "keys" / "acme" / "epoch-1.key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "keys" / "acme").st_mode) == 0o700
    assert keydir.epochs("acme")[0].endorsement is None


def test_it_refuses_to_init_a_tenant_twice(keydir):
    with pytest.raises(FileExistsError):
        keydir.init("acme", now=START)


def test_it_rejects_tenant_names_that_escape_the_directory(keydir):
    with pytest.raises(ValueError):
        keydir.init("../evil", now=START)


def test_rotate_creates_an_epoch_endorsed_by_the_previous_key(keydir):
    ep2 = keydir.rotate("acme", now=START + timedelta(days=1))
    epochs = keydir.epochs("acme")
    assert [e.number for e in epochs] == [1, 2] and ep2.not_before == format_time(START + timedelta(days=1))
    verify_epoch_chain(epochs, trust_anchor=epochs[0].public_key)
    assert keydir.signer("acme", START + timedelta(days=2)).epoch == 2
    assert keydir.signer("acme", START + timedelta(hours=1)).epoch == 1


def test_the_signer_signs_entry_hashes_verifiable_under_its_epoch(keydir):
    s = keydir.signer("acme", START)
    msg = entry_hash(b"memaudit/genesis/v1", {"x": 1})
    verify_signature(s.public_key, msg, s.sign(msg))
    assert s.public_key == keydir.epochs("acme")[0].public_key


def test_it_rejects_a_forged_endorsement(keydir):
    keydir.rotate("acme", now=START + timedelta(days=1))
    e1, e2 = keydir.epochs("acme")
    forged = replace(e2, endorsement=Ed25519Key.generate().sign(entry_hash(b"memaudit/epoch/v1", e2.body())))
    with pytest.raises(SignatureInvalidError):
        verify_epoch_chain([e1, forged])


def test_it_rejects_an_epoch_whose_endorsed_fields_were_altered(keydir):
    keydir.rotate("acme", now=START + timedelta(days=1))
    e1, e2 = keydir.epochs("acme")
    with pytest.raises(SignatureInvalidError):
        verify_epoch_chain([e1, replace(e2, not_after=format_time(START + timedelta(days=9999)))])


def test_it_rejects_a_wrong_trust_anchor(keydir):
    with pytest.raises(SignatureInvalidError):
        verify_epoch_chain(keydir.epochs("acme"), trust_anchor=generate_keypair()[1])


def test_it_rejects_gaps_and_mixed_tenants_in_the_epoch_chain(keydir):
    keydir.rotate("acme", now=START + timedelta(days=1))
    e1, e2 = keydir.epochs("acme")
    with pytest.raises(ChainBrokenError):
        verify_epoch_chain([e2])
    with pytest.raises(TenantMismatchError):
        verify_epoch_chain([e1, replace(e2, tenant="bobco")])


def test_a_revoked_epoch_cannot_endorse_a_later_successor(keydir):
    keydir.revoke("acme", 1, now=START + timedelta(hours=1))
    with pytest.raises(EpochRevokedError):
        keydir.rotate("acme", now=START + timedelta(days=1))
    keydir2 = KeyDirectory(keydir.path / "other")
    keydir2.init("acme", now=START)
    keydir2.rotate("acme", now=START + timedelta(days=1))
    keydir2.revoke("acme", 1, now=START + timedelta(hours=1))
    with pytest.raises(EpochRevokedError):
        verify_epoch_chain(keydir2.epochs("acme"))


def test_epoch_validity_is_half_open_and_ends_at_revocation(keydir):
    ep = keydir.epochs("acme")[0]
    assert epoch_valid_at(ep, START)
    assert not epoch_valid_at(ep, START - timedelta(seconds=1))
    assert not epoch_valid_at(ep, ep.not_after)
    revoked = keydir.revoke("acme", 1, now=START + timedelta(days=3))
    assert epoch_valid_at(revoked, START + timedelta(days=2))
    with pytest.raises(EpochRevokedError):
        check_epoch_at(revoked, START + timedelta(days=3))
    with pytest.raises(EpochExpiredError):
        keydir.signer("acme", START + timedelta(days=4))


def test_revoking_again_keeps_the_earlier_time(keydir):
    keydir.revoke("acme", 1, now=START + timedelta(days=3))
    assert keydir.revoke("acme", 1, now=START + timedelta(days=5)).revoked_at == format_time(START + timedelta(days=3))
    with pytest.raises(UnknownEpochError):
        keydir.revoke("acme", 7)


def test_epoch_set_names_each_failure(keydir):
    eps = EpochSet(keydir.epochs("acme"))
    s = keydir.signer("acme", START)
    msg = b"\x11" * 32
    sig = s.sign(msg)
    eps.verify(tenant="acme", number=1, time="2025-01-02T00:00:00Z", message=msg, signature=sig)
    with pytest.raises(UnknownEpochError):
        eps.verify(tenant="acme", number=2, time="2025-01-02T00:00:00Z", message=msg, signature=sig)
    with pytest.raises(TenantMismatchError):
        eps.verify(tenant="bobco", number=1, time="2025-01-02T00:00:00Z", message=msg, signature=sig)
    with pytest.raises(EpochExpiredError):
        eps.verify(tenant="acme", number=1, time="2024-12-31T00:00:00Z", message=msg, signature=sig)
    with pytest.raises(SignatureInvalidError):
        eps.verify(tenant="acme", number=1, time="2025-01-02T00:00:00Z", message=b"\x12" * 32, signature=sig)


def test_signers_from_the_same_seed_agree():
    seed, pub = generate_keypair()
    assert Ed25519Signer(seed, 3).public_key == pub
    with pytest.raises(SignatureInvalidError):
        verify_signature(pub, b"m", b"\x00" * 63)
