"""The ledger's writes, split by job (HackSoft's services layer):

* :mod:`ledger.services.keys` — housekeeper epochs, receipt-key endorsements, the key ring;
* :mod:`ledger.services.stores` — stores and unsigned memories;
* :mod:`ledger.services.writes` — the verified write path (genesis, transitions, labels);
* :mod:`ledger.services.sql` — its hand-built SQL (locks, one-query writes, the one-round-trip guard);
* :mod:`ledger.services.tree_heads` — signed tree heads and checkpoints;
* :mod:`ledger.services.corrections` — weight transitions a recorded decision calls for (issue 16).

Callers outside the ledger use the names re-exported here (``from ledger import services``);
modules of the ledger import from the submodule that owns a function.
"""

from ledger.services.corrections import decision_transitions_sign, transition_for_key
from ledger.services.keys import (
    housekeeper_init,
    housekeeper_revoke,
    housekeeper_rotate,
    receipt_key_endorse,
    receipt_key_revoke,
)
from ledger.services.sql import _tips, _tips_key
from ledger.services.stores import memories_create, store_create
from ledger.services.tree_heads import checkpoint_origin_of, tree_head_issue, tree_heads_issue_due
from ledger.services.writes import (
    DEFAULT_ETA_Q,
    GENESIS_BATCH,
    EntryRejected,
    decision_labels_sign,
    entry_insert_verified,
    label_append,
    memory_genesis_sign,
    outcomes_apply,
    transition_append,
    transitions_append,
)
from ledger.signing import key_endorsement_from_row

__all__ = [
    "DEFAULT_ETA_Q", "GENESIS_BATCH", "EntryRejected", "_tips", "_tips_key", "checkpoint_origin_of",
    "decision_labels_sign", "decision_transitions_sign", "entry_insert_verified", "housekeeper_init",
    "housekeeper_revoke", "housekeeper_rotate", "key_endorsement_from_row", "label_append", "memories_create",
    "memory_genesis_sign", "outcomes_apply", "receipt_key_endorse", "receipt_key_revoke", "store_create",
    "transition_append", "transition_for_key", "transitions_append", "tree_head_issue", "tree_heads_issue_due",
]
