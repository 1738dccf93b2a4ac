"""Recall through MemAudit, so a quarantine reaches the agent.

- ``MemAuditClient``: ``recall``, ``add``, ``outcome``; every recall's signed receipt is kept
  (``receipts``) and can be checked (``verify``).
- ``MemAuditStore`` (``memaudit_client.langgraph``): a LangGraph ``BaseStore`` backed by a store.
- ``Mem0Facade`` (``memaudit_client.mem0``): ``search``, ``add``, ``get_all``, ``history`` shaped
  like ``mem0.Memory``.

Switching an agent is one line: ``store = MemAuditStore(MemAuditClient(url, store_id, token))``
where it had ``InMemoryStore()``; ``memory = Mem0Facade(client)`` where it had ``Memory()``.
"""

from memaudit_client.client import MemAuditClient, MemAuditError, Recall
from memaudit_client.mem0 import Mem0Facade

__all__ = ["Mem0Facade", "MemAuditClient", "MemAuditError", "Recall"]
