"""The reviewer's case work in a real browser (issue 15): evidence panel on the review queue ->
a note -> assignment ("My queue") -> CSV export -> a decision (approve) -> the activity trail
shows all of it -> the webhooks (proposal assigned, label signed) delivered to a LOCAL receiver.

The audit is prepared in the test process (the analyst's half is ``test_e2e``'s walk); Celery
runs inline in the live server, so the housekeeper's label task signs there and the webhook is
a real HTTP POST through the egress client to 127.0.0.1, allowed by ``AGENT_EGRESS_ALLOW``.
Screenshots of the queue with the evidence panel and a note, at 1280 and 390 px, are written to
``docs/screenshots/`` (viewport only, to stay small); every page is checked for overflow.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.browser import chrome
from tests.browser.test_accounts_browser import receiver  # noqa: F401 - the local webhook receiver fixture
from tests.browser.test_e2e import PASSWORD, Browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chrome.available(), reason="needs Debian's chromium and chromedriver"),
]

DOCS_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
NOTE = "Checked the source: **forged** FAQ entry, see https://example.com <b>not html</b>"


@pytest.fixture
def casework_world(transactional_db, settings):
    from django.contrib.auth import get_user_model

    from orgs.models import Membership, Organization, Role

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    org = Organization.objects.create(name="Acme Security", slug="acme")
    users = {}
    for username, role in (("alice", Role.ANALYST), ("bob", Role.REVIEWER), ("dana", Role.ADMIN)):
        users[username] = get_user_model().objects.create_user(username=username, password=PASSWORD,
                                                               email=f"{username}@example.com")
        Membership.objects.create(organization=org, user=users[username], role=role)
    return org, users


def _prepare_audit(org, alice):
    """The analyst's half, through the services: a poisoned store, its incidents, a finished
    audit and its batch proposed for review."""
    from audits import services
    from audits.models import AuditRun
    from ledger.services import housekeeper_init
    from ledger.signing import housekeeper_role
    from tests.audits.factories import poisoned_store_import
    from tests.browser.test_e2e import _clear_caches

    _clear_caches()
    # The operator's `housekeeper init` and the inline import's genesis signatures, in this
    # thread only; the live server's label tasks hold the role themselves.
    with housekeeper_role():
        housekeeper_init(organization=org)
        poisoned = poisoned_store_import(organization=org, slug="support-bot")
    incidents = services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                          filename="incidents.jsonl", user=alice)
    run = services.audit_run_create(store=poisoned.store, incident_ids=[i.pk for i in incidents], user=alice)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    proposals = services.proposals_create_from_run(audit_run=run, user=alice)
    assert proposals
    return run, proposals


def _docs_shot(b: Browser, name: str, views: dict[str, str]) -> None:
    """Viewport screenshots at 1280 and 390 px, one per ``views`` entry (file suffix ->
    the selector scrolled to the top)."""
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    d = b.driver
    for w, h in ((1280, 900), (390, 844)):
        d.set_window_size(w, h)
        time.sleep(0.4)
        for suffix, selector in views.items():
            if suffix and w == 1280:
                continue  # at 1280 px the whole item fits the first viewport
            d.execute_script("document.querySelector(arguments[0]).scrollIntoView({block: 'start'})", selector)
            time.sleep(0.2)
            d.save_screenshot(str(DOCS_SHOTS / f"{name}-{w}{suffix}.png"))
    d.set_window_size(1280, 800)


def test_a_reviewer_notes_assigns_exports_decides_and_the_org_is_notified(live_server, casework_world, receiver):  # noqa: F811
    from memaudit_site.celery import app
    from orgs.notifications import webhook_create

    app.conf.task_always_eager = True
    org, users = casework_world
    url, hits = receiver
    run, proposals = _prepare_audit(org, users["alice"])
    webhook_create(organization=org, url=url, events=["proposal.assigned", "label.signed"])

    b = Browser(live_server.url)
    try:
        b.login("bob")
        b.get("/review/")
        b.wait(lambda d: b.all("#review-list article.review-item"), what="the review queue")
        first = b.css("#review-list article.review-item")
        pk = first.get_attribute("data-proposal")
        item = f"#proposal-{pk}"

        # The evidence panel: incidents, the replayed answers, the scores explained.
        b.css(f"{item} .ri-evidence > summary").click()
        b.wait(lambda d: b.css(f"{item} .ri-evidence").get_attribute("open") is not None, what="the evidence")
        evidence = b.css(f"{item} .ri-evidence").text
        assert "CMIS" in evidence and "DS" in evidence

        # A note, markdown rendered escaped.
        b.css(f"{item} .ri-notes > summary").click()
        b.css(f"{item} .note-form textarea").send_keys(NOTE)
        b.css(f"{item} .note-form button[type=submit]").click()
        b.wait(lambda d: b.all(f"{item} .note-body strong"), what="the note")
        note = b.css(f"{item} .note-body").text
        assert "forged" in note and "<b>not html</b>" in note and not b.all(f"{item} .note-body b")
        assert "user:bob" in b.css(f"{item} .note-head").text

        # Assign it to himself: it is in his queue, and the organization's webhook hears of it.
        from selenium.webdriver.support.ui import Select

        Select(b.css(f"{item} .assign-form select")).select_by_value(str(users["bob"].pk))
        b.css(f"{item} .assign-form button[type=submit]").click()
        b.wait(lambda d: "Assigned to bob" in b.css(f"{item} .assignee").text, what="the assignment")
        b.wait(lambda d: any(h["event"] == "proposal.assigned" for h in hits), timeout=20,
               what="the proposal.assigned webhook at the local receiver")
        b.get("/review/?assignee=me")
        b.wait(lambda d: b.all(item), what="the proposal in My queue")
        assert len(b.all("#review-list article.review-item")) == 1

        # The screenshots the issue asks for: the queue with the evidence panel and a note.
        b.css(f"{item} .ri-evidence > summary").click()
        b.css(f"{item} .ri-notes[open]")
        _docs_shot(b, "review-queue-evidence-note", {"": item, "-notes": f"{item} .ri-evidence .ev-incident"})
        b.shot("casework-review-queue")

        # Export CSV from the suspects page (the same request the button makes).
        b.get(f"/audits/{run.pk}/suspects/")
        b.wait(lambda d: b.all("#suspect-table"), what="the suspects table")
        b.shot("casework-suspects")
        csv_text = b.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(document.querySelector('#export-csv').href).then(r => r.text()).then(done);")
        assert csv_text.splitlines()[0].startswith("rank,memory_id,memory_pk")
        assert len(csv_text.strip().splitlines()) > 1

        # The decision: approve with a reason; the housekeeper signs poison_likely.
        b.get("/review/?assignee=me")
        b.wait(lambda d: b.all(f"{item} form.decide"), what="the decision form")
        b.css(f"{item} form.decide input[name=reason]").send_keys("Forged FAQ entry; note and evidence agree")
        b.css(f"{item} form.decide button[value=approve]").click()
        b.wait(lambda d: "approved" in b.text(), what="the approval message")
        b.wait(lambda d: any(h["event"] == "label.signed" for h in hits), timeout=30,
               what="the label.signed webhook at the local receiver")
        assert b"poison_likely" in next(h["body"] for h in hits if h["event"] == "label.signed")

        # The activity trail (org admins) shows the whole case.
        b.login("dana")
        b.get("/activity/")
        trail = b.css("#activity-table").text
        for verb in ("note.added", "proposal.assigned", "audit.exported", "review.approve"):
            assert verb in trail, verb
        b.shot("casework-activity")
        assert not b.overflow, b.overflow
    finally:
        b.driver.quit()
