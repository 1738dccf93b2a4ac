"""Entry builders, signed entries, and provenance/label chain verification."""

from dataclasses import replace
from datetime import timedelta

import pytest

from ledger.core.entries import (
    ZERO_HASH_HEX,
    EntryFormatError,
    SignedEntry,
    check_provenance_chain,
    genesis_body,
    label_body,
    provenance_body,
    sign_entry,
    verify_label_chain,
    verify_provenance_chain,
)
from ledger.core.errors import (
    ChainBrokenError,
    EpochExpiredError,
    EpochRevokedError,
    SignatureInvalidError,
    TenantMismatchError,
    UnknownEpochError,
    WeightMismatchError,
)
from ledger.core.keys import Ed25519Signer
from tests.ledger.core.factories import Housekeeper


def resign(hk: Housekeeper, entry: SignedEntry, **changes) -> SignedEntry:
    """Re-sign an altered body with the tenant's real key: only chain logic can catch it."""
    body = {**entry.body, **changes}
    signer = Ed25519Signer(hk.keys._read_seed(hk.tenant, body["epoch"]), body["epoch"])
    return sign_entry(entry.kind, body, signer)


def prov(hk, mid="m1", **kw):
    m = hk.memories[mid]
    args = {"genesis": m.genesis, "nodes": m.provenance, "transitions": m.transitions}
    args.update(kw)
    return verify_provenance_chain(args["genesis"], args["nodes"], args["transitions"], tenant="acme", memory=mid,
                                   epochs=hk.keys.epochs("acme"))


def labels(hk, mid, entries=None):
    return verify_label_chain(hk.memories[mid].labels if entries is None else entries, tenant="acme", memory=mid,
                              epochs=hk.keys.epochs("acme"))


def test_a_clean_chain_returns_the_final_weight(hk):
    for mid, m in hk.memories.items():
        assert prov(hk, mid) == m.weight_q
    state = check_provenance_chain(hk.memories["m1"].genesis, hk.memories["m1"].provenance,
                                   hk.memories["m1"].transitions, tenant="acme", memory="m1",
                                   epochs=hk.keys.epochs("acme"))
    assert state.head == hk.memories["m1"].head and len(state.weights_by_head) == 3


def test_it_rejects_a_forged_signature(hk):
    m = hk.memories["m1"]
    forged = replace(m.provenance[0], signature=Ed25519Signer(b"\x07" * 32, 1).sign(m.provenance[0].hash()))
    with pytest.raises(SignatureInvalidError) as err:
        prov(hk, nodes=[forged, *m.provenance[1:]])
    assert (err.value.kind, err.value.seq) == ("provenance", 1)


def test_it_rejects_a_body_altered_after_signing(hk):
    m = hk.memories["m1"]
    altered = replace(m.genesis, body={**m.genesis.body, "content_sha256": "ab" * 32})
    with pytest.raises(SignatureInvalidError):
        prov(hk, genesis=altered)


def test_it_rejects_an_entry_of_tenant_a_presented_as_tenant_b(tmp_path, hk):
    other = Housekeeper(tmp_path / "bob-keys", tenant="bobco")
    other.add_memory("m1", "Paris is the capital of France.")
    with pytest.raises(TenantMismatchError):
        prov(hk, genesis=other.memories["m1"].genesis)


def test_it_rejects_an_entry_signed_outside_its_epoch(hk):
    m = hk.memories["m1"]
    late = resign(hk, m.provenance[0], time="2027-01-01T00:00:00Z")
    with pytest.raises(EpochExpiredError):
        prov(hk, nodes=[late, *m.provenance[1:]])


def test_it_rejects_an_entry_signed_after_its_epoch_was_revoked(hk):
    hk.keys.revoke("acme", 1, now=hk.now - timedelta(seconds=15))
    with pytest.raises(EpochRevokedError):
        prov(hk, "m1")


def test_it_rejects_an_unknown_epoch(hk):
    m = hk.memories["m1"]
    with pytest.raises(UnknownEpochError):
        prov(hk, nodes=[replace(m.provenance[0], body={**m.provenance[0].body, "epoch": 9}), *m.provenance[1:]])


def test_it_rejects_a_broken_prev_link(hk):
    m = hk.memories["m1"]
    bad = resign(hk, m.provenance[1], prev=m.genesis.hash_hex())
    with pytest.raises(ChainBrokenError) as err:
        prov(hk, nodes=[m.provenance[0], bad])
    assert err.value.seq == 2


def test_it_rejects_reordered_entries(hk):
    m = hk.memories["m1"]
    with pytest.raises(ChainBrokenError):
        prov(hk, nodes=m.provenance[::-1])
    with pytest.raises(ChainBrokenError):
        prov(hk, transitions=m.transitions[::-1])


def test_it_rejects_a_node_that_no_transition_commits(hk):
    m = hk.memories["m1"]
    with pytest.raises(WeightMismatchError) as err:
        prov(hk, transitions=m.transitions[:1])
    assert (err.value.kind, err.value.seq) == ("provenance", 2)


