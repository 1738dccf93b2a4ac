"""The portable verifier: a clean end-to-end bundle, every corrupted field kind, the CLI."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.bundle import load_bundle, write_bundle, write_bundle_dir
from ledger.core.errors import BundleError
from ledger.core.verify import verify_bundle
from tests.ledger.core.factories import Housekeeper

ROOT = Path(__file__).resolve().parents[3]


def flip_hex(s: str) -> str:
    return ("1" if s[0] != "1" else "2") + s[1:]


def mem(b, mid):
    return next(m for m in b["memories"] if m["id"] == mid)


def test_a_clean_bundle_has_no_findings(bundle):
    assert verify_bundle(bundle) == []
    assert len(bundle["log"]["tree_heads"]) == 3 and len(bundle["log"]["consistency"]) == 2
    assert [e["number"] for e in bundle["epochs"]] == [1, 2]


def test_it_survives_a_json_round_trip(bundle, tmp_path):
    write_bundle(bundle, tmp_path / "b.json")
    assert verify_bundle(load_bundle(tmp_path / "b.json")) == []
    write_bundle_dir(bundle, tmp_path / "dir")
    assert verify_bundle(load_bundle(tmp_path / "dir")) == []


def _set(path, value):
    def fn(b):
        *head, last = path
        obj = b
        for p in head:
            obj = mem(obj, p) if isinstance(p, str) and p.startswith("m") and isinstance(obj, dict) and "memories" in obj else obj[p]
        obj[last] = value(obj[last]) if callable(value) else value
    return fn


CORRUPTIONS = [
    # (id, mutation, expected subject, expected entry label or None, expected error)
    ("genesis signature", _set(["m1", "genesis", "signature"], flip_hex), "memory=m1", "genesis seq=0", "SignatureInvalidError"),
    ("genesis content", _set(["m1", "genesis", "body", "content_sha256"], "ab" * 32), "memory=m1", "genesis seq=0", "SignatureInvalidError"),
    ("provenance weight", _set(["m1", "provenance", 1, "body", "new_weight_q"], 2000), "memory=m1", "provenance seq=2", "SignatureInvalidError"),
    ("provenance evidence", _set(["m2", "provenance", 0, "body", "evidence"], ["forged"]), "memory=m2", "provenance seq=1", "SignatureInvalidError"),
    ("provenance epoch", _set(["m1", "provenance", 1, "body", "epoch"], 1), "memory=m1", "provenance seq=2", "SignatureInvalidError"),
    ("transition weight", _set(["m1", "transitions", 0, "body", "new_weight_q"], 1), "memory=m1", "transition seq=1", "EntryFormatError"),
    ("transition signature", _set(["m3", "transitions", 0, "signature"], flip_hex), "memory=m3", "transition seq=1", "SignatureInvalidError"),
    ("label value", _set(["m3", "labels", 1, "body", "label"], "poison_refuted"), "memory=m3", "label seq=1", "SignatureInvalidError"),
    ("label actor", _set(["m2", "labels", 1, "body", "actor"], "mallory"), "memory=m2", "label seq=1", "SignatureInvalidError"),
    ("label evidence float", _set(["m2", "labels", 0, "body", "evidence"], {"ds": 0.9}), "memory=m2", "label seq=0", "CanonicalError"),
    ("live weight", _set(["m1", "live", "weight_q"], 3000), "memory=m1", "live", "WeightMismatchError"),
    ("live state", _set(["m3", "live", "state"], None), "memory=m3", "live", "ChainBrokenError"),
    ("live chain head", _set(["m2", "live", "chain_head"], "cd" * 32), "memory=m2", "live", "ChainBrokenError"),
    ("content hash", _set(["m2", "content_sha256"], "ef" * 32), "memory=m2", "genesis seq=0", "ChainBrokenError"),
    ("store", _set(["m2", "store"], "other"), "memory=m2", "genesis seq=0", "ChainBrokenError"),
    ("reordered nodes", _set(["m1", "provenance"], lambda v: v[::-1]), "memory=m1", "provenance seq=2", "ChainBrokenError"),
    ("reordered labels", _set(["m3", "labels"], lambda v: v[::-1]), "memory=m3", "label seq=1", "ChainBrokenError"),
    ("dropped transition", _set(["m1", "transitions"], lambda v: v[:1]), "memory=m1", "provenance seq=2", "WeightMismatchError"),
    ("dropped label", _set(["m2", "labels"], lambda v: v[:1]), "memory=m2", "live", "ChainBrokenError"),
    ("epoch endorsement", _set(["epochs", 1, "endorsement"], flip_hex), "epoch=2", None, "SignatureInvalidError"),
    ("epoch key swapped", _set(["epochs", 1, "public_key"], "11" * 32), "epoch=2", None, "SignatureInvalidError"),
    ("epoch revoked early", _set(["epochs", 0, "revoked_at"], "2025-01-01T00:00:03Z"), "memory=m3", "genesis seq=0", "EpochRevokedError"),
    ("epoch expired early", _set(["epochs", 0, "not_after"], "2025-01-01T00:00:02Z"), "memory=m2", "genesis seq=0", "EpochExpiredError"),
    # Leaf 0 is the receipt key's endorsement (factories.Housekeeper); the memories' leaves follow.
    ("log leaves swapped", _set(["log", "leaves"], lambda v: [v[0], v[2], v[1], *v[3:]]), "tree_head size=4", None, "ProofError"),
    ("log leaf dropped", _set(["log", "leaves"], lambda v: v[:-1]), "memory=m2", "label seq=1", "ChainBrokenError"),
    ("log leaf unknown", _set(["log", "leaves", 0], ["m9", "genesis", 0]), "memory=m9", "genesis seq=0", "ChainBrokenError"),
    ("log out of causal order", _set(["log", "leaves"], lambda v: [v[0], v[4], *v[1:4], *v[5:]]), "memory=m1", "provenance seq=1", "ChainBrokenError"),
    ("tree head root", _set(["log", "tree_heads", 1, "body", "root"], "ab" * 32), "tree_head size=11", None, "SignatureInvalidError"),
    ("tree head signature", _set(["log", "tree_heads", 2, "signature"], flip_hex), "tree_head size=16", None, "SignatureInvalidError"),
    ("consistency proof flipped", _set(["log", "consistency", 0, "proof", 0], flip_hex), "tree_head size=11", "consistency 4->11", "ProofError"),
    ("consistency proof missing", _set(["log", "consistency"], lambda v: v[1:]), "tree_head size=11", None, "ProofError"),
    ("receipt signature", _set(["receipts", 0, "signature"], flip_hex), "receipt #0", None, "SignatureInvalidError"),
    ("receipt result", _set(["receipts", 0, "results", 0, "weight_q"], 100), "receipt #0", None, "ProofError"),
    # Listing a key in receipt_keys is not trust: the endorsement is (issue 13).
    ("receipt key endorsement missing", _set(["key_endorsements"], []), "receipt #0", None, "SignatureInvalidError"),
    ("receipt key endorsement forged", _set(["key_endorsements", 0, "signature"], flip_hex), "key_endorsement seq=0",
     None, "SignatureInvalidError"),
    ("receipt sth root", _set(["receipts", 0, "body", "sth_root"], "ab" * 32), "receipt #0", None, "SignatureInvalidError"),
]


@pytest.mark.parametrize(("what", "mutate", "subject", "entry", "error"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_it_finds_each_corrupted_field(bundle, what, mutate, subject, entry, error):
    b = copy.deepcopy(bundle)
    mutate(b)
    findings = verify_bundle(b)
    assert findings, f"{what} went unnoticed"
    assert any(f.subject == subject and (entry is None or f.entry == entry) and f.error == error for f in findings), \
        "\n".join(map(str, findings))


def test_it_finds_an_entry_of_tenant_a_replayed_into_tenant_b(bundle, tmp_path):
    bob = Housekeeper(tmp_path / "bob-keys", tenant="bobco")
    bob.add_memory("m1", "Paris is the capital of France.")
    b = copy.deepcopy(bundle)
    mem(b, "m1")["genesis"] = bob.memories["m1"].genesis.to_json()
    findings = verify_bundle(b)
    assert any(f.subject == "memory=m1" and f.error == "TenantMismatchError" for f in findings)


def test_it_finds_a_whole_bundle_relabelled_to_another_tenant(bundle):
    b = copy.deepcopy(bundle)
    b["tenant"] = "bobco"
    errors = {f.error for f in verify_bundle(b)}
    assert "TenantMismatchError" in errors


def test_a_pinned_trust_anchor_must_match_epoch_1(bundle):
    anchor = bytes.fromhex(bundle["epochs"][0]["public_key"])
    assert verify_bundle(bundle, trust_anchor=anchor) == []
    findings = verify_bundle(bundle, trust_anchor=b"\x01" * 32)
    assert findings[0].subject == "epoch=1"


def test_finding_lines_name_the_memory_and_entry(bundle):
    b = copy.deepcopy(bundle)
    _set(["m1", "provenance", 1, "signature"], flip_hex)(b)
    lines = [str(f) for f in verify_bundle(b)]
    assert "FAIL memory=m1 provenance seq=2: signature invalid (epoch 2)" in lines


@pytest.mark.parametrize(
    "broken",
    [
        lambda b: b.pop("memories"),
        lambda b: b.update(version=99),
        lambda b: b.update(format="something-else"),
        lambda b: b["memories"][0].pop("genesis"),
        lambda b: b["memories"][0]["live"].pop("weight_q"),
        lambda b: b["log"].update(leaves=[["m1", "genesis"]]),
        lambda b: b["epochs"][0].update(public_key="not hex"),
    ],
)
def test_it_raises_bundle_error_for_unusable_input(bundle, broken):
    b = copy.deepcopy(bundle)
    broken(b)
    with pytest.raises(BundleError):
        verify_bundle(b)


# --------------------------------------------------------------------------- CLI


def run_cli(path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.core.verify", str(path), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_exits_0_for_a_clean_anchored_bundle(bundle, tmp_path):
    write_bundle(bundle, tmp_path / "bundle.json")
    out = run_cli(tmp_path / "bundle.json", "--anchor", bundle["epochs"][0]["public_key"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("OK: 3 memories, ")


def test_cli_exits_3_and_says_unanchored_first_without_an_anchor(bundle, tmp_path):
    write_bundle(bundle, tmp_path / "bundle.json")
    out = run_cli(tmp_path / "bundle.json")
    assert out.returncode == 3, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("UNANCHORED") and lines[-1].startswith("UNANCHORED: 3 memories")


def test_cli_reads_the_directory_form(bundle, tmp_path):
    write_bundle_dir(bundle, tmp_path / "export")
    assert run_cli(tmp_path / "export", "--trust-anchor", bundle["epochs"][0]["public_key"]).returncode == 0


def test_cli_exits_1_and_prints_one_line_per_finding(bundle, tmp_path):
    b = copy.deepcopy(bundle)
    _set(["m1", "provenance", 1, "signature"], flip_hex)(b)
    _set(["m3", "live", "state"], "poison_refuted")(b)
    write_bundle(b, tmp_path / "bundle.json")
    out = run_cli(tmp_path / "bundle.json")
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert "FAIL memory=m1 provenance seq=2: signature invalid (epoch 2)" in lines
    assert any(line.startswith("FAIL memory=m3 live: state 'poison_refuted'") for line in lines)
    assert lines[-1].startswith("FAILED with ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"format": "memaudit-evidence-bundle", "version": 2}), "version 2 is not supported"),
        (json.dumps({"format": "memaudit-evidence-bundle", "version": 1, "tenant": "acme"}), "missing key 'epochs'"),
        ("[]", "top level is not an object"),
    ],
)
def test_cli_exits_2_for_unusable_input(tmp_path, content, message):
    (tmp_path / "bundle.json").write_text(content)
    out = run_cli(tmp_path / "bundle.json")
    assert out.returncode == 2
    assert message in out.stderr and out.stderr.startswith("ERROR: unusable bundle:")


def test_cli_exits_2_for_a_missing_path(tmp_path):
    assert run_cli(tmp_path / "nope.json").returncode == 2


@pytest.mark.slow
def test_a_10k_entry_bundle_verifies_clean(tmp_path):
    from ledger.core.bundle import parse_bundle
    from ledger.core.verify import verify_parsed
    from tests.ledger.core.factories import big_ledger

    report = verify_parsed(parse_bundle(big_ledger(tmp_path / "keys").bundle()))
    assert report.findings == [] and report.entries >= 9_990
    print(f"verified {report.entries} entries in {report.seconds:.3f}s ({report.entries / report.seconds:,.0f}/s)")
