"""The PKCS#11 signer backend against SoftHSM2: a non-extractable Ed25519 epoch key on the token
signs the ledger, and an exported bundle verifies with the portable verifier.

Skipped (with the reason) where SoftHSM2 or python-pkcs11 is missing; ``.ci/run`` installs
both and sets ``MEMAUDIT_REQUIRE_HSM=1``, which turns the skip into a failure there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ledger.core.canonical import TAG_EPOCH, entry_hash
from ledger.core.keys import verify_epoch_chain, verify_signature

SOFTHSM_MODULES = ("/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
                   "/usr/local/lib/softhsm/libsofthsm2.so")
PIN = "246810"


def _unavailable() -> str | None:
    try:
        import pkcs11  # noqa: F401
    except ImportError:
        return "python-pkcs11 is not installed"
    if shutil.which("softhsm2-util") is None:
        return "softhsm2-util not found (Debian package softhsm2)"
    if not any(Path(m).exists() for m in SOFTHSM_MODULES):
        return "libsofthsm2.so not found"
    return None


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory):
    """One SoftHSM2 token for the session (a PKCS#11 module is initialised once per process, with
    the configuration it finds then); tests keep apart by organization slug."""
    reason = _unavailable()
    if reason:
        if os.environ.get("MEMAUDIT_REQUIRE_HSM") == "1":
            pytest.fail(f"MEMAUDIT_REQUIRE_HSM=1 but {reason}")
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("softhsm")
    (base / "tokens").mkdir()
    conf = base / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {base / 'tokens'}\nobjectstore.backend = file\nlog.level = ERROR\n")
    os.environ["SOFTHSM2_CONF"] = str(conf)
    label = f"memaudit-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["softhsm2-util", "--init-token", "--free", "--label", label, "--pin", PIN, "--so-pin", "13579"],
                   check=True, capture_output=True, timeout=60)
    module = next(m for m in SOFTHSM_MODULES if Path(m).exists())
    return {"module": module, "label": label}


@pytest.fixture
def hsm_settings(softhsm, settings):
    settings.HOUSEKEEPER_SIGNER = "pkcs11"
    settings.PKCS11_MODULE = softhsm["module"]
    settings.PKCS11_TOKEN_LABEL = softhsm["label"]
    settings.PKCS11_PIN = PIN
    return settings


def _slug() -> str:
    return f"hsm-{uuid.uuid4().hex[:10]}"


def test_the_epoch_key_is_generated_on_the_token_and_cannot_leave_it(softhsm, tmp_path):
    from ledger.keystore import Pkcs11KeyStore

    ks = Pkcs11KeyStore(tmp_path / "keys", module=softhsm["module"], token_label=softhsm["label"], pin=PIN)
    tenant = _slug()
    ep1 = ks.init(tenant)
    assert ks.private_key_attributes(tenant, 1) == {"extractable": False, "sensitive": True}
    # Only the public records are on disk: no seed file a thief could copy.
    assert sorted(p.name for p in (tmp_path / "keys" / tenant).iterdir()) == ["epochs.json"]
    message = entry_hash("memaudit/test", {"n": 1})
    verify_signature(ep1.public_key, message, ks.signer(tenant).sign(message))
    ep2 = ks.rotate(tenant)
    verify_signature(ep1.public_key, entry_hash(TAG_EPOCH, ep2.body()), ep2.endorsement)
    verify_epoch_chain(ks.epochs(tenant), trust_anchor=ep1.public_key)
    assert ks.signer(tenant).epoch == 2
    with pytest.raises(FileExistsError):
        ks._generate(tenant, 1)  # a second key under an existing epoch's label is refused


def test_a_wrong_pin_is_a_clear_error_without_the_pin(softhsm, tmp_path):
    # In a fresh process: PKCS#11 login is per token and process, and this one may be logged in.
    code = ("import sys\nfrom ledger.keystore import Pkcs11Error, Pkcs11KeyStore\n"
            f"ks = Pkcs11KeyStore({str(tmp_path / 'keys')!r}, module={softhsm['module']!r}, "
            f"token_label={softhsm['label']!r}, pin='000000')\n"
            "try:\n    ks.init('wrong-pin')\nexcept Pkcs11Error as exc:\n    print(exc)\n    sys.exit(3)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ})
    assert run.returncode == 3, run.stderr
    assert softhsm["label"] in run.stdout and "PinIncorrect" in run.stdout and "000000" not in run.stdout


@pytest.mark.django_db
def test_the_ledger_signed_by_the_hsm_verifies_end_to_end(hsm_settings, tmp_path, monkeypatch, capsys, client):
    from ledger import services
    from ledger.core.verify import main as portable_verify
    from ledger.export import bundle_write
    from ledger.models import KeyEpoch
    from ledger.verification import organization_verify
    from orgs.models import Organization
    from tests.hardening.world import member

    monkeypatch.setenv("MEMAUDIT_ROLE", "housekeeper")
    org = Organization.objects.create(name="HSM", slug=_slug())
    epoch = services.housekeeper_init(organization=org)
    store = services.store_create(organization=org, name="Main", slug="main")
    ms = services.memories_create(store=store, records=[{"id": f"h{i}", "text": f"hsm memory {i}"} for i in range(3)])
    assert services.memory_genesis_sign(memory_ids=[m.pk for m in ms]) == 3
    services.transition_append(memory_id=ms[0].pk, valence_q=500, evidence=["outcome:1"])
    services.label_append(memory_id=ms[1].pk, label="poison_suspect", reason="r", evidence={}, actor="user:ana")
    services.housekeeper_rotate(organization=org)
    services.transition_append(memory_id=ms[0].pk, valence_q=-500, evidence=["outcome:2"])
    services.tree_head_issue(organization=org)
    assert KeyEpoch.objects.filter(organization=org).count() == 2
    # The token signed two endorsements (one online key per epoch), not one signature per entry.
    from ledger.models import KeyEndorsement

    assert KeyEndorsement.objects.filter(organization=org, purpose="online").values_list("epoch", flat=True) \
        .order_by("epoch").distinct().count() == 2
    assert organization_verify(org) == []
    out = tmp_path / "bundle.json"
    bundle_write(org, out)
    capsys.readouterr()
    assert portable_verify([str(out), "--trust-anchor", epoch.public_key.hex()]) == 0
    assert "OK" in capsys.readouterr().out

    client.force_login(member(org, "dana", "admin"))
    page = client.get("/keys/").content.decode()
    assert 'id="signer-backend">pkcs11<' in page and "non-extractable" in page and PIN not in page
