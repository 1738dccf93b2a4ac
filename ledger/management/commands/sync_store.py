"""``manage.py sync_store STORE --mem0-history FILE | --langgraph-sqlite FILE``: pull new and
changed records from a team's own mem0 or LangGraph store into a MemAudit store as signed
entries. Idempotent (source id + content hash), so it can run on a schedule: cron, or the
Celery beat entry ``MEMAUDIT_SYNC`` describes in docs/formats.md.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from interchange.issues import ValidationError
from ledger.imports import store_sync
from ledger.management.commands.import_memories import _store
from ledger.signing import housekeeper_role


class Command(BaseCommand):
    help = "Sync new/changed records from a mem0 history DB or a LangGraph SqliteStore file into a store."

    def add_arguments(self, parser):
        parser.add_argument("store", help="<org slug>/<store slug> or store id")
        src = parser.add_mutually_exclusive_group(required=True)
        src.add_argument("--mem0-history", metavar="FILE", help="mem0's SQLite history database")
        src.add_argument("--langgraph-sqlite", metavar="FILE", help="a langgraph-checkpoint-sqlite store database")
        parser.add_argument("--inline", action="store_true",
                            help="sign, embed and classify in this process instead of on the workers")

    def handle(self, *args, store: str, mem0_history: str | None, langgraph_sqlite: str | None, inline: bool,
               **options):

        target = _store(store)
        source, path = ("mem0-history", mem0_history) if mem0_history else ("langgraph-sqlite", langgraph_sqlite)
        try:
            if inline:
                with housekeeper_role():
                    job = store_sync(store=target, source=source, path=path, inline=True)
            else:
                job = store_sync(store=target, source=source, path=path)
        except ValidationError as exc:
            for i in exc.issues:
                self.stderr.write(str(i))
            raise CommandError(f"{exc.total} issue(s); nothing was synced") from None
        except OSError as exc:
            raise CommandError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        if job is None:
            self.stdout.write(f"{target.organization.slug}/{target.slug}: up to date with {path}")
            return
        if job.status == "failed":
            raise CommandError(f"sync #{job.pk} failed: {job.errors[:3]}")
        self.stdout.write(f"sync #{job.pk}: {job.total} new memor{'y' if job.total == 1 else 'ies'}, "
                          f"{len(job.history)} history event(s) from {source} into "
                          f"{target.organization.slug}/{target.slug}, status {job.status}")
