"""Deployment hardening (Django's deployment checklist, OWASP ASVS V14): production settings pass
``manage.py check --deploy`` with no warnings; secrets come from the environment or files and the
placeholder is refused; uploads over the limits are refused clearly and write nothing; security
headers on every page (HSTS only over TLS); failed logins are throttled.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.hardening.conftest import TABLES

ROOT = Path(__file__).resolve().parents[2]


def _check_deploy(tmp_path, **env) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "VAR_DIR": str(tmp_path / "var"),
            "DEBUG": "False", "SECURE_TLS": "True", "ALLOWED_HOSTS": "memaudit.example.com"}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120)


def test_production_settings_pass_check_deploy_with_no_warnings(tmp_path):
    proc = _check_deploy(tmp_path, SECRET_KEY=secrets.token_urlsafe(64))
    TABLES["deploy"].append(("manage.py check --deploy (DEBUG=False, SECURE_TLS=True)",
                             proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-200:]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout, proc.stdout


def test_the_secret_key_may_come_from_a_file(tmp_path):
    secret = tmp_path / "secret_key"
    secret.write_text(secrets.token_urlsafe(64) + "\n")
    proc = _check_deploy(tmp_path, SECRET_KEY_FILE=str(secret))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_placeholder_secret_key_is_refused_when_debug_is_off(tmp_path):
    proc = _check_deploy(tmp_path)
    assert proc.returncode != 0
    assert "memaudit.E001" in proc.stdout + proc.stderr


def test_without_tls_check_deploy_names_what_is_missing(tmp_path):
    """Documents the settings that TLS turns on (HSTS, secure cookies, SSL redirect)."""
    proc = _check_deploy(tmp_path, SECRET_KEY=secrets.token_urlsafe(64), SECURE_TLS="False")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in out, out


# --------------------------------------------------------------------------- upload limits


@pytest.mark.django_db
def test_a_memories_upload_over_the_limit_is_refused_clearly_and_writes_nothing(client, org_a, alice, settings):
    from ledger.models import Memory
    from ledger.services import store_create

    settings.MAX_UPLOAD_BYTES = 1000
    store = store_create(organization=org_a, name="Main", slug="main")
    client.force_login(alice)
    data = b"\n".join(json.dumps({"id": f"m{n}", "text": "x" * 40}).encode() for n in range(40))
    api = client.post(f"/api/v1/stores/{store.pk}/memories/", {"file": SimpleUploadedFile("big.jsonl", data)})
    assert api.status_code in (400, 413), api.status_code
    assert "upload limit" in json.dumps(api.json()) and "big.jsonl" in api.json()["detail"]
    page = client.post(f"/stores/{store.pk}/import/", {"file": SimpleUploadedFile("big.jsonl", data)})
    assert page.status_code in (400, 413) and "upload limit" in page.content.decode()
    assert Memory.objects.count() == 0


@pytest.mark.django_db
def test_an_incidents_upload_over_the_limit_is_refused_clearly(client, memories, store, organization, settings):
    from audits.models import Incident
    from tests.hardening.world import member

    settings.MAX_UPLOAD_BYTES = 200
    client.force_login(member(organization, "ana", "analyst"))
    data = b"\n".join(json.dumps({"id": f"i{n}", "query": "q", "output": "o", "retrieved": ["m0"]}).encode()
                      for n in range(10))
    resp = client.post("/api/v1/incidents/upload/", {"store": store.pk, "file": SimpleUploadedFile("inc.jsonl", data)})
    assert resp.status_code in (400, 413), resp.status_code
    assert "upload limit" in json.dumps(resp.json())
    assert Incident.objects.count() == 0


@pytest.mark.django_db
def test_a_json_body_over_the_request_limit_is_a_clear_client_error(client, org_a, alice, settings):
    from ledger.models import Memory
    from ledger.services import store_create

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2000
    store = store_create(organization=org_a, name="Main", slug="main")
    client.force_login(alice)
    body = json.dumps([{"id": f"m{n}", "text": "x" * 50} for n in range(100)])
    resp = client.post(f"/api/v1/stores/{store.pk}/memories/", body, content_type="application/json")
    assert resp.status_code in (400, 413), resp.status_code
    assert Memory.objects.count() == 0


# --------------------------------------------------------------------------- headers and login


@pytest.mark.django_db
def test_security_headers_on_pages_and_the_api(client, alice):
    client.force_login(alice)
    for url in ("/login/", "/", "/api/v1/me/"):
        resp = client.get(url)
        assert resp["X-Frame-Options"] == "DENY", url
        assert resp["X-Content-Type-Options"] == "nosniff", url
        assert resp["Referrer-Policy"] == "same-origin", url
        assert "Strict-Transport-Security" not in resp, url  # never over plain HTTP
    page = client.get("/")
    assert "default-src" in page.get("Content-Security-Policy", ""), dict(page.headers)
    TABLES["deploy"].append(("security headers on /, /login/, /api/v1/me/",
                             "X-Frame-Options, nosniff, Referrer-Policy, CSP"))


@pytest.mark.django_db
def test_hsts_is_sent_over_tls_when_tls_is_configured(settings, alice):
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    tls = Client()
    resp = tls.get("/login/", secure=True)
    assert resp["Strict-Transport-Security"].startswith("max-age=31536000")
    assert "Strict-Transport-Security" not in Client().get("/login/")


@pytest.mark.django_db
def test_failed_logins_are_throttled_even_for_the_right_password(client, alice, settings, tmp_path):
    from django.core.cache import cache

    from tests.conftest import PASSWORD

    cache.clear()
    for _ in range(settings.LOGIN_MAX_FAILURES):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    resp = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert "_auth_user_id" not in client.session
    assert resp.status_code in (200, 403, 429)
    cache.clear()
    TABLES["deploy"].append(("login throttling", f"locked after {settings.LOGIN_MAX_FAILURES} failures"))
