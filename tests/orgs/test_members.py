import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from orgs.models import Membership, Role


@pytest.mark.django_db
def test_an_org_admin_invites_a_member_by_a_one_time_link(client, dana):
    client.force_login(dana)
    r = client.post("/members/", {"username": "erin", "email": "erin@example.com", "role": "reviewer"}, follow=True)
    assert r.status_code == 200
    assert b"Invitation link" in r.content and b"One-time password" not in r.content
    # Nobody joins before accepting, and no account is made for them.
    assert not Membership.objects.filter(user__username="erin").exists()
    assert not get_user_model().objects.filter(username="erin").exists()


@pytest.mark.django_db
def test_accepting_an_invitation_to_an_organization_one_is_in_is_a_clear_error(dana, alice):
    from orgs.services import invitation_accept, invitation_create

    _, token = invitation_create(organization=dana.memberships.get().organization, invited_by=dana,
                                 username="alice", role="analyst")
    with pytest.raises(ValidationError, match="already a member"):
        invitation_accept(token=token, user=alice)


@pytest.mark.django_db
def test_a_tampered_invitation_token_is_refused(dana):
    from orgs.services import invitation_create, invitation_for_token

    _, token = invitation_create(organization=dana.memberships.get().organization, invited_by=dana,
                                 email="x@example.com", role="analyst")
    assert invitation_for_token(token=token).email == "x@example.com"
    for bad in (token[:-1] + ("A" if token[-1] != "A" else "B"), "", "nonsense", token + "x"):
        with pytest.raises(ValidationError, match="not valid"):
            invitation_for_token(token=bad)


@pytest.mark.django_db
def test_an_invitation_without_username_or_email_is_refused(client, dana):
    client.force_login(dana)
    r = client.post("/members/", {"username": " ", "email": "", "role": "analyst"})
    assert r.status_code == 200 and b"username or email" in r.content


@pytest.mark.django_db
def test_an_org_admin_changes_a_role(client, dana, alice):
    client.force_login(dana)
    m = alice.memberships.get()
    client.post(f"/members/{m.pk}/role/", {"role": "reviewer"})
    m.refresh_from_db()
    assert m.role == Role.REVIEWER


@pytest.mark.django_db
def test_the_last_org_admin_cannot_be_demoted(client, dana):
    client.force_login(dana)
    m = dana.memberships.get()
    r = client.post(f"/members/{m.pk}/role/", {"role": "analyst"}, follow=True)
    m.refresh_from_db()
    assert m.role == Role.ADMIN
    assert b"at least one active org admin" in r.content


@pytest.mark.django_db
@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_a_non_admin_cannot_manage_members(client, persona, request, alice, dana):
    user = request.getfixturevalue(persona)
    client.force_login(user)
    assert client.get("/members/").status_code == 403
    m = alice.memberships.get()
    assert client.post(f"/members/{m.pk}/role/", {"role": "admin"}).status_code == 403
    m.refresh_from_db()
    assert m.role == Role.ANALYST


@pytest.mark.django_db
def test_an_admin_of_another_org_cannot_touch_our_members(client, charlie, alice):
    client.force_login(charlie)
    m = alice.memberships.get()
    assert client.post(f"/members/{m.pk}/role/", {"role": "admin"}).status_code == 404
    m.refresh_from_db()
    assert m.role == Role.ANALYST
    assert b"alice" not in client.get("/members/").content


@pytest.mark.django_db
def test_the_members_api_lists_only_our_org(client, dana, alice, charlie):
    client.force_login(dana)
    names = {m["username"] for m in client.get("/api/v1/members/").json()}
    assert names == {"dana", "alice"}


@pytest.mark.django_db
def test_the_members_api_refuses_analysts(client, alice):
    client.force_login(alice)
    r = client.get("/api/v1/members/")
    assert r.status_code == 403
    assert "cannot do this" in r.json()["detail"]


@pytest.mark.django_db
def test_the_api_accepts_a_user_token(client, alice):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=alice)
    r = client.get("/api/v1/me/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert r.status_code == 200
    assert r.json()["organization_slug"] == "alice-corp" and r.json()["role"] == "analyst"


@pytest.mark.django_db
def test_the_api_answers_503_when_the_database_is_unreachable(client, alice, monkeypatch):
    from django.db import OperationalError

    from orgs import api

    client.force_login(alice)

    def down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(api, "request_membership", down)
    r = client.get("/api/v1/me/")
    assert r.status_code == 503
    assert r["Retry-After"] == "5"
    assert "temporarily unavailable" in r.json()["detail"]


@pytest.mark.django_db
def test_a_deeply_nested_json_body_is_a_clear_400(client, alice):
    from django.urls import get_resolver
    from rest_framework.parsers import JSONParser as DrfJSONParser

    from orgs.parsers import JSONParser

    client.force_login(alice)
    body = "[" * 100_000 + "]" * 100_000
    r = client.post("/api/v1/stores/", body, content_type="application/json")
    assert r.status_code == 400
    assert "nested too deeply" in r.json()["detail"]
    # Every API view parses JSON with our parser (a view listing DRF's own would 500 again).
    for pattern in get_resolver().url_patterns:
        for sub in getattr(pattern, "url_patterns", []):
            view = getattr(sub.callback, "cls", None)
            for parser in getattr(view, "parser_classes", ()):
                assert not (issubclass(parser, DrfJSONParser) and not issubclass(parser, JSONParser)), view


def test_request_fields_refuse_out_of_range_ids_and_boolean_numbers():
    from rest_framework.exceptions import ValidationError

    from orgs.api import DbIdField, StrictFloatField

    with pytest.raises(ValidationError):
        DbIdField().run_validation(2**63)
    assert DbIdField().run_validation(7) == 7
    with pytest.raises(ValidationError):
        StrictFloatField().run_validation(True)
    assert StrictFloatField().run_validation(0.5) == 0.5
