"""Authorization matrix (DESIGN section 2, OWASP ASVS V4): every page and API endpoint, found
through the URL resolver at test time, x role (anonymous, analyst, reviewer, org admin,
superuser without membership) x object of the own or of another organization, against the
explicit table ``EXPECTED``. A URL without a row fails the test, so every new endpoint gets a
decision. Write requests carry a valid body (ids of the column's organization), so the status
is the authorization decision rather than a validation error where possible.

Codes per cell: five roles in ``ROLES`` order, "own | other". Reading guide: 302 on pages for
anonymous = redirect to login; 403 = role or no membership; 404 = another organization's
object; 405 = method not allowed (checked after the role on some pages); 400 = authorized
but the (deliberately minimal) form is incomplete.
"""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from tests.hardening.authz import ROLES, fill, url_patterns
from tests.hardening.conftest import TABLES
from tests.hardening.world import build_tenant

pytestmark = pytest.mark.django_db


def BODIES(t) -> dict[str, object]:  # noqa: N802 - a table
    """Valid bodies for write endpoints, with the ids of tenant ``t`` (JSON for the API)."""
    return {
        "review-decide": {"decision": "approve", "reason": "checked"},
        "review-bulk": {"proposals": [t.proposal.pk], "decision": "approve", "reason": "checked"},
        "member-role": {"role": "reviewer"},
        "review-policy": {"four_eyes": "on"},
        "store-list": {"name": "Page store"},
        "api-stores": {"name": "New store"},
        "api-store-memories": [{"id": "new-1", "text": "a new memory"}],
        "api-store-tokens": {"name": "agent 2"},
        "api-store-recall": {"query": "capital of Japan", "k": 2},
        "api/v1/stores/<int:store_id>/recall/": {"query": "capital of Japan", "k": 2},
        "api-receipt-outcomes": {"memory": t.receipt.body["results"][0]["memory"], "reward": 0.5},
        "api/v1/receipts/<int:receipt_id>/outcomes/": {"memory": t.receipt.body["results"][0]["memory"],
                                                       "reward": 0.5},
        "api-incident-create": {"store": t.store.pk, "query": "q?", "output": "o", "retrieved": ["m4"],
                                "harm": {"type": "contains", "target": "o"}},
        "api-audit-create": {"store": t.store.pk, "incident_ids": [t.incident.pk]},
        "api-audit-propose": {"memory_ids": [t.memory.pk]},
        "api-review-approve": {"reason": "checked"},
        "api-review-refute": {"reason": "checked"},
        "api-reviews-approve": {"ids": [t.proposal.pk], "reason": "checked"},
        "api-reviews-refute": {"ids": [t.proposal.pk], "reason": "checked"},
        "agent-endpoint-list": {"name": "page-agent", "connector": "webhook", "base_url": "https://a.example/h"},
        "agent-endpoint-edit": {"name": "edited", "connector": "webhook", "base_url": "https://a.example/h"},
        "api-agent-endpoints": {"name": "api-agent", "connector": "webhook", "base_url": "https://a.example/h",
                                "secret": "s"},
        # case work (issue 15)
        "proposal-note-add": {"body": "checked the source"},
        "suspect-notes": {"body": "checked the source"},
        "proposal-assign": {"assignee": "me"},
        "api-review-notes": {"body": "checked the source"},
        "api-suspect-notes": {"body": "checked the source"},
        "api-review-assign": {"assignee": t.users["reviewer"].pk},
    }


def request(client, user, method: str, key: str, route: str, tenant) -> int:
    client.logout()
    if user is not None:
        client.force_login(user)
    url = fill(route, tenant.ids)
    body = BODIES(tenant).get(key) if method == "post" else None
    with transaction.atomic():
        if body is None:
            resp = getattr(client, method)(url)
        elif route.startswith("api/"):
            resp = client.post(url, json.dumps(body), content_type="application/json")
        else:
            resp = client.post(url, body)
        transaction.set_rollback(True)
    return resp.status_code


