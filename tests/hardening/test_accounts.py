"""Accounts against an insider (issue 11, "Accounts" and the `make run` defaults; issue 15's
activity trail and agent tokens page). Each test is a reproduction that worked on the product
before the change: an org admin adding someone else's account without consent, logins landing
in another organization, unthrottled admin logins and password spraying, no password change or
reset, no way to deactivate or remove a member or to list, revoke or expire an agent token, and
an anonymous visitor reading debug pages, status details and the API description.

Personas (tests/conftest.py): Alice (analyst) and Dana (org admin) of Alice Corp; Charlie, org
admin of Charlie Ltd, must not pull Alice into his organization.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from orgs import models as orgs_models
from orgs.models import ActivityEvent, Membership, Organization, Role
from tests.conftest import PASSWORD, _member

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"https?://[^\s<\"]+/invite/[^\s<\"/]+/")


@pytest.fixture(autouse=True)
def _fresh_throttles():
    cache.clear()
    yield
    cache.clear()


def _invite(client, admin, **data) -> str:
    """An admin creates an invitation on the members page; returns the link shown once."""
    client.force_login(admin)
    r = client.post("/members/", {"username": "", "email": "", "role": "analyst", **data})
    assert r.status_code == 302, r.content.decode()[:2000]
    page = client.get("/members/").content.decode()
    [link] = LINK.findall(page)
    assert client.get("/members/").content.decode().count(link) == 0  # shown once
    return link


# --------------------------------------------------------------------------- invitations


def test_an_admin_of_another_org_cannot_add_an_existing_user_without_consent(client, alice, charlie, org_b):
    _invite(client, charlie, username="alice", role="reviewer")
    assert not Membership.objects.filter(user=alice, organization=org_b).exists()
    assert orgs_models.Invitation.objects.get(organization=org_b).accepted_at is None


def test_the_invite_answer_does_not_reveal_whether_a_username_exists(client, alice, charlie):
    client.force_login(charlie)
    pages = []
    for username in ("alice", "nobody-by-this-name"):
        r = client.post("/members/", {"username": username, "email": "", "role": "analyst"}, follow=True)
        page = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", r.content.decode())
        pages.append(LINK.sub("LINK", page).replace(username, "NAME"))
    # The pending list shows both invitations; compare the answer above it.
    first, second = (p.split('id="invitation-table"')[0] for p in pages)
    assert first == second
    assert "already a member" not in first and "exists" not in first


def test_an_existing_user_logs_in_and_accepts_an_invitation(client, alice, charlie, org_b):
    link = _invite(client, charlie, username="alice", role="reviewer")
    client.logout()
    page = client.get(link).content.decode()
    assert "Log in to accept" in page and "Charlie Ltd" in page
    client.force_login(alice)
    r = client.post(link, {"decision": "accept"})
    assert r.status_code == 302
    m = Membership.objects.get(user=alice, organization=org_b)
    assert m.role == Role.REVIEWER and m.invited_by == charlie
    # Single use.
    assert client.post(link, {"decision": "accept"}).status_code == 410
    verbs = set(ActivityEvent.objects.filter(organization=org_b).values_list("verb", flat=True))
    assert {"member.invited", "member.joined"} <= verbs


def test_an_invitation_made_out_to_one_account_cannot_be_accepted_by_another(client, alice, bob, charlie, org_b):
    link = _invite(client, charlie, username="alice")
    client.force_login(bob)
    r = client.post(link, {"decision": "accept"})
    assert b"another account" in r.content
    assert not Membership.objects.filter(organization=org_b, user=bob).exists()


def test_a_new_user_sets_their_own_password_and_the_admin_never_sees_it(client, dana, org_a):
    link = _invite(client, dana, username="erin", email="erin@example.com", role="reviewer")
    page = client.get("/members/").content.decode()
    assert "One-time password" not in page and "new-password" not in page
    assert len(mail.outbox) == 1 and link in mail.outbox[0].body and "erin@example.com" in mail.outbox[0].to
    client.logout()
    r = client.post(link, {"username": "erin", "email": "", "password1": "short", "password2": "short"})
    assert r.status_code == 200 and b"too short" in r.content
    r = client.post(link, {"username": "erin", "email": "", "password1": "a-Long-pass-phrase-9",
                           "password2": "a-Long-pass-phrase-9"})
    assert r.status_code == 302
    m = Membership.objects.get(user__username="erin")
    assert m.organization == org_a and m.role == Role.REVIEWER and m.invited_by == dana
    assert client.login(username="erin", password="a-Long-pass-phrase-9")


def test_an_expired_or_withdrawn_invitation_is_refused(client, dana, settings):
    link = _invite(client, dana, username="frank")
    inv = orgs_models.Invitation.objects.get(username="frank")
    orgs_models.Invitation.objects.filter(pk=inv.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    client.logout()
    r = client.get(link)
    assert r.status_code == 410 and b"expired" in r.content
    link2 = _invite(client, dana, username="gina")
    inv2 = orgs_models.Invitation.objects.get(username="gina")
    assert client.post(f"/invitations/{inv2.pk}/revoke/").status_code == 302
    client.logout()
    assert b"withdrawn" in client.get(link2).content
    assert client.get(link2[:-3] + "xx/").status_code == 410


def test_the_next_login_stays_in_the_users_first_organization(client, alice, org_a):
    # Alice later joins an organization that sorts first by name; logging in must not move her there.
    aardvark = Organization.objects.create(name="Aardvark", slug="aardvark")
    Membership.objects.create(organization=aardvark, user=alice, role=Role.ADMIN)
    r = client.post("/login/", {"username": "alice", "password": PASSWORD}, follow=True)
    assert client.get("/api/v1/me/").json()["organization_slug"] == "alice-corp"
    assert b"switch with the menu" in r.content


# --------------------------------------------------------------------------- throttling


def test_the_admin_login_is_throttled(client, settings, django_user_model):
    settings.LOGIN_MAX_FAILURES = 3
    django_user_model.objects.create_superuser("root", "root@example.com", PASSWORD)
    for _ in range(3):
        client.post("/admin/login/", {"username": "root", "password": "wrong"})
    r = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert r.status_code == 200 and b"Too many failed attempts" in r.content
    assert "_auth_user_id" not in client.session


def test_one_password_tried_over_many_usernames_is_throttled(client, settings, django_user_model, alice):
    settings.LOGIN_MAX_PASSWORD_FAILURES = 5
    django_user_model.objects.create_user("victim", password="Spring-2026-sunshine")
    for i in range(5):  # five accounts, one guess each: the per-account limit never trips
        client.post("/login/", {"username": f"user{i}", "password": "Spring-2026-sunshine"})
    r = client.post("/login/", {"username": "victim", "password": "Spring-2026-sunshine"})
    assert b"Too many failed attempts" in r.content and "_auth_user_id" not in client.session
    # Another password is not affected.
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302


# --------------------------------------------------------------------------- passwords


def test_a_user_changes_their_password(client, alice):
    client.force_login(alice)
    assert client.get("/account/password/").status_code == 200
    r = client.post("/account/password/", {"old_password": PASSWORD, "new_password1": "a-New-pass-phrase-7",
                                           "new_password2": "a-New-pass-phrase-7"})
    assert r.status_code == 302
    client.logout()
    assert client.login(username="alice", password="a-New-pass-phrase-7")
    assert ActivityEvent.objects.filter(verb="user.password_changed", actor=alice).exists()


def test_a_user_resets_a_forgotten_password_by_email(client, alice):
    r = client.post("/password-reset/", {"email": "alice@example.com"})
    assert r.status_code == 302
    r2 = client.post("/password-reset/", {"email": "nobody@example.com"})
    assert r2.status_code == 302 and r2["Location"] == r["Location"]  # same answer either way
    [message] = mail.outbox
    url = re.search(r"http://testserver(/password-reset/\S+/)", message.body).group(1)
    r = client.get(url, follow=True)
    form_url = r.redirect_chain[-1][0]
    r = client.post(form_url, {"new_password1": "a-Reset-pass-phrase-3", "new_password2": "a-Reset-pass-phrase-3"})
    assert r.status_code == 302
    assert client.login(username="alice", password="a-Reset-pass-phrase-3")


# --------------------------------------------------------------------------- members


def test_an_admin_deactivates_and_removes_a_member(client, alice, dana):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=alice)
    m = alice.memberships.get()
    client.force_login(dana)
    assert client.post(f"/members/{m.pk}/active/", {"active": "0"}).status_code == 302
    m.refresh_from_db()
    assert m.is_active is False
    assert b"deactivated" in client.get("/members/").content
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert c.get("/api/v1/me/").status_code == 403
    alice_client = type(client)()
    alice_client.force_login(alice)
    assert alice_client.get("/").status_code == 403
    client.post(f"/members/{m.pk}/active/", {"active": "1"})
    assert c.get("/api/v1/me/").status_code == 200
    assert client.post(f"/members/{m.pk}/remove/").status_code == 302
    assert not Membership.objects.filter(pk=m.pk).exists()
    verbs = list(ActivityEvent.objects.filter(target="user:alice").values_list("verb", flat=True))
    assert {"member.deactivated", "member.reactivated", "member.removed"} <= set(verbs)


def test_the_last_active_admin_cannot_be_deactivated_or_removed(client, dana, alice):
    m = dana.memberships.get()
    client.force_login(dana)
    r = client.post(f"/members/{m.pk}/remove/", follow=True)
    assert b"at least one active org admin" in r.content
    client.post(f"/members/{m.pk}/active/", {"active": "0"})
    m.refresh_from_db()
    assert m.is_active and Membership.objects.filter(pk=m.pk).exists()


def test_an_admin_of_another_org_cannot_deactivate_our_members(client, alice, charlie):
    m = alice.memberships.get()
    client.force_login(charlie)
    assert client.post(f"/members/{m.pk}/active/", {"active": "0"}).status_code == 404
    assert client.post(f"/members/{m.pk}/remove/").status_code == 404
    m.refresh_from_db()
    assert m.is_active


# --------------------------------------------------------------------------- agent tokens


@pytest.fixture
def acme_admin(organization):
    return _member(organization, "acme-admin", Role.ADMIN)


def _api(user=None, token=None) -> APIClient:
    c = APIClient()
    if user is not None:
        c.force_login(user)
    if token is not None:
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


RECALL = {"query": "anything", "k": 1}


def test_agent_tokens_are_listed_revoked_and_expire(store, housekeeper, recall_env, acme_admin, charlie):
    admin = _api(acme_admin)
    r = admin.post(f"/api/v1/stores/{store.pk}/tokens/", {"name": "bot", "expires_in_days": 30}, format="json")
    assert r.status_code == 201
    raw, token_id = r.json()["token"], r.json()["id"]
    assert r.json()["expires_at"]
    assert _api(token=raw).post(f"/api/v1/stores/{store.pk}/recall", RECALL, format="json").status_code == 200
    listed = admin.get("/api/v1/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["bot"] and listed[0]["last_used_at"] and listed[0]["state"] == "active"
    assert raw not in json.dumps(listed)
    # Another organization's admin neither sees nor revokes it.
    assert _api(charlie).get("/api/v1/tokens/").json()["results"] == []
    assert _api(charlie).post(f"/api/v1/tokens/{token_id}/revoke/").status_code == 404
    assert admin.post(f"/api/v1/tokens/{token_id}/revoke/").json()["state"] == "revoked"
    r = _api(token=raw).post(f"/api/v1/stores/{store.pk}/recall", RECALL, format="json")
    assert r.status_code == 401 and "revoked" in r.json()["detail"]
    # Expiry.
    r = admin.post(f"/api/v1/stores/{store.pk}/tokens/", {"name": "old"}, format="json")
    from ledger.models import AgentToken

    AgentToken.objects.filter(pk=r.json()["id"]).update(expires_at=timezone.now() - timedelta(minutes=1))
    r = _api(token=r.json()["token"]).post(f"/api/v1/stores/{store.pk}/recall", RECALL, format="json")
    assert r.status_code == 401 and "expired" in r.json()["detail"]
    verbs = list(ActivityEvent.objects.filter(verb__startswith="token.").values_list("verb", flat=True))
    assert sorted(verbs) == ["token.created", "token.created", "token.revoked"]


def test_a_deactivated_members_agent_tokens_stop_working_until_they_are_reactivated(
        store, housekeeper, recall_env, acme_admin):
    """An admin saw the raw token once, when they made it: after they leave (deactivated, as a
    member or as a user) it must not keep reaching the organization's memories."""
    from orgs.services import member_set_active

    other = _member(store.organization, "acme-admin-2", Role.ADMIN)
    admin = _api(acme_admin)
    raw = admin.post(f"/api/v1/stores/{store.pk}/tokens/", {"name": "bot"}, format="json").json()["token"]
    kept = _api(other).post(f"/api/v1/stores/{store.pk}/tokens/", {"name": "kept"}, format="json").json()["token"]
    recall = f"/api/v1/stores/{store.pk}/recall"
    assert _api(token=raw).post(recall, RECALL, format="json").status_code == 200
    membership = Membership.objects.get(organization=store.organization, user=acme_admin)
    member_set_active(organization=store.organization, membership_id=membership.pk, active=False, actor=other)
    r = _api(token=raw).post(recall, RECALL, format="json")
    assert r.status_code == 401 and "no longer an active member" in r.json()["detail"]
    assert _api(token=kept).post(recall, RECALL, format="json").status_code == 200  # other admins' tokens work
    states = {t["name"]: t["state"] for t in _api(other).get("/api/v1/tokens/").json()["results"]}
    assert states == {"bot": "suspended", "kept": "active"}
    client = _api(other)
    assert b"suspended" in client.get("/tokens/").content
    member_set_active(organization=store.organization, membership_id=membership.pk, active=True, actor=other)
    assert _api(token=raw).post(recall, RECALL, format="json").status_code == 200
    # A deactivated user account (Django's is_active) suspends them too.
    acme_admin.is_active = False
    acme_admin.save(update_fields=["is_active"])
    assert _api(token=raw).post(recall, RECALL, format="json").status_code == 401


