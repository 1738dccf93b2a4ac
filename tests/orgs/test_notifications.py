"""Notifications (issue 15): per-organization webhooks with HMAC-SHA256 signed payloads, retried
by Celery, delivered to a real local receiver (an HTTP server on 127.0.0.1, the network edge);
console email for the same events; the settings page for org admins only."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from orgs.models import ActivityEvent, WebhookDelivery, WebhookEndpoint
from orgs.notifications import notification_emit, notification_settings_update, webhook_create

pytestmark = pytest.mark.django_db


class Receiver:
    """A local webhook receiver: records each POST; answers the codes queued in ``answers``."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.answers: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append({"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                code = outer.answers.pop(0) if outer.answers else 204
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def celery_retries():
    """Eager tasks with retries: Celery's apply() re-runs a retried task only when errors do not
    propagate (the shared fixture propagates them)."""
    from memaudit_site.celery import app

    previous = app.conf.task_eager_propagates
    app.conf.task_eager_propagates = False
    yield
    app.conf.task_eager_propagates = previous


@pytest.fixture
def receiver(settings):
    r = Receiver()
    # The receiver is on loopback: deliveries reach it only because the egress allow-list names it.
    settings.AGENT_EGRESS_ALLOW = f"127.0.0.1:{r.server.server_address[1]}"
    yield r
    r.close()


def _verify(secret: str, headers: dict, body: bytes) -> bool:
    t, v1 = dict(p.split("=", 1) for p in headers["x-memaudit-signature"].split(",")).values()
    want = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, v1)


def test_an_event_is_delivered_signed_to_the_local_receiver(receiver, org_a, dana, django_capture_on_commit_callbacks):
    _, secret = webhook_create(organization=org_a, url=receiver.url, events=["audit.finished"], created_by=dana)
    with django_capture_on_commit_callbacks(execute=True):
        notification_emit(organization_id=org_a.pk, event="audit.finished", payload={"audit_run": 7})
        notification_emit(organization_id=org_a.pk, event="label.signed", payload={"memory": 1})  # not subscribed
    [req] = receiver.requests
    assert req["headers"]["x-memaudit-event"] == "audit.finished"
    assert _verify(secret, req["headers"], req["body"])
    assert not _verify("whsec_wrong", req["headers"], req["body"])
    assert json.loads(req["body"])["audit_run"] == 7
    d = WebhookDelivery.objects.get()
    assert d.status == "delivered" and d.attempts == 1 and d.response_code == 204
    assert ActivityEvent.objects.filter(verb="webhook.created").exists()


def test_a_failing_receiver_is_retried_then_delivered(receiver, org_a, celery_retries,
                                                      django_capture_on_commit_callbacks):
    webhook_create(organization=org_a, url=receiver.url, events=["proposal.waiting"])
    receiver.answers = [500, 503]
    with django_capture_on_commit_callbacks(execute=True):
        notification_emit(organization_id=org_a.pk, event="proposal.waiting", payload={"proposal": 1})
    d = WebhookDelivery.objects.get()
    assert len(receiver.requests) == 3 and d.status == "delivered" and d.attempts == 3


def test_a_receiver_that_never_answers_2xx_ends_failed_without_echoing_its_body(receiver, org_a, celery_retries,
                                                                               django_capture_on_commit_callbacks):
    webhook_create(organization=org_a, url=receiver.url, events=["label.signed"])
    receiver.answers = [500] * 10
    with django_capture_on_commit_callbacks(execute=True):
        notification_emit(organization_id=org_a.pk, event="label.signed", payload={"memory": 1})
    d = WebhookDelivery.objects.get()
    assert d.status == "failed" and d.attempts == 5 and d.error == "answered HTTP 500"


def test_a_webhook_to_an_internal_address_is_refused_by_the_egress_policy(receiver, org_a, settings,
                                                                         django_capture_on_commit_callbacks):
    settings.AGENT_EGRESS_ALLOW = ""  # loopback, private and metadata addresses refused (SSRF)
    webhook_create(organization=org_a, url=receiver.url, events=["audit.finished"])
    with django_capture_on_commit_callbacks(execute=True):
        notification_emit(organization_id=org_a.pk, event="audit.finished", payload={"audit_run": 7})
    d = WebhookDelivery.objects.get()
    assert receiver.requests == [] and d.status == "failed" and d.attempts == 1
    assert d.error.startswith("not delivered: blocked, request id ")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1:6379/",
                                 "http://user:pw@example.com/", "not a url"])
def test_webhook_urls_are_http_or_https_only(org_a, url):
    with pytest.raises(ValidationError):
        webhook_create(organization=org_a, url=url, events=["audit.finished"])


