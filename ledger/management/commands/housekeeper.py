"""``housekeeper init|rotate|revoke|status|tree-head --org SLUG``: the operator's key commands.

Run by an operator on the housekeeper host (it holds the housekeeper role for its duration).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from ledger.core.errors import LedgerError
from ledger.core.keys import key_id
from ledger.models import LogLeaf, Memory, TreeHead
from ledger.services import keys, tree_heads
from ledger.signing import epochs_for, housekeeper_role, key_directory
from orgs.models import Organization


class Command(BaseCommand):
    help = "Manage an organization's housekeeper key epochs (private keys stay in HOUSEKEEPER_KEY_DIR)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["init", "rotate", "revoke", "status", "tree-head"])
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--epoch", type=int, help="epoch number (revoke)")

    def handle(self, *args, action: str, org: str, epoch: int | None, **options):
        try:
            organization = Organization.objects.get(slug=org)
        except Organization.DoesNotExist:
            raise CommandError(f"no organization {org!r}") from None
        try:
            with housekeeper_role():
                if action == "init":
                    ep = keys.housekeeper_init(organization=organization)
                    self.stdout.write(f"epoch {ep.number} created for {org}; trust anchor (pin it): {ep.public_key.hex()}")
                elif action == "rotate":
                    ep = keys.housekeeper_rotate(organization=organization)
                    self.stdout.write(f"epoch {ep.number} created for {org}, endorsed by epoch {ep.number - 1}")
                elif action == "revoke":
                    if epoch is None:
                        raise CommandError("revoke needs --epoch N")
                    ep = keys.housekeeper_revoke(organization=organization, epoch=epoch)
                    self.stdout.write(f"epoch {ep.number} of {org} revoked at {ep.revoked_at}")
                elif action == "tree-head":
                    sth = tree_heads.tree_head_issue(organization=organization)
                    self.stdout.write(f"tree head size={sth.size} root={bytes(sth.root).hex()} time={sth.time}")
                else:
                    self._status(organization)
        except (ValidationError, LedgerError, FileExistsError, OSError) as exc:
            raise CommandError(str(exc.messages[0] if isinstance(exc, ValidationError) else exc)) from None

    def _status(self, organization: Organization) -> None:
        epochs = epochs_for(organization)
        if not epochs:
            self.stdout.write(f"{organization.slug}: no key epochs (run: housekeeper init --org {organization.slug})")
            return
        on_disk = {e.number for e in key_directory().epochs(organization.slug)}
        for e in epochs:
            state = f"revoked {e.revoked_at}" if e.revoked_at else "active"
            self.stdout.write(f"epoch {e.number} key {key_id(e.public_key)} [{e.not_before}, {e.not_after}) {state}"
                              f"{'' if e.number in on_disk else ' (private key not in this key directory)'}")
        sth = TreeHead.objects.filter(organization=organization).order_by("-size").first()
        unsigned = Memory.objects.filter(organization=organization, chain_head__isnull=True).count()
        self.stdout.write(f"log: {LogLeaf.objects.filter(organization=organization).count()} leaves; latest tree head "
                          f"{'none' if sth is None else f'size={sth.size} at {sth.time}'}; "
                          f"{unsigned} memories awaiting genesis")
