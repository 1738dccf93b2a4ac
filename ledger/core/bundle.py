"""Evidence bundle: build from plain objects, load from disk, parse into typed records.

The format is specified in ``docs/bundle.md``. In short: version 1 JSON with
the tenant, its key epochs, every memory's chains and exported live state, the
tenant log (leaf order as ``[memory, kind, seq]`` references, signed tree
heads, consistency proofs between consecutive tree heads), recall receipts and
the receipt public keys. Log leaf ``i`` is ``leaf_hash(entry_hash(entry_i))``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ledger.core.entries import GENESIS, KIND_TAGS, LABEL, PROVENANCE, TRANSITION, SignedEntry
from ledger.core.errors import BundleError
from ledger.core.keys import Epoch, KeyEndorsement, key_id
from ledger.core.merkle import MerkleLevels, consistency_proof, leaf_hash
from ledger.core.tree_heads import SignedTreeHead

# A key endorsement's log leaf is ``[KEYS_REF, KEY_ENDORSEMENT, seq]`` (it belongs to no memory;
# memory ids always contain a "/", so this one cannot clash).
KEYS_REF = ":keys"
KEY_ENDORSEMENT = "key_endorsement"

BUNDLE_FORMAT = "memaudit-evidence-bundle"
BUNDLE_VERSION = 1


# --------------------------------------------------------------------------- building


def leaf_ref(memory: str, entry: SignedEntry) -> list:
    """The log's reference to an entry: ``[memory id, kind, seq]``."""
    return [memory, entry.kind, entry.body["seq"]]


def memory_record(*, memory_id: str, store: str, content_sha256: str, genesis: SignedEntry,
                  provenance: Sequence[SignedEntry] = (), transitions: Sequence[SignedEntry] = (),
                  labels: Sequence[SignedEntry] = (), live_weight_q: int, live_state: str | None,
                  chain_head: str) -> dict:
    return {
        "id": memory_id,
        "store": store,
        "content_sha256": content_sha256,
        "live": {"weight_q": live_weight_q, "state": live_state, "chain_head": chain_head},
        "genesis": genesis.to_json(),
        "provenance": [e.to_json() for e in provenance],
        "transitions": [e.to_json() for e in transitions],
        "labels": [e.to_json() for e in labels],
    }


def consistency_records(tree_heads: Sequence[SignedTreeHead], leaf_hashes: Sequence[bytes]) -> list[dict]:
    """Consistency proofs between each pair of consecutive tree heads (sizes > 0 and growing).

    A tree head larger than the log (a truncated log) gets no proof: none can be computed, and
    the verifier reports that tree head as exceeding the log instead of the export failing.
    """
    out = []
    levels = None
    for a, b in zip(tree_heads, tree_heads[1:]):
        if 0 < a.size < b.size <= len(leaf_hashes):
            levels = levels or MerkleLevels(leaf_hashes)  # built once: each proof is then O(log^2 n)
            proof = consistency_proof(a.size, leaf_hashes, new_size=b.size, levels=levels)
            out.append({"old_size": a.size, "new_size": b.size, "proof": [p.hex() for p in proof]})
    return out


def build_bundle(*, tenant: str, epochs: Sequence[Epoch], memories: Sequence[dict], log_leaves: Sequence[list],
                 tree_heads: Sequence[SignedTreeHead], consistency: Sequence[dict] | None = None,
                 receipts: Sequence[dict] = (), receipt_public_keys: Iterable[bytes] = (),
                 exported_at: str | None = None, leaf_hashes: Sequence[bytes] | None = None,
                 checkpoints: Sequence[str] = (), key_endorsements: Sequence[KeyEndorsement] = ()) -> dict:
    """Assemble a bundle. ``log_leaves`` are :func:`leaf_ref` lists in append order.

    Pass ``leaf_hashes`` (log leaf hashes in the same order) to have the
    consistency proofs computed here when ``consistency`` is None.
    """
    if consistency is None:
        if leaf_hashes is None:
            raise ValueError("give consistency proofs or the leaf hashes to compute them")
        consistency = consistency_records(tree_heads, leaf_hashes)
    bundle = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "tenant": tenant,
        "epochs": [e.to_json() for e in epochs],
        "memories": list(memories),
        "log": {
            "leaves": [list(r) for r in log_leaves],
            "tree_heads": [t.to_json() for t in tree_heads],
            "consistency": list(consistency),
            "checkpoints": list(checkpoints),
        },
        "receipts": list(receipts),
        "receipt_keys": [{"key_id": key_id(k), "public_key": k.hex()} for k in receipt_public_keys],
        # Online (entry-signing) and receipt keys, each endorsed by an epoch key (docs/bundle.md).
        "key_endorsements": [e.to_json() for e in key_endorsements],
    }
    if exported_at is not None:
        bundle["exported_at"] = exported_at
    return bundle


