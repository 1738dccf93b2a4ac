"""Step 7: one Flag per flagged passage, from the instruction rule and from suspicious groups."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ledger.classifier import learned
from ledger.classifier.grouping import find_groups
from ledger.classifier.instruction import instruction_markers
from ledger.classifier.learned import embedding_injections
from ledger.classifier.model import (
    CLASSIFIER_NAME,
    CLASSIFIER_VERSION,
    DEFAULT_PARAMS,
    Dense,
    Flag,
    Group,
    Known,
    Params,
)

ACTOR = f"{CLASSIFIER_NAME}@{CLASSIFIER_VERSION}"


def classify(
    passages: Iterable[tuple[str, str]] | Mapping[str, str],
    *,
    only: Iterable[str] | None = None,
    params: Params = DEFAULT_PARAMS,
    dense: Dense | None = None,
    known: Known | None = None,
) -> list[Flag]:
    """Flag passages that share a suspicious query pattern; one Flag per passage, sorted by id.

    ``passages`` is the batch together with whatever existing passages should be considered
    (the whole store, or the store's neighbourhood of the batch). ``only`` restricts the flags
    returned to those ids (the newly ingested batch), while the pattern is still found across
    all passages given. ``dense`` holds the passages' sentence embeddings (version 3 steps);
    without it the lexical rules alone decide. When ``dense`` also gives each passage's vector
    (``dense.vector(id)``, version 3.3) the learned instruction detector runs too, calibrated on
    every passage given (:mod:`ledger.classifier.learned`). ``known``: per-passage results the
    caller already has (:class:`ledger.classifier.model.Known`); the flags are the same without it.
    """
    wanted = None if only is None else set(only)
    passages = list(passages.items()) if isinstance(passages, Mapping) else list(passages)
    flags = _instruction_flags(passages, wanted, {} if known is None else known.markers)
    detector = None  # the detector's own default model
    if known is not None and known.scores and (model := learned.load_model()) is not None:
        detector = _KnownScores(model, known.scores)
    for mid, hit in embedding_injections(passages, dense, model=detector).items():
        if (wanted is None or mid in wanted) and mid not in flags:
            flags[mid] = Flag(
                memory_id=mid,
                reason=(f"instruction injection: reads as an order to the agent (learned detector score "
                        f"{hit.score:.2f} >= this store's bar {hit.threshold:.2f}; form '{hit.form}')"),
                evidence={"classifier": ACTOR, "rule": "instruction-embedding", "score": hit.score,
                          "store_bar": hit.threshold, "form": hit.form,
                          "embedding_model": getattr(dense, "model", None)},
            )
    for g in find_groups(passages, params=params, dense=dense, known=None if known is None else known.facts):
        for mid in g.members:
            if (wanted is None or mid in wanted) and mid not in flags:
                flags[mid] = _group_flag(mid, g, dense)
    return [flags[k] for k in sorted(flags)]


class _KnownScores:
    """The learned detector's model with the scores a caller already has (by text); every other
    attribute is the model's own."""

    def __init__(self, model, scores: Mapping[str, float]) -> None:
        self._model = model
        self._scores = scores

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def score(self, vector, text: str) -> float:
        known = self._scores.get(text)
        return self._model.score(vector, text) if known is None else known


def _instruction_flags(passages: list[tuple[str, str]], wanted: set[str] | None,
                       known: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, Flag]:
    flags = {}
    for mid, text in sorted(passages):
        if wanted is not None and mid not in wanted:
            continue
        marks = known.get(text)
        if marks is None:
            marks = instruction_markers(text)
        if marks:
            flags[mid] = Flag(
                memory_id=mid,
                reason="instruction injection: the passage addresses the agent with "
                       + "; ".join(f"{n} ('{t}')" for n, t in marks),
                evidence={"classifier": ACTOR, "rule": "instruction",
                          "markers": [{"rule": n, "text": t} for n, t in marks]},
            )
    return flags


def _group_flag(memory_id: str, g: Group, dense: Dense | None) -> Flag:
    core_text = ", ".join(g.core[:8])
    return Flag(
        memory_id=memory_id,
        reason=(f"{g.distinct} passages repeat the question pattern '{g.pattern}' "
                f"(core terms: {core_text}; similarity {g.similarity:.2f}) each asserting an answer"),
        evidence={
            "classifier": ACTOR,
            "group": list(g.members),
            "core": list(g.core),
            "core_weight": g.core_weight,
            "distinct_passages": g.distinct,
            "similarity": g.similarity,
            "pattern": g.pattern,
            "embedding_model": dense.model if dense is not None else None,
        },
    )
