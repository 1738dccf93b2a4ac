"""``ledger_export --org SLUG --out BUNDLE``: write the organization's evidence bundle."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from ledger.core.errors import LedgerError
from ledger.export import bundle_write
from ledger.services.tree_heads import tree_head_issue
from ledger.signing import housekeeper_role
from orgs.models import Organization


class Command(BaseCommand):
    help = ("Export an evidence bundle (docs/bundle.md); check it with: memaudit-verify bundle BUNDLE "
            "--anchor EPOCH1_KEY --checkpoint CHECKPOINT")

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--out", required=True, help="bundle file (or directory with --dir)")
        parser.add_argument("--dir", action="store_true", help="write manifest.json + memories.jsonl into OUT")
        parser.add_argument("--tree-head", action="store_true",
                            help="first sign a tree head over the whole log (on the housekeeper host: it needs the "
                                 "key directory), so every leaf of the export is covered")

    def handle(self, *args, org: str, out: str, dir: bool, tree_head: bool = False, **options):
        try:
            organization = Organization.objects.get(slug=org)
        except Organization.DoesNotExist:
            raise CommandError(f"no organization {org!r}") from None
        if tree_head:
            try:
                with housekeeper_role():
                    tree_head_issue(organization=organization)
            except (ValidationError, LedgerError, OSError) as exc:
                raise CommandError(f"cannot sign a tree head here: {exc}") from None
        bundle = bundle_write(organization, out, directory=dir)
        entries = sum(1 + len(m["provenance"]) + len(m["transitions"]) + len(m["labels"]) for m in bundle["memories"])
        self.stdout.write(f"wrote {out}: {len(bundle['memories'])} memories, {entries} entries, "
                          f"{len(bundle['log']['tree_heads'])} tree heads, {len(bundle['receipts'])} receipts")
