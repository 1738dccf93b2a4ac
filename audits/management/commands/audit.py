"""``manage.py audit STORE --incidents FILE [--audit-settings JSON]``: import incidents, audit now.

(``--settings`` is Django's own option, read by manage.py before any command sees it, so the
audit settings take ``--audit-settings``.)

The audit runs in this process through the same services the workers run (plan, replays,
analysis); the ranked suspects are printed. STORE is a store id, ``org-slug/store-slug``, or a
store slug that is unique across organizations.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.management.base import BaseCommand, CommandError

from audits.models import AuditRun
from audits.services.analysis import audit_run_now
from audits.services.incidents import incidents_import
from audits.services.runs import audit_run_create
from interchange.issues import ValidationError
from ledger.models import Store


def store_lookup(ref: str) -> Store:
    qs = Store.objects.select_related("organization")
    if ref.isdigit():
        found = qs.filter(pk=int(ref))
    elif "/" in ref:
        org, slug = ref.split("/", 1)
        found = qs.filter(organization__slug=org, slug=slug)
    else:
        found = qs.filter(slug=ref)
    stores = list(found[:2])
    if not stores:
        raise CommandError(f"no store {ref!r} (give an id, org-slug/store-slug or a unique slug)")
    if len(stores) > 1:
        raise CommandError(f"store slug {ref!r} is used by several organizations; write org-slug/{ref}")
    return stores[0]


class Command(BaseCommand):
    help = "Import incidents into a store and audit it now, in this process; print the ranked suspects."

    def add_arguments(self, parser) -> None:
        parser.add_argument("store")
        parser.add_argument("--incidents", required=True, type=Path, help="incidents.jsonl or a JSON array")
        parser.add_argument("--audit-settings", dest="audit_settings", default="{}", help='audit settings as JSON, e.g. \'{"alpha": 0.6}\'')
        parser.add_argument("--top", type=int, default=20, help="suspects to print")
        parser.add_argument("--json", type=Path, help="also write the results here")

    def handle(self, *args, **opts) -> None:
        store = store_lookup(opts["store"])
        try:
            settings = json.loads(opts["audit_settings"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--audit-settings is not JSON: {exc}") from None
        path: Path = opts["incidents"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            incidents = incidents_import(store=store, data=path.read_bytes(), filename=path.name)
            run = audit_run_create(store=store, incident_ids=[i.pk for i in incidents],
                                   settings=settings, enqueue=False)
        except ValidationError as exc:
            raise CommandError("\n".join(str(i) for i in exc.issues)) from None
        except DjangoValidationError as exc:
            raise CommandError("; ".join(f"{k}: {', '.join(v)}" for k, v in exc.message_dict.items())) from None
        self.stdout.write(f"audit #{run.pk}: {store} ({store.organization.slug}), {len(incidents)} incidents")
        run = audit_run_now(audit_run_id=run.pk)
        if run.status != AuditRun.Status.DONE:
            raise CommandError(f"audit #{run.pk} {run.status}: {run.error}")
        res = run.results
        self.stdout.write(f"{run.replays_total} replays, {res['agent_calls']} agent calls, "
                          f"{res['timings'].get('run_wall', 0):.1f} s; batch of {len(res['batch'])}, "
                          f"residual harm {res['residual']['harmful']}/{res['residual']['total']} incidents")
        self.stdout.write(f"{'rank':>4}  {'memory':<28} {'DS':>6} {'CMIS':>6} {'CAS':>6}  batch")
        for s in run.suspects.select_related("memory").order_by("rank")[:opts["top"]]:
            self.stdout.write(f"{s.rank:>4}  {s.memory.external_id[:28]:<28} {s.ds:6.3f} {s.cmis:6.3f} "
                              f"{s.cas:6.3f}  {'yes' if s.in_batch else ''}")
        for name, b in res.get("baselines", {}).items():
            r = b.get("residual") or {}
            self.stdout.write(f"baseline {name:<17} removes {len(b['removed'])}, "
                              f"residual harm {r.get('harmful', '?')}/{r.get('total', '?')}")
        if opts["json"]:
            out = {"audit_run": run.pk, **res, "suspects": [
                {"rank": s.rank, "memory": s.memory.external_id, "ds": s.ds, "cmis": s.cmis, "cas": s.cas,
                 "in_batch": s.in_batch} for s in run.suspects.select_related("memory").order_by("rank")]}
            opts["json"].write_text(json.dumps(out, indent=1))
