"""Case work (issue 15): notes on a suspect or a proposal (append-only, markdown escaped),
assignment of a proposal to a reviewer and "My queue", filters and paging on the lists, and the
CSV/JSON export of an audit's suspects and decisions. Alice is the analyst, Bob the reviewer,
Dana the org admin; Charlie (Globex) must reach nothing of Acme's."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core import mail
from django.core.exceptions import ObjectDoesNotExist, ValidationError

from audits import casework, exports, services
from audits.models import AuditSuspect, CaseNote, ReviewProposal
from orgs.models import ActivityEvent, WebhookDelivery

pytestmark = pytest.mark.django_db


@pytest.fixture
def proposals(run, alice) -> list[ReviewProposal]:
    made = services.proposals_create_from_run(audit_run=run, user=alice)
    assert len(made) >= 2
    return made


def _verbs(org) -> list[str]:
    return list(ActivityEvent.objects.filter(organization=org).values_list("verb", flat=True))


# ----------------------------------------------------------------------------- markdown


def test_markdown_escapes_html_before_anything_else():
    out = casework.markdown_render('<script>alert(1)</script> <img src=x onerror="a()"> **bold**')
    assert "<script" not in out and "<img" not in out
    assert "&lt;script&gt;" in out and "&lt;img src=x onerror=&quot;a()&quot;&gt;" in out
    assert "<strong>bold</strong>" in out


def test_markdown_links_only_http_and_https_with_noopener():
    out = casework.markdown_render("[ok](https://example.com/a?b=1&c=2) [bad](javascript:alert(1)) "
                                   "[data](data:text/html,x) [q](https://e.com/\"onmouseover=x)")
    assert '<a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer nofollow"' in out
    assert "javascript:" in out and 'href="javascript' not in out
    assert 'href="data' not in out
    # A quote in the URL is &quot; already: it cannot end the attribute and add another.
    assert _anchor_attributes(out) == [["href", "rel", "target"]] * 2
    assert 'href="https://e.com/&quot;onmouseover=x"' in out


def _anchor_attributes(fragment: str) -> list[list[str]]:
    from html.parser import HTMLParser

    found: list[list[str]] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "a":
                found.append([name for name, _ in attrs])

    P().feed(fragment)
    return found


def test_markdown_subset_paragraphs_lists_code():
    out = casework.markdown_render("First *line*\nsecond `<b>`\n\n- one\n- two\n\n1. a\n2. b\n\n```\n<x>\n```")
    assert out.startswith("<p>First <em>line</em><br>second <code>&lt;b&gt;</code></p>")
    assert "<ul><li>one</li><li>two</li></ul>" in out
    assert "<ol><li>a</li><li>b</li></ol>" in out
    assert "<pre><code>&lt;x&gt;</code></pre>" in out


# ----------------------------------------------------------------------------- notes


def test_a_note_on_a_proposal_is_shown_escaped_and_recorded(client, proposals, bob, acme):
    p = proposals[0]
    client.force_login(bob)
    resp = client.post(f"/review/{p.pk}/notes/", {"body": "Checked the source: *forged* <script>x</script>",
                                                  "next": "/review/?state=open"})
    assert resp.status_code == 302 and resp["Location"] == f"/review/?state=open#proposal-{p.pk}"
    note = CaseNote.objects.get(proposal=p)
    assert note.author == bob and note.author_label == "user:bob" and note.memory_id == p.memory_id
    page = client.get("/review/").content.decode()
    assert "Checked the source: <em>forged</em> &lt;script&gt;x&lt;/script&gt;" in page
    assert "<script>x</script>" not in page
    assert "note.added" in _verbs(acme)


def test_a_note_must_say_something_and_has_a_size_limit(proposals, bob, acme):
    with pytest.raises(ValidationError, match="Write the note"):
        casework.note_add(organization=acme, user=bob, body="   ", proposal_id=proposals[0].pk)
    with pytest.raises(ValidationError, match="at most"):
        casework.note_add(organization=acme, user=bob, body="x" * 10_001, proposal_id=proposals[0].pk)
    assert not CaseNote.objects.exists()


def test_notes_are_append_only_through_the_api(client, proposals, bob, acme):
    p = proposals[0]
    client.force_login(bob)
    url = f"/api/v1/reviews/{p.pk}/notes/"
    created = client.post(url, {"body": "first"}, content_type="application/json")
    assert created.status_code == 201 and created.json()["author"] == "user:bob"
    client.post(url, {"body": "second"}, content_type="application/json")
    assert [n["body"] for n in client.get(url).json()] == ["first", "second"]
    assert client.put(url, {"body": "rewritten"}, content_type="application/json").status_code == 405
    assert client.delete(url).status_code == 405
    assert client.post(url, {"body": ""}, content_type="application/json").status_code == 400


def test_a_suspect_note_is_shown_with_the_proposal_of_the_same_audit(client, run, proposals, alice, bob, acme):
    p = proposals[0]
    client.force_login(alice)
    url = f"/audits/{run.pk}/suspects/{p.memory_id}/notes/"
    resp = client.post(url, {"body": "Retrieved for 3 incidents; text reads like an injected answer."})
    assert resp.status_code == 302 and resp["Location"] == url
    assert "injected answer" in client.get(url).content.decode()
    # The reviewer sees the analyst's note on the proposal made from that suspect.
    assert [n.body for n in casework.notes_for_proposal(organization=acme, proposal=p)] == [
        "Retrieved for 3 incidents; text reads like an injected answer."]
    client.force_login(bob)
    assert "injected answer" in client.get("/review/").content.decode()


def test_charlie_cannot_note_or_read_acme_notes(client, run, proposals, charlie, globex, acme):
    p = proposals[0]
    casework.note_add(organization=acme, user=p.proposed_by, body="acme only", proposal_id=p.pk)
    with pytest.raises(ObjectDoesNotExist):
        casework.note_add(organization=globex, user=charlie, body="x", proposal_id=p.pk)
    client.force_login(charlie)
    assert client.post(f"/review/{p.pk}/notes/", {"body": "x"}).status_code == 404
    assert client.get(f"/audits/{run.pk}/suspects/{p.memory_id}/notes/").status_code == 404
    assert client.get(f"/api/v1/reviews/{p.pk}/notes/").status_code == 404
    assert CaseNote.objects.filter(organization=globex).count() == 0


def test_a_memory_outside_the_audit_takes_no_suspect_note(run, alice, acme):
    outside = AuditSuspect.objects.filter(run=run).order_by("-rank").first().memory_id + 100_000
    with pytest.raises(ObjectDoesNotExist):
        casework.note_add(organization=acme, user=alice, body="x", audit_run_id=run.pk, memory_id=outside)


# ----------------------------------------------------------------------------- assignment


def test_bob_assigns_a_proposal_to_himself_and_it_is_in_my_queue(client, proposals, bob, acme,
                                                                 django_capture_on_commit_callbacks):
    from orgs.notifications import webhook_create

    webhook_create(organization=acme, url="https://hooks.example.com/memaudit", events=["proposal.assigned"])
    p, other = proposals[0], proposals[1]
    client.force_login(bob)
    with django_capture_on_commit_callbacks(execute=False):
        resp = client.post(f"/review/{p.pk}/assign/", {"assignee": "me"})
    assert resp.status_code == 302
    p.refresh_from_db()
    assert p.assigned_to == bob and p.assigned_by == bob and p.assigned_at is not None
    mine = client.get("/review/?assignee=me").content.decode()
    assert f'id="proposal-{p.pk}"' in mine and f'id="proposal-{other.pk}"' not in mine
    unassigned = client.get("/review/?assignee=none").content.decode()
    assert f'id="proposal-{p.pk}"' not in unassigned and f'id="proposal-{other.pk}"' in unassigned
    assert "proposal.assigned" in _verbs(acme)
    delivery = WebhookDelivery.objects.get(event="proposal.assigned")
    assert delivery.payload["assigned_to"] == "user:bob" and delivery.payload["proposal"] == p.pk


def test_the_assignee_gets_an_email(proposals, bob, dana, acme, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        casework.proposal_assign(organization=acme, proposal_id=proposals[0].pk, assignee_id=bob.pk, user=dana)
    assert [m.to for m in mail.outbox] == [["bob@example.com"]]
    assert f"#{proposals[0].pk}" in mail.outbox[0].subject


def test_only_a_reviewer_of_the_org_can_be_assigned(proposals, bob, alice, charlie, acme):
    p = proposals[0]
    with pytest.raises(ValidationError, match="cannot review"):
        casework.proposal_assign(organization=acme, proposal_id=p.pk, assignee_id=alice.pk, user=bob)
    with pytest.raises(ValidationError, match="No active member"):
        casework.proposal_assign(organization=acme, proposal_id=p.pk, assignee_id=charlie.pk, user=bob)
    with pytest.raises(ValidationError, match="Only reviewers"):
        casework.proposal_assign(organization=acme, proposal_id=p.pk, assignee_id=bob.pk, user=alice)
    p.refresh_from_db()
    assert p.assigned_to is None


def test_unassign_and_a_decided_proposal_is_not_reassigned(proposals, bob, dana, acme):
    p = proposals[0]
    casework.proposal_assign(organization=acme, proposal_id=p.pk, assignee_id=bob.pk, user=dana)
    p = casework.proposal_assign(organization=acme, proposal_id=p.pk, assignee_id=None, user=dana)
    assert p.assigned_to is None and "proposal.unassigned" in _verbs(acme)
    services.proposal_refute(organization=acme, proposal_id=p.pk, user=bob, reason="a true fact")
    with pytest.raises(ValidationError, match="only open proposals"):
        casework.proposal_assign(organization=acme, proposal_id=p.pk, assignee_id=bob.pk, user=dana)


def test_assign_through_the_api(client, proposals, bob, alice, acme):
    p = proposals[0]
    client.force_login(bob)
    resp = client.post(f"/api/v1/reviews/{p.pk}/assign/", {"assignee": bob.pk}, content_type="application/json")
    assert resp.status_code == 200 and resp.json()["assigned_to"] == "bob"
    bad = client.post(f"/api/v1/reviews/{p.pk}/assign/", {"assignee": alice.pk}, content_type="application/json")
    assert bad.status_code == 400 and "cannot review" in json.dumps(bad.json())
    mine = client.get("/api/v1/reviews/?assignee=me").json()
    assert [r["id"] for r in mine] == [p.pk]
    assert p.pk not in [r["id"] for r in client.get("/api/v1/reviews/?assignee=none").json()]
    assert client.get("/api/v1/reviews/?assignee=bogus").status_code == 400
    client.force_login(alice)
    assert client.post(f"/api/v1/reviews/{p.pk}/assign/", {"assignee": None},
                       content_type="application/json").status_code == 403


# ----------------------------------------------------------------------------- filters and paging


@pytest.mark.parametrize("query", ["ds_min=abc", "ds_min=0.9&ds_max=0.1", "state=nonsense", "store=999999",
                                   "assignee=zzz", "audit=-3"])
def test_a_bad_queue_filter_is_a_clear_message_not_a_500(client, proposals, bob, query):
    client.force_login(bob)
    resp = client.get(f"/review/?{query}")
    assert resp.status_code == 400
    assert "The filter was not applied." in resp.content.decode()


def test_the_queue_pages_on_the_server_and_keeps_its_filters(client, proposals, bob, monkeypatch):
    monkeypatch.setattr(casework, "PAGE_SIZE", 1)
    client.force_login(bob)
    first = client.get("/review/?state=open&ds_min=0").content.decode()
    second = client.get("/review/?state=open&ds_min=0&page=2").content.decode()
    assert f'id="proposal-{proposals[0].pk}"' in first and f'id="proposal-{proposals[1].pk}"' not in first
    assert f'id="proposal-{proposals[1].pk}"' in second
    assert "?state=open&amp;ds_min=0&page=2" in first  # the pager keeps the filters
    assert f"1–1 of {len(proposals)}" in first


def test_queue_filters_by_score_state_and_audit(proposals, bob, acme, run):
    ds = sorted(p.scores["ds"] for p in proposals)
    top = casework.proposals_filtered(organization=acme, user=bob, ds_min=ds[-1])
    assert {p.pk for p in top} == {p.pk for p in proposals if p.scores["ds"] >= ds[-1]}
    assert casework.proposals_filtered(organization=acme, user=bob, audit_run_id=run.pk + 1).count() == 0
    decided = services.proposal_refute(organization=acme, proposal_id=proposals[0].pk, user=bob, reason="true")
    assert decided.status in ("applying", "refuted")  # refuted once the housekeeper has signed
    assert [p.pk for p in casework.proposals_filtered(organization=acme, user=bob, state=decided.status)] == [
        decided.pk]
    assert decided.pk not in {p.pk for p in casework.proposals_filtered(organization=acme, user=bob)}


def test_the_suspect_list_counts_only_credited_suspects_and_filters(client, run, alice):
    client.force_login(alice)
    positive = AuditSuspect.objects.filter(run=run, ds__gt=0).count()
    page = client.get(f"/audits/{run.pk}/suspects/").content.decode()
    assert f"{positive} suspect" in page
    batch = AuditSuspect.objects.filter(run=run, in_batch=True).count()
    assert f"{batch} suspect" in client.get(f"/audits/{run.pk}/suspects/?in_batch=yes").content.decode()
    assert client.get(f"/audits/{run.pk}/suspects/?ds_min=2").status_code == 400


def test_audit_and_incident_lists_validate_their_filters(client, run, alice):
    client.force_login(alice)
    assert client.get("/audits/?status=done").status_code == 200
    assert client.get("/audits/?status=bogus").status_code == 400
    assert client.get("/incidents/?store=12345").status_code == 400
    bad = client.get(f"/stores/{run.store_id}/?weight_min=abc")
    assert bad.status_code == 400 and "The filter was not applied." in bad.content.decode()
    listed = client.get(f"/incidents/?q=zzz-no-such&store={run.store_id}").content.decode()
    assert "No incident matches these filters." in listed


def test_the_ledger_page_pages_filters_and_shows_signed_times(client, run, alice, monkeypatch):
    from ledger import views as ledger_views
    from ledger.models import GenesisEntry

    monkeypatch.setattr(ledger_views, "PAGE_SIZE", 5)
    client.force_login(alice)
    page = client.get("/ledger/?kind=genesis").content.decode()
    assert "Signed at" in page and "page=2" in page
    newest = GenesisEntry.objects.filter(memory__store=run.store).order_by("-pk").first()
    assert newest.time in page
    assert client.get("/ledger/?kind=bogus").status_code == 400
    one = client.get(f"/ledger/?memory={newest.memory.store.slug}/{newest.memory.external_id}").content.decode()
    assert newest.memory.external_id in one and "(1 matching)" in one


# ----------------------------------------------------------------------------- exports


def test_csv_cells_that_look_like_formulas_are_quoted():
    assert [exports.csv_cell(v) for v in ("=1+1", "+x", "-2", "@SUM(A1)", "\tx", "plain", 0.5, -1.0)] == [
        "'=1+1", "'+x", "'-2", "'@SUM(A1)", "'\tx", "plain", 0.5, -1.0]


def test_the_csv_export_has_every_credited_suspect_and_the_decisions(client, run, proposals, bob, acme):
    p = proposals[0]
    services.proposal_refute(organization=acme, proposal_id=p.pk, user=bob, reason='=HYPERLINK("http://x")')
    client.force_login(bob)
    resp = client.get(f"/audits/{run.pk}/export.csv")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/csv")
    assert f'memaudit-audit-{run.pk}-suspects.csv' in resp["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(resp.content.decode())))
    assert len(rows) == AuditSuspect.objects.filter(run=run, ds__gt=0).count()
    assert [int(r["rank"]) for r in rows] == sorted(int(r["rank"]) for r in rows)
    row = next(r for r in rows if r["proposal_id"] == str(p.pk))
    assert row["decision"] == "refute" and row["decided_by"] == "bob"
    assert row["decision_reason"] == "'=HYPERLINK(\"http://x\")"
    assert ActivityEvent.objects.filter(organization=acme, verb="audit.exported",
                                        detail__format="csv").count() == 1


def test_the_json_export_matches_the_csv_and_the_api(client, run, proposals, alice):
    client.force_login(alice)
    page = client.get(f"/audits/{run.pk}/export.json").json()
    api = client.get(f"/api/v1/audits/{run.pk}/export/json/").json()
    assert page["suspects"] == api["suspects"] and page["audit_run"] == run.pk
    assert {s["memory_pk"] for s in page["suspects"]} == set(
        AuditSuspect.objects.filter(run=run, ds__gt=0).values_list("memory_id", flat=True))
    assert client.get(f"/api/v1/audits/{run.pk}/export/csv/")["Content-Type"].startswith("text/csv")


def test_an_unfinished_audit_has_nothing_to_export(client, poisoned, alice, acme):
    incidents = services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                          filename="i.jsonl", user=alice)
    pending = services.audit_run_create(store=poisoned.store, incident_ids=[i.pk for i in incidents], user=alice,
                                        enqueue=False)
    client.force_login(alice)
    assert client.get(f"/api/v1/audits/{pending.pk}/export/csv/").status_code == 409
    resp = client.get(f"/audits/{pending.pk}/export.csv")
    assert resp.status_code == 302 and resp["Location"] == f"/audits/{pending.pk}/"
    assert "audit.exported" not in _verbs(acme)


def test_charlie_cannot_export_acme_audits(client, run, charlie):
    client.force_login(charlie)
    assert client.get(f"/audits/{run.pk}/export.csv").status_code == 404
    assert client.get(f"/api/v1/audits/{run.pk}/export/json/").status_code == 404
