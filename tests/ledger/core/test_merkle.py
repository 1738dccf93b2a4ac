"""RFC 6962 Merkle tree: CT test vectors, corrupted proofs, property tests."""

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.errors import ProofError
from ledger.core.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    root_from_consistency_proof,
    root_from_inclusion_proof,
    roots_at,
    verify_consistency,
    verify_inclusion,
)

V = json.loads((Path(__file__).parent / "vectors" / "rfc6962.json").read_text())
LEAVES = [leaf_hash(bytes.fromhex(d)) for d in V["leaves"]]
ROOTS = [bytes.fromhex(r) for r in V["roots"]]
OTHER_ROOT = hashlib.sha256(b"not a root").digest()


def _hx(items):
    return [bytes.fromhex(p) for p in items]


def _flip(h: bytes, bit: int = 4) -> bytes:
    return bytes([h[0] ^ (1 << bit)]) + h[1:]


def test_empty_tree_root_is_sha256_of_nothing():
    # printf '' | sha256sum
    assert root([]) == EMPTY_ROOT == ROOTS[0]


def test_leaf_and_node_hashes_are_prefixed():
    # printf '\x00' | sha256sum -> 6e340b9c...
    assert leaf_hash(b"") == ROOTS[1]
    # (printf '\x01'; <leaf 0>; <leaf 1>) | sha256sum -> fac54203...
    assert node_hash(LEAVES[0], LEAVES[1]) == ROOTS[2]


@pytest.mark.parametrize("size", range(9))
def test_root_matches_the_ct_vector_for_each_size(size):
    assert root(LEAVES[:size]) == ROOTS[size]


def test_roots_at_computes_every_prefix_in_one_pass():
    assert roots_at(LEAVES, range(9)) == dict(enumerate(ROOTS))


def test_roots_at_rejects_a_size_beyond_the_leaves():
    with pytest.raises(ProofError):
        roots_at(LEAVES, [9])


@pytest.mark.parametrize("case", V["inclusion"], ids=[c["desc"] for c in V["inclusion"]])
def test_inclusion_proof_matches_and_verifies_the_ct_vector(case):
    i, n, proof = case["index"], case["size"], _hx(case["proof"])
    assert inclusion_proof(i, LEAVES[:n]) == proof
    assert root_from_inclusion_proof(i, n, LEAVES[i], proof) == ROOTS[n]
    verify_inclusion(i, n, LEAVES[i], proof, ROOTS[n])


def _inclusion_corruptions(i, n, leaf, proof, good_root):
    yield "index+1", (i + 1, n, leaf, proof, good_root)
    yield "index-1", (i - 1, n, leaf, proof, good_root)
    yield "size*2", (i, n * 2, leaf, proof, good_root)
    for k in range(len(proof)):
        bad = list(proof)
        bad[k] = _flip(bad[k])
        yield f"flipped bit in proof[{k}]", (i, n, leaf, bad, good_root)
    yield "trailing garbage", (i, n, leaf, proof + [OTHER_ROOT], good_root)
    yield "preceding garbage", (i, n, leaf, [OTHER_ROOT] + proof, good_root)
    if proof:
        yield "empty proof", (i, n, leaf, [], good_root)
    yield "swapped root", (i, n, leaf, proof, OTHER_ROOT)
    yield "flipped leaf", (i, n, _flip(leaf), proof, good_root)
    yield "short element", (i, n, leaf, [p[:31] for p in proof] or [b"\x00" * 31], good_root)


@pytest.mark.parametrize("case", V["inclusion"], ids=[c["desc"] for c in V["inclusion"]])
def test_it_rejects_every_corruption_of_a_good_inclusion_proof(case):
    i, n, proof = case["index"], case["size"], _hx(case["proof"])
    corrupted = list(_inclusion_corruptions(i, n, LEAVES[i], proof, ROOTS[n]))
    assert len(corrupted) >= 7
    for what, args in corrupted:
        with pytest.raises(ProofError):
            verify_inclusion(*args)
            pytest.fail(f"{what} verified")


