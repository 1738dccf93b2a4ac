"""``ledger_export --org SLUG --out BUNDLE``: write the organization's evidence bundle."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ledger.export import bundle_write
from orgs.models import Organization


class Command(BaseCommand):
    help = "Export an evidence bundle (docs/bundle.md); check it with: python -m ledger.core.verify BUNDLE"

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--out", required=True, help="bundle file (or directory with --dir)")
        parser.add_argument("--dir", action="store_true", help="write manifest.json + memories.jsonl into OUT")

    def handle(self, *args, org: str, out: str, dir: bool, **options):
        try:
            organization = Organization.objects.get(slug=org)
        except Organization.DoesNotExist:
            raise CommandError(f"no organization {org!r}") from None
        bundle = bundle_write(organization, out, directory=dir)
        entries = sum(1 + len(m["provenance"]) + len(m["transitions"]) + len(m["labels"]) for m in bundle["memories"])
        self.stdout.write(f"wrote {out}: {len(bundle['memories'])} memories, {entries} entries, "
                          f"{len(bundle['log']['tree_heads'])} tree heads, {len(bundle['receipts'])} receipts")
