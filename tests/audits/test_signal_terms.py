"""The results page names each signal in words and says what it measures; the JSON keeps the
engine's names (``audits.ui_selectors.SIGNAL_TERMS``)."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from audits.engine.graph import SIGNALS
from audits.ui_selectors import SIGNAL_TERMS, signal_rows


def test_every_graph_signal_has_a_label_and_an_explanation():
    for name in SIGNALS:
        label, explanation = SIGNAL_TERMS[name]
        assert label and label != name and explanation
    assert signal_rows({"something_new": 0.5}) == [{"name": "something_new", "label": "something_new", "help": "",
                                                    "value": 0.5}]


@pytest.mark.django_db(transaction=True)  # the audit runs through the broker, as in test_verdict_wiring
def test_the_results_page_shows_signals_by_their_labels(client, finished_run, alice):
    suspect = next(s for s in finished_run.suspects.filter(ds__gt=0).order_by("rank") if s.signals)
    name = next(iter(suspect.signals))
    label, explanation = SIGNAL_TERMS[name]
    client.force_login(alice)
    page = client.get(f"/audits/{finished_run.pk}/").content.decode()
    assert f'<span title="{escape(explanation)}" data-signal="{name}">{escape(label)} ' in page
    assert "CAS signals:" not in page
