import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from memaudit_site import settings as site_settings


def test_envbool_fails_loudly_on_a_bad_value(monkeypatch):
    monkeypatch.setenv("DEBUG", "yes")
    with pytest.raises(ImproperlyConfigured, match="DEBUG=yes"):
        site_settings.envbool("DEBUG", "True")


def test_envint_fails_loudly_on_a_bad_value(monkeypatch):
    monkeypatch.setenv("MAX_UPLOAD_BYTES", "lots")
    with pytest.raises(ImproperlyConfigured, match="MAX_UPLOAD_BYTES=lots"):
        site_settings.envint("MAX_UPLOAD_BYTES", "1")


def test_envsecret_reads_a_secret_file(monkeypatch, tmp_path):
    path = tmp_path / "secret"
    path.write_text("s3cr3t\n")
    monkeypatch.setenv("SECRET_KEY_FILE", str(path))
    assert site_settings.envsecret("SECRET_KEY", "x") == "s3cr3t"


def test_the_system_check_refuses_the_placeholder_key_without_debug(settings):
    settings.DEBUG = False
    settings.SECRET_KEY = site_settings.PLACEHOLDER_SECRET_KEY
    with pytest.raises(SystemCheckError, match="memaudit.E001"):
        call_command("check")


@pytest.mark.django_db
def test_the_status_page_reports_database_and_broker(client, alice):
    r = client.get("/status/", HTTP_ACCEPT="application/json")
    body = r.json()
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True
    assert "workers" in body


@pytest.mark.django_db
def test_the_status_page_shows_a_live_worker_heartbeat(client, alice):
    from django.utils import timezone

    from orgs.models import WorkerHeartbeat

    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="w1@host", queues="audit,housekeeper,replay", pid=1, started_at=now, last_seen=now)
    client.force_login(alice)  # details need a login
    body = client.get("/status/", HTTP_ACCEPT="application/json").json()
    assert body["workers"]["ok"] is True
    assert "housekeeper" in body["workers"]["detail"]


@pytest.mark.django_db
def test_seed_demo_is_idempotent(settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--no-store")
    first = capsys.readouterr().out
    call_command("seed_demo", "--no-store")
    second = capsys.readouterr().out
    assert "password:" in first and "already exist" in second
    assert len((tmp_path / "demo-credentials.txt").read_text().splitlines()) == 3


@pytest.mark.django_db
def test_pages_carry_a_strict_content_security_policy(client):
    r = client.get("/login/")
    csp = r["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp
    assert r["X-Frame-Options"] == "DENY" and r["X-Content-Type-Options"] == "nosniff"


def test_no_template_uses_inline_scripts_or_handlers():
    # The CSP forbids them; a new one would silently stop working in the browser.
    import re
    from pathlib import Path

    offenders = []
    for path in Path("templates").rglob("*.html"):
        text = path.read_text()
        if re.search(r"\son[a-z]+\s*=", text) or re.search(r"<script(?![^>]*\b(src|type=\"application/json\")=?)[^>]*>", text):
            offenders.append(str(path))
    assert offenders == []


def test_the_key_dir_check_accepts_prefixed_static_dirs(settings, tmp_path):
    from orgs.checks import check_housekeeper_key_dir_outside_static

    settings.STATICFILES_DIRS = [("vendor", tmp_path / "static")]
    settings.HOUSEKEEPER_KEY_DIR = tmp_path / "static" / "keys"
    assert [e.id for e in check_housekeeper_key_dir_outside_static(None)] == ["memaudit.E002"]


def test_plotly_is_served_from_its_package(client):
    from django.contrib.staticfiles import finders

    assert finders.find("vendor/plotly.min.js").endswith("plotly/package_data/plotly.min.js")
