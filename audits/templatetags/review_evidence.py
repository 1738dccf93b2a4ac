"""The audit's sections on the ledger's memory page (evidence, review history).

A template tag rather than an import in ``ledger.views``: the ledger layer does not import the
audit layer (docs/architecture.md); the page asks the audit app to render its part.
"""

from __future__ import annotations

from django import template

from audits import selectors, ui_selectors

register = template.Library()


@register.inclusion_tag("audits/_memory_review.html")
def memory_review(memory) -> dict:
    """Evidence from the latest audit that credits ``memory``, and every proposal and decision
    on it. ``memory`` comes from an organization-scoped selector, so its organization scopes these."""
    organization = memory.organization
    return {
        "evidence": ui_selectors.memory_evidence(organization=organization, memory=memory),
        "review_history": selectors.proposal_history(organization=organization, memory_ids=[memory.pk])[memory.pk],
    }
