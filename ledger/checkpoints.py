"""Witness-ready checkpoints of an organization's log (C2SP tlog-checkpoint, tlog-cosignature).

Selectors read what the housekeeper signed (the checkpoint note of a tree head, a consistency
proof between two sizes); services record the org admin's trusted witness keys and the
cosignatures those witnesses send back. Nothing here signs: the web process holds no key, the
checkpoint signature is written with the tree head (``ledger.services.tree_head_issue``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from ledger.core.checkpoint import Checkpoint, log_key, parse_checkpoint_text
from ledger.core.errors import BundleError, LedgerError
from ledger.core.merkle import consistency_proof
from ledger.core.note import (
    COSIGNATURE_V1,
    Note,
    NoteError,
    NoteSignature,
    VerifierKey,
    key_id,
    parse_note,
    parse_verifier_key,
    verify_cosignature,
)
from ledger.core.receipt_check import check_receipt
from ledger.models import LogLeaf, ReceiptKey, TreeHead, WitnessCosignature, WitnessKey
from ledger.services.tree_heads import checkpoint_origin_of
from ledger.signing import epochs_for, receipt_key_endorsement_for
from orgs.models import Organization

MAX_NOTE_BYTES = 16 * 1024  # a checkpoint with 100 cosignatures is ~11 kB


# --------------------------------------------------------------------------- selectors


def _cosignature_lines(rows: list[TreeHead]) -> dict[int, list[NoteSignature]]:
    out: dict[int, list[NoteSignature]] = {}
    for c in (WitnessCosignature.objects.filter(tree_head__in=rows, witness__revoked_at__isnull=True)
              .select_related("witness").order_by("tree_head_id", "witness__name")):
        w = c.witness
        out.setdefault(c.tree_head_id, []).append(NoteSignature(
            w.name, key_id(w.name, COSIGNATURE_V1, bytes(w.public_key)), c.timestamp.to_bytes(8, "big") + bytes(c.signature)))
    return out


def _notes(rows: list[TreeHead], organization: Organization, *, cosigned: bool) -> dict[int, Note]:
    """Checkpoint notes of tree-head rows (by row id), skipping heads signed before checkpoints
    existed or under an epoch the database does not know; three queries whatever the count."""
    keys = {e.number: e.public_key for e in epochs_for(organization)}
    origin = checkpoint_origin_of(organization)
    witness_lines = _cosignature_lines(rows) if cosigned else {}
    out = {}
    for row in rows:
        if row.checkpoint_signature is None or row.epoch not in keys:
            continue
        cp = Checkpoint(origin, row.size, bytes(row.root))
        sigs = [NoteSignature(origin, log_key(origin, keys[row.epoch]).key_id, bytes(row.checkpoint_signature)),
                *witness_lines.get(row.pk, [])]
        out[row.pk] = Note(cp.text(), tuple(sigs))
    return out


def checkpoint_of(row: TreeHead, organization: Organization, *, cosigned: bool = True) -> Note | None:
    """The tree head as a signed checkpoint note (with the stored witness cosignatures); None when
    the head predates checkpoints or its epoch is unknown."""
    return _notes([row], organization, cosigned=cosigned).get(row.pk)


def checkpoint_latest(organization: Organization) -> tuple[TreeHead, Note] | None:
    """The newest tree head that has a checkpoint note."""
    row = (TreeHead.objects.filter(organization=organization, checkpoint_signature__isnull=False)
           .order_by("-size").first())
    if row is None:
        return None
    note = checkpoint_of(row, organization)
    return (row, note) if note is not None else None


def checkpoint_notes(organization: Organization, heads: Sequence[TreeHead]) -> list[str]:
    """The checkpoint notes of ``heads`` (the evidence bundle's tree heads, oldest first), of those
    that have one: read with the heads, not again, so that a head the housekeeper signs meanwhile
    gives no checkpoint without its tree head."""
    rows = [r for r in heads if r.checkpoint_signature is not None]
    notes = _notes(rows, organization, cosigned=True)
    return [notes[r.pk].encode() for r in rows if r.pk in notes]


def log_verifier_key(organization: Organization) -> str | None:
    """The log's note verifier key (``origin+keyid+base64(0x01||key)``) under its newest epoch, for witnesses."""
    epochs = epochs_for(organization)
    if not epochs:
        return None
    return log_key(checkpoint_origin_of(organization), epochs[-1].public_key).encode()


@dataclass(frozen=True)
class ConsistencyProof:
    old: int
    new: int
    proof: list[bytes]


def consistency_proof_get(organization: Organization, *, old: int, new: int) -> ConsistencyProof:
    """RFC 6962 PROOF(old, D[new]) over the stored leaves; ``new`` at most the newest tree head."""
    latest = TreeHead.objects.filter(organization=organization).order_by("-size").values_list("size", flat=True).first()
    if latest is None:
        raise ValidationError("no tree head signed yet")
    if not 0 < old <= new <= latest:
        raise ValidationError(f"need 0 < old <= new <= {latest} (the newest tree head)")
    hashes = [bytes(h) for h in LogLeaf.objects.filter(organization=organization, index__lt=new)
              .order_by("index").values_list("leaf_hash", flat=True)]
    if len(hashes) != new:
        raise ValidationError("the log has fewer leaves than its tree heads; run ledger_verify")
    return ConsistencyProof(old, new, consistency_proof(old, hashes) if old < new else [])


def witness_key_list(organization: Organization) -> list[dict]:
    return [{"id": w.pk, "name": w.name,
             "vkey": VerifierKey(w.name, COSIGNATURE_V1, bytes(w.public_key)).encode(),
             "created_at": w.created_at, "revoked_at": w.revoked_at,
             "cosignatures": w.cosignatures.count()}
            for w in WitnessKey.objects.filter(organization=organization).order_by("name")]


# --------------------------------------------------------------------------- services


def witness_key_add(*, organization: Organization, vkey: str, user=None) -> WitnessKey:
    """Trust a witness: its ``cosignature/v1`` verifier key ``name+keyid+base64(0x04||key)``."""
    try:
        vk = parse_verifier_key(vkey)
    except NoteError as exc:
        raise ValidationError(f"witness key: {exc}") from None
    if vk.type != COSIGNATURE_V1:
        raise ValidationError("witness key must be a cosignature/v1 key (type 0x04), not a log key (0x01)")
    try:
        with transaction.atomic():
            return WitnessKey.objects.create(organization=organization, name=vk.name, public_key=vk.public_key,
                                             added_by=user)
    except IntegrityError:
        raise ValidationError(f"a witness named {vk.name!r} is already configured") from None


def witness_key_revoke(*, organization: Organization, witness_id: int) -> WitnessKey:
    w = WitnessKey.objects.get(organization=organization, pk=witness_id)
    if w.revoked_at is None:
        w.revoked_at = datetime.now(timezone.utc)
        w.save(update_fields=["revoked_at"])
    return w


def cosignatures_accept(*, organization: Organization, note: str | bytes) -> list[WitnessCosignature]:
    """Store the known witnesses' cosignatures on one of our checkpoints; return the new ones.

    The note must be a checkpoint this log signed (same origin, a stored tree head's size and
    root, our signature line intact); lines of unknown keys are ignored, a known witness's
    invalid cosignature refuses the whole note, and a repeat is not stored twice.
    """
    raw = note.encode("utf-8") if isinstance(note, str) else note
    if len(raw) > MAX_NOTE_BYTES:
        raise ValidationError(f"note larger than {MAX_NOTE_BYTES} bytes")
    try:
        parsed = parse_note(raw)
        cp = parse_checkpoint_text(parsed.text)
    except NoteError as exc:
        raise ValidationError(f"not a checkpoint note: {exc}") from None
    if cp.origin != checkpoint_origin_of(organization):
        raise ValidationError(f"origin {cp.origin[:80]!r} is not this organization's log")
    row = TreeHead.objects.filter(organization=organization, size=cp.size, checkpoint_signature__isnull=False).first()
    ours = checkpoint_of(row, organization, cosigned=False) if row is not None else None
    if ours is None or ours.text != parsed.text:
        raise ValidationError(f"no checkpoint of size {cp.size} with that root was signed by this log")
    witnesses = {(w.name, key_id(w.name, COSIGNATURE_V1, bytes(w.public_key))): w
                 for w in WitnessKey.objects.filter(organization=organization, revoked_at__isnull=True)}
    found: list[tuple[WitnessKey, int, bytes]] = []
    for sig in parsed.signatures:
        w = witnesses.get((sig.name, sig.key_id))
        if w is None:
            continue
        try:
            ts = verify_cosignature(parsed, sig, VerifierKey(w.name, COSIGNATURE_V1, bytes(w.public_key)))
        except LedgerError as exc:
            raise ValidationError(f"cosignature by {w.name}: {exc}") from None
        found.append((w, ts, sig.signature[8:]))
    if not found:
        raise ValidationError("the note carries no cosignature by a witness this organization trusts")
    created = []
    with transaction.atomic():
        for w, ts, sig in found:
            obj, new = WitnessCosignature.objects.get_or_create(tree_head=row, witness=w,
                                                                defaults={"timestamp": ts, "signature": sig})
            if new:
                created.append(obj)
    return created



# --------------------------------------------------------------------------- the receipt-check page

MAX_RECEIPT_BYTES = 256 * 1024


def receipt_check(organization: Organization, pasted: str) -> dict:
    """The portable receipt check (``memaudit-verify receipt``) on a pasted receipt, with this
    organization's anchor, newest checkpoint and, when the sizes differ, a consistency proof
    computed from the stored log. Returns ``{"error"}`` or ``{"findings", "sth_size", ...}``."""


    if len(pasted.encode("utf-8")) > MAX_RECEIPT_BYTES:
        return {"error": f"larger than {MAX_RECEIPT_BYTES // 1024} kB"}
    try:
        doc = json.loads(pasted)
    except ValueError as exc:
        return {"error": f"not JSON: {exc}"}
    receipt = doc.get("receipt", doc) if isinstance(doc, dict) else None
    body = receipt.get("body") if isinstance(receipt, dict) else None
    if not isinstance(body, dict) or type(body.get("sth_size")) is not int or type(body.get("key_id")) is not str:
        return {"error": "not a receipt: paste the JSON an agent got from recall (or GET /api/v1/receipts/<id>/)"}
    key = ReceiptKey.objects.filter(organization=organization, key_id=body["key_id"]).values_list(
        "public_key", flat=True).first()
    epochs = epochs_for(organization)
    latest = checkpoint_latest(organization)
    if key is None:
        return {"error": f"receipt key {body['key_id'][:32]!r} is not one of {organization.name}'s receipt keys"}
    if not epochs or latest is None:
        return {"error": "this organization has no signed checkpoint yet"}
    _, note = latest
    cp = parse_checkpoint_text(note.text)
    proof = None
    size = body["sth_size"]
    if 0 < size != cp.size:
        lo, hi = sorted((size, cp.size))
        try:
            p = consistency_proof_get(organization, old=lo, new=hi)
            proof = {"old_size": p.old, "new_size": p.new, "proof": [h.hex() for h in p.proof]}
        except ValidationError:
            proof = None  # the check reports the missing proof
    try:
        # The server knows its own keys, but checks them as an outsider would: through the
        # endorsement that the epoch chain gives the receipt key for the receipt's time.
        endorsement = receipt_key_endorsement_for(organization, body)
        findings = check_receipt({"receipt": receipt, "epochs": [e.to_json() for e in epochs],
                                  "receipt_public_key": bytes(key).hex(),
                                  "receipt_key_endorsement": endorsement.to_json() if endorsement else None},
                                 anchor=epochs[0].public_key, checkpoint=note.encode(), proof=proof)
    except BundleError as exc:
        return {"error": str(exc)}
    return {"findings": findings, "sth_size": size, "checkpoint_size": cp.size, "tenant": body.get("tenant"),
            "results": len(receipt.get("results") or [])}
