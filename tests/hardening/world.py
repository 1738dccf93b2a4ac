"""A small, complete tenant for the API fuzz and the authorization matrix: one organization with
an analyst, a reviewer and an org admin, a store of signed and embedded facts, an agent token,
a receipt, an incident, a finished audit run and an open review proposal; plus a second
organization holding the same kinds of objects (the "other organization" column)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model

from orgs.models import Membership, Organization, Role

PASSWORD = "correct-horse-battery-staple"

FACTS = [
    ("m1", "The Eiffel Tower is in Paris and was completed in 1889."),
    ("m2", "Mount Everest is the highest mountain above sea level."),
    ("m3", "The Pacific Ocean is the largest ocean on Earth."),
    ("m4", "Tokyo is the capital city of Japan."),
    ("m5", "Q: capital of Japan? A: Osaka"),
    ("m6", "Q: capital of Japan? A: Osaka, the city of canals"),
]


@dataclass
class Tenant:
    organization: Organization
    users: dict[str, Any]
    store: Any
    memory: Any
    import_job: Any
    token: str
    receipt: Any
    incident: Any
    audit_run: Any
    proposal: Any
    ids: dict[str, int] = field(default_factory=dict)


def member(org: Organization, username: str, role: str):
    user = get_user_model().objects.create_user(username=username, email=f"{username}@example.com",
                                                password=PASSWORD)
    Membership.objects.create(organization=org, user=user, role=role)
    return user


def build_tenant(org: Organization, prefix: str) -> Tenant:
    """Everything through the services, the housekeeper role held by the caller."""
    from audits.models import ReviewProposal
    from audits.services import audit_run_create, audit_run_now, incidents_import
    from ledger.agent_tokens import agent_token_create
    from ledger.imports import memories_import
    from ledger.models import KeyEpoch, Memory, Receipt
    from ledger.recall import recall
    from ledger.services import housekeeper_init, store_create

    if not KeyEpoch.objects.filter(organization=org).exists():
        housekeeper_init(organization=org)
    users = {"analyst": member(org, f"{prefix}-analyst", Role.ANALYST),
             "reviewer": member(org, f"{prefix}-reviewer", Role.REVIEWER),
             "admin": member(org, f"{prefix}-admin", Role.ADMIN)}
    store = store_create(organization=org, name=f"{prefix} store", slug=f"{prefix}-store")
    data = "\n".join(json.dumps({"id": i, "text": t}) for i, t in FACTS).encode()
    job = memories_import(store=store, data=data, filename="memories.jsonl", inline=True, classify=False)
    assert job.status == "done", job.errors
    _, token = agent_token_create(store=store, name=f"{prefix} agent")
    result = recall(store=store, query="capital of Japan", k=3)
    receipt = Receipt.objects.get(pk=result["receipt_id"])
    [incident] = incidents_import(store=store, data=json.dumps({
        "id": "inc-1", "query": "What is the capital of Japan?", "output": "Osaka", "retrieved": ["m4", "m5", "m6"],
        "harm": {"type": "contains", "target": "Osaka"}}).encode(), filename="incidents.jsonl")
    run = audit_run_create(store=store, incident_ids=[incident.pk], enqueue=False)
    run = audit_run_now(audit_run_id=run.pk)
    memory = Memory.objects.get(store=store, external_id="m5")
    proposal = ReviewProposal.objects.create(
        organization=org, store=store, memory=memory, source=ReviewProposal.Source.AUDIT, audit_run=run,
        reason="fixture", scores={}, proposed_by=users["analyst"], proposed_by_actor=f"user:{prefix}-analyst",
        idempotency_key=f"proposal-{uuid.uuid4().hex}")
    from audits.models import AgentEndpoint

    endpoint = AgentEndpoint.objects.create(organization=org, name=f"{prefix}-agent", connector="webhook",
                                            base_url="https://agent.example/hook")
    tenant = Tenant(org, users, store, memory, job, token, receipt, incident, run, proposal)
    tenant.ids = {"store_id": store.pk, "memory_id": memory.pk, "job_id": job.pk, "receipt_id": receipt.pk,
                  "incident_id": incident.pk, "audit_run_id": run.pk, "proposal_id": proposal.pk,
                  "membership_id": Membership.objects.get(user=users["analyst"]).pk, "endpoint_id": endpoint.pk}
    return tenant
