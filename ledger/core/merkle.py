"""RFC 6962 Merkle tree: hashes, roots, inclusion and consistency proofs.

Hashing (RFC 6962 section 2.1): ``leaf_hash(d) = SHA-256(0x00 || d)``,
``node_hash(l, r) = SHA-256(0x01 || l || r)``, the empty tree's root is
``SHA-256("")``. Proof generation follows RFC 6962 sections 2.1.1 (PATH) and
2.1.2 (PROOF); verification follows transparency-dev/merkle
(``proof/verify.go``: RootFromInclusionProof, RootFromConsistencyProof), each
split into a ``root_from_*`` computation and a ``verify_*`` comparison.

Roots are computed with a stack of perfect subtrees (a compact range): one
pass, ``n - 1`` node hashes, no list slicing, so 100k leaves take ~0.1 s.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Sequence

from ledger.core.errors import ProofError

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    return _sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return _sha256(b"\x01" + left + right).digest()


# --------------------------------------------------------------------------- roots


def _range_root(leaf_hashes: Sequence[bytes], lo: int, hi: int) -> bytes:
    """MTH(D[lo:hi]) — the tree shape depends only on ``hi - lo``."""
    if hi <= lo:
        return EMPTY_ROOT
    sizes: list[int] = []
    hashes: list[bytes] = []
    for i in range(lo, hi):
        h, s = leaf_hashes[i], 1
        while sizes and sizes[-1] == s:
            h = _sha256(b"\x01" + hashes.pop() + h).digest()
            s += sizes.pop()
        sizes.append(s)
        hashes.append(h)
    h = hashes[-1]
    for left in reversed(hashes[:-1]):
        h = _sha256(b"\x01" + left + h).digest()
    return h


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """Merkle Tree Hash of the given leaf hashes (RFC 6962 section 2.1)."""
    return _range_root(leaf_hashes, 0, len(leaf_hashes))


def roots_at(leaf_hashes: Iterable[bytes], sizes: Iterable[int]) -> dict[int, bytes]:
    """Roots of the prefixes of the given sizes, in one pass over the leaves."""
    wanted = sorted(set(sizes))
    out: dict[int, bytes] = {}
    if wanted and wanted[0] < 0:
        raise ProofError(f"negative tree size {wanted[0]}")
    if 0 in wanted:
        out[0] = EMPTY_ROOT
    stack_s: list[int] = []
    stack_h: list[bytes] = []
    want = iter(s for s in wanted if s > 0)
    nxt = next(want, None)
    n = 0
    for leaf in leaf_hashes:
        if nxt is None:
            break
        h, s = leaf, 1
        while stack_s and stack_s[-1] == s:
            h = _sha256(b"\x01" + stack_h.pop() + h).digest()
            s += stack_s.pop()
        stack_s.append(s)
        stack_h.append(h)
        n += 1
        if n == nxt:
            r = stack_h[-1]
            for left in reversed(stack_h[:-1]):
                r = _sha256(b"\x01" + left + r).digest()
            out[n] = r
            nxt = next(want, None)
    if nxt is not None:
        raise ProofError(f"tree size {nxt} exceeds the {n} leaves available")
    return out


# --------------------------------------------------------------------------- proof generation


def _split(n: int) -> int:
    """Largest power of two strictly less than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_proof(index: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """PATH(index, D[n]) (RFC 6962 section 2.1.1), ordered from the leaf upward."""
    n = len(leaf_hashes)
    if not 0 <= index < n:
        raise ProofError(f"index {index} out of range for tree size {n}")
    path: list[bytes] = []
    lo, hi, m = 0, n, index
    while hi - lo > 1:
        k = _split(hi - lo)
        if m < k:
            path.append(_range_root(leaf_hashes, lo + k, hi))
            hi = lo + k
        else:
            path.append(_range_root(leaf_hashes, lo, lo + k))
            lo, m = lo + k, m - k
    path.reverse()
    return path


class MerkleLevels:
    """Every perfect subtree hash of a leaf sequence (``n - 1`` node hashes, built once).

    The subranges RFC 6962 proofs need split into O(log n) aligned perfect subtrees, so with
    the levels each proof costs O(log^2 n) hashes instead of O(n): an export with a tree head
    every minute (hundreds of proofs over 10^5 leaves) stays linear in the log size.
    """

    def __init__(self, leaf_hashes: Sequence[bytes]) -> None:
        self.levels: list[list[bytes]] = [list(leaf_hashes)]
        while len(self.levels[-1]) > 1:
            prev = self.levels[-1]
            self.levels.append([_sha256(b"\x01" + prev[i] + prev[i + 1]).digest() for i in range(0, len(prev) - 1, 2)])

    def __len__(self) -> int:
        return len(self.levels[0])

    def range_root(self, lo: int, hi: int) -> bytes:
        """MTH(D[lo:hi]) from the stored perfect subtrees."""
        n = hi - lo
        if n <= 0:
            return EMPTY_ROOT
        if n & (n - 1) == 0 and lo % n == 0:
            return self.levels[n.bit_length() - 1][lo // n]
        k = _split(n)
        return node_hash(self.range_root(lo, lo + k), self.range_root(lo + k, hi))


def consistency_proof(old_size: int, leaf_hashes: Sequence[bytes], *, new_size: int | None = None,
                      levels: MerkleLevels | None = None) -> list[bytes]:
    """PROOF(m, D[n]) (RFC 6962 section 2.1.2) for ``0 < m <= n``; ``n`` = ``new_size`` or all leaves.

    Give ``levels`` (built over the same leaves, or a longer log with them as a prefix) to
    compute several proofs over one log cheaply.
    """
    n = len(leaf_hashes) if new_size is None else new_size
    if not 0 < old_size <= n <= len(leaf_hashes):
        raise ProofError(f"consistency proof needs 0 < old_size ({old_size}) <= size ({n}) <= {len(leaf_hashes)}")
    if levels is not None and len(levels) < n:
        raise ProofError("Merkle levels shorter than the tree")
    rr = levels.range_root if levels is not None else (lambda a, b: _range_root(leaf_hashes, a, b))
    proof: list[bytes] = []
    lo, hi, m, complete = 0, n, old_size, True
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            proof.append(rr(lo + k, hi))
            hi = lo + k
        else:
            proof.append(rr(lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    if not complete:
        proof.append(rr(lo, hi))
    proof.reverse()
    return proof


# --------------------------------------------------------------------------- verification


def _check_hashes(proof: Sequence[bytes]) -> None:
    for i, h in enumerate(proof):
        if not isinstance(h, (bytes, bytearray)) or len(h) != HASH_SIZE:
            raise ProofError(f"proof element {i} is not a {HASH_SIZE}-byte hash")


def _decomp_incl_proof(index: int, size: int) -> tuple[int, int]:
    inner = (index ^ (size - 1)).bit_length()
    border = bin(index >> inner).count("1")
    return inner, border


def _chain_inner(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    for i, h in enumerate(proof):
        seed = node_hash(seed, h) if (index >> i) & 1 == 0 else node_hash(h, seed)
    return seed


def _chain_inner_right(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    for i, h in enumerate(proof):
        if (index >> i) & 1 == 1:
            seed = node_hash(h, seed)
    return seed


def _chain_border_right(seed: bytes, proof: Sequence[bytes]) -> bytes:
    for h in proof:
        seed = node_hash(h, seed)
    return seed


def root_from_inclusion_proof(index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes]) -> bytes:
    """Root implied by an inclusion proof. Requires ``0 <= index < size``.

    1. Split the proof where the paths to ``index`` and ``size-1`` diverge.
    2. Chain the inner part by the index bits, then the border part from the left.
    """
    if not 0 <= index < size:
        raise ProofError(f"index {index} is beyond tree size {size}")
    if len(leaf_hash) != HASH_SIZE:
        raise ProofError(f"leaf hash has {len(leaf_hash)} bytes, want {HASH_SIZE}")
    _check_hashes(proof)
    inner, border = _decomp_incl_proof(index, size)
    if len(proof) != inner + border:
        raise ProofError(f"wrong proof size {len(proof)}, want {inner + border}")
    res = _chain_inner(leaf_hash, proof[:inner], index)
    return _chain_border_right(res, proof[inner:])


def verify_inclusion(index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes], root: bytes) -> None:
    calc = root_from_inclusion_proof(index, size, leaf_hash, proof)
    if calc != root:
        raise ProofError(f"inclusion proof for index {index} of size {size} yields root "
                         f"{calc.hex()[:16]}…, expected {bytes(root).hex()[:16]}…")


def root_from_consistency_proof(old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes) -> bytes:
    """New root implied by a consistency proof, after checking it reproduces ``old_root``.

    Requires ``0 < old_size <= new_size`` (equal sizes need an empty proof).
    1. The proof is a suffix of the inclusion proof of leaf ``old_size-1``,
       starting at level ``shift`` = trailing zeros of ``old_size``; its seed is
       ``old_root`` when ``old_size`` is a power of two, else ``proof[0]``.
    2. Chaining only left-hand siblings must give ``old_root``; chaining all gives the new root.
    """
    if new_size < old_size:
        raise ProofError(f"new size {new_size} < old size {old_size}")
    _check_hashes(proof)
    if len(old_root) != HASH_SIZE:
        raise ProofError("old root is not a 32-byte hash")
    if old_size == new_size:
        if proof:
            raise ProofError("sizes are equal but the proof is not empty")
        return bytes(old_root)
    if old_size == 0:
        raise ProofError("consistency proof from an empty tree is meaningless")
    if not proof:
        raise ProofError("empty consistency proof")
    inner, border = _decomp_incl_proof(old_size - 1, new_size)
    shift = (old_size & -old_size).bit_length() - 1
    inner -= shift
    if old_size == 1 << shift:
        seed, start = bytes(old_root), 0
    else:
        seed, start = proof[0], 1
    if len(proof) != start + inner + border:
        raise ProofError(f"wrong proof size {len(proof)}, want {start + inner + border}")
    proof = proof[start:]
    mask = (old_size - 1) >> shift
    hash1 = _chain_border_right(_chain_inner_right(seed, proof[:inner], mask), proof[inner:])
    if hash1 != old_root:
        raise ProofError("consistency proof does not reproduce the old root")
    return _chain_border_right(_chain_inner(seed, proof[:inner], mask), proof[inner:])


def verify_consistency(old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes,
                       new_root: bytes) -> None:
    calc = root_from_consistency_proof(old_size, new_size, proof, old_root)
    if calc != new_root:
        raise ProofError(f"consistency proof {old_size}->{new_size} yields root {calc.hex()[:16]}…, "
                         f"expected {bytes(new_root).hex()[:16]}…")
