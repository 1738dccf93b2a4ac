"""Incidents: validate an upload against its store, import it all or nothing, one from a form."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings as conf
from django.db import IntegrityError, transaction

from audits.engine.scenario import HarmSpec, IncidentCase, parse_incidents_collecting
from audits.models import Incident
from interchange.issues import Issue, ValidationError
from interchange.readers import chunks, line_of_id
from ledger.models import Memory, Store
from orgs.permissions import require


def incidents_validate(*, store: Store, data: bytes, filename: str) -> list[IncidentCase]:
    """Parse an upload and check it against the store; raise ``interchange.issues.ValidationError``
    naming file, line and field for every problem (unknown memory ids, ids already used), the
    store's checks of the incidents that parsed reported in the same pass as the parse problems."""
    limit = getattr(conf, "MAX_UPLOAD_BYTES", 50 * 1024 * 1024)
    if len(data) > limit:
        raise ValidationError([Issue(filename, None, None,
                                     f"file is {len(data):,} bytes, over the {limit:,}-byte upload limit")])
    incidents, issues = parse_incidents_collecting(data, filename)
    wanted = list({m for inc in incidents for m in inc.retrieved})
    known: set[str] = set()
    for chunk in chunks(wanted, 500):
        known.update(Memory.objects.filter(store=store, external_id__in=chunk).values_list("external_id", flat=True))
    existing = set(Incident.objects.filter(store=store, external_id__in=[inc.id for inc in incidents])
                   .values_list("external_id", flat=True))
    for inc in incidents:
        unknown = [m for m in inc.retrieved if m not in known]
        if unknown:
            more = f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""
            issues.add(filename, line_of_id(data, inc.id), "retrieved",
                       f"unknown memory id(s) in store {store.name!r}: {', '.join(map(repr, unknown[:5]))}{more}")
        if inc.id in existing:
            issues.add(filename, line_of_id(data, inc.id), "id", f"incident {inc.id!r} already exists in this store")
    issues.raise_if_any()
    return incidents


def incidents_import(*, store: Store, data: bytes, filename: str, user=None) -> list[Incident]:
    """Import incidents (JSONL or a JSON array, DESIGN section 5) all or nothing."""
    require(user=user, organization=store.organization, capability="propose")
    parsed = incidents_validate(store=store, data=data, filename=filename)
    rows = [Incident(organization=store.organization, store=store, external_id=inc.id, query=inc.query,
                     output=inc.output, retrieved=list(inc.retrieved),
                     harm=inc.harm.to_dict() if inc.harm is not None else None,
                     harm_value=inc.harm_value if inc.harm is None else None,
                     candidates=list(inc.candidates) if inc.candidates else None,
                     created_by=user)
            for inc in parsed]
    try:
        with transaction.atomic():
            Incident.objects.bulk_create(rows, batch_size=500)
    except IntegrityError as exc:  # a concurrent upload took an id between validation and insert
        raise ValidationError([Issue(filename, None, "id", f"an incident id is already used: {exc}")]) from exc
    return list(Incident.objects.filter(store=store, external_id__in=[r.external_id for r in rows])
                .order_by("external_id"))


def incident_create(*, store: Store, query: str, output: str, retrieved: Sequence[str],
                    harm: dict[str, Any] | None = None, external_id: str | None = None, user=None) -> Incident:
    """One incident from a form; the same checks as an upload (field names in the errors)."""
    obj: dict[str, Any] = {"id": external_id or f"inc-{uuid.uuid4().hex[:10]}", "query": query,
                           "output": output, "retrieved": list(retrieved)}
    if harm is not None:
        obj["harm"] = harm
    data = (json.dumps(obj) + "\n").encode("utf-8")
    return incidents_import(store=store, data=data, filename="form", user=user)[0]


def engine_incident(inc: Incident) -> IncidentCase:
    """The engine's view of an incident row."""
    return IncidentCase(inc.external_id, inc.query, inc.output, list(inc.retrieved),
                        HarmSpec.from_dict(inc.harm) if inc.harm else None,
                        inc.harm_value if not inc.harm else None,
                        list(inc.candidates) if inc.candidates else None)
