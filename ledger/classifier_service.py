"""The ingest-time classifier wired into the ledger (DESIGN section 3, "Ingest-time classifier").

``ledger.classifier`` decides (pure, deterministic, versioned); this module feeds it the
store's passages and records each flag as a ``ClassifierFinding``; the housekeeper turns a finding
into a signed ``poison_likely`` label whose actor is ``ingest-classifier@<version>`` and whose
reason/evidence are the classifier's own, after re-checking it (``ledger.decisions``). The label
task carries the finding's id only, never a label.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ledger import dispatch
from ledger.classifier import ACTOR, Flag, classify
from ledger.dense import DenseIndex
from ledger.embedding_store import cached_vectors, embedder_for_store, embeddings_compute
from ledger.embeddings import HashingEmbedder
from ledger.models import ClassifierFinding, EpistemicLabel, Memory, Store
from ledger.services import decision_labels_sign

logger = logging.getLogger(__name__)


def signable_evidence(evidence: dict) -> dict:
    """Signed bodies hold no floats (DESIGN section 3): a float figure ``x`` becomes the integer
    ``x_milli`` = round(x * 1000); everything else is kept as it is."""
    out: dict = {}
    for key, value in evidence.items():
        if isinstance(value, float):
            out[f"{key}_milli"] = round(value * 1000)
        elif isinstance(value, dict):
            out[key] = signable_evidence(value)
        else:
            out[key] = value
    return out


def ingest_flags(*, store: Store, memory_ids: Sequence[int] | None = None) -> list[tuple[int, Flag]]:
    """Run the classifier over the whole store; return (memory pk, flag) for the given memories.

    The whole store is passed so that a pattern split across two imports is still seen; only
    the new batch (``memory_ids``; all when None) gets flags.
    """
    rows = list(Memory.objects.filter(store=store).order_by("external_id").values_list(
        "pk", "external_id", "text", "content_sha256"))
    pk_of = {ext: pk for pk, ext, _, _ in rows}
    only = None
    if memory_ids is not None:
        wanted = set(memory_ids)
        only = [ext for pk, ext, _, _ in rows if pk in wanted]
    flags = classify([(ext, text) for _, ext, text, _ in rows], only=only, dense=store_dense(store, rows))
    return [(pk_of[f.memory_id], f) for f in flags]


def store_dense(store: Store, rows: Sequence[tuple]) -> DenseIndex | None:
    """The store's embedding neighbourhoods from the vectors recall uses (embedding the few
    texts not embedded yet); None for an empty store, or when the store's embedder is the
    hashing test double (the classifier's embedding thresholds assume a sentence model)."""
    embedder = embedder_for_store(store)
    if not rows or isinstance(embedder, HashingEmbedder):
        return None
    embeddings_compute(memories=Memory.objects.filter(store=store).select_related("store"), embedder=embedder)
    vectors = cached_vectors(model=embedder.model_name, hashes=(bytes(h) for *_, h in rows))
    matrix = np.stack([vectors[bytes(h)] for *_, h in rows])
    return DenseIndex([ext for _, ext, _, _ in rows], matrix, model=embedder.model_name)


def ingest_classify(*, store: Store, memory_ids: Sequence[int] | None = None, inline: bool = False) -> int:
    """Flag the batch: record one ``ClassifierFinding`` per flag and have the housekeeper sign
    a ``poison_likely`` label from each (it re-checks the finding; ``ledger.decisions``).

    Memories already labelled ``poison_likely`` keep their label; a finding is recorded once per
    memory and classifier version, and its label's idempotency key makes a retried task
    harmless. ``inline`` signs in this process (the caller holds the housekeeper role).
    Returns the number of flags.
    """
    flagged = ingest_flags(store=store, memory_ids=memory_ids)
    already = set(Memory.objects.filter(pk__in=[pk for pk, _ in flagged],
                                        epistemic_state=EpistemicLabel.Label.LIKELY).values_list("pk", flat=True))
    hashes = dict(Memory.objects.filter(pk__in=[pk for pk, _ in flagged]).values_list("pk", "content_sha256"))
    for pk, flag in flagged:
        if pk in already:
            continue
        finding, _ = ClassifierFinding.objects.get_or_create(
            memory_id=pk, classifier=ACTOR,
            defaults={"organization_id": store.organization_id, "reason": flag.reason,
                      "evidence": signable_evidence(flag.evidence), "content_sha256": bytes(hashes[pk])})
        if inline:
            decision_labels_sign(decision=f"finding:{finding.pk}")
        else:
            dispatch.finding_label(finding.pk)
    if flagged:
        logger.warning("ingest classifier %s flagged %d memories in store %s", ACTOR, len(flagged), store.pk)
    return len(flagged)
