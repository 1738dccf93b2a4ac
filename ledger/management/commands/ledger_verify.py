"""``ledger_verify --org SLUG [--anchor KEY] [--checkpoint FILE]``: one line per finding; exit 1
when there are findings.

Unlike the portable verifier it does not exit 3 without an anchor: it runs on the housekeeper
host and compares the recorded epochs with the key directory's. ``--anchor`` additionally
pins epoch 1, ``--checkpoint`` a tree head seen before (the log must still extend it). The
live log is not held to tree-head coverage: it grows between the scheduled tree heads."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from ledger import export
from ledger.core.verify import Finding, parse_anchor, verify_bundle
from ledger.verification import organization_verify
from orgs.models import Organization


class Command(BaseCommand):
    help = "Verify an organization's ledger in the database (same checks as the portable verifier, and more)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--anchor", "--trust-anchor", dest="anchor",
                            help="the organization's epoch-1 public key (hex, base64, or a file), pinned out of band")
        parser.add_argument("--checkpoint", help="a pinned C2SP checkpoint file the log must still extend")

    def handle(self, *args, org: str, anchor: str | None = None, checkpoint: str | None = None, **options):
        try:
            organization = Organization.objects.get(slug=org)
        except Organization.DoesNotExist:
            raise CommandError(f"no organization {org!r}") from None
        try:
            anchor_key = parse_anchor(anchor) if anchor else None
            pinned = open(checkpoint, encoding="utf-8").read() if checkpoint else None
        except (ValueError, OSError) as exc:
            raise CommandError(str(exc)) from None
        findings = organization_verify(organization)
        if anchor_key is not None or pinned is not None:
            # The anchor and the pinned checkpoint only concern the epoch chain and the tree heads:
            # checked on the export, their findings added to the database checks'.
            extra = verify_bundle(export.bundle_build(organization), trust_anchor=anchor_key, checkpoint=pinned,
                                  require_coverage=False)
            seen = {str(f) for f in findings}
            findings += [f for f in extra if str(f) not in seen and _pin_related(f)]
        for f in findings:
            self.stdout.write(str(f))
        if findings:
            self.stdout.write(f"FAILED with {len(findings)} finding(s)")
            sys.exit(1)
        self.stdout.write(f"OK: ledger of {org} verifies" + (" and extends the pinned checkpoint" if pinned else ""))


def _pin_related(f: Finding) -> bool:
    return f.subject.startswith(("epoch", "pinned checkpoint"))
