"""Review integrity (issue 11): nothing leaves recall on one person's word.

Each test reproduces what an insider did on the product before this change:

- an analyst's proposal alone (``poison_suspect`` with the store default ``exclude_suspect``)
  took a memory out of recall;
- an analyst created a store with ``four_eyes: false`` (API and form) and so decided alone;
- after a reviewer refuted a memory, the analyst's "Propose batch" re-signed ``poison_suspect``
  on it, it left recall again, and the reviewer saw no trace of the refutation;
- an org admin invited a sock-puppet reviewer and approved their own proposal through it.

Personas: Alice (analyst) and Bob (reviewer) and Dana (org admin) in Alice's organization.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from audits import services
from audits.models import AuditRun, ReviewProposal
from ledger.models import EpistemicLabel, Memory, Store
from ledger.recall import recall
from orgs.models import ActivityEvent, Membership
from orgs.services import invitation_accept_new_user, invitation_create
from tests.audits.factories import PoisonedStore, poisoned_store_import

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_audit_contexts(recall_env):
    services._CONTEXTS.items.clear()
    yield
    services._CONTEXTS.items.clear()


@pytest.fixture
def housekeeping(monkeypatch, org_a):
    from ledger.services import housekeeper_init

    monkeypatch.setenv("MEMAUDIT_ROLE", "housekeeper")
    housekeeper_init(organization=org_a)


@pytest.fixture
def poisoned(org_a, housekeeping) -> PoisonedStore:
    return poisoned_store_import(organization=org_a, slug="main")


def _finished_run(poisoned: PoisonedStore, user, incident_ids: list[int] | None = None) -> AuditRun:
    if incident_ids is None:
        incident_ids = [i.pk for i in services.incidents_import(
            store=poisoned.store, data=poisoned.incidents_jsonl(), filename="incidents.jsonl", user=user)]
    run = services.audit_run_create(store=poisoned.store, incident_ids=incident_ids, settings={}, user=user)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    return run


def _in_recall(memory_id: int) -> bool:
    memory = Memory.objects.select_related("store").get(pk=memory_id)
    store = Store.objects.select_related("organization").get(pk=memory.store_id)
    return memory_id in [r["id"] for r in recall(store=store, query=memory.text, k=5)["results"]]


def _labels(memory_id: int) -> list[str]:
    return list(EpistemicLabel.objects.filter(memory_id=memory_id).order_by("seq").values_list("label", flat=True))


def _item(page: str, proposal_id: int) -> str:
    """The review queue's article for one proposal."""
    start = page.index(f'data-proposal="{proposal_id}"')
    return page[start:page.index("</article>", start)]


# ----------------------------------------------------------------------------- one person's word


def test_an_analysts_proposal_alone_keeps_the_memory_in_recall(client, poisoned, alice, bob, org_a):
    assert poisoned.store.exclude_suspect and org_a.four_eyes  # the defaults of the reproduction
    run = _finished_run(poisoned, alice)
    proposals = services.proposals_create_from_run(audit_run=run, user=alice)
    assert proposals
    for p in proposals:
        assert Memory.objects.get(pk=p.memory_id).epistemic_state == "poison_suspect"  # flagged and signed
        assert _in_recall(p.memory_id), "an analyst's proposal alone took the memory out of recall"
    # The store's API and the next audit agree: nothing is quarantined yet.
    client.force_login(alice)
    assert client.get(f"/api/v1/stores/{poisoned.store.pk}/").json()["quarantined"] == 0
    assert services.store_view(Store.objects.get(pk=poisoned.store.pk)).blocked == set()

    # A second person's approval is what takes it out.
    services.proposal_approve(organization=org_a, proposal_id=proposals[0].pk, user=bob, reason="planted")
    assert not _in_recall(proposals[0].memory_id)
    assert client.get(f"/api/v1/stores/{poisoned.store.pk}/").json()["quarantined"] == 1
    # Both steps are in the organization's activity trail, with who did them.
    trail = {(e.verb, e.actor_id) for e in ActivityEvent.objects.filter(organization=org_a)}
    assert {("review.proposed", alice.pk), ("review.approve", bob.pk)} <= trail


def test_an_analyst_cannot_create_a_store_without_four_eyes_through_the_api(client, org_a, alice):
    client.force_login(alice)
    r = client.post("/api/v1/stores/", {"name": "Mine", "four_eyes": False}, content_type="application/json")
    assert r.status_code == 400 and "organization" in r.json()["four_eyes"][0]
    assert not Store.objects.filter(name="Mine").exists()
    r = client.post("/api/v1/stores/", {"name": "Mine"}, content_type="application/json")
    assert r.status_code == 201 and r.json()["four_eyes"] is True  # the organization's policy, read-only


def test_a_store_made_through_the_form_follows_the_organizations_four_eyes(client, org_a, alice, dana, housekeeping):
    client.force_login(alice)
    page = client.get("/stores/").content.decode()
    assert 'name="four_eyes"' not in page
    # An unticked checkbox used to make a single-reviewer store.
    r = client.post("/stores/", {"name": "Puppet store", "slug": "", "exclude_suspect": "on"})
    assert r.status_code == 302
    store = Store.objects.get(name="Puppet store")
    poisoned = poisoned_store_import(organization=org_a, slug=store.slug, store=store)
    run = _finished_run(poisoned, dana)
    [p, *_] = services.proposals_create_from_run(audit_run=run, user=dana)
    with pytest.raises(ValidationError, match="four-eyes"):
        services.proposal_approve(organization=org_a, proposal_id=p.pk, user=dana, reason="mine alone")
    assert _in_recall(p.memory_id)


