"""Signed tree heads (STH) of a tenant's RFC 6962 log, signed by the housekeeper key."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.core.canonical import TAG_TREE_HEAD, entry_hash, parse_time
from ledger.core.entries import EntryFormatError, Epochs, _hex64, _nonempty_str
from ledger.core.errors import BundleError, ProofError, SignatureInvalidError, TenantMismatchError
from ledger.core.keys import EpochSet, Signer


def tree_head_body(tenant: str, size: int, root_hex: str, time: str, epoch: int) -> dict:
    body = {"tenant": tenant, "size": size, "root": root_hex, "time": time, "epoch": epoch}
    validate_tree_head_body(body)
    parse_time(time)
    return body


def validate_tree_head_body(body: object) -> dict:
    if type(body) is not dict or set(body) != {"tenant", "size", "root", "time", "epoch"}:
        raise EntryFormatError("tree head body must have exactly tenant, size, root, time, epoch")
    if not _nonempty_str(body["tenant"]) or type(body["size"]) is not int or body["size"] < 0:
        raise EntryFormatError("tree head tenant must be a string and size a non-negative integer")
    if not _hex64(body["root"]) or type(body["epoch"]) is not int or type(body["time"]) is not str:
        raise EntryFormatError("tree head root must be 64 hex, epoch an integer, time a string")
    return body


@dataclass(frozen=True)
class SignedTreeHead:
    body: dict
    signature: bytes

    @property
    def size(self) -> int:
        return self.body["size"]

    @property
    def root(self) -> bytes:
        return bytes.fromhex(self.body["root"])

    def hash(self) -> bytes:
        return entry_hash(TAG_TREE_HEAD, self.body)

    def to_json(self) -> dict:
        return {"body": self.body, "signature": self.signature.hex()}

    @classmethod
    def from_json(cls, d: object) -> "SignedTreeHead":
        if type(d) is not dict or type(d.get("body")) is not dict or type(d.get("signature")) is not str:
            raise BundleError("tree head must be an object with body (object) and signature (hex)")
        try:
            return cls(d["body"], bytes.fromhex(d["signature"]))
        except ValueError:
            raise BundleError("tree head signature is not hex") from None


def sign_tree_head(tenant: str, size: int, root: bytes, time: str, signer: Signer) -> SignedTreeHead:
    body = tree_head_body(tenant, size, root.hex(), time, signer.epoch)
    return SignedTreeHead(body, signer.sign(entry_hash(TAG_TREE_HEAD, body)))


def verify_tree_head(sth: SignedTreeHead, *, tenant: str, epochs: Epochs, root: bytes | None = None) -> None:
    """Schema, tenant, housekeeper signature at the STH time; and the root when the caller knows it."""
    body = validate_tree_head_body(sth.body)
    if body["tenant"] != tenant:
        raise TenantMismatchError(f"tree head belongs to tenant {body['tenant']!r}, not {tenant!r}")
    try:
        EpochSet.of(epochs).verify(tenant=tenant, number=body["epoch"], time=body["time"],
                                   message=sth.hash(), signature=sth.signature)
    except SignatureInvalidError as exc:
        raise SignatureInvalidError(f"tree head {exc}") from None
    if root is not None and sth.root != root:
        raise ProofError(f"tree head root {body['root'][:16]}… differs from the recomputed root "
                         f"{root.hex()[:16]}… for size {body['size']}")
