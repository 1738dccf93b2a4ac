"""Endorsed keys: the epoch key (key file or HSM) endorses a short-lived online signing key that
lives only in the housekeeper's memory, and each recall-receipt key (issue 11, issue 13
"Receipt keys endorsed"). The portable verifier checks anchor -> epoch -> endorsed key."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from ledger import services
from ledger.core.canonical import format_time
from ledger.core.errors import SignatureInvalidError
from ledger.core.keys import Ed25519Key, EpochSet, check_key_endorsement, sign_key_endorsement, verify_signature
from ledger.core.receipts import build_receipt
from ledger.core.verify import verify_bundle
from ledger.export import bundle_build
from ledger.models import GenesisEntry, KeyEndorsement, ReceiptKey
from ledger.recall import recall
from ledger.signing import epochs_for

pytestmark = pytest.mark.usefixtures("recall_settings")

EIFFEL = "When was the Eiffel Tower in Paris completed?"


def _anchor(organization) -> bytes:
    return epochs_for(organization)[0].public_key


def _subjects(findings) -> list[str]:
    return [f"{f.subject} {f.entry or ''} {f.message}" for f in findings]


def test_entries_are_signed_by_an_endorsed_in_memory_key_never_written_anywhere(memories, organization, settings,
                                                                                 tmp_path):
    online = KeyEndorsement.objects.get(organization=organization, purpose="online")
    g = GenesisEntry.objects.filter(memory=memories[0]).first()
    from ledger.selectors import memory_entries_get

    entry = memory_entries_get(memories[0]).genesis
    assert g.epoch == 1 == online.epoch
    verify_signature(bytes(online.public_key), entry.hash(), entry.signature)  # the online key signed it
    with pytest.raises(SignatureInvalidError):
        verify_signature(epochs_for(organization)[0].public_key, entry.hash(), entry.signature)
    # Nothing on disk holds it: the key directory has the epoch's files only.
    assert sorted(p.name for p in (settings.HOUSEKEEPER_KEY_DIR / "acme").iterdir()) == ["epoch-1.key", "epochs.json"]
    # The endorsement is a statement of epoch 1, valid for ONLINE_KEY_VALIDITY_HOURS at most.
    e = services.key_endorsement_from_row(online, "acme")
    check_key_endorsement(e, EpochSet(epochs_for(organization)), tenant="acme")
    from ledger.core.canonical import parse_time

    assert parse_time(e.not_after) - parse_time(e.not_before) <= timedelta(hours=settings.ONLINE_KEY_VALIDITY_HOURS)
    bundle = bundle_build(organization)
    assert [k["body"]["purpose"] for k in bundle["key_endorsements"]] == ["online"]
    from ledger.core.bundle import parse_bundle
    from ledger.core.verify import verify_parsed

    assert verify_parsed(parse_bundle(bundle), trust_anchor=_anchor(organization), require_coverage=False).findings == []


def test_the_online_key_is_replaced_when_its_window_ends(memories, organization, housekeeper, settings):
    later = housekeeper.now + timedelta(hours=settings.ONLINE_KEY_VALIDITY_HOURS + 1)
    services.transition_append(memory_id=memories[0].pk, valence_q=200, evidence=["outcome:9"], now=later)
    keys = list(KeyEndorsement.objects.filter(organization=organization, purpose="online").order_by("seq"))
    assert len(keys) == 2 and keys[0].key_id != keys[1].key_id
    assert verify_bundle(bundle_build(organization), require_coverage=False) == []


def test_with_online_keys_off_the_epoch_key_signs_each_entry(store, organization, housekeeper, settings):
    settings.ONLINE_KEY_VALIDITY_HOURS = 0
    [m] = services.memories_create(store=store, records=[{"id": "e", "text": "epoch signed"}])
    services.memory_genesis_sign(memory_ids=[m.pk])
    assert not KeyEndorsement.objects.filter(organization=organization).exists()
    assert verify_bundle(bundle_build(organization), require_coverage=False) == []


def test_the_verifier_refuses_what_the_endorsement_chain_does_not_carry(memories, organization, housekeeper):
    services.tree_head_issue(organization=organization)
    bundle = bundle_build(organization)
    assert verify_bundle(bundle) == []

    # Dropping the endorsement: every entry (and the tree head) the online key signed fails.
    dropped = copy.deepcopy(bundle)
    dropped["key_endorsements"] = []
    found = _subjects(verify_bundle(dropped))
    assert any("memory=main/m0 genesis seq=0" in f and "signature invalid" in f for f in found)
    assert any("tree_head" in f for f in found)

    # An endorsement signed by the online key itself (a key endorsing keys) vouches for nothing.
    online = services.key_endorsement_from_row(KeyEndorsement.objects.get(organization=organization), "acme")
    rogue = Ed25519Key.generate()

    class _Fake:
        epoch = 1
        public_key = rogue.public_key

        def sign(self, message: bytes) -> bytes:
            return rogue.sign(message)

    forged = sign_key_endorsement(tenant="acme", seq=1, purpose="online", public_key=rogue.public_key,
                                  not_before=online.not_before, not_after=online.not_after, time=online.time,
                                  signer=_Fake())
    tampered = copy.deepcopy(bundle)
    tampered["key_endorsements"].append(forged.to_json())
    assert any("key_endorsement seq=1" in f and "signature invalid" in f for f in _subjects(verify_bundle(tampered)))

    # A window stretched past the epoch, re-signed by nobody: the signature no longer matches.
    stretched = copy.deepcopy(bundle)
    stretched["key_endorsements"][0]["body"]["not_after"] = "2999-01-01T00:00:00Z"
    assert any("key_endorsement seq=0" in f for f in _subjects(verify_bundle(stretched)))


def test_a_receipt_by_a_key_merely_listed_in_receipt_keys_is_refused(facts, housekeeper):
    """Issue 13: a receipt signed by any key listed in ``receipt_keys`` passed, even anchored."""
    organization = facts.organization
    services.tree_head_issue(organization=organization)
    receipt = recall(store=facts, query=EIFFEL, k=2)["receipt"]
    endorsed = KeyEndorsement.objects.get(organization=organization, purpose="receipt")
    assert endorsed.key_id == receipt["body"]["key_id"]
    services.tree_head_issue(organization=organization)  # covers the endorsement, as an export does
    bundle = bundle_build(organization)
    assert verify_bundle(bundle, trust_anchor=_anchor(organization)) == []

    foreign = Ed25519Key.generate()
    body = receipt["body"]
    forged = build_receipt([{k: r[k] for k in ("memory", "content_sha256", "weight_q", "state", "chain_head")}
                            for r in receipt["results"]], tenant=body["tenant"], store=body["store"],
                           query_sha256=body["query_sha256"], k=body["k"], sth_size=body["sth_size"],
                           sth_root_hex=body["sth_root"], projection_version=body["projection_version"],
                           time=body["time"], signer=foreign)
    tampered = copy.deepcopy(bundle)
    tampered["receipts"][0] = forged
    tampered["receipt_keys"].append({"key_id": foreign.key_id, "public_key": foreign.public_key.hex()})
    found = _subjects(verify_bundle(tampered, trust_anchor=_anchor(organization)))
    assert any("receipt #0" in f and "not endorsed" in f for f in found), found


def test_the_receipt_api_returns_the_endorsement_chain(facts, housekeeper, client):
    from ledger.core.keys import Epoch, verify_epoch_chain
    from ledger.core.keys import KeyEndorsement as CoreEndorsement
    from tests.hardening.world import member

    organization = facts.organization
    result = recall(store=facts, query=EIFFEL, k=1)
    receipt_id = result["receipt_id"]
    client.force_login(member(organization, "ana", "analyst"))
    data = client.get(f"/api/v1/receipts/{receipt_id}/").json()
    epochs = [Epoch.from_json(e) for e in data["epochs"]]
    verify_epoch_chain(epochs, trust_anchor=_anchor(organization))
    e = CoreEndorsement.from_json(data["receipt_key_endorsement"])
    check_key_endorsement(e, EpochSet(epochs), tenant="acme")
    assert e.purpose == "receipt" and e.key_id == data["receipt"]["body"]["key_id"]
    assert e.public_key.hex() == data["receipt_public_key"]


def test_a_revoked_receipt_key_is_rotated_and_its_later_receipts_refused(facts, housekeeper, client):
    from tests.hardening.world import member

    organization = facts.organization
    first = recall(store=facts, query=EIFFEL, k=1)["receipt"]
    old = first["body"]["key_id"]
    client.force_login(member(organization, "dana", "admin"))
    assert client.post("/keys/receipt-revoke/", {"key_id": old}).status_code == 302
    assert KeyEndorsement.objects.get(key_id=old).revoked_at
    page = client.get("/keys/").content.decode()
    assert "Endorsed keys" in page and old in page and "revoked" in page

    from ledger import signing

    signing._receipt_checked.clear()  # as after RECEIPT_ENDORSEMENT_RECHECK seconds
    second = recall(store=facts, query=EIFFEL, k=1)["receipt"]
    new = second["body"]["key_id"]
    assert new != old and ReceiptKey.objects.filter(organization=organization).count() == 2
    assert KeyEndorsement.objects.get(key_id=new, purpose="receipt").revoked_at == ""
    assert verify_bundle(bundle_build(organization), require_coverage=False) == []  # the old receipt predates the revocation

    # A receipt the old key signed after its revocation is refused.
    late = copy.deepcopy(bundle_build(organization))
    revoked_at = KeyEndorsement.objects.get(key_id=old).revoked_at
    from ledger.core.canonical import parse_time

    body = dict(late["receipts"][0]["body"], time=format_time(parse_time(revoked_at) + timedelta(seconds=1)))
    late["receipts"][0]["body"] = body
    found = _subjects(verify_bundle(late))
    assert any("receipt #0" in f and ("revoked" in f or "not endorsed" in f) for f in found), found


def test_endorsements_are_append_only_but_for_one_revocation(memories, organization):
    from django.db import DatabaseError, connection, transaction

    row = KeyEndorsement.objects.get(organization=organization)

    def refused(sql: str) -> None:
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as c:
            c.execute(sql, [row.pk])

    refused("UPDATE ledger_keyendorsement SET not_after = '2999-01-01T00:00:00Z' WHERE id = %s")
    refused("DELETE FROM ledger_keyendorsement WHERE id = %s")
    refused("UPDATE ledger_logleaf SET seq = seq + 1 WHERE memory_id IS NULL AND id > %s - 1000000")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_keyendorsement SET revoked_at = '2030-01-01T00:00:00Z' WHERE id = %s", [row.pk])
    refused("UPDATE ledger_keyendorsement SET revoked_at = '2031-01-01T00:00:00Z' WHERE id = %s")


def test_a_pending_receipt_key_is_not_looked_up_again_on_every_recall(facts, monkeypatch):
    """Until the housekeeper endorses it, the receipt key is as good as pending for the recheck
    period: recalls then sign without reading ReceiptKey and KeyEndorsement each time (a recall at
    20k spent 1-2 ms on those two queries while no housekeeper answered), and ask once more after it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from ledger import dispatch, signing

    asked: list[int] = []
    monkeypatch.setattr(dispatch, "receipt_key_endorse", lambda organization_id, row_id: asked.append(row_id))
    signing._receipt_checked.clear()
    recall(store=facts, query=EIFFEL, k=1)
    assert len(asked) == 1 and not KeyEndorsement.objects.filter(purpose="receipt").exists()

    def key_queries() -> list[str]:
        with CaptureQueriesContext(connection) as seen:
            receipt = recall(store=facts, query=EIFFEL, k=1)["receipt"]
        assert receipt["body"]["key_id"] == ReceiptKey.objects.get().key_id
        return [q["sql"] for q in seen.captured_queries
                if "ledger_receiptkey" in q["sql"] or "ledger_keyendorsement" in q["sql"]]

    assert key_queries() == [] and len(asked) == 1
    monkeypatch.setattr(signing, "RECEIPT_ENDORSEMENT_RECHECK", 0.0)  # the recheck period is over
    assert key_queries() and len(asked) == 2
