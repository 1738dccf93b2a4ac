"""Notifications: outgoing webhooks (HMAC-SHA256 signed, retried by Celery) and email, per
organization, for three events: an audit finished, a proposal waits for review, a label was signed.

Signature: ``X-MemAudit-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``;
a receiver recomputes it over the raw body and refuses a timestamp older than a few minutes.

Egress: only http(s) URLs with a host are accepted (``webhook_url_check``), and every delivery
goes through the SSRF-safe client (``egress.client``): internal and metadata addresses are
refused unless ``AGENT_EGRESS_ALLOW`` names them, no redirect is followed, and the receiver's
answer never reaches anything a user sees (a category, status and request id only).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from egress.client import EgressError, EgressPolicy, post
from orgs import dispatch
from orgs.models import NotificationEvent, NotificationSettings, Organization, WebhookDelivery, WebhookEndpoint
from orgs.secret_box import secret_decrypt, secret_encrypt
from orgs.services import activity_record

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
TIMEOUT_SECONDS = 10


class DeliveryFailed(Exception):
    """A delivery attempt that should be retried (network error, timeout, non-2xx answer)."""


def webhook_url_check(url: str) -> str:
    url = (url or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError({"url": "A webhook URL is http:// or https:// with a host name."})
    if parts.username or parts.password:
        raise ValidationError({"url": "Put no credentials in the URL: verify the signature instead."})
    return url


def _events(events) -> list[str]:
    chosen = sorted(set(events or []))
    unknown = [e for e in chosen if e not in NotificationEvent.values]
    if unknown:
        raise ValidationError({"events": f"Unknown event(s) {', '.join(unknown)}; use {', '.join(NotificationEvent.values)}."})
    if not chosen:
        raise ValidationError({"events": "Choose at least one event."})
    return chosen


def webhook_create(*, organization: Organization, url: str, events, created_by=None,
                   request=None) -> tuple[WebhookEndpoint, str]:
    """A new endpoint and its fresh signing secret: returned here once, stored only encrypted."""
    secret = "whsec_" + secrets.token_urlsafe(32)
    endpoint = WebhookEndpoint(organization=organization, url=webhook_url_check(url), events=_events(events),
                               secret_encrypted=secret_encrypt(secret),
                               created_by=created_by if getattr(created_by, "pk", None) else None)
    endpoint.full_clean()
    endpoint.save()
    activity_record(organization=organization, verb="webhook.created", actor=created_by, request=request,
                    target=endpoint.url, detail={"events": endpoint.events})
    return endpoint, secret


def webhook_delete(*, organization: Organization, webhook_id: int, actor=None, request=None) -> None:
    endpoint = WebhookEndpoint.objects.get(organization=organization, pk=webhook_id)
    url = endpoint.url
    endpoint.delete()
    activity_record(organization=organization, verb="webhook.deleted", actor=actor, request=request, target=url)


def notification_settings_get(*, organization: Organization) -> NotificationSettings:
    return NotificationSettings.objects.get_or_create(organization=organization)[0]


def notification_settings_update(*, organization: Organization, email_recipients: str, email_events,
                                 actor=None, request=None) -> NotificationSettings:
    config = notification_settings_get(organization=organization)
    config.email_recipients = email_recipients.strip()
    config.email_events = sorted(set(email_events or []))
    for address in config.recipients():
        try:
            validate_email(address)
        except ValidationError:
            raise ValidationError({"email_recipients": f"{address!r} is not an email address."}) from None
    config.save()
    activity_record(organization=organization, verb="notifications.updated", actor=actor, request=request,
                    target="email", detail={"recipients": len(config.recipients()), "events": config.email_events})
    return config


def notification_emit(*, organization_id: int, event: str, payload: dict) -> None:
    """Queue this event for every active endpoint subscribed to it, and the email, after the
    surrounding transaction commits (a rolled-back change notifies nobody). Never raises into
    the caller: a notification problem must not fail an audit or a signature."""
    try:
        body = {"event": event, "organization": organization_id, "sent_at": timezone.now().isoformat(), **payload}
        deliveries = [WebhookDelivery.objects.create(endpoint=e, event=event, payload=body)
                      for e in WebhookEndpoint.objects.filter(organization_id=organization_id, is_active=True)
                      if event in e.events]
        config = NotificationSettings.objects.filter(organization_id=organization_id).first()
        email = config is not None and event in config.email_events and bool(config.recipients())
    except Exception:
        logger.exception("could not queue the %s notification of organization %s", event, organization_id)
        return

    def enqueue() -> None:
        try:
            for d in deliveries:
                dispatch.send("orgs.tasks.webhook_deliver_task", d.pk)
            if email:
                dispatch.send("orgs.tasks.notification_email_task", organization_id, event, body)
        except Exception:  # the broker is down: the deliveries stay pending (visible on the page)
            logger.exception("could not enqueue the %s notification of organization %s", event, organization_id)

    transaction.on_commit(enqueue)


def signature_header(*, secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST through the egress client and return the status code (a non-2xx answer included)."""
    webhook_url_check(url)
    policy = EgressPolicy.from_setting(settings.AGENT_EGRESS_ALLOW, max_bytes=64 * 1024)
    try:
        return post(url, body, headers=headers, timeout=TIMEOUT_SECONDS, policy=policy).status
    except EgressError as exc:
        if exc.status is not None:
            return exc.status
        raise


