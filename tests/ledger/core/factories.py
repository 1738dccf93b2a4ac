"""Test factories: a tiny in-memory housekeeper that writes real signed ledgers.

It mirrors what the Django write path does (sign genesis, nodes + transitions,
labels, tree heads, receipts) so tests and the throughput benchmark exercise
the verifier on realistic bundles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ledger.core.bundle import KEY_ENDORSEMENT, KEYS_REF, build_bundle, leaf_ref, memory_record
from ledger.core.canonical import format_time, sha256_hex
from ledger.core.checkpoint import Checkpoint, checkpoint_origin, sign_checkpoint
from ledger.core.entries import (
    GENESIS,
    LABEL,
    PROVENANCE,
    TRANSITION,
    ZERO_HASH_HEX,
    SignedEntry,
    genesis_body,
    label_body,
    provenance_body,
    sign_entry,
    transition_body,
)
from ledger.core.keys import Ed25519Key, sign_key_endorsement
from ledger.core.merkle import leaf_hash, root
from ledger.core.receipts import build_receipt
from ledger.core.tree_heads import SignedTreeHead, sign_tree_head
from ledger.core.weights import WEIGHT_INITIAL_Q, next_weight_q
from ledger.keystore import KeyDirectory

START = datetime(2025, 1, 1, tzinfo=timezone.utc)
RECEIPT_SEED = bytes(range(32))
ORIGIN_PREFIX = "memaudit.test"


@dataclass
class MemoryState:
    id: str
    store: str
    content_sha256: str
    genesis: SignedEntry
    provenance: list[SignedEntry] = field(default_factory=list)
    transitions: list[SignedEntry] = field(default_factory=list)
    labels: list[SignedEntry] = field(default_factory=list)
    weight_q: int = WEIGHT_INITIAL_Q

    @property
    def head(self) -> str:
        return (self.provenance[-1] if self.provenance else self.genesis).hash_hex()

    @property
    def state(self) -> str | None:
        return self.labels[-1].body["label"] if self.labels else None


class Housekeeper:
    def __init__(self, keydir: Path, tenant: str = "acme", start: datetime = START, tick: timedelta = timedelta(seconds=1)):
        self.tenant = tenant
        self.keys = KeyDirectory(keydir)
        self.now = start
        self.tick = tick
        self.keys.init(tenant, now=start)
        self.memories: dict[str, MemoryState] = {}
        self.log: list[tuple[str, SignedEntry]] = []
        self.leaf_hashes: list[bytes] = []
        self.tree_heads: list[SignedTreeHead] = []
        self.checkpoints: list[str] = []  # the C2SP checkpoint note of each tree head
        self.receipts: list[dict] = []
        self.receipt_key = Ed25519Key(RECEIPT_SEED)
        self.log_refs: list[list] = []
        # The receipt key is trusted through epoch 1's endorsement (a leaf of the log, like entries).
        epoch1 = self.keys.epochs(tenant)[0]
        self.endorsements = [sign_key_endorsement(
            tenant=tenant, seq=0, purpose="receipt", public_key=self.receipt_key.public_key,
            not_before=epoch1.not_before, not_after=epoch1.not_after, time=epoch1.not_before,
            signer=self.keys.signer(tenant, start))]
        self.log_refs.append([KEYS_REF, KEY_ENDORSEMENT, 0])
        self.leaf_hashes.append(leaf_hash(self.endorsements[0].hash()))

    # -- clock and signing
    def _t(self) -> str:
        self.now += self.tick
        return format_time(self.now)

    def _sign(self, memory: str, kind: str, make) -> SignedEntry:
        t = self._t()
        signer = self.keys.signer(self.tenant, self.now)
        entry = sign_entry(kind, make(signer.epoch, t), signer)
        self.log.append((memory, entry))
        self.log_refs.append(leaf_ref(memory, entry))
        self.leaf_hashes.append(leaf_hash(entry.hash()))
        return entry

    # -- ledger writes
    def add_memory(self, mid: str, text: str, store: str = "main") -> MemoryState:
        content = sha256_hex(text)
        g = self._sign(mid, GENESIS, lambda ep, t: genesis_body(self.tenant, store, mid, content, WEIGHT_INITIAL_Q, ep, t))
        self.memories[mid] = m = MemoryState(mid, store, content, g)
        return m

    def mutate(self, mid: str, valence_q: int, eta_q: int = 500, evidence: list[str] | None = None) -> None:
        m = self.memories[mid]
        seq = len(m.provenance) + 1
        new = next_weight_q(m.weight_q, valence_q, eta_q)
        prev, w = m.head, m.weight_q
        node = self._sign(mid, PROVENANCE, lambda ep, t: provenance_body(
            self.tenant, mid, seq, w, new, valence_q, evidence or [f"outcome-{mid}-{seq}"], prev, ep, t, eta_q=eta_q))
        m.provenance.append(node)
        tr = self._sign(mid, TRANSITION, lambda ep, t: transition_body(self.tenant, mid, seq, new, node.hash_hex(), ep, t))
        m.transitions.append(tr)
        m.weight_q = new

    def label(self, mid: str, label: str, actor: str = "reviewer:alice", reason: str = "audit run 7") -> None:
        m = self.memories[mid]
        seq = len(m.labels)
        prev = m.labels[-1].hash_hex() if m.labels else ZERO_HASH_HEX
        m.labels.append(self._sign(mid, LABEL, lambda ep, t: label_body(
            self.tenant, mid, seq, label, reason, {"audit_run": 7, "ds_milli": 912}, actor, prev, ep, t)))

    def rotate(self) -> None:
        self.keys.rotate(self.tenant, now=self.now + self.tick)
        self.now += self.tick

    def tree_head(self) -> SignedTreeHead:
        t = self._t()
        signer = self.keys.signer(self.tenant, self.now)
        sth = sign_tree_head(self.tenant, len(self.leaf_hashes), root(self.leaf_hashes), t, signer)
        self.tree_heads.append(sth)
        cp = Checkpoint(checkpoint_origin(ORIGIN_PREFIX, self.tenant), sth.size, sth.root)
        self.checkpoints.append(sign_checkpoint(cp, public_key=signer.public_key, sign=signer.sign).encode())
        return sth

    def receipt(self, mids: list[str], query: str = "what is the capital of France?", k: int = 5) -> dict:
        sth = self.tree_heads[-1]
        results = [{"memory": mid, "content_sha256": self.memories[mid].content_sha256,
                    "weight_q": self.memories[mid].weight_q, "state": self.memories[mid].state,
                    "chain_head": self.memories[mid].head} for mid in mids]
        r = build_receipt(results, tenant=self.tenant, store="main", query_sha256=sha256_hex(query), k=k,
                          sth_size=sth.size, sth_root_hex=sth.body["root"], projection_version="p1",
                          time=self._t(), signer=self.receipt_key)
        self.receipts.append(r)
        return r

    # -- export
    def bundle(self) -> dict:
        memories = [memory_record(memory_id=m.id, store=m.store, content_sha256=m.content_sha256, genesis=m.genesis,
                                  provenance=m.provenance, transitions=m.transitions, labels=m.labels,
                                  live_weight_q=m.weight_q, live_state=m.state, chain_head=m.head)
                    for m in self.memories.values()]
        return build_bundle(tenant=self.tenant, epochs=self.keys.epochs(self.tenant), memories=memories,
                            log_leaves=self.log_refs, tree_heads=self.tree_heads,
                            receipts=self.receipts, receipt_public_keys=[self.receipt_key.public_key],
                            exported_at=format_time(self.now), leaf_hashes=self.leaf_hashes,
                            checkpoints=self.checkpoints, key_endorsements=self.endorsements)

    @property
    def anchor(self) -> bytes:
        return self.keys.epochs(self.tenant)[0].public_key


def small_ledger(keydir: Path) -> Housekeeper:
    """Three memories with transitions and labels, a key rotation, three tree heads and a receipt."""
    hk = Housekeeper(keydir)
    hk.add_memory("m1", "Paris is the capital of France.")
    hk.add_memory("m2", "The Eiffel tower is in Paris.")
    hk.add_memory("m3", "Q: capital of France? A: Berlin.")
    hk.tree_head()
    hk.mutate("m1", 800)
    hk.mutate("m2", -300)
    hk.mutate("m3", 1000)
    hk.label("m3", "poison_suspect", actor="classifier:poisonedrag@1")
    hk.tree_head()
    hk.rotate()
    hk.mutate("m1", -200)
    hk.label("m3", "poison_likely")
    hk.label("m2", "poison_suspect")
    hk.label("m2", "poison_refuted", actor="reviewer:bob")
    hk.tree_head()
    hk.receipt(["m1", "m2"])
    return hk


def big_ledger(keydir: Path, entries: int = 10_000) -> Housekeeper:
    """About ``entries`` entries: per memory genesis + 2 (node, transition) pairs + 1 label = 6 entries."""
    hk = Housekeeper(keydir, tick=timedelta(milliseconds=10))
    for i in range(entries // 6):
        mid = f"m{i}"
        hk.add_memory(mid, f"memory text number {i}")
        hk.mutate(mid, 600)
        hk.mutate(mid, -250)
        hk.label(mid, "poison_suspect")
        if i % 400 == 399:
            hk.tree_head()
    hk.tree_head()
    hk.receipt([f"m{i}" for i in range(5)])
    return hk


if __name__ == "__main__":
    # Throughput check: python -m tests.ledger.core.factories /tmp/big.json 10000
    #                   python -m ledger.core.verify /tmp/big.json
    import sys
    import tempfile

    from ledger.core.bundle import write_bundle

    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    with tempfile.TemporaryDirectory() as d:
        write_bundle(big_ledger(Path(d) / "keys", n).bundle(), out)
    print(f"wrote {out}")
