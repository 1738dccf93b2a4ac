"""The audit pages through Django's test client: each page for the right role (200), the wrong
role (403), another organization (404); upload errors with line and field; an audit from the
form to its results; the review flow that ends in a signed ``poison_likely`` label."""

from __future__ import annotations

import pytest

from audits import services
from audits.models import AuditRun, Incident, ReviewProposal
from ledger.models import EpistemicLabel
from tests.audits.conftest import jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def proposals(run, alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        created = services.proposals_create_from_run(audit_run=run, user=alice)
    assert created
    return created


# ----------------------------------------------------------------------------- pages and roles


@pytest.mark.parametrize("url", ["/", "/incidents/", "/audits/", "/review/", "/dashboard/runs/", "/review/pending/"])
def test_every_member_sees_the_list_pages(client, alice, url):
    client.force_login(alice)
    assert client.get(url).status_code == 200


def test_anonymous_visitors_are_sent_to_the_login_page(client, db):
    r = client.get("/audits/")
    assert r.status_code == 302 and r["Location"].startswith("/login/")


def test_the_dashboard_shows_counts_runs_and_ledger_activity(client, alice, run):
    client.force_login(alice)
    r = client.get("/")
    body = r.content.decode()
    assert f"Audit #{run.pk}" in body
    assert "Ledger activity" in body and "genesis" in body


def test_the_incident_detail_links_the_retrieved_memories(client, alice, incidents):
    client.force_login(alice)
    inc = incidents[0]
    r = client.get(f"/incidents/{inc.pk}/")
    assert r.status_code == 200
    for ext in inc.retrieved:
        assert ext.encode() in r.content
    assert b"/memories/" in r.content


def test_another_organizations_incident_run_and_progress_are_not_found(client, charlie, run, incidents):
    client.force_login(charlie)
    assert client.get(f"/incidents/{incidents[0].pk}/").status_code == 404
    assert client.get(f"/audits/{run.pk}/").status_code == 404
    assert client.get(f"/audits/{run.pk}/progress/").status_code == 404
    assert client.post(f"/audits/{run.pk}/propose/").status_code == 404
    assert run.proposals.count() == 0


def test_a_reviewer_cannot_upload_incidents_or_start_audits(client, bob, poisoned):
    client.force_login(bob)
    r = client.post("/incidents/", {"store": poisoned.store.pk, "file": _upload(poisoned.incidents_jsonl())})
    assert r.status_code == 403
    assert client.get("/audits/new/").status_code == 403
    assert not Incident.objects.exists()


# ----------------------------------------------------------------------------- incidents


def _upload(data: bytes, name: str = "incidents.jsonl"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def test_an_analyst_uploads_incidents(client, alice, poisoned):
    client.force_login(alice)
    r = client.post("/incidents/", {"store": poisoned.store.pk, "file": _upload(poisoned.incidents_jsonl())},
                    follow=True)
    assert r.status_code == 200
    assert Incident.objects.filter(store=poisoned.store).count() == len(poisoned.incidents)
    assert f"{len(poisoned.incidents)} incidents imported".encode() in r.content


def test_an_incident_naming_unknown_memories_is_reported_by_line_and_field(client, alice, poisoned):
    client.force_login(alice)
    good = poisoned.incidents[0]
    data = jsonl([good, {**good, "id": "inc-x", "retrieved": ["no-such-memory"]}])
    r = client.post("/incidents/", {"store": poisoned.store.pk, "file": _upload(data)})
    assert r.status_code == 400
    body = r.content.decode()
    assert 'id="validation-report"' in body
    assert '<td class="num">2</td><td class="mono">retrieved</td>' in body and "no-such-memory" in body
    assert not Incident.objects.exists()


def test_a_broken_json_line_is_reported_and_nothing_is_written(client, alice, poisoned):
    client.force_login(alice)
    data = jsonl(poisoned.incidents[:1]) + b"{not json\n"
    r = client.post("/incidents/", {"store": poisoned.store.pk, "file": _upload(data)})
    assert r.status_code == 400
    assert b'<td class="mono">incidents.jsonl</td><td class="num">2</td>' in r.content
    assert not Incident.objects.exists()


def test_a_single_incident_form_with_an_unknown_memory_names_the_field(client, alice, poisoned):
    client.force_login(alice)
    r = client.post("/incidents/new/", {"store": poisoned.store.pk, "query": "q?", "output": "Evilton",
                                        "retrieved": "ghost-1, ghost-2"})
    assert r.status_code == 400
    assert b"ghost-1" in r.content and b"Retrieved memory ids" in r.content
    assert not Incident.objects.exists()


def test_a_single_incident_is_recorded_from_the_form(client, alice, poisoned):
    client.force_login(alice)
    some = sorted(poisoned.poisoned)[:2]
    r = client.post("/incidents/new/", {"store": poisoned.store.pk, "query": "what is the capital?",
                                        "output": "Evilton", "retrieved": "\n".join(some), "harm_target": "Evilton",
                                        "external_id": "inc-form"})
    inc = Incident.objects.get(external_id="inc-form")
    assert r.status_code == 302 and r["Location"] == f"/incidents/{inc.pk}/"
    assert inc.retrieved == some and inc.harm == {"type": "contains", "target": "Evilton"}


# ----------------------------------------------------------------------------- audits


def test_the_audit_form_lists_the_store_incidents(client, alice, poisoned, incidents):
    client.force_login(alice)
    r = client.get(f"/audits/new/?store={poisoned.store.pk}")
    assert r.status_code == 200
    for inc in incidents:
        assert inc.external_id.encode() in r.content


def test_an_audit_started_from_the_form_runs_to_its_results(client, alice, poisoned, incidents,
                                                             django_capture_on_commit_callbacks):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post("/audits/new/", {"store": poisoned.store.pk, "incidents": [i.pk for i in incidents],
                                         "connector": "builtin-vote", "top_k": 5, "alpha": 0.6})
    run = AuditRun.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/audits/{run.pk}/"
    assert run.settings["alpha"] == 0.6 and run.settings["agent"]["connector"] == "builtin-vote"
    page = client.get(f"/audits/{run.pk}/").content.decode()
    assert 'id="suspect-table"' in page and 'id="consistency-graph"' in page and 'id="baselines"' in page
    top = run.suspects.order_by("rank").first()
    assert top.memory.external_id in page
    assert "Propose batch for review" in page
    progress = client.get(f"/audits/{run.pk}/progress/").content.decode()
    assert 'data-done="true"' in progress and "100%" in progress


def test_bad_audit_settings_are_shown_by_field(client, alice, poisoned, incidents):
    client.force_login(alice)
    r = client.post("/audits/new/", {"store": poisoned.store.pk, "incidents": [incidents[0].pk],
                                     "connector": "openai-chat", "top_k": 5, "alpha": 1.5})
    assert r.status_code == 400
    assert b"required for this server&#x27;s LLM" in r.content
    assert b"less than or equal to 1" in r.content
    assert not AuditRun.objects.exists()


def test_a_running_audit_shows_a_polling_progress_bar(client, alice, poisoned, incidents):
    client.force_login(alice)
    run = services.audit_run_create(store=poisoned.store, incident_ids=[i.pk for i in incidents], user=alice)
    # No on_commit capture: nothing ran, the run is still queued.
    page = client.get(f"/audits/{run.pk}/").content.decode()
    assert f'data-poll="/audits/{run.pk}/progress/"' in page
    assert 'data-done="false"' in page


def test_an_analyst_proposes_the_batch(client, alice, run, django_capture_on_commit_callbacks):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/audits/{run.pk}/propose/", follow=True)
    batch = run.suspects.filter(in_batch=True).count()
    assert ReviewProposal.objects.filter(audit_run=run).count() == batch
    assert b"proposed for review" in r.content
    # Each proposed memory now carries a signed poison_suspect label.
    assert EpistemicLabel.objects.filter(label="poison_suspect").count() == batch


def test_a_reviewer_cannot_propose(client, bob, run):
    client.force_login(bob)
    assert client.post(f"/audits/{run.pk}/propose/").status_code == 403


# ----------------------------------------------------------------------------- review


def test_the_queue_lists_open_proposals_for_a_reviewer(client, bob, proposals):
    client.force_login(bob)
    r = client.get("/review/")
    body = r.content.decode()
    assert body.count('class="review-item') == len(proposals)
    assert 'action="/review/bulk/"' in body and "Keyboard shortcuts" in body


def test_approving_signs_poison_likely_and_shows_it_in_the_history(client, bob, proposals,
                                                                   django_capture_on_commit_callbacks):
    client.force_login(bob)
    p = proposals[0]
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "Redirects the capital"})
    assert r.status_code == 302
    queue = client.get("/review/").content.decode()  # the queue records what the housekeeper signed
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.APPROVED and p.label.label == "poison_likely"
    assert 'id="decided-table"' in queue and "approved" in queue
    history = client.get(f"/memories/{p.memory_id}/").content.decode()
    assert "poison_likely" in history and "Redirects the capital" in history and "user:bob" in history
    assert "✓ Verified" in history


