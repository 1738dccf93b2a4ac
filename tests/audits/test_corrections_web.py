"""Issue 16 through the API and the pages: propose an audit's honest errors as corrections, the
reviewer approves or rejects them, the results page shows both groups, the correcting memory,
the collateral (utility cost) and a batch that breaks correct answers; the memory page shows the
signed down-weight."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from audits import services
from audits.models import AuditRun, ReviewProposal
from ledger.models import Memory, ProvenanceNode

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


# ----------------------------------------------------------------------------- API


def test_alice_proposes_corrections_and_bob_approves_them_through_the_api(corrected_run, alice, bob, outdated):
    r = client_for(alice).post(f"/api/v1/audits/{corrected_run.pk}/corrections/", {}, format="json")
    assert r.status_code == 201, r.data
    got = r.data["proposals"]
    assert {p["memory_external_id"] for p in got} == outdated.stale and r.data["skipped"] == {}
    new_pk = Memory.objects.get(store=outdated.store, external_id=outdated.correcting).pk
    for p in got:
        assert p["kind"] == "correction" and p["correction_kind"] == "outdated"
        assert p["corrected_by"] == new_pk and p["corrected_by_external_id"] == outdated.correcting
        assert p["status"] == "open" and p["transition"] is None and p["proposed_label"] == ""
    # Proposing again adds nothing and says why.
    again = client_for(alice).post(f"/api/v1/audits/{corrected_run.pk}/corrections/", {}, format="json")
    assert again.data["proposals"] == [] and all("already under review" in v for v in again.data["skipped"].values())
    r = client_for(bob).post(f"/api/v1/reviews/{got[0]['id']}/approve/", {"reason": "newer note"}, format="json")
    assert r.status_code == 200 and r.data["status"] == "approved" and r.data["transition"]
    node = ProvenanceNode.objects.get(pk=r.data["transition"])
    assert f"corrected_by:{outdated.store.slug}/{outdated.correcting}" in node.evidence
    r = client_for(bob).post(f"/api/v1/reviews/{got[1]['id']}/refute/", {"reason": "still right"}, format="json")
    assert r.status_code == 200 and r.data["status"] == "refuted" and r.data["transition"] is None
    listed = client_for(bob).get("/api/v1/reviews/?status=all").data
    assert {p["kind"] for p in listed} == {"correction"}


def test_the_corrections_api_names_what_is_wrong(corrected_run, alice, bob, charlie, outdated):
    filler = Memory.objects.get(store=outdated.store, external_id="f2")
    r = client_for(alice).post(f"/api/v1/audits/{corrected_run.pk}/corrections/", {"memory_ids": [filler.pk]},
                               format="json")
    assert r.status_code == 400 and "not honest errors of this run" in str(r.data)
    # Bob reviews; he does not propose. Charlie is in another organization: the run does not exist for him.
    assert client_for(bob).post(f"/api/v1/audits/{corrected_run.pk}/corrections/", {}, format="json").status_code == 403
    assert client_for(charlie).post(f"/api/v1/audits/{corrected_run.pk}/corrections/", {},
                                    format="json").status_code == 404


# ----------------------------------------------------------------------------- pages


def test_the_results_page_shows_the_honest_errors_with_the_correcting_memory_and_the_collateral(
        client, corrected_run, alice, outdated):
    client.force_login(alice)
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    new_pk = Memory.objects.get(store=outdated.store, external_id=outdated.correcting).pk
    assert "Honest errors (2)" in page and "Poison-like (" in page
    assert f'class="corrected-by" href="/memories/{new_pk}/"' in page
    assert 'id="propose-corrections"' in page and "Propose corrections (2)" in page
    coll = corrected_run.results["collateral"]
    assert "Collateral check" in page and f"of {coll['questions']} clean questions" in page


def test_a_batch_that_breaks_correct_answers_is_flagged_and_its_members_marked(client, corrected_run, alice):
    res = dict(corrected_run.results)
    member = res["batch_external_ids"][0]
    # As the engine's collateral check writes it when removing a member changes a supported answer.
    res["collateral"] = {**res.get("collateral", {}), "questions": 20, "changed": 3, "broken": 2,
                         "flagged": True, "breaking": [member], "utility_cost": 0.1}
    AuditRun.objects.filter(pk=corrected_run.pk).update(results=res)
    client.force_login(alice)
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert 'id="collateral-flag"' in page and "This batch breaks correct answers" in page
    assert "2 of 20 clean questions (10.0%)" in page and "3 (15.0%)" in page
    assert f'id="collateral-breaking">{member}<' in page and ">breaks a clean answer<" in page
    # ... and beside the button that proposes the batch.
    assert 'id="propose-collateral"' in page and f"breaks 2 correct answers (breaking: {member})" in page


def test_a_correction_that_is_the_stores_only_record_on_its_own_question_is_flagged(client, corrected_run, alice):
    res = dict(corrected_run.results)
    member = res["batch_external_ids"][0]
    # As the engine writes it (`own_question_check`): no sampled clean question broken, but one
    # correction was the store's only record on a question no incident asks.
    res["collateral"] = {**res.get("collateral", {}), "questions": 20, "changed": 1, "broken": 0,
                         "own_questions": 2, "own_broken": 1, "flagged": True, "breaking": [member]}
    AuditRun.objects.filter(pk=corrected_run.pk).update(results=res)
    client.force_login(alice)
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert 'id="collateral-flag"' in page and 'id="collateral-own"' in page
    assert "2 corrections are the store's only record on a question no incident asks, and removing 1 of them" in page
    assert "and leaves 1 question of its corrections with no record of the store" in page


def test_an_unflagged_batch_shows_no_flag(client, corrected_run, alice):
    res = dict(corrected_run.results)
    res["collateral"] = {**res.get("collateral", {}), "questions": 20, "changed": 0, "broken": 0,
                         "flagged": False, "breaking": []}
    AuditRun.objects.filter(pk=corrected_run.pk).update(results=res)
    client.force_login(alice)
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert "0 of 20 clean questions" in page and "collateral-flag" not in page and "propose-collateral" not in page
    assert "collateral-fragile" not in page


def test_answers_the_agent_loses_under_a_placebo_removal_too_are_shown_as_its_variability(client, corrected_run,
                                                                                           alice):
    res = dict(corrected_run.results)
    # As `collateral_check` writes it: two answers changed, both lost under the placebo too.
    res["collateral"] = {**res.get("collateral", {}), "questions": 20, "changed": 2, "broken": 0, "fragile": 2,
                         "flagged": False, "breaking": []}
    AuditRun.objects.filter(pk=corrected_run.pk).update(results=res)
    client.force_login(alice)
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert 'id="collateral-fragile">2 lost the answer as well when as many of their other records left' in page
    assert "0 of 20 clean questions" in page and "collateral-flag" not in page


def test_proposing_one_correction_from_the_page_then_approving_it_in_the_queue(client, corrected_run, alice, bob,
                                                                               outdated):
    old1 = Memory.objects.get(store=outdated.store, external_id="old1")
    client.force_login(alice)
    r = client.post(f"/audits/{corrected_run.pk}/corrections/", {"memory": [old1.pk]})
    assert r.status_code == 302 and r["Location"].endswith(f"/audits/{corrected_run.pk}/#verdicts")
    p = ReviewProposal.objects.get(memory=old1)
    assert p.kind == "correction" and ReviewProposal.objects.count() == 1
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert f"correction open (#{p.pk})" in page and "Propose corrections (1)" in page
    client.force_login(bob)
    queue = client.get("/review/").content.decode()
    assert "correction · outdated" in queue and "Approve correction" in queue and ">Reject<" in queue
    r = client.post(f"/review/{p.pk}/decide/", {"decision": "approve", "reason": "the newer note corrects it"},
                    follow=True)
    assert "signed down-weight appended (weight 1.000 → 0.100)" in r.content.decode()
    p.refresh_from_db()
    assert p.status == "approved" and p.transition_id
    # The memory page shows the signed correction in its history; the results page its status.
    mem = client.get(f"/memories/{old1.pk}/").content.decode()
    assert f"correction:proposal:{p.pk}" in mem and f"corrected_by:{outdated.store.slug}/new" in mem
    assert "weight 1.000 → <strong>0.100</strong>" in mem
    # ... and in its review history: the correction, what corrects it, the signed down-weight.
    assert f'class="corrected-by" href="/memories/{p.corrected_by_id}/"' in mem
    assert f"signed down-weight, seq {p.transition.seq}: 1000‰ → 100‰" in mem
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert f"correction approved (#{p.pk})" in page and "1000‰ → 100‰, signed" in page


def test_the_reviewer_rejects_a_correction_in_the_queue(client, corrected_run, alice, bob):
    made = services.review.corrections_create_from_run(audit_run=corrected_run, user=alice)
    client.force_login(bob)
    r = client.post(f"/review/{made[0].pk}/decide/", {"decision": "refute", "reason": "still right"}, follow=True)
    assert "rejected; nothing signed" in r.content.decode()
    assert not ProvenanceNode.objects.filter(memory_id=made[0].memory_id).exists()


def test_only_proposers_see_the_button_and_may_post(client, corrected_run, bob):
    client.force_login(bob)  # a reviewer
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert 'id="propose-corrections"' not in page
    assert client.post(f"/audits/{corrected_run.pk}/corrections/").status_code == 403
    assert not ReviewProposal.objects.exists()


def test_the_audit_export_names_each_members_verdict_and_its_correction(client, corrected_run, alice, outdated):
    import csv
    import io
    import json

    from audits.services.review import corrections_create_from_run

    proposed = list(corrections_create_from_run(audit_run=corrected_run, user=alice))
    assert proposed
    client.force_login(alice)
    rows = json.loads(client.get(f"/audits/{corrected_run.pk}/export.json").content)["suspects"]
    by_id = {r["memory_id"]: r for r in rows}
    for ext in outdated.stale:
        assert by_id[ext]["verdict"] == "honest-error"
        assert by_id[ext]["proposal_kind"] == "correction" and by_id[ext]["corrected_by"] == outdated.correcting
    table = list(csv.DictReader(io.StringIO(client.get(f"/audits/{corrected_run.pk}/export.csv").content.decode())))
    assert {r["memory_id"]: (r["verdict"], r["proposal_kind"], r["corrected_by"]) for r in table
            if r["memory_id"] in outdated.stale} == {ext: ("honest-error", "correction", outdated.correcting)
                                                    for ext in outdated.stale}


def test_corrections_split_out_of_the_batch_are_named_and_not_proposed(client, corrected_run, alice):
    """As the engine writes it when a correction whose removal broke a clean answer is kept out
    of the batch (every incident's harm stays removed without it): named, and the batch is not
    flagged for it."""
    res = dict(corrected_run.results)
    res["collateral"] = {**res.get("collateral", {}), "questions": 20, "changed": 1, "broken": 0,
                         "flagged": False, "breaking": [], "kept": ["m-kept-1", "m-kept-2"]}
    res["residual_rounds"] = [*res.get("residual_rounds", [{"batch_size": 3, "harmful": 0}]),
                              {"split": ["m-kept-1", "m-kept-2"], "batch_size": 2, "harmful": 0}]
    AuditRun.objects.filter(pk=corrected_run.pk).update(results=res)
    client.force_login(alice)
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert 'id="collateral-kept"' in page and "Split out of the batch, 2 corrections" in page
    assert "m-kept-1, m-kept-2</span> (not proposed)" in page and 'id="collateral-flag"' not in page
    assert "batch of 2 (2 corrections that broke a clean answer split out), 0 still harmful" in page


def test_records_returned_as_the_store_side_of_a_planted_group_are_named_in_the_rounds(client, corrected_run, alice):
    """As the engine writes it when the reach confirms a planted group that records in the batch
    only stood against (`audit.analyse`, round `restored`): the round says they went back."""
    res = dict(corrected_run.results)
    res["residual_rounds"] = [*res.get("residual_rounds", [{"batch_size": 3, "harmful": 0}]),
                              {"restored": ["m-side-1", "m-side-2"], "batch_size": 1, "harmful": 0}]
    AuditRun.objects.filter(pk=corrected_run.pk).update(results=res)
    client.force_login(alice)
    page = client.get(f"/audits/{corrected_run.pk}/").content.decode()
    assert ("batch of 1 (2 records returned: the store's own side of a planted group found later), "
            "0 still harmful") in page