def test_the_agent_tokens_page_creates_shows_once_and_revokes(client, store, acme_admin):
    client.force_login(acme_admin)
    r = client.post("/tokens/", {"store": store.pk, "name": "support-bot", "expires_in_days": 7})
    assert r.status_code == 302
    page = client.get("/tokens/").content.decode()
    raw = re.search(r'id="new-token">(mat_[^<]+)<', page).group(1)
    assert raw not in client.get("/tokens/").content.decode()
    from ledger.models import AgentToken

    token = AgentToken.objects.get(name="support-bot")
    assert token.created_by == acme_admin and token.expires_at is not None
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert b"revoked" in client.get("/tokens/").content


# --------------------------------------------------------------------------- activity trail


def test_the_activity_trail_lists_filters_and_pages(client, dana, alice, org_a):
    from orgs.services import activity_record

    for i in range(60):
        activity_record(organization=org_a, verb="member.role_changed", actor=dana, target=f"user:x{i}")
    activity_record(organization=org_a, verb="ledger.exported", actor=alice, target="bundle")
    client.force_login(dana)
    page = client.get("/activity/").content.decode()
    assert "61 events" in page
    assert "page=2" in page
    assert "1 event" in client.get("/activity/?verb=ledger.").content.decode()
    body = client.get("/api/v1/activity/?verb=member.&limit=10").json()
    assert body["count"] == 60 and len(body["results"]) == 10
    assert client.get("/api/v1/activity/?actor=alice").json()["results"][0]["verb"] == "ledger.exported"
    client.force_login(alice)
    assert client.get("/activity/").status_code == 403
    assert client.get("/api/v1/activity/").status_code == 403


