"""Health of the parts the product depends on: database, broker, workers."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from celery.signals import worker_ready, worker_shutdown
from django.db import close_old_connections, connection
from django.utils import timezone

from memaudit_site.celery import app
from orgs.models import WorkerHeartbeat

HEARTBEAT_SECONDS = 5
STALE_AFTER = timedelta(seconds=30)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return Check("Database", False, f"{connection.vendor}: {exc.__class__.__name__}: {exc}")
    return Check("Database", True, f"{connection.vendor} ({connection.settings_dict['NAME']})")


def check_broker() -> Check:
    url = app.conf.broker_url
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return Check("Broker", False, f"{url.split('://')[0]}: {exc.__class__.__name__}: {exc}")
    return Check("Broker", True, url.split("@")[-1] if "@" in url else url)


def check_workers() -> Check:
    cutoff = timezone.now() - STALE_AFTER
    alive = list(WorkerHeartbeat.objects.filter(last_seen__gte=cutoff).order_by("hostname"))
    if not alive:
        return Check("Workers", False, "no worker has reported in the last 30 s")
    queues = sorted({q for w in alive for q in w.queues.split(",") if q})
    return Check("Workers", True, f"{len(alive)} alive, queues: {', '.join(queues)}")


def health_checks() -> list[Check]:
    return [check_database(), check_broker(), check_workers()]


def _beat(hostname: str, queues: str, stop: threading.Event) -> None:
    started = timezone.now()
    while not stop.is_set():
        try:
            close_old_connections()
            WorkerHeartbeat.objects.update_or_create(
                hostname=hostname,
                defaults={"queues": queues, "pid": os.getpid(), "started_at": started, "last_seen": timezone.now()},
            )
        except Exception:
            time.sleep(HEARTBEAT_SECONDS)
        stop.wait(HEARTBEAT_SECONDS)


_stop = threading.Event()


@worker_ready.connect
def start_heartbeat(sender=None, **kwargs) -> None:
    queues = ",".join(sorted(q.name for q in sender.app.amqp.queues.consume_from.values()))
    threading.Thread(target=_beat, args=(sender.hostname, queues, _stop), daemon=True, name="heartbeat").start()


@worker_shutdown.connect
def stop_heartbeat(**kwargs) -> None:
    _stop.set()
