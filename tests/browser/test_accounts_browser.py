"""The org admin's accounts pages in a real browser (issue 11 "Accounts", issue 15 "Agent tokens
page", "Activity trail", "Notifications").

Dana (org admin) invites Erin by a one-time link; Erin opens it in a fresh browser and sets her
own password; Dana creates an agent token (shown once) and revokes it, adds a webhook pointing at
a local receiver, and reads the activity trail, which lists all of it. Every page is saved at
1280x800 and 390x844 under ``artifacts/screenshots/accounts-*`` and checked for horizontal overflow.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.browser import chrome
from tests.browser.test_e2e import PASSWORD, Browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chrome.available(), reason="needs Debian's chromium and chromedriver"),
]


@pytest.fixture
def admin_world(transactional_db):
    from django.contrib.auth import get_user_model

    from ledger.services import store_create
    from orgs.models import Membership, Organization, Role

    org = Organization.objects.create(name="Acme Security", slug="acme")
    dana = get_user_model().objects.create_user(username="dana", password=PASSWORD)
    Membership.objects.create(organization=org, user=dana, role=Role.ADMIN)
    store_create(organization=org, name="Support bot", slug="support-bot")
    return org


@pytest.fixture
def receiver(settings):
    hits: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            hits.append({"event": self.headers["X-MemAudit-Event"], "body": body})
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Loopback is reachable only because the egress allow-list names this receiver.
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{server.server_address[1]}"
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", hits
    server.shutdown()
    server.server_close()


def test_an_admin_invites_makes_a_token_adds_a_webhook_and_reads_the_trail(live_server, admin_world, receiver):
    from memaudit_site.celery import app

    # No worker here: the webhook delivery runs inline in the live server (a real HTTP POST).
    app.conf.task_always_eager = True
    url, hits = receiver
    b = Browser(live_server.url)
    try:
        b.login("dana")
        b.get("/members/")
        b.css("#id_username").send_keys("erin")
        b.css("#id_email").send_keys("erin@example.com")
        b.css("form[novalidate] button[type=submit]").click()
        b.wait(lambda d: b.all("#invitation-link"), what="the invitation link")
        link = b.css("#invitation-link").text
        assert "password" not in b.css("#invitation-link-box").text.lower().replace("carries no password", "")
        b.shot("accounts-members")

        erin = Browser(live_server.url)
        try:
            erin.get(link.replace("http://testserver", live_server.url).split(live_server.url)[-1])
            erin.wait(lambda d: "Create my account" in erin.text(), what="the invitation page")
            erin.shot("accounts-invitation")
            erin.css("#id_password1").send_keys("Erins-own-pass-phrase-42")
            erin.css("#id_password2").send_keys("Erins-own-pass-phrase-42")
            erin.css("form[novalidate] button[type=submit]").click()
            erin.wait(lambda d: "/login/" in d.current_url, what="the login page")
            erin.css("input[name=username]").send_keys("erin")
            erin.css("input[name=password]").send_keys("Erins-own-pass-phrase-42")
            erin.css("button[type=submit]").click()
            erin.wait(lambda d: "Dashboard" in erin.css("h1").text, what="Erin's dashboard")
        finally:
            erin.driver.quit()

        b.get("/tokens/")
        b.css("#id_name").send_keys("support agent")
        b.css("form[novalidate] button[type=submit]").click()
        b.wait(lambda d: b.all("#new-token"), what="the new token")
        assert b.css("#new-token").text.startswith("mat_")
        b.shot("accounts-tokens")
        b.css("#token-table form button").click()
        b.driver.switch_to.alert.accept()
        b.wait(lambda d: "revoked" in b.css("#token-table").text, what="the revoked token")

        b.get("/settings/notifications/")
        b.css("#id_url").send_keys(url)
        b.css("input[name=form][value=webhook] ~ div button, form:has(input[value=webhook]) button").click()
        b.wait(lambda d: b.all("#webhook-secret"), what="the webhook secret")
        b.shot("accounts-notifications")

        from orgs.notifications import notification_emit

        notification_emit(organization_id=admin_world.pk, event="audit.finished", payload={"audit_run": 1})
        b.wait(lambda d: hits, timeout=20, what="the webhook delivery at the local receiver")
        assert hits[0]["event"] == "audit.finished"

        b.get("/activity/")
        text = b.css("#activity-table").text
        for verb in ("member.invited", "member.joined", "user.login", "token.created", "token.revoked",
                     "webhook.created"):
            assert verb in text, verb
        b.shot("accounts-activity")
        assert re.search(r"\d+ events", b.text())
        assert not b.overflow, b.overflow
    finally:
        b.driver.quit()