def test_logins_and_exports_are_recorded_with_the_client_address(client, alice, org_a):
    client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="203.0.113.7")
    event = ActivityEvent.objects.get(organization=org_a, verb="user.login")
    assert event.actor == alice and event.ip == "203.0.113.7"
    client.get("/ledger/export/")
    assert ActivityEvent.objects.filter(organization=org_a, verb="ledger.exported", actor=alice).exists()
    client.logout()
    client.post("/login/", {"username": "alice", "password": "guess"}, REMOTE_ADDR="198.51.100.9")
    failed = ActivityEvent.objects.get(organization=org_a, verb="user.login_failed")
    assert failed.ip == "198.51.100.9" and failed.target == "user:alice" and failed.actor is None


def test_the_activity_trail_is_append_only_in_the_database(dana, org_a, django_user_model):
    from orgs.services import activity_record

    event = activity_record(organization=org_a, verb="member.invited", actor=dana, target="x")
    for sql in ("UPDATE orgs_activityevent SET verb = 'nothing' WHERE id = %s",
                "DELETE FROM orgs_activityevent WHERE id = %s"):
        with pytest.raises(IntegrityError if connection.vendor == "postgresql" else Exception), transaction.atomic():
            with connection.cursor() as c:
                c.execute(sql, [event.pk])
    assert ActivityEvent.objects.get(pk=event.pk).verb == "member.invited"
    # Deleting a user keeps the row (the actor becomes NULL, the label stays).
    dana.delete()
    event.refresh_from_db()
    assert event.actor is None and event.actor_label == "user:dana"


