"""Notification tasks: ids in, one service call (retries with backoff for webhooks)."""

from __future__ import annotations

from celery import shared_task

from orgs.notifications import MAX_ATTEMPTS, DeliveryFailed, notification_email_send, webhook_deliver


@shared_task(bind=True, max_retries=MAX_ATTEMPTS - 1, acks_late=True)
def webhook_deliver_task(self, delivery_id: int) -> None:
    try:
        webhook_deliver(delivery_id=delivery_id, final=self.request.retries >= self.max_retries)
    except DeliveryFailed as exc:
        # 10 s, 40 s, 160 s, 640 s between attempts.
        raise self.retry(exc=exc, countdown=10 * 4 ** self.request.retries) from None


@shared_task
def notification_email_task(organization_id: int, event: str, payload: dict) -> None:
    notification_email_send(organization_id=organization_id, event=event, payload=payload)

