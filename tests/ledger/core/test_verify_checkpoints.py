"""Checkpoints inside and outside the bundle, tree-head coverage and k-of-n witnesses (ledger.core.verify)."""

import copy
import time

import pytest

from ledger.core.note import COSIGNATURE_V1, NoteSigner, VerifierKey, cosign, parse_note
from ledger.core.verify import parse_anchor, parse_witness, verify_bundle

WITNESSES = [NoteSigner(f"witness.example/w{i}", bytes([i]) * 32, COSIGNATURE_V1) for i in range(1, 4)]
WKEYS = [VerifierKey(w.name, COSIGNATURE_V1, w.public_key) for w in WITNESSES]


def cosigned(note_text: str, *signers: NoteSigner) -> str:
    note = parse_note(note_text)
    return note_text + "".join(cosign(note, s, int(time.time())).line() for s in signers)


def test_the_bundle_carries_one_valid_checkpoint_per_tree_head(hk, bundle):
    assert len(bundle["log"]["checkpoints"]) == 3
    assert bundle["log"]["checkpoints"][-1].startswith("memaudit.test/acme\n16\n")
    assert verify_bundle(bundle, trust_anchor=hk.anchor) == []


def test_a_checkpoint_that_twins_no_tree_head_or_is_forged_is_a_finding(hk, bundle):
    b = copy.deepcopy(bundle)
    b["log"]["checkpoints"][0] = b["log"]["checkpoints"][0].replace("\n4\n", "\n5\n")
    findings = verify_bundle(b)
    assert [(f.subject, f.error) for f in findings] == [("checkpoint #0", "SignatureInvalidError")]
    other = copy.deepcopy(bundle)
    other["log"]["checkpoints"] = [bundle["log"]["checkpoints"][0]]
    other["log"]["tree_heads"] = other["log"]["tree_heads"][1:]
    other["log"]["consistency"] = other["log"]["consistency"][1:]
    assert ("checkpoint #0", "ProofError") in [(f.subject, f.error) for f in verify_bundle(other)]


def test_coverage_can_be_relaxed_for_a_live_log_only(hk):
    hk.add_memory("m9", "after the last tree head")
    b = hk.bundle()
    assert [f.subject for f in verify_bundle(b)] == ["log"]
    assert verify_bundle(b, require_coverage=False) == []


def test_a_pinned_checkpoint_of_another_log_is_a_finding(hk, bundle, tmp_path):
    from tests.ledger.core.factories import Housekeeper

    other = Housekeeper(tmp_path / "other", tenant="bobco")
    other.add_memory("x", "y")
    other.tree_head()
    findings = verify_bundle(bundle, checkpoint=other.checkpoints[-1])
    assert [f.subject for f in findings] == ["pinned checkpoint"]


@pytest.mark.parametrize(("signers", "k", "ok"), [((0, 1), 2, True), ((0,), 2, False), ((), 1, False),
                                                  ((0, 1, 2), 3, True)])
def test_k_of_n_known_witnesses_must_cosign_the_pinned_checkpoint(hk, bundle, signers, k, ok):
    note = cosigned(hk.checkpoints[-1], *(WITNESSES[i] for i in signers))
    findings = verify_bundle(bundle, checkpoint=note, witnesses=WKEYS, witness_threshold=k)
    assert (findings == []) is ok, findings


def test_an_unknown_witness_does_not_count_and_a_bad_known_cosignature_is_a_finding(hk, bundle):
    stranger = NoteSigner("witness.example/w1", b"\x09" * 32, COSIGNATURE_V1)  # same name, other key
    note = cosigned(hk.checkpoints[-1], stranger, WITNESSES[1])
    assert verify_bundle(bundle, checkpoint=note, witnesses=WKEYS, witness_threshold=1) == []
    assert verify_bundle(bundle, checkpoint=note, witnesses=WKEYS, witness_threshold=2) != []
    sig = cosign(parse_note(hk.checkpoints[-1]), WITNESSES[0], 1700000000)
    bad = hk.checkpoints[-1] + sig.line().replace(sig.line().split(" ")[-1][:8], "AAAAAAAA")
    findings = verify_bundle(bundle, checkpoint=bad, witnesses=WKEYS, witness_threshold=1)
    assert findings and findings[0].subject == "pinned checkpoint"


def test_anchor_and_witness_spellings(hk, tmp_path):
    import base64

    from ledger.core.note import VerifierKey as VK

    a = hk.anchor
    assert parse_anchor(a.hex()) == a == parse_anchor(base64.b64encode(a).decode())
    assert parse_anchor(VK("memaudit.test/acme", 0x01, a).encode()) == a
    (tmp_path / "a").write_text(a.hex() + "\n")
    assert parse_anchor(str(tmp_path / "a")) == a == parse_anchor("@" + str(tmp_path / "a"))
    for bad in ("", "abcd", "zz" * 32, base64.b64encode(b"x" * 31).decode()):
        with pytest.raises(ValueError):
            parse_anchor(bad)
    assert parse_witness(WKEYS[0].encode()) == WKEYS[0]
    with pytest.raises(ValueError):
        parse_witness(VK("w", 0x01, a).encode())  # a log key, not a cosigner key
