"""Typed errors of the ledger core.

Every verify function either returns a value or raises exactly one of these,
so callers (the Django write path, the portable verifier) can map failures to
clear messages without parsing strings.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base class. ``kind`` and ``seq`` name the offending entry when known."""

    def __init__(self, message: str, *, kind: str | None = None, seq: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.seq = seq

    def __str__(self) -> str:
        return self.message


class CanonicalError(LedgerError):
    """A value cannot be canonically encoded (float, bytes, non-str key, ...)."""


class ChainBrokenError(LedgerError):
    """Sequence gap, wrong ``prev`` link, reordered or missing entry."""


class SignatureInvalidError(LedgerError):
    """An Ed25519 signature does not verify over the entry hash."""


class TenantMismatchError(LedgerError):
    """An entry of one tenant presented as another tenant's."""


class EpochExpiredError(LedgerError):
    """The entry time lies outside the signing epoch's validity window."""


class EpochRevokedError(LedgerError):
    """The entry was signed at or after the signing epoch's revocation."""


class UnknownEpochError(LedgerError):
    """The entry names an epoch the verifier does not know."""


class WeightMismatchError(LedgerError):
    """A weight that no transition (or the weight rule) explains."""


class ProofError(LedgerError):
    """A Merkle inclusion or consistency proof does not verify."""


class BundleError(LedgerError):
    """An evidence bundle or receipt is structurally unusable."""
