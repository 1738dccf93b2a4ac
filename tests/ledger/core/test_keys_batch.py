"""Signature checks of a batch on worker threads (ledger.core.keys.SignatureBatch)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ledger.core.errors import SignatureInvalidError
from ledger.core.keys import Ed25519Key, SignatureBatch


def test_a_batch_passes_when_every_signature_is_valid_and_names_the_first_invalid_one():
    key, other = Ed25519Key.generate(), Ed25519Key.generate()
    with ThreadPoolExecutor(2) as pool:
        good = SignatureBatch(pool, 2)
        for i in range(150):  # in two shares
            msg = bytes([i]) * 32
            good.add((other.public_key, key.public_key), msg, key.sign(msg), kind="provenance", seq=i,
                     number=1, memory=f"main/m{i}")
        good.check()
        bad = SignatureBatch(pool, 2)
        for i in range(150):
            msg = bytes([i]) * 32
            sig = other.sign(msg) if i in (97, 120) else key.sign(msg)  # a stranger's key, twice
            bad.add((key.public_key,), msg, sig, kind="transition", seq=i, number=3, memory=f"main/m{i}")
        with pytest.raises(SignatureInvalidError) as exc:
            bad.check()
    assert (exc.value.kind, exc.value.seq, exc.value.memory) == ("transition", 97, "main/m97")
    assert "epoch 3" in exc.value.message


def test_an_empty_batch_checks_nothing():
    with ThreadPoolExecutor(2) as pool:
        SignatureBatch(pool, 2).check()