def log_leaf_hashes(entries: Iterable[SignedEntry]) -> list[bytes]:
    """Leaf hashes of the tenant log for entries in append order."""
    return [leaf_hash(e.hash()) for e in entries]


def write_bundle(bundle: Mapping, path: str | Path) -> None:
    """Write a single-file bundle (UTF-8 JSON)."""
    Path(path).write_text(json.dumps(bundle, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


def write_bundle_dir(bundle: Mapping, path: str | Path) -> None:
    """Write the directory form: ``manifest.json`` (all but memories) + ``memories.jsonl``."""
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    manifest = {k: v for k, v in bundle.items() if k != "memories"}
    (d / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    with (d / "memories.jsonl").open("w", encoding="utf-8") as f:
        for m in bundle["memories"]:
            f.write(json.dumps(m, ensure_ascii=False, separators=(",", ":")) + "\n")


# --------------------------------------------------------------------------- loading


def _load_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path}: cannot read: {exc}") from None


def load_bundle(path: str | Path) -> dict:
    """Read a bundle file, or a directory holding ``bundle.json`` or ``manifest.json`` + ``memories.jsonl``."""
    p = Path(path)
    if p.is_dir():
        if (p / "bundle.json").is_file():
            p = p / "bundle.json"
        elif (p / "manifest.json").is_file():
            manifest = _load_json(p / "manifest.json")
            if type(manifest) is not dict:
                raise BundleError(f"{p / 'manifest.json'}: top level is not an object")
            memories = []
            mp = p / "memories.jsonl"
            if not mp.is_file():
                raise BundleError(f"{mp}: missing")
            with mp.open(encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        memories.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise BundleError(f"{mp}:{n}: not JSON ({exc.msg})") from None
            return {**manifest, "memories": memories}
        else:
            raise BundleError(f"{p}: directory holds neither bundle.json nor manifest.json")
    elif not p.exists():
        raise BundleError(f"{p}: no such file or directory")
    data = _load_json(p)
    if type(data) is not dict:
        raise BundleError(f"{p}: top level is not an object")
    return data


# --------------------------------------------------------------------------- parsing


@dataclass
class MemoryRecord:
    id: str
    store: str
    content_sha256: str
    live: dict
    genesis: SignedEntry
    provenance: list[SignedEntry]
    transitions: list[SignedEntry]
    labels: list[SignedEntry]

    def entries(self) -> Iterable[SignedEntry]:
        yield self.genesis
        yield from self.provenance
        yield from self.transitions
        yield from self.labels


@dataclass
class ParsedBundle:
    tenant: str
    epochs: list[Epoch]
    memories: list[MemoryRecord]
    leaves: list[tuple[str, str, int]]
    tree_heads: list[SignedTreeHead]
    consistency: list[tuple[int, int, list[bytes]]]
    receipts: list[dict]
    receipt_keys: dict[str, bytes] = field(default_factory=dict)
    checkpoints: list[str] = field(default_factory=list)  # C2SP checkpoint notes (log.checkpoints, optional)
    key_endorsements: list[KeyEndorsement] = field(default_factory=list)


def _need(d: Mapping, key: str, typ: type, where: str) -> object:
    if key not in d:
        raise BundleError(f"{where}: missing key {key!r}")
    v = d[key]
    if type(v) is not typ:
        raise BundleError(f"{where}: {key!r} must be {typ.__name__}, got {type(v).__name__}")
    return v


def _entries(d: Mapping, key: str, where: str) -> list[SignedEntry]:
    items = _need(d, key, list, where)
    out = []
    for i, e in enumerate(items):
        try:
            out.append(SignedEntry.from_json(e))
        except BundleError as exc:
            raise BundleError(f"{where} {key}[{i}]: {exc}") from None
    return out


def _hex(v: object, where: str) -> bytes:
    try:
        return bytes.fromhex(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BundleError(f"{where}: not a hex string") from None


def parse_bundle(data: object) -> ParsedBundle:
    """Check the bundle's structure (not its cryptography); raise BundleError when unusable."""
    if type(data) is not dict:
        raise BundleError("bundle top level is not an object")
    if data.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"bundle format is {data.get('format')!r}, expected {BUNDLE_FORMAT!r}")
    if data.get("version") != BUNDLE_VERSION:
        raise BundleError(f"bundle version {data.get('version')!r} is not supported (this verifier reads "
                          f"version {BUNDLE_VERSION})")
    tenant = _need(data, "tenant", str, "bundle")
    epochs = [Epoch.from_json(e) if type(e) is dict else _bad(f"bundle epochs[{i}] is not an object")
              for i, e in enumerate(_need(data, "epochs", list, "bundle"))]
    memories = []
    for i, m in enumerate(_need(data, "memories", list, "bundle")):
        where = f"memories[{i}]"
        if type(m) is not dict:
            raise BundleError(f"{where} is not an object")
        live = _need(m, "live", dict, where)
        for key in ("weight_q", "state", "chain_head"):
            if key not in live:
                raise BundleError(f"{where}.live: missing key {key!r}")
        if "genesis" not in m:
            raise BundleError(f"{where}: missing key 'genesis'")
        try:
            genesis = SignedEntry.from_json(m["genesis"])
        except BundleError as exc:
            raise BundleError(f"{where} genesis: {exc}") from None
        memories.append(MemoryRecord(
            id=_need(m, "id", str, where), store=_need(m, "store", str, where),
            content_sha256=_need(m, "content_sha256", str, where), live=live, genesis=genesis,
            provenance=_entries(m, "provenance", where), transitions=_entries(m, "transitions", where),
            labels=_entries(m, "labels", where),
        ))
    log = _need(data, "log", dict, "bundle")
    leaves = []
    for i, ref in enumerate(_need(log, "leaves", list, "log")):
        shaped = type(ref) is list and len(ref) == 3 and type(ref[0]) is str and type(ref[1]) is str \
            and type(ref[2]) is int
        if not shaped or not (ref[1] in KIND_TAGS or (ref[1] == KEY_ENDORSEMENT and ref[0] == KEYS_REF)):
            raise BundleError(f"log.leaves[{i}] must be [memory id, kind, seq], got {ref!r:.80}")
        leaves.append((ref[0], ref[1], ref[2]))
    tree_heads = [SignedTreeHead.from_json(t) for t in _need(log, "tree_heads", list, "log")]
    consistency = []
    for i, c in enumerate(_need(log, "consistency", list, "log")):
        where = f"log.consistency[{i}]"
        if type(c) is not dict:
            raise BundleError(f"{where} is not an object")
        consistency.append((_need(c, "old_size", int, where), _need(c, "new_size", int, where),
                            [_hex(p, where) for p in _need(c, "proof", list, where)]))
    checkpoints = log.get("checkpoints", [])
    if type(checkpoints) is not list or not all(type(c) is str for c in checkpoints):
        raise BundleError("log.checkpoints must be a list of checkpoint notes (strings)")
    receipts = _need(data, "receipts", list, "bundle")
    receipt_keys = {}
    for i, k in enumerate(_need(data, "receipt_keys", list, "bundle")):
        where = f"receipt_keys[{i}]"
        if type(k) is not dict:
            raise BundleError(f"{where} is not an object")
        receipt_keys[_need(k, "key_id", str, where)] = _hex(_need(k, "public_key", str, where), where)
    endorsements = []
    raw = data.get("key_endorsements", [])  # absent in bundles from before endorsed keys: none
    if type(raw) is not list:
        raise BundleError("bundle: 'key_endorsements' must be list")
    for i, e in enumerate(raw):
        try:
            endorsements.append(KeyEndorsement.from_json(e))
        except BundleError as exc:
            raise BundleError(f"key_endorsements[{i}]: {exc}") from None
    return ParsedBundle(tenant, epochs, memories, leaves, tree_heads, consistency, receipts, receipt_keys,
                        list(checkpoints), endorsements)


def _bad(message: str) -> Epoch:
    raise BundleError(message)


ENTRY_KINDS = (GENESIS, PROVENANCE, TRANSITION, LABEL)
