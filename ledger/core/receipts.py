"""Recall receipts (DESIGN section 3, "Recall with receipts").

A receipt is an RFC 6962 tree over the ordered results. Leaf ``i`` is
``leaf_hash(canonical_json(result_i))`` with ``result_i`` =
``{rank, memory, content_sha256, weight_q, state, chain_head}`` and rank = i+1.
The body binds the query hash, k, tenant, store, the results root and count,
the calibration state (STH size/root, projection version), the time and the
receipt key id; it is signed (``entry_hash(TAG_RECEIPT, body)``) by the
separate, lower-privilege receipt key — a plain Ed25519 key, not an epoch key.
Each result carries its inclusion proof so it can be checked on its own.
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from ledger.core.canonical import TAG_RECEIPT, canonical_json, entry_hash, parse_time
from ledger.core.entries import _hex64
from ledger.core.errors import BundleError, LedgerError, ProofError, SignatureInvalidError
from ledger.core.keys import key_id, verify_signature
from ledger.core.merkle import EMPTY_ROOT, inclusion_proof, leaf_hash, root, verify_inclusion

RESULT_FIELDS = ("rank", "memory", "content_sha256", "weight_q", "state", "chain_head")
BODY_FIELDS = ("tenant", "store", "query_sha256", "k", "results_root", "result_count", "sth_size",
               "sth_root", "projection_version", "time", "key_id")


class ReceiptSigner(Protocol):
    public_key: bytes

    def sign(self, message: bytes) -> bytes: ...


def _result_leaf(result: Mapping) -> bytes:
    return leaf_hash(canonical_json({f: result[f] for f in RESULT_FIELDS}))


def _check_result(i: int, r: object) -> dict:
    if type(r) is not dict:
        raise BundleError(f"result {i} is not an object")
    missing = [f for f in RESULT_FIELDS if f not in r]
    if missing:
        raise BundleError(f"result {i} misses {', '.join(missing)}")
    if r["rank"] != i + 1:
        raise ProofError(f"result {i} has rank {r['rank']!r}, expected {i + 1}")
    if type(r["memory"]) is not str or not _hex64(r["content_sha256"]) or not _hex64(r["chain_head"]):
        raise BundleError(f"result {i}: memory must be a string, content_sha256/chain_head 64 hex")
    if type(r["weight_q"]) is not int or not (r["state"] is None or type(r["state"]) is str):
        raise BundleError(f"result {i}: weight_q must be an integer, state a string or null")
    return r


def build_receipt(results: Sequence[Mapping], *, tenant: str, store: str, query_sha256: str, k: int,
                  sth_size: int, sth_root_hex: str, projection_version: str, time: str,
                  signer: ReceiptSigner) -> dict:
    """Sign a receipt over the ordered ``results`` (ranks are assigned 1..n when absent)."""
    rows = [{**{f: r.get(f) for f in RESULT_FIELDS[1:]}, "rank": i + 1} for i, r in enumerate(results)]
    for i, r in enumerate(rows):
        _check_result(i, r)
    if len(rows) > k:
        raise ValueError(f"{len(rows)} results exceed k={k}")
    leaves = [_result_leaf(r) for r in rows]
    body = {
        "tenant": tenant, "store": store, "query_sha256": query_sha256, "k": k,
        "results_root": root(leaves).hex(), "result_count": len(rows), "sth_size": sth_size,
        "sth_root": sth_root_hex, "projection_version": projection_version, "time": time,
        "key_id": key_id(signer.public_key),
    }
    _check_body(body)
    return {
        "body": body,
        "signature": signer.sign(entry_hash(TAG_RECEIPT, body)).hex(),
        "results": [{**r, "proof": [p.hex() for p in inclusion_proof(i, leaves)]} for i, r in enumerate(rows)],
    }


def _check_body(body: object) -> dict:
    if type(body) is not dict:
        raise BundleError("receipt body is not an object")
    if set(body) != set(BODY_FIELDS):
        raise BundleError(f"receipt body fields {sorted(body)} differ from {list(BODY_FIELDS)}")
    for name in ("tenant", "store", "projection_version", "key_id"):
        if type(body[name]) is not str:
            raise BundleError(f"receipt body {name} must be a string")
    for name in ("k", "result_count", "sth_size"):
        if type(body[name]) is not int or body[name] < 0:
            raise BundleError(f"receipt body {name} must be a non-negative integer")
    for name in ("query_sha256", "results_root", "sth_root"):
        if not _hex64(body[name]):
            raise BundleError(f"receipt body {name} must be 64 lowercase hex")
    parse_time(body["time"])
    return body


def verify_receipt(receipt: Mapping, receipt_public_key: bytes) -> None:
    """Verify a receipt on its own; return None or raise a typed error.

    1. Shape of body and results (BundleError).
    2. ``key_id`` names this key; the signature verifies over the body hash.
    3. ``result_count`` equals the results given and does not exceed ``k``.
    4. Each result, at rank i+1, is included in ``results_root`` by its proof.
    """
    if not isinstance(receipt, Mapping) or type(receipt.get("signature")) is not str:
        raise BundleError("receipt must be an object with body, signature (hex) and results")
    body = _check_body(receipt.get("body"))
    results = receipt.get("results")
    if type(results) is not list:
        raise BundleError("receipt results must be a list")
    if body["key_id"] != key_id(receipt_public_key):
        raise SignatureInvalidError(f"receipt key_id {body['key_id']} does not name the given receipt key")
    try:
        signature = bytes.fromhex(receipt["signature"])
    except ValueError:
        raise BundleError("receipt signature is not hex") from None
    try:
        verify_signature(receipt_public_key, entry_hash(TAG_RECEIPT, body), signature)
    except SignatureInvalidError:
        raise SignatureInvalidError("receipt signature invalid") from None
    n = len(results)
    if body["result_count"] != n:
        raise ProofError(f"receipt binds {body['result_count']} results but carries {n}")
    if n > body["k"]:
        raise ProofError(f"receipt carries {n} results for k={body['k']}")
    results_root = bytes.fromhex(body["results_root"])
    if n == 0 and results_root != EMPTY_ROOT:
        raise ProofError("receipt with no results must bind the empty root")
    for i, r in enumerate(results):
        _check_result(i, r)
        proof_hex = r.get("proof")
        if type(proof_hex) is not list or not all(type(p) is str for p in proof_hex):
            raise BundleError(f"result {i} proof must be a list of hex strings")
        try:
            proof = [bytes.fromhex(p) for p in proof_hex]
            verify_inclusion(i, n, _result_leaf(r), proof, results_root)
        except ValueError:
            raise BundleError(f"result {i} proof is not hex") from None
        except LedgerError as exc:
            raise ProofError(f"result rank {i + 1} ({r['memory']}): {exc}") from None
