"""``manage.py import_memories STORE FILE``: the same import as the browser and the API.

STORE is ``<organization slug>/<store slug>`` or a store id. Without ``--inline`` the memories
are stored and the workers sign, embed and classify them (the job's progress is printed by
``--wait``); with ``--inline`` this command does that work itself, as the housekeeper (an
operator command may read the key directory, DESIGN section 3).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ledger.imports import memories_import
from ledger.models import ImportJob, Store
from ledger.signing import housekeeper_role


def _store(spec: str) -> Store:
    qs = Store.objects.select_related("organization")
    if spec.isdigit():
        store = qs.filter(pk=int(spec)).first()
    elif "/" in spec:
        org, slug = spec.split("/", 1)
        store = qs.filter(organization__slug=org, slug=slug).first()
    else:
        raise CommandError(f"STORE must be <org slug>/<store slug> or a store id, not {spec!r}")
    if store is None:
        raise CommandError(f"no store {spec!r}")
    return store


class Command(BaseCommand):
    help = "Import memories (JSONL, JSON array or CSV) into a store; a bad file imports nothing."

    def add_arguments(self, parser):
        parser.add_argument("store", help="<org slug>/<store slug> or store id")
        parser.add_argument("file", help="memories file (.jsonl, .json or .csv)")
        parser.add_argument("--inline", action="store_true",
                            help="sign, embed and classify in this process instead of on the workers")
        parser.add_argument("--wait", action="store_true", help="poll the job until the workers finish")

    def handle(self, *args, store: str, file: str, inline: bool, wait: bool, **options):

        target = _store(store)
        path = Path(file)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"{file}: {exc}") from None
        started = time.perf_counter()
        if inline:
            with housekeeper_role():
                job = memories_import(store=target, data=data, filename=path.name, inline=True,
                                      progress=self._progress)
        else:
            job = memories_import(store=target, data=data, filename=path.name)
        if job.status == ImportJob.Status.FAILED:
            for e in job.errors:
                where = e["file"] + (f":{e['line']}" if e["line"] is not None else "")
                where += f" [{e['field']}]" if e["field"] else ""
                self.stderr.write(f"{where}: {e['message']}")
            raise CommandError(f"{len(job.errors)} issue(s); nothing was imported")
        while wait and job.status == ImportJob.Status.RUNNING:
            self._progress(job.done, job.total)
            time.sleep(1)
            job.refresh_from_db()
        if self.stdout.isatty():
            sys.stdout.write("\n")
        self.stdout.write(f"import #{job.pk}: {job.total} memories into {target.organization.slug}/{target.slug}, "
                          f"status {job.status} ({time.perf_counter() - started:.1f}s)")

    def _progress(self, done: int, total: int) -> None:
        self.stdout.write(f"\r{done}/{total} signed and embedded", ending="")
        self.stdout.flush()