def test_a_double_submitted_approval_appends_one_label(client, bob, proposals, django_capture_on_commit_callbacks):
    client.force_login(bob)
    p = proposals[0]
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "dup"})
    assert EpistemicLabel.objects.filter(memory_id=p.memory_id, label="poison_likely").count() == 1


def test_an_approval_without_a_reason_is_refused(client, bob, proposals):
    client.force_login(bob)
    p = proposals[0]
    r = client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "  "}, follow=True)
    assert b"a reason is required" in r.content
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.OPEN


def test_an_analyst_cannot_approve(client, alice, proposals):
    client.force_login(alice)
    assert client.post(f"/review/{proposals[0].pk}/decide/", {"decision": "approve", "reason": "x"}).status_code == 403


def test_four_eyes_stops_the_proposer_from_approving(client, dana, run, django_capture_on_commit_callbacks):
    # Dana (org admin) may both propose and review; four-eyes (the store default) forbids both on one item.
    client.force_login(dana)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/audits/{run.pk}/propose/")
    p = ReviewProposal.objects.filter(audit_run=run).first()
    page = client.get("/review/").content.decode()
    assert "Four-eyes: you proposed this" in page
    r = client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "mine"}, follow=True)
    assert b"four-eyes" in r.content
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.OPEN


def test_approving_another_organizations_proposal_is_not_found(client, charlie, proposals):
    client.force_login(charlie)
    p = proposals[0]
    assert client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "x"}).status_code == 404
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.OPEN


