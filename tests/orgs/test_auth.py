import pytest
from django.test import Client

from tests.conftest import PASSWORD


@pytest.mark.django_db
def test_it_shows_a_clear_message_for_a_wrong_password(client, alice):
    r = client.post("/login/", {"username": "alice", "password": "nope"})
    assert r.status_code == 200
    assert b"do not match an account" in r.content
    assert b"Traceback" not in r.content


@pytest.mark.django_db
def test_it_gives_the_same_message_for_an_unknown_user(client, alice):
    # No user enumeration: unknown user and wrong password read the same.
    r = client.post("/login/", {"username": "mallory", "password": "x"})
    assert b"do not match an account" in r.content


@pytest.mark.django_db
def test_it_logs_in_and_lands_on_the_dashboard(client, alice):
    r = client.post("/login/", {"username": "alice", "password": PASSWORD}, follow=True)
    assert r.redirect_chain[-1][0] == "/"
    assert b"Dashboard" in r.content
    assert b"Alice Corp" in r.content


@pytest.mark.django_db
def test_it_redirects_anonymous_users_to_login(client):
    r = client.get("/")
    assert r.status_code == 302
    assert r["Location"].startswith("/login/?next=/")


@pytest.mark.django_db
def test_it_explains_a_missing_csrf_token(alice):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    r = csrf_client.post("/logout/")
    assert r.status_code == 403
    assert b"security token" in r.content
    assert b"Traceback" not in r.content


@pytest.mark.django_db
def test_an_expired_session_asks_to_log_in_again(client, alice, settings):
    client.force_login(alice)
    client.session.flush()
    s = client.session
    s.set_expiry(-1)
    s.save()
    r = client.get("/")
    assert r.status_code == 302 and "/login/" in r["Location"]


@pytest.mark.django_db
def test_logout_ends_the_session(client, alice):
    client.force_login(alice)
    r = client.post("/logout/")
    assert r.status_code == 302
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_it_throttles_repeated_failed_logins(client, alice, settings):
    from django.core.cache import cache

    cache.clear()
    settings.LOGIN_MAX_FAILURES = 3
    for _ in range(3):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    r = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert r.status_code == 200
    assert b"Too many failed attempts" in r.content
    assert "_auth_user_id" not in client.session
    cache.clear()
    r = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert r.status_code == 302