def test_only_an_org_admin_sets_four_eyes_and_it_is_recorded(client, poisoned, org_a, alice, bob, dana):
    for user in (alice, bob):
        client.force_login(user)
        assert client.post("/organization/review-policy/", {"four_eyes": ""}).status_code == 403
        r = client.put("/api/v1/organization/review-policy/", {"four_eyes": False},
                       content_type="application/json")
        assert r.status_code == 403
    org_a.refresh_from_db()
    assert org_a.four_eyes

    client.force_login(dana)
    assert client.get("/organization/review-policy/").status_code == 200
    r = client.post("/organization/review-policy/", {"four_eyes": ""})
    assert r.status_code == 302
    org_a.refresh_from_db()
    assert not org_a.four_eyes
    event = ActivityEvent.objects.get(organization=org_a, verb="review_policy.changed")
    assert event.actor == dana and event.detail == {"four_eyes": False}
    # With four-eyes off (the admin's decision), the store's exclude_suspect policy applies and
    # one person may decide.
    run = _finished_run(poisoned, dana)
    [p, *_] = services.proposals_create_from_run(audit_run=run, user=dana)
    assert not _in_recall(p.memory_id)
    assert services.proposal_approve(organization=org_a, proposal_id=p.pk, user=dana, reason="alone").status == \
        ReviewProposal.Status.APPROVED
    r = client.put("/api/v1/organization/review-policy/", {"four_eyes": True}, content_type="application/json")
    assert r.status_code == 200 and r.json() == {"four_eyes": True}
    org_a.refresh_from_db()
    assert org_a.four_eyes


# ----------------------------------------------------------------------------- refuted memories


def test_a_refuted_memory_is_not_proposed_again_without_new_evidence(client, poisoned, org_a, alice, bob):
    run = _finished_run(poisoned, alice)
    first = services.proposals_create_from_run(audit_run=run, user=alice)[0]
    services.proposal_refute(organization=org_a, proposal_id=first.pk, user=bob, reason="a legitimate record")
    assert _in_recall(first.memory_id)

    again = services.proposals_create_from_run(audit_run=run, user=alice)
    assert first.memory_id not in {p.memory_id for p in again}
    assert "refuted" in again.skipped[first.memory_id]
    assert _labels(first.memory_id) == ["poison_suspect", "poison_refuted"]
    assert _in_recall(first.memory_id)
    # The results page says why it was not proposed.
    client.force_login(alice)
    page = client.get(f"/audits/{run.pk}/").content.decode()
    assert "needs an audit finished after the refutation" in page
    rows = client.get(f"/api/v1/audits/{run.pk}/suspects/").json()["suspects"]
    assert "refuted by bob" in next(r for r in rows if r["memory_pk"] == first.memory_id)["blocked"]
    r = client.post(f"/audits/{run.pk}/propose/", {"memory": [first.memory_id]}, follow=True)
    assert b"refuted by bob" in r.content
    assert _labels(first.memory_id) == ["poison_suspect", "poison_refuted"]


def test_new_evidence_allows_a_new_proposal_and_the_reviewer_sees_the_refutation(client, poisoned, org_a,
                                                                                  alice, bob):
    run = _finished_run(poisoned, alice)
    first = services.proposals_create_from_run(audit_run=run, user=alice)[0]
    services.proposal_refute(organization=org_a, proposal_id=first.pk, user=bob, reason="a legitimate record")
    # A later audit that ranks it is new evidence.
    later = _finished_run(poisoned, alice, incident_ids=list(run.incidents.values_list("pk", flat=True)))
    [second] = services.proposals_create_from_run(audit_run=later, user=alice, memory_ids=[first.memory_id])
    assert _labels(first.memory_id) == ["poison_suspect", "poison_refuted", "poison_suspect"]

    client.force_login(bob)
    item = _item(client.get("/review/").content.decode(), second.pk)
    assert "a legitimate record" in item and "refuted" in item and "bob" in item
    page = client.get(f"/memories/{first.memory_id}/").content.decode()
    history = page[page.index('id="review-history"'):]
    assert "a legitimate record" in history and f"#{first.pk}" in history and f"#{second.pk}" in history


# ----------------------------------------------------------------------------- sock puppets


def test_an_org_admin_cannot_approve_through_an_account_they_invited(client, settings, poisoned, org_a, dana, bob):
    settings.REVIEW_INVITE_COOLDOWN_HOURS = 72
    # dana invites a reviewer by link; the invitee (her puppet) sets a password and joins.
    _, token = invitation_create(organization=org_a, invited_by=dana, role="reviewer", username="puppet")
    invitation_accept_new_user(token=token, username="puppet", password="a long puppet passphrase 7")
    puppet = get_user_model().objects.get(username="puppet")
    assert Membership.objects.get(user=puppet, organization=org_a).invited_by == dana

    run = _finished_run(poisoned, dana)
    p, p2 = services.proposals_create_from_run(audit_run=run, user=dana)[:2]
    client.force_login(puppet)
    assert "invited" in _item(client.get("/review/").content.decode(), p.pk)
    r = client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "looks planted"}, follow=True)
    assert b"invited by dana" in r.content
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.OPEN and _in_recall(p.memory_id)

    # Someone dana did not bring in may approve; so may the invitee once the cooldown is over.
    assert services.proposal_approve(organization=org_a, proposal_id=p.pk, user=bob, reason="planted").status == \
        ReviewProposal.Status.APPROVED
    Membership.objects.filter(user=puppet).update(created_at=timezone.now() - timedelta(hours=73))
    assert services.proposal_approve(organization=org_a, proposal_id=p2.pk, user=puppet,
                                     reason="planted").status == ReviewProposal.Status.APPROVED
