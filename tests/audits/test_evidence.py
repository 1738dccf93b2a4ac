"""The reviewer decides on evidence, and the results page counts honestly (issue 15): the
evidence panel on a proposal and on a suspect (full text, incidents with the observed and the
replayed answers, CMIS/CAS/DS with the normalised values DS used, earlier decisions), "not
reproduced" incidents left out of before -> after, only positive-score suspects counted."""

from __future__ import annotations

import html
import json

import pytest

from audits import services, ui_selectors
from audits.models import AuditRun, AuditSuspect
from ledger.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(poisoned, alice, django_capture_on_commit_callbacks):
    clean = Memory.objects.filter(store=poisoned.store).exclude(external_id__in=poisoned.poisoned).order_by("pk")[0]
    # One incident the replay cannot reproduce: the agent never said this for this question.
    unreproducible = {"id": "inc-ghost", "query": "What colour is the sky on a clear day?",
                      "output": "The answer is Evilton.", "retrieved": [clean.external_id],
                      "harm": {"type": "contains", "target": "Evilton"}}
    data = poisoned.incidents_jsonl() + (json.dumps(unreproducible) + "\n").encode()
    incidents = services.incidents_import(store=poisoned.store, data=data, filename="incidents.jsonl", user=alice)
    with django_capture_on_commit_callbacks(execute=True):
        r = services.audit_run_create(store=poisoned.store, incident_ids=[i.pk for i in incidents], user=alice)
    r.refresh_from_db()
    assert r.status == AuditRun.Status.DONE, r.error
    return r


def test_the_headline_leaves_out_what_the_replay_did_not_reproduce(client, run, alice, acme):
    r = ui_selectors.audit_results(organization=acme, audit_run_id=run.pk)
    assert r["not_reproduced"] == ["inc-ghost"]
    harmful = [e for e in r["event_rows"] if e["harmful_before"]]
    assert r["harmful_before"] == len(harmful) - 1
    assert r["positive_count"] == AuditSuspect.objects.filter(run=run, ds__gt=0).count() < r["suspect_count"]
    client.force_login(alice)
    page = client.get(f"/audits/{run.pk}/").content.decode()
    assert "1 not reproduced" in page and "inc-ghost" in page
    assert "suspects with a positive score" in page
    assert "batch ," not in page and "batch , " not in page


def test_each_credited_suspect_has_its_evidence(run, acme):
    r = ui_selectors.audit_results(organization=acme, audit_run_id=run.pk)
    top = r["suspects"][0]
    ev = top["evidence"]
    assert ev["text"] == Memory.objects.get(pk=top["memory_pk"]).text
    assert ev["incidents"] and all(i["observed_output"] == "The answer is Evilton." for i in ev["incidents"])
    credited = [i for i in ev["incidents"] if (i["score"] or 0) > 0]
    assert credited
    for i in credited:
        # The replay with everything in place was harmful; without the memory (or its group) less so.
        assert i["with_it"]["harmful"]
        dropped = [x for x in (i["without_it"], i["without_group"]) if x is not None]
        assert dropped and min(x["harm"] for x in dropped) < i["with_it"]["harm"]
    # DS as the sum of the normalised parts it really used, each explained.
    alpha = run.settings["alpha"]
    assert top["ds"] == pytest.approx(alpha * ev["cmis_hat"] + (1 - alpha) * ev["cas_hat"], abs=1e-3) or \
        "later round" in ev["explain"]["ds"]
    assert f"{ev['cas_hat']:.3f}" in ev["explain"]["cas"] and ev["explain"]["ds"].startswith(f"DS {top['ds']:.3f}")
    assert all(s["evidence"] is None for s in r["suspects"] if s["ds"] <= 0)


