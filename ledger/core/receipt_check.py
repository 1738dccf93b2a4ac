"""``memaudit-verify receipt RECEIPT --anchor … --checkpoint …``: one recall receipt, on its own.

For an agent's owner who holds a receipt but no bundle. The receipt file is what
``GET /api/v1/receipts/<id>/`` returns (``receipt``, ``receipt_public_key``,
``receipt_key_endorsement``, ``epochs``, optionally ``consistency``) or a bare receipt (then
``--receipt-key``, a key the owner pinned out of band).
Checks: the receipt's signature and result inclusion proofs; the receipt key is endorsed for
the receipt's time by an epoch of the anchored chain (a key merely named in the file is
anyone's: issue 13); the checkpoint is
signed by the anchor (or an epoch endorsed from it); the tree head the receipt
cites is the checkpoint or consistent with it (RFC 6962 proof from the file or
``--proof``, as served at ``/api/v1/orgs/<slug>/proof/consistency``).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from dataclasses import asdict
from typing import Sequence

from ledger.core.checkpoint import open_checkpoint
from ledger.core.errors import BundleError, LedgerError, ProofError
from ledger.core.keys import (
    RECEIPT,
    Epoch,
    EpochSet,
    KeyEndorsement,
    check_key_endorsement,
    endorsed_key_valid_at,
    verify_epoch_chain,
)
from ledger.core.merkle import verify_consistency
from ledger.core.note import cosigned_by
from ledger.core.receipts import verify_receipt
from ledger.core.verify import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_UNANCHORED,
    EXIT_UNUSABLE,
    UNANCHORED_LINE,
    Finding,
    _add_trust_args,
    _finding,
    _read_arg,
    _trust,
)


def _hex_or_b64(items: object) -> list[bytes]:
    if type(items) is not list:
        raise BundleError("proof must be a list of hashes")
    out = []
    for p in items:
        if type(p) is not str:
            raise BundleError("proof hashes must be strings")
        try:
            out.append(bytes.fromhex(p) if len(p) == 64 else base64.b64decode(p, validate=True))
        except ValueError:
            raise BundleError("proof hash is neither hex nor base64") from None
    return out


def _proof_of(doc: object) -> tuple[int, int, list[bytes]] | None:
    if not isinstance(doc, dict):
        return None
    old = doc.get("old_size", doc.get("old"))
    new = doc.get("new_size", doc.get("new"))
    if type(old) is not int or type(new) is not int:
        raise BundleError("consistency proof needs integer old/new sizes")
    return old, new, _hex_or_b64(doc.get("proof"))


def check_receipt(doc: dict, *, anchor: bytes | None, checkpoint: str | None, receipt_key: bytes | None = None,
                  proof: dict | None = None, witnesses=(), witness_threshold: int = 0) -> list[Finding]:
    """Findings for one receipt document (empty = clean)."""
    findings: list[Finding] = []
    receipt = doc.get("receipt", doc) if isinstance(doc, dict) else doc
    if not isinstance(receipt, dict) or not isinstance(receipt.get("body"), dict):
        raise BundleError("not a receipt (want the receipt API response or a bare receipt)")
    key = receipt_key
    pinned = key is not None
    if key is None:
        try:
            key = bytes.fromhex(doc.get("receipt_public_key", ""))
        except ValueError:
            raise BundleError("receipt_public_key is not hex") from None
    if len(key) != 32:
        raise BundleError("no receipt public key (give --receipt-key or the receipt API response)")
    try:
        verify_receipt(receipt, key)
    except LedgerError as exc:
        findings.append(_finding("receipt", exc))
        return findings
    body = receipt["body"]
    keys: list[bytes] = []
    epochs: list[Epoch] = []
    if doc.get("epochs"):
        try:
            epochs = [Epoch.from_json(e) for e in doc["epochs"]]
            verify_epoch_chain(epochs, trust_anchor=anchor)
            keys = [e.public_key for e in epochs]
        except LedgerError as exc:
            findings.append(_finding("epochs", exc))
            epochs = []
    elif anchor is not None:
        keys = [anchor]
    if not pinned:
        _check_receipt_key(doc, key, body, epochs, findings)
    if checkpoint is None:
        return findings
    try:
        opened = open_checkpoint(checkpoint, keys)
    except LedgerError as exc:
        findings.append(_finding("checkpoint", exc))
        return findings
    cp = opened.checkpoint
    if cp.tenant != body["tenant"]:
        findings.append(Finding("checkpoint", None, f"origin {cp.origin!r} is not the receipt's tenant "
                                f"{body['tenant']!r}", "TenantMismatchError"))
    if witness_threshold:
        try:
            n = len(cosigned_by(opened.note, witnesses))
            if n < witness_threshold:
                findings.append(Finding("checkpoint", None, f"cosigned by {n} known witnesses, "
                                        f"{witness_threshold} required", "SignatureInvalidError"))
        except LedgerError as exc:
            findings.append(_finding("checkpoint", exc))
    size, root = body["sth_size"], bytes.fromhex(body["sth_root"])
    try:
        if size == cp.size:
            if root != cp.root:
                raise ProofError(f"receipt cites a root of size {size} that differs from the checkpoint's")
        elif size > 0:
            given = _proof_of(proof) or _proof_of(doc.get("consistency"))
            lo, hi = sorted((size, cp.size))
            if given is None or given[:2] != (lo, hi):
                raise ProofError(f"no consistency proof {lo}->{hi} between the receipt's tree head and the "
                                 "checkpoint (fetch /api/v1/orgs/<slug>/proof/consistency and pass --proof)")
            lo_root, hi_root = (root, cp.root) if size < cp.size else (cp.root, root)
            verify_consistency(lo, hi, given[2], lo_root, hi_root)
    except LedgerError as exc:
        findings.append(_finding("receipt", exc, f"sth_size={size}"))
    return findings


def _check_receipt_key(doc: dict, key: bytes, body: dict, epochs: list[Epoch], findings: list[Finding]) -> None:
    """The key that signed the receipt must be endorsed for receipts, at the receipt's time, by an
    epoch of the (anchored) chain: anchor -> epoch -> receipt key."""
    raw = doc.get("receipt_key_endorsement")
    if raw is None:
        findings.append(Finding("receipt key", None, "the receipt key carries no endorsement: anyone can sign a "
                                "receipt with a key of their own (use the receipt API's response, or pin the key "
                                "with --receipt-key)", "SignatureInvalidError"))
        return
    if not epochs:
        findings.append(Finding("receipt key", None, "its endorsement cannot be checked without the organization's "
                                "epochs (the receipt API's 'epochs')", "SignatureInvalidError"))
        return
    ring = EpochSet(epochs)
    try:
        endorsement = KeyEndorsement.from_json(raw)
        check_key_endorsement(endorsement, ring, tenant=body.get("tenant"))
    except (LedgerError, BundleError) as exc:
        findings.append(_finding("receipt key", exc) if isinstance(exc, LedgerError) else
                        Finding("receipt key", None, str(exc), type(exc).__name__))
        return
    if endorsement.purpose != RECEIPT or endorsement.public_key != key:
        findings.append(Finding("receipt key", None, "the endorsement is for another key or purpose, not the key "
                                "that signed this receipt", "SignatureInvalidError"))
    elif not endorsed_key_valid_at(endorsement, body.get("time"), ring):
        findings.append(Finding("receipt key", None, f"not endorsed for the receipt's time {body.get('time')!r} "
                                "(outside its window, or revoked)", "EpochExpiredError"))


def receipt_main(argv: Sequence[str], prog: str) -> int:
    ap = argparse.ArgumentParser(prog=prog, description="Verify one recall receipt against a pinned anchor and "
                                 "checkpoint (exit 0 clean, 1 findings, 2 unusable, 3 clean but unanchored).")
    ap.add_argument("receipt", help="receipt JSON file (the receipt API response, or a bare receipt)")
    ap.add_argument("--receipt-key", help="hex receipt public key (when the file is a bare receipt)")
    ap.add_argument("--proof", help="consistency proof JSON (from /api/v1/orgs/<slug>/proof/consistency)")
    _add_trust_args(ap)
    args = ap.parse_args(argv)
    try:
        anchor, checkpoint, witnesses, threshold = _trust(args)
        doc = json.loads(_read_arg("@" + args.receipt))
        proof = json.loads(_read_arg(args.proof)) if args.proof else None
        findings = check_receipt(doc, anchor=anchor, checkpoint=checkpoint,
                                 receipt_key=bytes.fromhex(args.receipt_key) if args.receipt_key else None,
                                 proof=proof, witnesses=witnesses, witness_threshold=threshold)
    except (BundleError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        print(f"ERROR: unusable input: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    if anchor is None:
        print(UNANCHORED_LINE)
    for f in findings:
        print(json.dumps(asdict(f)) if args.json else str(f))
    if findings:
        print(f"FAILED with {len(findings)} finding(s)")
        return EXIT_FINDINGS
    print(f"{'OK' if anchor is not None else 'UNANCHORED'}: receipt verified"
          + (" and consistent with the pinned checkpoint" if checkpoint else " (no --checkpoint given)"))
    return EXIT_OK if anchor is not None else EXIT_UNANCHORED
