"""Recall receipts: build, verify, and every tampering found."""

import copy

import pytest

from ledger.core.canonical import sha256_hex
from ledger.core.errors import BundleError, ProofError, SignatureInvalidError
from ledger.core.keys import Ed25519Key
from ledger.core.merkle import EMPTY_ROOT
from ledger.core.receipts import build_receipt, verify_receipt


@pytest.fixture
def receipt(hk):
    return hk.receipts[0]


@pytest.fixture
def key(hk):
    return hk.receipt_key.public_key


def test_a_fresh_receipt_verifies(receipt, key):
    verify_receipt(receipt, key)
    assert [r["rank"] for r in receipt["results"]] == [1, 2]
    assert receipt["body"]["result_count"] == 2 and receipt["body"]["k"] == 5


def test_an_empty_receipt_binds_the_empty_root(hk, key):
    r = build_receipt([], tenant="acme", store="main", query_sha256=sha256_hex("q"), k=3, sth_size=0,
                      sth_root_hex=EMPTY_ROOT.hex(), projection_version="p1", time="2025-01-01T00:00:00Z",
                      signer=hk.receipt_key)
    verify_receipt(r, key)


def _tamper(receipt, fn):
    r = copy.deepcopy(receipt)
    fn(r)
    return r


@pytest.mark.parametrize(
    ("what", "fn", "error"),
    [
        ("flipped signature", lambda r: r.update(signature=("00" if r["signature"][:2] != "00" else "01") + r["signature"][2:]),
         SignatureInvalidError),
        ("query hash changed", lambda r: r["body"].update(query_sha256="ab" * 32), SignatureInvalidError),
        ("k lowered", lambda r: r["body"].update(k=1), SignatureInvalidError),
        ("result weight changed", lambda r: r["results"][0].update(weight_q=2999), ProofError),
        ("result state changed", lambda r: r["results"][1].update(state=None), ProofError),
        ("results swapped", lambda r: r["results"].reverse(), ProofError),
        ("result dropped", lambda r: r["results"].pop(), ProofError),
        ("result duplicated", lambda r: r["results"].append(copy.deepcopy(r["results"][0])), ProofError),
        ("proof element flipped", lambda r: r["results"][0]["proof"].__setitem__(0, "ff" * 32), ProofError),
        ("proof emptied", lambda r: r["results"][0].update(proof=[]), ProofError),
        ("result field missing", lambda r: r["results"][0].pop("chain_head"), BundleError),
        ("body field missing", lambda r: r["body"].pop("sth_root"), BundleError),
    ],
)
def test_it_rejects_a_tampered_receipt(receipt, key, what, fn, error):
    with pytest.raises(error):
        verify_receipt(_tamper(receipt, fn), key)


def test_it_rejects_a_receipt_checked_against_another_key(receipt):
    with pytest.raises(SignatureInvalidError):
        verify_receipt(receipt, Ed25519Key.generate().public_key)


def test_it_rejects_a_receipt_signed_by_another_key_claiming_this_key_id(hk, receipt, key):
    impostor = Ed25519Key.generate()
    r = build_receipt(receipt["results"], tenant="acme", store="main", query_sha256=receipt["body"]["query_sha256"],
                      k=5, sth_size=receipt["body"]["sth_size"], sth_root_hex=receipt["body"]["sth_root"],
                      projection_version="p1", time=receipt["body"]["time"], signer=impostor)
    r["body"]["key_id"] = receipt["body"]["key_id"]
    with pytest.raises(SignatureInvalidError):
        verify_receipt(r, key)


def test_build_receipt_refuses_more_results_than_k(hk, receipt):
    with pytest.raises(ValueError):
        build_receipt(receipt["results"], tenant="acme", store="main", query_sha256="ab" * 32, k=1, sth_size=0,
                      sth_root_hex=EMPTY_ROOT.hex(), projection_version="p1", time="2025-01-01T00:00:00Z",
                      signer=hk.receipt_key)