def test_bulk_refute_decides_each_and_reports_the_skipped(client, bob, proposals, django_capture_on_commit_callbacks):
    client.force_login(bob)
    ids = [p.pk for p in proposals[:2]] + [999999]
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/review/bulk/", {"decision": "refute", "reason": "Clean after all", "proposals": ids})
    r = client.get("/review/")
    assert b"2 proposals refuted" in r.content and b"#999999 skipped: not found" in r.content
    assert ReviewProposal.objects.filter(status=ReviewProposal.Status.REFUTED).count() == 2


def test_a_decision_waiting_for_the_housekeeper_shows_as_pending(client, bob, proposals):
    client.force_login(bob)
    p = proposals[0]
    # No on_commit capture: the label task is never sent, as if the housekeeper were down.
    client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "later"})
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.APPLYING
    page = client.get("/review/").content.decode()
    assert "Waiting for the housekeeper" in page and 'data-poll="/review/pending/"' in page
    partial = client.get("/review/pending/").content.decode()
    assert 'data-done="false"' in partial and "pending" in partial


def test_the_propose_button_says_why_it_counts_fewer_than_the_batch(client, alice, run,
                                                                     django_capture_on_commit_callbacks):
    client.force_login(alice)
    batch = list(run.suspects.filter(in_batch=True).order_by("rank"))
    assert len(batch) >= 2
    assert 'id="propose-note"' not in client.get(f"/audits/{run.pk}/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        services.proposals_create_from_run(audit_run=run, user=alice, memory_ids=[batch[0].memory_id])
    page = client.get(f"/audits/{run.pk}/").content.decode()
    assert f"Propose batch for review ({len(batch) - 1})" in page
    assert f"{len(batch) - 1} of the {len(batch)} in the batch" in page
