"""Outgoing HTTP under the operator's policy: the one client every request to an outside
address goes through (agent connectors, LLM judges, notification webhooks).

Pure: standard library only, no Django, so the audit engine and every app can use it
(docs/architecture.md). ``egress.client`` has the policy and the client.
"""
