"""A label batch is followed by a tree head covering it (issue 13: "after every label batch"),
on the audit → review path; the schedule's task is tolerant of an organization it cannot sign for."""

# ruff: noqa: F811
from __future__ import annotations

import pytest

from audits import services
from audits.models import AuditRun
from ledger.models import LogLeaf, TreeHead
from tests.audits.conftest import (  # noqa: F401  (fixtures: the personas' orgs, keys, a poisoned store)
    _audit_test_settings,
    acme,
    globex,
    globex_store,
    housekeeping,
    jsonl,
    org_a,
    org_b,
    poisoned,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _covered(org) -> bool:
    head = TreeHead.objects.filter(organization=org).order_by("-size").first()
    return head is not None and head.size == LogLeaf.objects.filter(organization=org).count()


def test_a_proposed_batch_and_a_bulk_decision_each_end_under_a_tree_head(poisoned, alice, bob, acme):
    ids = [i.pk for i in services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=alice)]
    run = services.audit_run_create(store=poisoned.store, incident_ids=ids, settings={}, user=alice)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    before = TreeHead.objects.filter(organization=acme).count()
    proposals = services.proposals_create_from_run(audit_run=run, user=alice)
    assert proposals and _covered(acme)
    assert TreeHead.objects.filter(organization=acme).count() == before + 1  # one for the batch, not per label
    services.proposals_approve_bulk(organization=acme, proposal_ids=[p.pk for p in proposals], user=bob,
                                    reason="batch of plants")
    assert _covered(acme)


def test_the_after_labels_task_logs_instead_of_raising_without_keys(caplog):
    from ledger.tasks import tree_head_after_labels_task
    from orgs.models import Organization

    keyless = Organization.objects.create(name="Keyless", slug="keyless")
    assert tree_head_after_labels_task(keyless.pk) == -1
    assert "tree head after labels" in caplog.text and not TreeHead.objects.filter(organization=keyless).exists()
