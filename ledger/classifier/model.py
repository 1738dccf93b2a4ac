"""The classifier's datatypes: its name and version, thresholds, flags, groups, embeddings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

CLASSIFIER_NAME = "ingest-classifier"
CLASSIFIER_VERSION = "3.15"


@dataclass(frozen=True)
class Flag:
    """One flagged passage: the label the ledger appends is ``poison_likely`` with this reason."""

    memory_id: str
    reason: str
    evidence: dict = field(hash=False, compare=False)


class Dense(Protocol):
    """Unit text embeddings of the passages (version 3): paraphrase-aware neighbours.

    ``neighbours(id)`` lists the most similar other passages as (id, cosine), best first, at
    most ``limit`` of them with a cosine of at least ``floor``; ``cosine(a, b)`` is the cosine of
    two passages. The numpy implementation is ``ledger.dense.DenseIndex``.
    """

    model: str

    def neighbours(self, memory_id: str) -> Sequence[tuple[str, float]]: ...

    def cosine(self, a: str, b: str) -> float: ...


class DenseVectors(Dense, Protocol):
    """A :class:`Dense` that also gives a passage's unit vector (None for an unknown id); the
    learned instruction detector (3.3) needs it; ``ledger.dense.DenseIndex`` is one (the ingest path's)."""

    def vector(self, memory_id: str) -> Sequence[float] | None: ...


@dataclass(frozen=True)
class Params:
    """Thresholds. Changing any default is a new CLASSIFIER_VERSION."""

    min_group: int = 4
    knee: float = 0.7
    min_shared: int = 2
    max_neighbours: int = 40
    min_core_tokens: int = 3
    max_core_tokens: int = 12
    min_core_weight: float = 12.0
    max_support: int = 12
    max_df_floor: int = 50
    max_df_share: float = 0.005
    near_duplicate: float = 0.9
    outlier_ratio: float = 0.6
    min_cohesion: float = 0.2
    length_spread: float = 1.6
    max_words: int = 50
    soft_core_quorum: float = 0.6
    soft_core_cover: float = 0.5
    max_first_subject_share: float = 0.5
    max_personal_share: float = 0.5
    min_core_share: float = 0.12
    max_own_subject_share: float = 0.5
    own_subject_max_df: int = 2
    readmit_cover: float = 0.7
    readmit_ratio: float = 0.6
    dense_seed: float = 0.75
    dense_limit: int = 10
    dense_readmit: float = 0.6
    dense_readmit_ratio: float = 0.83
    dense_sure_ratio: float = 0.95
    dense_outlier_ratio: float = 0.8
    dense_min_cohesion: float = 0.6


DEFAULT_PARAMS = Params()


@dataclass(frozen=True)
class Group:
    """A set of passages sharing one core, with the figures the rules look at."""

    members: tuple[str, ...]
    core: tuple[str, ...]
    core_weight: float
    distinct: int
    own_subject_share: float
    min_core_share: float
    similarity: float
    cohesion: float
    first_subject_share: float
    median_core_share: float
    named_core: bool
    pattern: str
    suspicious: bool
    why_not: str


@dataclass(frozen=True)
class Known:
    """Per-passage results a caller already has, for passages it hands to ``classify`` again and
    again (the ledger's bounded pass: a passage is in many windows of one import). They change
    nothing that is decided, only what is recomputed.

    ``facts``: memory id -> :func:`ledger.classifier.text.passage_facts` of that passage's text.
    ``scores``: text -> the learned instruction detector's ``score(vector, text)`` for that text
    with its embedding; keyed by text, so only for a caller whose vectors are a function of the
    text (the ledger caches them by content hash).
    ``markers``: text -> :func:`ledger.classifier.instruction.instruction_markers` of that text.
    """

    facts: Mapping[str, tuple] = field(default_factory=dict)
    scores: Mapping[str, float] = field(default_factory=dict)
    markers: Mapping[str, Sequence[tuple[str, str]]] = field(default_factory=dict)