def test_the_review_queue_shows_the_evidence_and_earlier_decisions(client, run, alice, bob, acme,
                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        created = services.proposals_create_from_run(audit_run=run, user=alice)
    p = created[0]
    client.force_login(bob)
    page = html.unescape(client.get("/review/").content.decode())
    start = page.index(f'data-evidence-for="{p.pk}"')
    panel = page[start:page.index("</details>", start)]
    memory = Memory.objects.get(pk=p.memory_id)
    assert memory.text.splitlines()[0] in panel
    assert "Replayed without it" in panel and "Observed (the incident)" in panel
    assert "normalised" in panel and f"DS {p.scores['ds']:.3f}" in panel


def test_the_memory_page_shows_its_latest_evidence_and_review_history(client, run, alice, bob, acme,
                                                                     django_capture_on_commit_callbacks):
    top = AuditSuspect.objects.filter(run=run).order_by("rank").select_related("memory")[0]
    with django_capture_on_commit_callbacks(execute=True):
        [p] = services.proposals_create_from_run(audit_run=run, user=alice, memory_ids=[top.memory_id])
    client.force_login(bob)
    page = html.unescape(client.get(f"/memories/{top.memory_id}/").content.decode())
    evidence = page[page.index('id="evidence"'):page.index('id="review-history"')]
    assert f"audit #{run.pk}" in evidence and "Replayed without it" in evidence
    assert f"#{p.pk}" in page[page.index('id="review-history"'):]
    assert "in recall (flagged" in page


def test_the_table_shows_the_normalised_parts_that_add_up_to_ds(client, run, alice, acme):
    client.force_login(alice)
    page = html.unescape(client.get(f"/audits/{run.pk}/").content.decode())
    top = AuditSuspect.objects.filter(run=run).order_by("rank")[0]
    row = page[page.index(f'data-memory="{top.memory_id}"'):]
    row = row[:row.index("</tr>")]
    values = [v.split("<")[0] for v in row.split('<span class="val">')[1:]]
    assert values[0] == f"{top.cmis_hat:.3f}" and values[1] == f"{top.cas_hat:.3f}"
    assert f"raw {top.cas:.3f}" in row  # the raw value stays in the tooltip
    # Every term of the page is explained in place and in the glossary.
    glossary = page[page.index('id="glossary"'):]
    for term in ("CMIS", "CAS", "DS", "In R*", "Single / Group", "Reproduced", "Residual harm", "Now answers"):
        assert f"<dt>{term}</dt>" in glossary
    assert 'title="Whether the agent actually retrieved' in page


def test_the_graph_defaults_to_the_batch_and_its_neighbours_laid_out_once(client, run, alice, acme, monkeypatch):
    from audits.engine import layout

    calls = []
    real = layout.focus_view
    monkeypatch.setattr(layout, "focus_view", lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
    first = ui_selectors.audit_results(organization=acme, audit_run_id=run.pk)
    again = ui_selectors.audit_results(organization=acme, audit_run_id=run.pk)

    assert len(calls) <= 1 and first["graph_views"] == again["graph_views"]  # cached (or already warm)
    focus, full = first["graph_views"]["focus"], first["graph_views"]["full"]
    batch = set((run.results or {}).get("batch") or [])
    assert batch and batch <= {n["id"] for n in focus["nodes"] if n["kind"] == "memory"}
    assert len(focus["nodes"]) < len(full["nodes"]) == len(first["graph"]["nodes"])
    client.force_login(alice)
    page = client.get(f"/audits/{run.pk}/").content.decode()
    data = json.loads(page.split('<script id="graph-data" type="application/json">')[1].split("</script>")[0])
    assert set(data) == {"focus", "full", "memory_url"}
    assert 'data-graph-view="full"' in page and "Batch and neighbours" in page


def test_the_evidence_panel_draws_the_memorys_neighbourhood(client, run, alice, acme):
    r = ui_selectors.audit_results(organization=acme, audit_run_id=run.pk)
    top = r["suspects"][0]
    ego = top["evidence"]["ego"]
    node = next(n for n in r["graph"]["nodes"] if n["id"] == top["external_id"])
    assert ego["center"]["id"] == node["id"] and ego["degree"] == sum(
        1 for e in r["graph"]["edges"] if node["id"] in (e["source"], e["target"]) and e["source"] != e["target"])
    client.force_login(alice)
    page = client.get(f"/memories/{top['memory_pk']}/").content.decode()
    assert "data-ego" in page and "Neighbourhood in the consistency graph" in page


def test_the_worker_can_lay_the_graph_out_before_anyone_opens_the_page(run, acme, monkeypatch):
    from audits.engine import layout

    # The run finished just now: its cache key (run, finish time, graph digest) is new.
    ui_selectors.graph_views_warm(run=run)
    monkeypatch.setattr(layout, "focus_view", lambda *a, **kw: pytest.fail("laid out again on a page view"))
    monkeypatch.setattr(layout, "full_view", lambda *a, **kw: pytest.fail("laid out again on a page view"))
    assert ui_selectors.audit_results(organization=acme, audit_run_id=run.pk)["graph_views"]["focus"]["nodes"]
