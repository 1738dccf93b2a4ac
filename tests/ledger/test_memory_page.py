"""The memory page states its recall status with since-when and by whom, and shows the weight
history readably: a step list for a few signed weights, a dated chart for more (issue 15)."""

# ruff: noqa: F811

from __future__ import annotations

import html
import json

import pytest

from ledger.models import Memory

# tests/audits' fixtures: the personas' organizations, the housekeeper, a poisoned store.
from tests.audits.conftest import _audit_test_settings, acme, globex, housekeeping, org_a, org_b, poisoned  # noqa: F401

pytestmark = pytest.mark.django_db


def _label(memory: Memory, label: str, actor: str = "user:bob"):
    from ledger.services import label_append

    return label_append(memory_id=memory.pk, label=label, reason="test", evidence={}, actor=actor)


def _page(client, user, memory) -> str:
    client.force_login(user)
    return html.unescape(client.get(f"/memories/{memory.pk}/").content.decode())


def test_a_quarantined_memory_says_it_is_out_of_recall_since_when_and_by_whom(client, alice, poisoned):
    m = Memory.objects.filter(store=poisoned.store).first()
    lab = _label(m, "poison_likely")

    page = _page(client, alice, m)

    status = page[page.index('id="memory-recall"'):page.index("</dd>", page.index('id="memory-recall"'))]
    assert "out of recall" in status and f"since {lab.time}" in " ".join(status.split()).replace(
        '<span class="mono">', "").replace("</span>", "")
    assert "by user:bob" in status and f"label #{lab.seq}" in status
    assert "(not served: out of recall)" in page


def test_a_refuted_memory_is_back_in_recall_since_the_refutation(client, alice, poisoned):
    m = Memory.objects.filter(store=poisoned.store).first()
    _label(m, "poison_likely")
    back = _label(m, "poison_refuted", actor="user:dana")

    page = _page(client, alice, m)

    status = page[page.index('id="memory-recall"'):page.index("</dd>", page.index('id="memory-recall"'))]
    assert "in recall" in status and "out of recall" not in status
    assert back.time in status and "by user:dana" in status and "poison_refuted" in status


def test_a_clean_memory_is_in_recall_since_it_was_signed(client, alice, poisoned):
    m = Memory.objects.filter(store=poisoned.store).first()
    page = _page(client, alice, m)
    assert 'id="recall-since"' in page and "signed at import" in page


def test_few_weights_are_a_step_list_and_more_a_chart_with_plotly_dates(client, alice, poisoned):
    from ledger.services import transition_append

    m = Memory.objects.filter(store=poisoned.store).first()
    page = _page(client, alice, m)
    assert 'id="weight-steps"' in page and "(initial)" in page and 'id="weight-chart"' not in page

    for valence_q in (500, -250):
        transition_append(memory_id=m.pk, valence_q=valence_q, evidence=["test"])
    raw = client.get(f"/memories/{m.pk}/").content.decode()
    data = json.loads(html.unescape(raw.split('data-weights="')[1].split('"')[0]))
    assert len(data["t"]) == 3 and all("T" not in t and not t.endswith("Z") for t in data["t"])
