"""Issue 16 in a real browser, against a live server and a real Celery worker: Alice proposes an
audit's honest errors (outdated notes, corrected by a newer one) as corrections from the results
page; Bob approves one in the review queue; the worker (the housekeeper — the web process never
signs) appends one signed down-weight linked to the correcting memory, which the memory page
shows in its signed history; Bob rejects the other, and nothing is signed for it."""

# ruff: noqa: F811

from __future__ import annotations

import pytest

from tests.browser import chrome
from tests.browser.test_e2e import Browser, _clear_caches, people, worker  # noqa: F401  (fixtures)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chrome.available(), reason="needs Debian's chromium and chromedriver"),
]


@pytest.fixture
def corrected_run(people):
    """The outdated-notes store audited in this thread (eager Celery, housekeeper role here only)."""
    from audits import services
    from audits.models import AuditRun
    from ledger.signing import housekeeper_role
    from memaudit_site.celery import app
    from orgs.models import Membership
    from tests.audits.corrections_factory import outdated_store_import

    alice = Membership.objects.get(organization=people, user__username="alice").user
    app.conf.task_always_eager = True
    try:
        with housekeeper_role():
            outdated = outdated_store_import(organization=people)
            _clear_caches()
            ids = [i.pk for i in services.incidents_import(store=outdated.store, data=outdated.incidents_jsonl(),
                                                           filename="incidents.jsonl", user=alice)]
            run = services.audit_run_create(store=outdated.store, incident_ids=ids, settings={}, user=alice)
    finally:
        app.conf.task_always_eager = False
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    return run, outdated


def test_an_analyst_proposes_corrections_and_a_reviewer_approves_one(live_server, worker, corrected_run):
    from audits.models import ReviewProposal
    from ledger.models import EpistemicLabel, Memory, ProvenanceNode

    run, outdated = corrected_run
    old1 = Memory.objects.get(store=outdated.store, external_id="old1")
    old2 = Memory.objects.get(store=outdated.store, external_id="old2")
    new = Memory.objects.get(store=outdated.store, external_id=outdated.correcting)
    b = Browser(live_server.url)
    try:
        # ---- Alice: the results page ---------------------------------------------------------
        b.login("alice")
        b.get(f"/audits/{run.pk}/")
        card = b.css("#verdicts").text
        assert "Honest errors (2)" in card and "corrected by new" in card and "Collateral check" in card
        assert b.css("#honest-errors a.corrected-by").get_attribute("href").endswith(f"/memories/{new.pk}/")
        b.css("#propose-corrections").click()
        b.wait(lambda d: "2 corrections proposed for review" in b.text(), what="the corrections message")
        made = {p.memory_id: p for p in ReviewProposal.objects.filter(kind="correction")}
        assert set(made) == {old1.pk, old2.pk}
        assert "correction open" in b.css("#honest-errors").text
        b.shot("corrections-results")
        # Proposing signs nothing: no flag, no weight change.
        assert not EpistemicLabel.objects.filter(memory__in=[old1, old2]).exists()
        assert not ProvenanceNode.objects.filter(memory__in=[old1, old2]).exists()

        # ---- Bob: the review queue -----------------------------------------------------------
        b.login("bob")
        b.get("/review/")
        item = f".review-item[data-proposal='{made[old1.pk].pk}']"
        b.wait(lambda d: b.all(item), what="the correction in the queue")
        assert "correction · outdated" in b.css(item).text and "corrected by new" in b.css(item).text
        b.shot("corrections-queue")
        b.css(f"{item} input[name=reason]").send_keys("The newer note corrects the moon count.")
        b.css(f"{item} button[value=approve]").click()
        b.wait(lambda d: b.all("#decided-table") and "old1" in b.css("#decided-table").text
               and "down-weight" in b.css("#decided-table").text, timeout=90,
               what="the worker to sign the down-weight")
        p = ReviewProposal.objects.get(pk=made[old1.pk].pk)
        assert p.status == ReviewProposal.Status.APPROVED
        nodes = list(ProvenanceNode.objects.filter(memory=old1))
        assert len(nodes) == 1 and nodes[0].pk == p.transition_id and nodes[0].new_weight_q == 100
        assert f"corrected_by:{outdated.store.slug}/new" in nodes[0].evidence
        assert Memory.objects.get(pk=old1.pk).live_weight_q == 100

        other = f".review-item[data-proposal='{made[old2.pk].pk}']"
        b.css(f"{other} input[name=reason]").send_keys("Keep it as it is.")
        b.css(f"{other} button[value=refute]").click()
        b.wait(lambda d: "rejected; nothing signed" in b.text(), what="the rejection")
        assert not ProvenanceNode.objects.filter(memory=old2).exists()

        # ---- The memory page: the correction in the signed history ---------------------------
        b.get(f"/memories/{old1.pk}/")
        timeline = b.css("#provenance-timeline").text
        assert f"correction:proposal:{p.pk}" in timeline and "corrected_by:notes/new" in timeline
        assert "1.000 → 0.100" in timeline
        b.shot("corrections-memory")
        b.get(f"/audits/{run.pk}/")
        assert f"correction approved (#{p.pk})" in b.css("#honest-errors").text
        assert "correction rejected" in b.css("#honest-errors").text
        assert not b.overflow, b.overflow
    finally:
        b.driver.quit()
