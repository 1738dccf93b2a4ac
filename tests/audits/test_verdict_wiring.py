"""Issue 16 in the product: the engine's poison/honest-error verdicts reach the proposal and the
results page (audits/services.py proposals_create_from_run, audits/ui_selectors.py, template)."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from audits import services
from audits.models import AuditRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_run_keeps_a_verdict_with_reasons_for_every_batch_member(finished_run):
    res = finished_run.results
    assert set(res["verdicts"]) == set(res["batch_external_ids"])
    for v in res["verdicts"].values():
        assert v["verdict"] in ("poison-like", "honest-error") and v["reasons"]
    assert res["collateral"]["questions"] > 0 and "utility_cost" in res["collateral"]
    assert "cas_auc" in res["signal_influence"]


def test_batch_proposals_leave_out_honest_errors_and_say_why_the_rest_are_poison(finished_run, alice):
    res = dict(finished_run.results)
    batch = list(res["batch_external_ids"])
    assert len(batch) >= 2
    honest = batch[0]
    # As the engine writes it when it judges a member an honest error.
    res["verdicts"][honest] = {"memory_id": honest, "verdict": "honest-error",
                               "reasons": ["isolated: no adversarial marker"], "corrected_by": None}
    AuditRun.objects.filter(pk=finished_run.pk).update(results=res)
    finished_run.refresh_from_db()
    made = services.proposals_create_from_run(audit_run=finished_run, user=alice)
    ext = {p.memory.external_id for p in made}
    assert honest not in ext and ext == set(batch) - {honest}
    for p in made:
        assert res["verdicts"][p.memory.external_id]["verdict"] in p.reason


def test_the_results_page_shows_both_groups(client, finished_run, alice):
    res = dict(finished_run.results)
    honest = res["batch_external_ids"][0]
    res["verdicts"][honest] = {"memory_id": honest, "verdict": "honest-error",
                               "reasons": ["outdated: an older version of a fact with a newer correction"],
                               "corrected_by": "m-new"}
    AuditRun.objects.filter(pk=finished_run.pk).update(results=res)
    client.force_login(alice)
    page = client.get(f"/audits/{finished_run.pk}/").content.decode()
    assert "Poison or honest error" in page
    assert "Honest errors (1)" in page and "corrected by" in page and "m-new" in page
    assert f"Poison-like ({len(res['batch_external_ids']) - 1})" in page
    assert "Collateral check" in page


def test_the_results_page_says_how_cmis_and_cas_were_weighted_for_this_store(client, finished_run, alice):
    inf = finished_run.results["signal_influence"]
    fit = inf["alpha_fit"]  # fitted on the store's own evidence; the analysis used it
    assert inf["alpha_used"] == fit["alpha"] and fit["seeds"] > 0 and fit["why"]
    client.force_login(alice)
    page = client.get(f"/audits/{finished_run.pk}/").content.decode()
    assert 'id="fusion"' in page and "How CMIS and CAS were weighted" in page
    assert f'<span id="fusion-alpha">{fit["alpha"]:.2f}</span>' in page and escape(fit["why"]) in page
    assert "batch member" in page and 'id="fusion-effect"' in page
    # CAS without weight (as a store whose evidence shows it no better than chance gets it).
    res = dict(finished_run.results)
    res["signal_influence"] = {**inf, "alpha_used": 1.0, "alpha_fit": {
        **fit, "alpha": 1.0, "why": "CAS separates this store's causal memories from clean ones no better than "
                                   "chance: no weight"}}
    AuditRun.objects.filter(pk=finished_run.pk).update(results=res)
    page = client.get(f"/audits/{finished_run.pk}/").content.decode()
    assert '<span id="fusion-alpha">1.00</span> × CMIS + 0.00 × CAS: CAS separates' in page