# --------------------------------------------------------------------------- `make run` defaults


def test_make_run_serves_with_debug_off_and_an_owner_only_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "SECRET_KEY_FILE")}
    env["VAR_DIR"] = str(tmp_path)
    out = subprocess.run([str(ROOT / "bin" / "run"), "--print-env"], env=env, capture_output=True, text=True,
                         timeout=30, check=True).stdout
    assert "DEBUG=False" in out
    key = tmp_path / "secret_key"
    assert f"SECRET_KEY_FILE={key}" in out
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_text()) >= 50
    # A second start keeps the same key (sessions survive a restart).
    first = key.read_text()
    subprocess.run([str(ROOT / "bin" / "run"), "--print-env"], env=env, capture_output=True, timeout=30, check=True)
    assert key.read_text() == first
    env["DEBUG"] = "1"
    out = subprocess.run([str(ROOT / "bin" / "run"), "--print-env"], env=env, capture_output=True, text=True,
                         timeout=30, check=True).stdout
    assert "DEBUG=True" in out


def test_an_anonymous_404_lists_no_urls_with_debug_off(client, settings):
    settings.DEBUG = False
    r = client.get("/no-such-page/")
    assert r.status_code == 404
    body = r.content.decode()
    assert "URLconf" not in body and "api/v1/" not in body and "Not found" in body


