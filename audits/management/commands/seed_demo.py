"""Create the demo organization with one user per role, its housekeeper key epoch and a demo
store: a poisoned support-agent memory (a simulation of MINJA, ``audits.demo``, built from
the EHRAgent records in ../shared/data) with the incidents found in the agent's logs.

Idempotent: users that exist keep their passwords; new ones get random passwords, printed once
and kept (0600) in var/demo-credentials.txt so a newcomer can find them again. Run by an
operator (``make run``), so it may hold the housekeeper role to create the first key epoch."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from audits.demo import DEFAULT_DATA, ScenarioError, build_demo, write_scenario
from audits.engine.scenario import load_scenario
from audits.scenario_import import scenario_import
from ledger.models import KeyEpoch, Store
from ledger.services import housekeeper_init
from ledger.signing import housekeeper_role
from orgs.models import Membership, Organization, Role

DEMO_STORE_SLUG = "clinical-assistant"
DEMO_USERS = [("analyst", Role.ANALYST), ("reviewer", Role.REVIEWER), ("admin", Role.ADMIN)]


class Command(BaseCommand):
    help = "Create the demo organization and its analyst, reviewer and org admin (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--org", default="demo", help="organization slug (default: demo)")
        parser.add_argument("--no-store", action="store_true", help="skip the demo store and incidents")
        parser.add_argument("--size", type=int, default=400, help="memories in the demo store (default: 400)")

    def handle(self, *args, org: str, no_store: bool, size: int, **options):
        organization = self._people(org)
        if not no_store:
            self._demo_store(organization, size)

    @transaction.atomic
    def _people(self, org: str) -> Organization:
        User = get_user_model()
        organization, _ = Organization.objects.get_or_create(slug=org, defaults={"name": "Demo Security Team"})
        created = []
        for username, role in DEMO_USERS:
            user = User.objects.filter(username=username).first()
            if user is None:
                password = secrets.token_urlsafe(9)
                user = User.objects.create_user(username=username, email=f"{username}@example.com", password=password)
                created.append((username, role, password))
            Membership.objects.get_or_create(organization=organization, user=user, defaults={"role": role})
        if not KeyEpoch.objects.filter(organization=organization).exists():
            with housekeeper_role():
                housekeeper_init(organization=organization)
            self.stdout.write(f"Housekeeper key epoch 1 created for '{organization.slug}' in {settings.HOUSEKEEPER_KEY_DIR}.")
        path = settings.VAR_DIR / "demo-credentials.txt"
        if created:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                for username, role, password in created:
                    fh.write(f"{username} {password} {role}\n")
            self.stdout.write(self.style.SUCCESS(f"Demo organization '{organization.name}' — log in with:"))
            for username, role, password in created:
                self.stdout.write(f"  {Role(role).label:<10} username: {username:<9} password: {password}")
            self.stdout.write(f"(also saved in {path})")
        else:
            self.stdout.write(f"Demo users already exist; their passwords are in {path}.")
        return organization

    def _demo_store(self, organization: Organization, size: int) -> None:
        if Store.objects.filter(organization=organization, slug=DEMO_STORE_SLUG).exists():
            self.stdout.write("The demo store is already loaded.")
            return
        if not (DEFAULT_DATA / "ehragent").is_dir():
            self.stdout.write(f"{DEFAULT_DATA} has no EHRAgent records; no demo store loaded "
                              "(import your own memories from the Stores page).")
            return
        folder = settings.VAR_DIR / "demo-scenario"
        try:
            write_scenario(build_demo(size=size), folder)
        except ScenarioError as exc:
            self.stdout.write(f"The demo scenario could not be built ({exc}); no demo store loaded.")
            return
        self.stdout.write(f"Loading the demo store ({size} memories, a simulation of MINJA) — embedding and signing...")
        loaded = scenario_import(organization=organization, path=folder, scenario=load_scenario(folder),
                                 store_name="Clinical assistant (MINJA simulation)", store_slug=DEMO_STORE_SLUG)
        self.stdout.write(self.style.SUCCESS(
            f"Demo store loaded: {loaded.store.memories.count()} signed memories, "
            f"{len(loaded.incidents)} incidents from the agent's logs. Log in as the analyst and start an audit."))
