"""The Celery app: queues ``audit`` (graph, fusion, orchestration), ``replay`` (agent calls)
and ``housekeeper`` (the only queue whose worker loads signing keys).

Beat (``bin/run`` starts it inside the housekeeper worker with ``-B``) runs
``ledger.tasks.tree_heads_issue_due_task`` every ``TREE_HEAD_INTERVAL_S`` seconds (settings:
``CELERY_BEAT_SCHEDULE``), so tree heads are signed without anyone pressing a button."""

import os

from celery import Celery
from kombu import Queue
from kombu.transport import TRANSPORT_ALIASES

# The embedded broker writes each message atomically (memaudit_site.broker_fs).
TRANSPORT_ALIASES["filesystem"] = "memaudit_site.broker_fs:Transport"

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memaudit_site.settings")

app = Celery("memaudit")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("audit", "replay", "housekeeper")]
app.autodiscover_tasks()