# Roles: anonymous, analyst, reviewer, admin, superuser; "own | other" organization.
EXPECTED: dict[tuple[str, str], str] = {
    ("login", "GET"): "200 302 302 302 302 | 200 302 302 302 302",
    ("login", "POST"): "200 302 302 302 302 | 200 302 302 302 302",
    ("logout", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("logout", "POST"): "302 302 302 302 302 | 302 302 302 302 302",
    ("status", "GET"): "200 200 200 200 200 | 200 200 200 200 200",
    ("status", "POST"): "200 200 200 200 200 | 200 200 200 200 200",
    ("members", "GET"): "302 403 403 200 403 | 302 403 403 200 403",
    ("members", "POST"): "302 403 403 200 403 | 302 403 403 200 403",
    ("member-role", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("member-role", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    # The organization's review policy (four-eyes): org admins only; PUT on the API likewise
    # (tests/hardening/test_review_integrity.py).
    ("review-policy", "GET"): "302 403 403 200 403 | 302 403 403 200 403",
    ("review-policy", "POST"): "302 403 403 302 403 | 302 403 403 302 403",
    ("api-review-policy", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-review-policy", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("switch-organization", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("switch-organization", "POST"): "302 302 302 302 403 | 302 302 302 302 403",
    ("store-list", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    # Analysts upload memory stores (the product brief); reviewers only decide labels.
    ("store-list", "POST"): "302 302 403 302 403 | 302 302 403 302 403",
    ("store-detail", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("store-detail", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("store-import", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("store-import", "POST"): "302 200 403 200 403 | 302 404 404 404 403",
    ("import-detail", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("import-detail", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("import-progress", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("import-progress", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("memory-detail", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("memory-detail", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("ledger", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("ledger", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("ledger-verify", "GET"): "302 405 405 405 403 | 302 405 405 405 403",
    ("ledger-verify", "POST"): "302 302 302 302 403 | 302 302 302 302 403",
    ("ledger-tree-heads", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("ledger-tree-heads", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("favicon", "GET"): "301 301 301 301 301 | 301 301 301 301 301",
    ("favicon", "POST"): "405 405 405 405 405 | 405 405 405 405 405",
    ("ledger-tree-head", "GET"): "302 405 405 405 403 | 302 405 405 405 403",
    ("ledger-tree-head", "POST"): "302 302 302 302 403 | 302 302 302 302 403",
    ("receipt-check", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("receipt-check", "POST"): "302 200 200 200 403 | 302 200 200 200 403",
    ("witness-add", "GET"): "302 403 403 405 403 | 302 403 403 405 403",
    ("witness-add", "POST"): "302 403 403 302 403 | 302 403 403 302 403",
    ("witness-revoke", "GET"): "302 403 403 405 403 | 302 403 403 405 403",
    ("witness-revoke", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    # Witness endpoints are public by design (witnesses hold no account): size and hashes only.
    ("api-checkpoint", "GET"): "200 200 200 200 200 | 200 200 200 200 200",
    ("api-checkpoint", "POST"): "405 405 405 405 405 | 405 405 405 405 405",
    ("api-checkpoint-cosignature", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("api-checkpoint-cosignature", "POST"): "415 415 415 415 415 | 415 415 415 415 415",  # text/plain only
    ("api-consistency-proof", "GET"): "400 400 400 400 400 | 400 400 400 400 400",
    ("api-consistency-proof", "POST"): "405 405 405 405 405 | 405 405 405 405 405",
    ("ledger-export", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("ledger-export", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("keys", "GET"): "302 403 403 200 403 | 302 403 403 200 403",
    ("keys", "POST"): "302 403 403 405 403 | 302 403 403 405 403",
    ("keys-rotate", "GET"): "302 403 403 405 403 | 302 403 403 405 403",
    ("keys-rotate", "POST"): "302 403 403 302 403 | 302 403 403 302 403",
    ("keys-receipt-revoke", "GET"): "302 403 403 405 403 | 302 403 403 405 403",
    ("keys-receipt-revoke", "POST"): "302 403 403 302 403 | 302 403 403 302 403",
    ("dashboard", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("dashboard", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("dashboard-runs", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("dashboard-runs", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("incident-list", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("incident-list", "POST"): "302 200 403 200 403 | 302 200 403 200 403",
    ("incident-create", "GET"): "302 302 403 302 403 | 302 302 403 302 403",
    ("incident-create", "POST"): "302 400 403 400 403 | 302 400 403 400 403",
    ("incident-detail", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("incident-detail", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("audit-list", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("audit-list", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("audit-new", "GET"): "302 200 403 200 403 | 302 200 403 200 403",
    ("audit-new", "POST"): "302 200 403 200 403 | 302 200 403 200 403",
    ("audit-detail", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("audit-detail", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("audit-progress", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("audit-progress", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("audit-propose", "GET"): "302 405 403 405 403 | 302 405 403 405 403",
    ("audit-propose", "POST"): "302 302 403 302 403 | 302 404 403 404 403",
    ("audit-propose-corrections", "GET"): "302 405 403 405 403 | 302 405 403 405 403",
    ("audit-propose-corrections", "POST"): "302 302 403 302 403 | 302 404 403 404 403",
    ("audit-resume", "GET"): "302 405 403 405 403 | 302 405 403 405 403",
    ("audit-resume", "POST"): "302 302 403 302 403 | 302 404 403 404 403",
    ("review-queue", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("review-queue", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("review-pending", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("review-pending", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("review-bulk", "GET"): "302 403 405 405 403 | 302 403 405 405 403",
    ("review-bulk", "POST"): "302 403 302 302 403 | 302 403 302 302 403",
    ("review-decide", "GET"): "302 403 405 405 403 | 302 403 405 405 403",
    ("review-decide", "POST"): "302 403 302 302 403 | 302 403 404 404 403",
    ("api-me", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-me", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-members", "GET"): "403 403 403 200 403 | 403 403 403 200 403",
    ("api-members", "POST"): "403 403 403 405 403 | 403 403 403 405 403",
    ("api-stores", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-stores", "POST"): "403 201 403 201 403 | 403 201 403 201 403",
    ("api-store", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-store", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    # Agent tokens are accepted here too (their own store), so anonymous gets 401 + WWW-Authenticate.
    ("api-store-memories", "GET"): "401 200 200 200 403 | 401 404 404 404 403",
    ("api-store-memories", "POST"): "401 202 403 202 403 | 401 404 403 404 403",
    ("api-store-tokens", "GET"): "403 403 403 405 403 | 403 403 403 405 403",
    ("api-store-tokens", "POST"): "403 403 403 201 403 | 403 403 403 404 403",
    ("api-store-recall", "GET"): "401 405 405 405 403 | 401 405 405 405 403",
    ("api-store-recall", "POST"): "401 200 200 200 403 | 401 404 404 404 403",
    ("api/v1/stores/<int:store_id>/recall/", "GET"): "401 405 405 405 403 | 401 405 405 405 403",
    ("api/v1/stores/<int:store_id>/recall/", "POST"): "401 200 200 200 403 | 401 404 404 404 403",
    ("api-memory", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-memory", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-import-formats", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-import-formats", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-import", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-import", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-receipt", "GET"): "401 200 200 200 403 | 401 404 404 404 403",
    ("api-receipt", "POST"): "401 405 405 405 403 | 401 405 405 405 403",
    ("api-receipt-outcomes", "GET"): "401 405 405 405 403 | 401 405 405 405 403",
    ("api-receipt-outcomes", "POST"): "401 201 201 201 403 | 401 404 404 404 403",
    ("api/v1/receipts/<int:receipt_id>/outcomes/", "GET"): "401 405 405 405 403 | 401 405 405 405 403",
    ("api/v1/receipts/<int:receipt_id>/outcomes/", "POST"): "401 201 201 201 403 | 401 404 404 404 403",
    ("api-incidents", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-incidents", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-incident-create", "GET"): "403 405 403 405 403 | 403 405 403 405 403",
    ("api-incident-create", "POST"): "403 201 403 201 403 | 403 404 403 404 403",
    ("api-incident-upload", "GET"): "403 405 403 405 403 | 403 405 403 405 403",
    ("api-incident-upload", "POST"): "403 400 403 400 403 | 403 400 403 400 403",
    ("api-incident", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-incident", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-audits", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-audits", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-audit-create", "GET"): "403 405 403 405 403 | 403 405 403 405 403",
    ("api-audit-create", "POST"): "403 201 403 201 403 | 403 404 403 404 403",
    ("api-audit-corrections", "GET"): "403 405 403 405 403 | 403 405 403 405 403",
    ("api-audit-corrections", "POST"): "403 201 403 201 403 | 403 404 403 404 403",
    ("api-audit", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-audit", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-audit-progress", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-audit-progress", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-audit-suspects", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-audit-suspects", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-audit-propose", "GET"): "403 405 403 405 403 | 403 405 403 405 403",
    ("api-audit-propose", "POST"): "403 201 403 201 403 | 403 404 403 404 403",
    ("api-reviews", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-reviews", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-reviews-approve", "GET"): "403 403 405 405 403 | 403 403 405 405 403",
    ("api-reviews-approve", "POST"): "403 403 200 200 403 | 403 403 200 200 403",
    ("api-reviews-refute", "GET"): "403 403 405 405 403 | 403 403 405 405 403",
    ("api-reviews-refute", "POST"): "403 403 200 200 403 | 403 403 200 200 403",
    ("api-review-approve", "GET"): "403 403 405 405 403 | 403 403 405 405 403",
    ("api-review-approve", "POST"): "403 403 200 200 403 | 403 403 404 404 403",
    ("api-review-refute", "GET"): "403 403 405 405 403 | 403 403 405 405 403",
    ("api-review-refute", "POST"): "403 403 200 200 403 | 403 403 404 404 403",
    # Agent endpoints (issue 11): every member reads the names; only org admins write.
    ("agent-endpoint-list", "GET"): "302 200 200 200 403 | 302 200 200 200 403",
    ("agent-endpoint-list", "POST"): "302 403 403 302 403 | 302 403 403 302 403",
    ("agent-endpoint-edit", "GET"): "302 403 403 200 403 | 302 403 403 404 403",
    ("agent-endpoint-edit", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    ("agent-endpoint-delete", "GET"): "302 403 403 405 403 | 302 403 403 405 403",
    ("agent-endpoint-delete", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    ("api-agent-endpoints", "GET"): "403 200 200 200 403 | 403 200 200 200 403",
    ("api-agent-endpoints", "POST"): "403 403 403 201 403 | 403 403 403 201 403",
    ("api-agent-endpoint", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-agent-endpoint", "POST"): "403 403 403 405 403 | 403 403 403 405 403",
    # The API description needs a login (issue 11); the docs page sends anonymous visitors to it.
    ("schema", "GET"): "403 200 200 200 200 | 403 200 200 200 200",
    ("schema", "POST"): "403 405 405 405 405 | 403 405 405 405 405",
    ("api-docs", "GET"): "302 200 200 200 200 | 302 200 200 200 200",
    ("api-docs", "POST"): "302 405 405 405 405 | 302 405 405 405 405",
    # Accounts (issue 11). Passwords: one's own account, any logged-in user; resets are public.
    ("password_change", "GET"): "302 200 200 200 200 | 302 200 200 200 200",
    ("password_change", "POST"): "302 200 200 200 200 | 302 200 200 200 200",
    ("password_change_done", "GET"): "302 200 200 200 200 | 302 200 200 200 200",
    ("password_change_done", "POST"): "302 405 405 405 405 | 302 405 405 405 405",
    ("password_reset", "GET"): "200 200 200 200 200 | 200 200 200 200 200",
    ("password_reset", "POST"): "200 200 200 200 200 | 200 200 200 200 200",
    ("password_reset_done", "GET"): "200 200 200 200 200 | 200 200 200 200 200",
    ("password_reset_done", "POST"): "405 405 405 405 405 | 405 405 405 405 405",
    ("password_reset_confirm", "GET"): "200 200 200 200 200 | 200 200 200 200 200",
    ("password_reset_confirm", "POST"): "200 200 200 200 200 | 200 200 200 200 200",
    ("password_reset_complete", "GET"): "200 200 200 200 200 | 200 200 200 200 200",
    ("password_reset_complete", "POST"): "405 405 405 405 405 | 405 405 405 405 405",
    ("member-active", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("member-active", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    ("member-remove", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("member-remove", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    ("invitation-revoke", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("invitation-revoke", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    # The invitee's page: the link is the credential; an empty POST is an incomplete signup form
    # (anonymous) or "not now" (logged in). Joining needs an explicit accept (test_accounts).
    ("invitation-accept", "GET"): "200 200 200 200 200 | 200 200 200 200 200",
    ("invitation-accept", "POST"): "200 302 302 302 302 | 200 302 302 302 302",
    ("agent-tokens", "GET"): "302 403 403 200 403 | 302 403 403 200 403",
    ("agent-tokens", "POST"): "302 403 403 200 403 | 302 403 403 200 403",
    ("agent-token-revoke", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("agent-token-revoke", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    ("activity", "GET"): "302 403 403 200 403 | 302 403 403 200 403",
    ("activity", "POST"): "302 403 403 405 403 | 302 403 403 405 403",
    ("api-activity", "GET"): "403 403 403 200 403 | 403 403 403 200 403",
    ("api-activity", "POST"): "403 403 403 405 403 | 403 403 403 405 403",
    ("api-tokens", "GET"): "403 403 403 200 403 | 403 403 403 200 403",
    ("api-tokens", "POST"): "403 403 403 405 403 | 403 403 403 405 403",
    ("api-token-revoke", "GET"): "403 403 403 405 403 | 403 403 403 405 403",
    ("api-token-revoke", "POST"): "403 403 403 200 403 | 403 403 403 404 403",
    ("notification-settings", "GET"): "302 403 403 200 403 | 302 403 403 200 403",
    ("notification-settings", "POST"): "302 403 403 200 403 | 302 403 403 200 403",
    ("webhook-delete", "GET"): "405 405 405 405 405 | 405 405 405 405 405",
    ("webhook-delete", "POST"): "302 403 403 302 403 | 302 403 403 404 403",
    # Case work (issue 15): every member notes and exports; reviewers and org admins assign.
    ("proposal-note-add", "GET"): "302 405 405 405 403 | 302 405 405 405 403",
    ("proposal-note-add", "POST"): "302 302 302 302 403 | 302 404 404 404 403",
    ("proposal-assign", "GET"): "302 403 405 405 403 | 302 403 405 405 403",
    ("proposal-assign", "POST"): "302 403 302 302 403 | 302 403 404 404 403",
    ("audit-suspects", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("audit-suspects", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("suspect-notes", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("suspect-notes", "POST"): "302 302 302 302 403 | 302 404 404 404 403",
    ("audit-export-csv", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("audit-export-csv", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("audit-export-json", "GET"): "302 200 200 200 403 | 302 404 404 404 403",
    ("audit-export-json", "POST"): "302 405 405 405 403 | 302 405 405 405 403",
    ("api-review-notes", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-review-notes", "POST"): "403 201 201 201 403 | 403 404 404 404 403",
    ("api-suspect-notes", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-suspect-notes", "POST"): "403 201 201 201 403 | 403 404 404 404 403",
    ("api-review-assign", "GET"): "403 403 405 405 403 | 403 403 405 405 403",
    ("api-review-assign", "POST"): "403 403 200 200 403 | 403 403 404 404 403",
    ("api-audit-export-csv", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-audit-export-csv", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
    ("api-audit-export-json", "GET"): "403 200 200 200 403 | 403 404 404 404 403",
    ("api-audit-export-json", "POST"): "403 405 405 405 403 | 403 405 405 405 403",
}


def _account_ids(t) -> None:
    """Ids of the accounts pages (issue 11): an invitation (and its link token), an agent
    token, a password-reset link (an invalid one: the page answers for any), a webhook."""
    from ledger.models import AgentToken
    from orgs.notifications import webhook_create
    from orgs.services import invitation_create

    invitation, token = invitation_create(organization=t.organization, invited_by=t.users["admin"],
                                          email="new@example.com", role="analyst")
    t.ids.update({"invitation_id": invitation.pk, "token": token, "uidb64": "MQ",
                  "token_id": AgentToken.objects.filter(store=t.store).first().pk,
                  "webhook_id": webhook_create(organization=t.organization, url="https://example.com/hook",
                                               events=["audit.finished"])[0].pk})


@pytest.fixture
def matrix_world(organization, housekeeper, recall_env, django_user_model):
    from orgs.models import Organization

    own = build_tenant(organization, "acme")
    other = build_tenant(Organization.objects.create(name="Globex", slug="globex"), "globex")
    for t in (own, other):
        _account_ids(t)
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    users = {"anonymous": None, **{r: own.users[r] for r in ("analyst", "reviewer", "admin")}, "superuser": root}
    return own, other, users


def test_every_url_has_an_expectation():
    keys = {k for k, _ in url_patterns()}
    missing = sorted(k for k in keys if (k, "GET") not in EXPECTED or (k, "POST") not in EXPECTED)
    assert not missing, f"new URL(s) without a row in EXPECTED: {missing}"
    stale = sorted({k for k, _ in EXPECTED} - keys)
    assert not stale, f"rows for URLs that no longer exist: {stale}"


def test_the_authorization_matrix(client, matrix_world):
    own, other, users = matrix_world
    mismatches = []
    cells = 0
    for key, route in url_patterns():
        for method in ("get", "post"):
            want = EXPECTED.get((key, method.upper()))
            if want is None:
                continue
            got = " | ".join(" ".join(str(request(client, users[role], method, key, route, t)) for role in ROLES)
                             for t in (own, other))
            cells += 10
            if got != want:
                mismatches.append(f"{method.upper()} {key}: expected {want}, got {got}")
    TABLES["authorization matrix"].append((f"{cells} cells", f"{len(mismatches)} mismatches"))
    assert not mismatches, "\n".join(mismatches)


def test_bulk_decisions_skip_another_organizations_proposals(client, matrix_world):
    own, other, users = matrix_world
    client.force_login(users["reviewer"])
    resp = client.post("/api/v1/reviews/approve/", json.dumps({"ids": [other.proposal.pk], "reason": "x"}),
                       content_type="application/json")
    assert resp.status_code == 200 and resp.json()["decided"] == []
    other.proposal.refresh_from_db()
    assert other.proposal.status == "open"