@pytest.mark.parametrize("case", V["consistency"], ids=[c["desc"] for c in V["consistency"]])
def test_consistency_proof_matches_and_verifies_the_ct_vector(case):
    m, n, proof = case["old_size"], case["new_size"], _hx(case["proof"])
    assert consistency_proof(m, LEAVES[:n]) == proof
    assert root_from_consistency_proof(m, n, proof, ROOTS[m]) == ROOTS[n]
    verify_consistency(m, n, proof, ROOTS[m], ROOTS[n])


def _consistency_corruptions(m, n, proof, old, new):
    yield "old_size+1", (m + 1, n, proof, old, new)
    yield "old_size-1", (m - 1, n, proof, old, new)
    yield "new_size*2", (m, n * 2, proof, old, new)
    for k in range(len(proof)):
        bad = list(proof)
        bad[k] = _flip(bad[k])
        yield f"flipped bit in proof[{k}]", (m, n, bad, old, new)
    yield "trailing garbage", (m, n, proof + [OTHER_ROOT], old, new)
    yield "preceding garbage", (m, n, [OTHER_ROOT] + proof, old, new)
    if proof:
        yield "empty proof", (m, n, [], old, new)
    yield "swapped roots" if old != new else "foreign new root", (m, n, proof, new, old) if old != new else (
        m, n, proof, old, OTHER_ROOT)
    yield "foreign old root", (m, n, proof, OTHER_ROOT, new)


@pytest.mark.parametrize("case", V["consistency"], ids=[c["desc"] for c in V["consistency"]])
def test_it_rejects_every_corruption_of_a_good_consistency_proof(case):
    m, n, proof = case["old_size"], case["new_size"], _hx(case["proof"])
    for what, args in _consistency_corruptions(m, n, proof, ROOTS[m], ROOTS[n]):
        with pytest.raises(ProofError):
            verify_consistency(*args)
            pytest.fail(f"{what} verified")


def test_it_refuses_proofs_it_cannot_build():
    with pytest.raises(ProofError):
        inclusion_proof(8, LEAVES)
    with pytest.raises(ProofError):
        consistency_proof(0, LEAVES)
    with pytest.raises(ProofError):
        consistency_proof(9, LEAVES)


def test_root_of_100k_leaves_agrees_with_the_incremental_roots():
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(100_000)]
    r = root(leaves)
    assert roots_at(leaves, [99_999, 100_000])[100_000] == r
    verify_inclusion(77_777, 100_000, leaves[77_777], inclusion_proof(77_777, leaves), r)
    verify_consistency(65_537, 100_000, consistency_proof(65_537, leaves), roots_at(leaves, [65_537])[65_537], r)


def _tree(n):
    return [leaf_hash(i.to_bytes(4, "big")) for i in range(n)]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_inclusion_proofs_for_random_trees_verify(n_i):
    n, i = n_i
    leaves = _tree(n)
    r = root(leaves)
    proof = inclusion_proof(i, leaves)
    verify_inclusion(i, n, leaves[i], proof, r)
    if proof:
        with pytest.raises(ProofError):
            verify_inclusion(i, n, leaves[i], [_flip(proof[0])] + proof[1:], r)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n))))
def test_consistency_proofs_for_random_trees_verify(m_n):
    m, n = m_n
    leaves = _tree(n)
    old, new = root(leaves[:m]), root(leaves)
    proof = consistency_proof(m, leaves)
    assert root_from_consistency_proof(m, n, proof, old) == new
    if proof:
        with pytest.raises(ProofError):
            verify_consistency(m, n, proof[:-1] + [_flip(proof[-1])], old, new)


def test_merkle_levels_give_the_same_proofs_and_roots_as_the_direct_computation():
    """consistency_records builds the levels once (a tree head a minute means hundreds of proofs)."""
    from ledger.core.merkle import MerkleLevels, consistency_proof, leaf_hash, root

    leaves = [leaf_hash(bytes([i % 256, i // 256])) for i in range(300)]
    levels = MerkleLevels(leaves)
    for lo, hi in [(0, 300), (0, 1), (0, 256), (256, 300), (17, 29), (5, 5)]:
        assert levels.range_root(lo, hi) == root(leaves[lo:hi])
    for old, new in [(1, 2), (3, 7), (7, 8), (100, 300), (256, 300), (299, 300), (5, 5)]:
        assert consistency_proof(old, leaves, new_size=new, levels=levels) == consistency_proof(old, leaves[:new])