def test_it_rejects_a_transition_whose_weight_differs_from_its_node(hk):
    m = hk.memories["m1"]
    bad = resign(hk, m.transitions[1], new_weight_q=2999)
    with pytest.raises(WeightMismatchError):
        prov(hk, transitions=[m.transitions[0], bad])


def test_it_rejects_a_transition_bound_to_another_node(hk):
    m = hk.memories["m1"]
    bad = resign(hk, m.transitions[1], provenance=m.provenance[0].hash_hex())
    with pytest.raises(ChainBrokenError):
        prov(hk, transitions=[m.transitions[0], bad])


def test_it_rejects_a_weight_the_rule_does_not_give(hk):
    m = hk.memories["m1"]
    bad = resign(hk, m.provenance[1], new_weight_q=m.provenance[1].body["new_weight_q"] + 1)
    with pytest.raises(WeightMismatchError):
        prov(hk, nodes=[m.provenance[0], bad])


def test_without_eta_it_rejects_a_weight_moving_against_the_valence(hk):
    m = hk.memories["m2"]  # valence -300: the weight went down
    body = {k: v for k, v in m.provenance[0].body.items() if k != "eta_q"}
    node = resign(hk, SignedEntry("provenance", body, b""), new_weight_q=1200)
    tr = resign(hk, m.transitions[0], provenance=node.hash_hex(), new_weight_q=1200)
    with pytest.raises(WeightMismatchError):
        prov(hk, "m2", nodes=[node], transitions=[tr])


def test_it_rejects_a_prev_weight_that_skips_a_step(hk):
    m = hk.memories["m1"]
    bad = resign(hk, m.provenance[1], prev_weight_q=1000)
    with pytest.raises((WeightMismatchError, ChainBrokenError)):
        prov(hk, nodes=[m.provenance[0], bad])


def test_it_rejects_a_node_of_another_memory(hk):
    with pytest.raises(ChainBrokenError):
        prov(hk, "m1", nodes=hk.memories["m2"].provenance)


def test_label_state_is_the_last_label(hk):
    assert labels(hk, "m1") is None
    assert labels(hk, "m3") == "poison_likely"
    assert labels(hk, "m2") == "poison_refuted"  # refuted after suspect
    assert hk.memories["m3"].labels[0].body["prev"] == ZERO_HASH_HEX


def test_it_rejects_a_broken_or_reordered_label_chain(hk):
    lab = hk.memories["m3"].labels
    with pytest.raises(ChainBrokenError):
        labels(hk, "m3", lab[::-1])
    with pytest.raises(ChainBrokenError):
        labels(hk, "m3", [lab[0], resign(hk, lab[1], prev=ZERO_HASH_HEX)])
    with pytest.raises(ChainBrokenError):
        labels(hk, "m3", lab[1:])
    with pytest.raises(SignatureInvalidError):
        labels(hk, "m3", [lab[0], replace(lab[1], body={**lab[1].body, "label": "poison_refuted"})])


def test_signed_entries_round_trip_through_json(hk):
    e = hk.memories["m3"].labels[1]
    assert SignedEntry.from_json(e.to_json()) == e
    assert e.to_json()["signature"] == e.signature.hex()


@pytest.mark.parametrize(
    "make",
    [
        lambda: genesis_body("acme", "main", "m1", "zz" * 32, 1000, 1, "2025-01-01T00:00:00Z"),
        lambda: genesis_body("acme", "main", "m1", "ab" * 32, 1000.0, 1, "2025-01-01T00:00:00Z"),
        lambda: genesis_body("acme", "main", "m1", "ab" * 32, 50, 1, "2025-01-01T00:00:00Z"),
        lambda: genesis_body("acme", "main", "m1", "ab" * 32, 1000, 1, "2025-01-01 00:00:00"),
        lambda: provenance_body("acme", "m1", 0, 1000, 1000, 0, [], "ab" * 32, 1, "2025-01-01T00:00:00Z"),
        lambda: provenance_body("acme", "m1", 1, 1000, 1000, 0, [1], "ab" * 32, 1, "2025-01-01T00:00:00Z"),
        lambda: label_body("acme", "m1", 0, "deleted", "", {}, "alice", ZERO_HASH_HEX, 1, "2025-01-01T00:00:00Z"),
        lambda: label_body("acme", "m1", 0, "poison_likely", "", {}, "", ZERO_HASH_HEX, 1, "2025-01-01T00:00:00Z"),
    ],
)
def test_builders_reject_bad_fields(make):
    with pytest.raises(EntryFormatError):
        make()


def test_sign_entry_refuses_a_signer_of_another_epoch(hk):
    body = genesis_body("acme", "main", "m9", "ab" * 32, 1000, 2, "2025-01-01T00:00:00Z")
    with pytest.raises(SignatureInvalidError):
        sign_entry("genesis", body, Ed25519Signer(b"\x01" * 32, 1))
