"""``ledger_verify --org SLUG``: one line per finding; exit status 1 when there are findings."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from ledger.verification import organization_verify
from orgs.models import Organization


class Command(BaseCommand):
    help = "Verify an organization's ledger in the database (same checks as the portable verifier, and more)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")

    def handle(self, *args, org: str, **options):
        try:
            organization = Organization.objects.get(slug=org)
        except Organization.DoesNotExist:
            raise CommandError(f"no organization {org!r}") from None
        findings = organization_verify(organization)
        for f in findings:
            self.stdout.write(str(f))
        if findings:
            self.stdout.write(f"FAILED with {len(findings)} finding(s)")
            sys.exit(1)
        self.stdout.write(f"OK: ledger of {org} verifies")