def test_email_goes_to_the_configured_addresses_for_chosen_events(org_a, django_capture_on_commit_callbacks):
    notification_settings_update(organization=org_a, email_recipients="ops@example.com, sec@example.com",
                                 email_events=["audit.finished"])
    with django_capture_on_commit_callbacks(execute=True):
        notification_emit(organization_id=org_a.pk, event="audit.finished", payload={"audit_run": 3})
        notification_emit(organization_id=org_a.pk, event="proposal.waiting", payload={"proposal": 1})
    [message] = mail.outbox
    assert message.to == ["ops@example.com", "sec@example.com"] and "An audit finished" in message.subject


def test_a_new_review_proposal_notifies(receiver, org_a, django_capture_on_commit_callbacks):
    from audits.models import ReviewProposal
    from ledger.models import Memory
    from ledger.services import memories_create, store_create

    webhook_create(organization=org_a, url=receiver.url, events=["proposal.waiting"])
    store = store_create(organization=org_a, name="S", slug="s")
    [memory] = memories_create(store=store, records=[{"id": "m1", "text": "t"}])
    with django_capture_on_commit_callbacks(execute=True):
        ReviewProposal.objects.create(organization=org_a, store=store, memory=Memory.objects.get(pk=memory.pk),
                                      source=ReviewProposal.Source.AUDIT, reason="x", scores={},
                                      proposed_by_actor="user:alice", idempotency_key="k1")
    [req] = receiver.requests
    assert json.loads(req["body"])["event"] == "proposal.waiting"


def test_the_settings_page_adds_a_webhook_and_shows_its_secret_once(client, dana, alice, receiver):
    client.force_login(dana)
    r = client.post("/settings/notifications/", {"form": "webhook", "url": receiver.url,
                                                 "events": ["audit.finished", "label.signed"]})
    assert r.status_code == 302
    page = client.get("/settings/notifications/").content.decode()
    secret = re.search(r'id="webhook-secret">(whsec_[^<]+)<', page).group(1)
    assert WebhookEndpoint.objects.count() == 1
    assert secret not in client.get("/settings/notifications/").content.decode()
    r = client.post("/settings/notifications/", {"form": "webhook", "url": "file:///etc/passwd",
                                                 "events": ["audit.finished"]})
    assert r.status_code == 200 and WebhookEndpoint.objects.count() == 1
    r = client.post("/settings/notifications/", {"form": "email", "email_recipients": "a@example.com",
                                                 "email_events": ["proposal.waiting"]})
    assert r.status_code == 302
    client.force_login(alice)
    assert client.get("/settings/notifications/").status_code == 403
    w = WebhookEndpoint.objects.get()
    assert client.post(f"/settings/notifications/webhooks/{w.pk}/delete/").status_code == 403
    client.force_login(dana)
    assert client.post(f"/settings/notifications/webhooks/{w.pk}/delete/").status_code == 302
    assert not WebhookEndpoint.objects.exists()


def test_the_signing_secret_is_stored_encrypted_and_still_signs(client, dana, org_a, receiver,
                                                               django_capture_on_commit_callbacks):
    """A reader of the database (a backup, a replica) must not get the secret that lets them
    forge our webhooks to the organization's receivers."""
    from django.db import connection

    client.force_login(dana)
    client.post("/settings/notifications/", {"form": "webhook", "url": receiver.url, "events": ["audit.finished"]})
    secret = re.search(r'id="webhook-secret">(whsec_[^<]+)<', client.get("/settings/notifications/").content.decode()).group(1)
    with connection.cursor() as cur:
        cur.execute(f"SELECT * FROM {WebhookEndpoint._meta.db_table}")
        row = cur.fetchone()
    assert not any(secret.encode() in (bytes(v) if isinstance(v, (bytes, memoryview)) else str(v).encode())
                   for v in row)
    with django_capture_on_commit_callbacks(execute=True):
        notification_emit(organization_id=org_a.pk, event="audit.finished", payload={"audit_run": 1})
    [req] = receiver.requests
    assert _verify(secret, req["headers"], req["body"])


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_the_secrets_stored_before_it(org_a):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from orgs.secret_box import secret_decrypt

    executor = MigrationExecutor(connection)
    executor.migrate([("orgs", "0005_accounts_notifications")])
    try:
        old = executor.loader.project_state([("orgs", "0005_accounts_notifications")]).apps
        old.get_model("orgs", "WebhookEndpoint").objects.create(
            organization_id=org_a.pk, url="https://hooks.example.com/x", secret="whsec_before", events=["audit.finished"])
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    endpoint = WebhookEndpoint.objects.get()
    assert b"whsec_before" not in bytes(endpoint.secret_encrypted)
    assert secret_decrypt(endpoint.secret_encrypted) == "whsec_before"