def test_status_details_and_the_api_description_need_a_login(client, alice):
    r = client.get("/status/", HTTP_ACCEPT="application/json")
    assert r.status_code == 200 and r.json()["database"] == {"ok": True}
    page = client.get("/status/").content.decode()
    assert "sqlite" not in page.lower() and "postgres" not in page.lower()
    assert client.get("/api/schema/").status_code in (401, 403)
    r = client.get("/api/docs/")
    assert r.status_code == 302 and "/login/" in r["Location"]
    client.force_login(alice)
    assert "detail" in client.get("/status/", HTTP_ACCEPT="application/json").json()["database"]
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200


# --------------------------------------------------------------------------- notifications (issue 15)


def test_a_finished_audit_and_a_signed_label_reach_the_webhook(organization, housekeeper, recall_env,
                                                                 django_capture_on_commit_callbacks):
    from ledger import services
    from orgs.models import WebhookDelivery
    from orgs.notifications import webhook_create
    from tests.hardening.world import build_tenant

    webhook_create(organization=organization, url="http://127.0.0.1:9/unused",
                   events=["audit.finished", "label.signed", "proposal.waiting"])
    with django_capture_on_commit_callbacks(execute=False):
        tenant = build_tenant(organization, "acme")
        services.label_append(memory_id=tenant.memory.pk, label="poison_suspect", reason="x", evidence={},
                              actor="user:acme-analyst")
    events = set(WebhookDelivery.objects.values_list("event", flat=True))
    assert events == {"audit.finished", "label.signed", "proposal.waiting"}
    payloads = json.dumps(list(WebhookDelivery.objects.values_list("payload", flat=True)))
    assert "Osaka" not in payloads  # ids and counts, never memory text


def test_an_invitation_made_out_to_a_username_keeps_it(client, dana):
    link = _invite(client, dana, username="hana")
    client.logout()
    r = client.post(link, {"username": "somebody-else", "password1": "a-Long-pass-phrase-9",
                           "password2": "a-Long-pass-phrase-9"})
    assert r.status_code == 302
    assert Membership.objects.filter(user__username="hana").exists()
    assert not Membership.objects.filter(user__username="somebody-else").exists()


def test_a_deactivated_membership_grants_nothing_to_a_service(alice):
    """Services check roles themselves (``orgs.permissions.require``) for the API, the pages and
    commands alike: a deactivated membership must not pass that check, whatever its role."""
    from django.core.exceptions import PermissionDenied

    from orgs.permissions import require

    m = alice.memberships.get()
    require(user=alice, organization=m.organization, capability="member")
    Membership.objects.filter(pk=m.pk).update(is_active=False)
    with pytest.raises(PermissionDenied, match="deactivated"):
        require(user=alice, organization=m.organization, capability="member")
