"""Issue 13's reproductions, as an outside auditor runs them: bundles built with ``ledger.core``
(the same code the product signs with), checked by the command-line verifier.

1. A complete bundle signed with a freshly generated key: without ``--anchor`` the verifier
   prints ``UNANCHORED`` first and exits 3; with the organization's real anchor it is a finding.
2. History deleted together with every tree head (a memory's label entries and their leaves,
   or a whole memory): a finding with the anchor alone (leaves no signed tree head covers), and
   with a pinned checkpoint (the bundle no longer reaches it).
3. The same deletions re-signed by someone holding the housekeeper key: only the pinned
   checkpoint catches it (the new tree heads are not consistent with it).
4. Log entries past the newest tree head: a finding.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.bundle import KEY_ENDORSEMENT, KEYS_REF, consistency_records
from ledger.core.merkle import leaf_hash, root
from ledger.core.tree_heads import sign_tree_head
from tests.ledger.core.factories import Housekeeper, small_ledger

ROOT = Path(__file__).resolve().parents[2]


def verify(tmp_path: Path, bundle: dict, *args: str) -> tuple[int, list[str]]:
    path = tmp_path / f"bundle-{len(list(tmp_path.glob('bundle-*')))}.json"
    path.write_text(json.dumps(bundle))
    out = subprocess.run([sys.executable, "-m", "ledger.core.verify", str(path), *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert not out.stderr, out.stderr
    return out.returncode, out.stdout.splitlines()


@pytest.fixture
def org(tmp_path) -> Housekeeper:
    """The organization: its ledger, its anchor, and the checkpoint an auditor pinned last time."""
    return small_ledger(tmp_path / "org-keys")


@pytest.fixture
def pinned(org, tmp_path) -> Path:
    p = tmp_path / "checkpoint.txt"
    p.write_text(org.checkpoints[-1])
    return p


def fresh_key_bundle(tmp_path: Path) -> dict:
    """Two memories, a label, a tree head and a receipt, signed by a key made up on the spot."""
    hk = Housekeeper(tmp_path / "fresh-keys")
    hk.add_memory("m1", "Paris is the capital of France.")
    hk.add_memory("m2", "Q: capital of France? A: Berlin.")
    hk.label("m2", "poison_refuted", actor="reviewer:mallory")
    hk.tree_head()
    hk.receipt(["m1"])
    return hk.bundle()


def test_a_fresh_key_bundle_is_unanchored_without_an_anchor_and_a_finding_with_it(org, tmp_path):
    forged = fresh_key_bundle(tmp_path)
    status, lines = verify(tmp_path, forged)
    assert status == 3 and lines[0].startswith("UNANCHORED")
    status, lines = verify(tmp_path, forged, "--anchor", org.anchor.hex())
    assert status == 1
    assert "FAIL epoch=1: epoch 1 key does not match the trust anchor" in lines
    # the old flag still works, and base64 / a key file are read the same way
    import base64
    (tmp_path / "anchor.txt").write_text(base64.b64encode(org.anchor).decode() + "\n")
    assert verify(tmp_path, forged, "--trust-anchor", str(tmp_path / "anchor.txt"))[0] == 1
    assert verify(tmp_path, org.bundle(), "--anchor", str(tmp_path / "anchor.txt"))[0] == 0


def _drop(bundle: dict, *, memory: str, kinds: tuple[str, ...] | None) -> dict:
    """Remove a memory's entries of ``kinds`` (None: the whole memory), their leaves, every tree head,
    checkpoint and consistency proof, and the receipts (they would cite the dropped memory)."""
    b = copy.deepcopy(bundle)
    for m in list(b["memories"]):
        if m["id"] == memory:
            if kinds is None:
                b["memories"].remove(m)
            else:
                for k in kinds:
                    m[k] = []
                m["live"]["state"] = None
    gone = {"labels": "label", "provenance": "provenance", "transitions": "transition"}
    drop_kinds = None if kinds is None else {gone[k] for k in kinds}
    b["log"]["leaves"] = [ref for ref in b["log"]["leaves"]
                          if not (ref[0] == memory and (drop_kinds is None or ref[1] in drop_kinds))]
    b["log"]["tree_heads"], b["log"]["consistency"], b["log"]["checkpoints"] = [], [], []
    b["receipts"] = []
    return b


@pytest.mark.parametrize("kinds", [("labels",), None], ids=["a memory's labels", "a whole memory"])
def test_history_dropped_with_every_tree_head_is_a_finding(org, pinned, tmp_path, kinds):
    victim = "m2" if kinds is None else "m3"
    tampered = _drop(org.bundle(), memory=victim, kinds=kinds)
    anchor = org.anchor.hex()
    status, lines = verify(tmp_path, tampered, "--anchor", anchor)
    assert status == 1
    assert any(line.startswith("FAIL log: none of the") and "covered by a valid signed tree head" in line
               for line in lines), lines
    status, lines = verify(tmp_path, tampered, "--anchor", anchor, "--checkpoint", str(pinned))
    assert status == 1
    assert any(line.startswith("FAIL pinned checkpoint: checkpoint of size 16 is newer than the bundle")
               and "dropped" in line for line in lines), lines


@pytest.mark.parametrize("kinds", [("labels",), None], ids=["a memory's labels", "a whole memory"])
def test_history_dropped_and_re_signed_with_the_key_fails_only_against_the_pinned_checkpoint(
        org, pinned, tmp_path, kinds):
    victim = "m2" if kinds is None else "m3"
    tampered = _drop(org.bundle(), memory=victim, kinds=kinds)
    # whoever holds the housekeeper key signs fresh tree heads over the shortened log
    entries = {(mid, e.kind, e.body["seq"]): e for mid, e in org.log}
    entries.update({(KEYS_REF, KEY_ENDORSEMENT, e.seq): e for e in org.endorsements})
    hashes = [leaf_hash(entries[tuple(ref)].hash()) for ref in tampered["log"]["leaves"]]
    signer = org.keys.signer(org.tenant, org.now)
    sth = sign_tree_head(org.tenant, len(hashes), root(hashes), "2025-01-01T00:01:00Z", signer)
    tampered["log"]["tree_heads"] = [sth.to_json()]
    tampered["log"]["consistency"] = consistency_records([sth], hashes)
    anchor = org.anchor.hex()
    assert verify(tmp_path, tampered, "--anchor", anchor)[0] == 0  # internally consistent again
    status, lines = verify(tmp_path, tampered, "--anchor", anchor, "--checkpoint", str(pinned))
    assert status == 1
    assert any(line.startswith("FAIL pinned checkpoint") for line in lines), lines


def test_log_entries_past_the_newest_tree_head_are_a_finding(org, tmp_path):
    org.label("m1", "poison_suspect")  # appended after the last tree head
    status, lines = verify(tmp_path, org.bundle(), "--anchor", org.anchor.hex())
    assert status == 1
    assert "FAIL log: log leaves 16..16 (1) lie beyond the newest signed tree head (size 16)" in lines
    org.tree_head()
    assert verify(tmp_path, org.bundle(), "--anchor", org.anchor.hex())[0] == 0


def test_the_untampered_bundle_is_consistent_with_the_pinned_checkpoint(org, pinned, tmp_path):
    org.add_memory("m4", "Later memory.")
    org.tree_head()
    status, lines = verify(tmp_path, org.bundle(), "--anchor", org.anchor.hex(), "--checkpoint", str(pinned))
    assert status == 0, lines
    assert lines[-1].startswith("OK:") and "consistent with the pinned checkpoint of size 16" in lines[-1]