def webhook_deliver(*, delivery_id: int, final: bool = False) -> WebhookDelivery:
    """One attempt. Raises DeliveryFailed for the task to retry unless ``final``; then the
    delivery is marked failed. The error kept is our own words (status code or exception class)."""
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    if delivery.status != WebhookDelivery.Status.PENDING:
        return delivery
    endpoint = delivery.endpoint
    body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "MemAudit-Webhook/1",
               "X-MemAudit-Event": delivery.event, "X-MemAudit-Delivery": str(delivery.pk),
               "X-MemAudit-Signature": signature_header(secret=secret_decrypt(endpoint.secret_encrypted), body=body, timestamp=int(time.time()))}
    code, error = None, ""
    try:
        code = _post(endpoint.url, body, headers)
        if not 200 <= code < 300:
            error = f"answered HTTP {code}"
    except ValidationError:
        error = "URL refused (http or https only)"
        final = True
    except EgressError as exc:  # our own words: a category and a request id (the detail is in the log)
        error = f"not delivered: {exc.category}, request id {exc.request_id}"
        final = final or not exc.transient
    except Exception as exc:  # network: log the detail, keep our own words
        logger.warning("webhook delivery %s to %s failed: %r", delivery.pk, endpoint.url, exc)
        error = f"no answer ({exc.__class__.__name__})"
    attempts = delivery.attempts + 1
    if not error:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(status=WebhookDelivery.Status.DELIVERED,
                                                              attempts=attempts, response_code=code, error="",
                                                              delivered_at=timezone.now())
    else:
        status = WebhookDelivery.Status.FAILED if final or attempts >= MAX_ATTEMPTS else WebhookDelivery.Status.PENDING
        WebhookDelivery.objects.filter(pk=delivery.pk).update(status=status, attempts=attempts, response_code=code,
                                                              error=error[:200])
        if status == WebhookDelivery.Status.PENDING:
            raise DeliveryFailed(error)
    delivery.refresh_from_db()
    return delivery


def notification_email_send(*, organization_id: int, event: str, payload: dict) -> int:
    config = NotificationSettings.objects.select_related("organization").filter(organization_id=organization_id).first()
    if config is None or event not in config.email_events or not config.recipients():
        return 0
    label = NotificationEvent(event).label if event in NotificationEvent.values else event
    lines = [f"{label} in {config.organization.name}.", ""]
    lines += [f"{k}: {v}" for k, v in payload.items() if k not in ("event", "organization")]
    return send_mail(subject=f"[MemAudit] {label}", message="\n".join(lines), from_email=None,
                     recipient_list=config.recipients())


def site_url(path: str) -> str:
    return settings.SITE_ROOT.rstrip("/") + path
