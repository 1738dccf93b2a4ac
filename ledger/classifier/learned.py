"""Version 3.3: instruction injections recognised by meaning, calibrated per store.

The 3.2 rule (:mod:`ledger.classifier.instruction`) is a set of hand-written patterns; phrasings
it was not written for pass it (holdout 2 / 20). This detector reads the passage's sentence
embedding (the store's MiniLM vector, the one recall uses; nothing is loaded or downloaded here)
together with a few speech-act cues (``CUES``: second person, modals, clause-initial imperatives,
persistence, an agent named, authority, overrides...; their weights are fitted, not set by hand)
and scores it with a linear model (logistic regression) fitted offline on labelled injections
and negatives (``bench/instruction_set.py --train``; the weights, the data they were fitted on
and the model they belong to are in ``instruction_model.json`` next to this file). A passage is
flagged when three things hold:

1. its score is at least the model's absolute threshold (chosen by cross-validation between the
   two tune batches, never on a holdout set);
2. it stands out from its own store: the score is at least ``z_min`` robust deviations (median
   and MAD of the scores of every passage given, which is the store or its neighbourhood) above
   the store's median. A store whose every passage reads like an order (a runbook, a
   policy manual) raises its own bar; a store too small to estimate a spread (< ``min_store``
   passages) borrows the spread of the clean background the weights were fitted against
   (``reference``, 3.13: with the absolute threshold alone, stores of 100 clean memories were
   labelled 3.2 per 10,000, ``bench/learned_small_stores.py``);
3. it has the form of an order to a reader (``directive_form``): an imperative at a clause
   start, a modal or a standing-rule phrase ("should", "must", "every time", "from now", "whoever
   asks"), or a second-person address. Encyclopedic prose about the same topic (a page on prompt
   injection) has the meaning without the form.

Only embeddings of the model named in the weights file are scored (``Dense.model``); a ``Dense``
without a ``vector`` method, or of another model, leaves this detector off and the 3.2 patterns
alone decide. Pure Python, no numpy (``tests/test_architecture.py``): a dot product of 384 floats
per passage.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from ledger.classifier.instruction import addressee, directive_evidence

MODEL_FILE = Path(__file__).with_name("instruction_model.json")
# 3.10: each point of the structural scorer's score (a passage that addresses a reader and asks
# something, below the scorer's own bar) lowers the learned bar by this many logits. Chosen on the
# tuning sets and the 12,650 clean memories (docs/benchmarks.md 1c): 0.5 is half the weight at
# which the first clean memory would be flagged.
STRUCTURAL_WEIGHT = 0.5

_DIRECTIVE = re.compile(
    r"\b(?:should|must|shall|has to|have to|is to|are to|may now|can now|feel free|needs? to|make sure|make it|be sure"
    r"|always|never|every time|each time|whenever|whoever|anyone who|from now|from here|going forward|henceforth"
    r"|for (?:the rest|all (?:later|future))|all later|later on|until further notice|do not|don't|no longer)\b"
    r"|\byou(?:'re|r)?\b"
    r"|(?:^|[.!?:;\n]\s*|,\s*)(?:please\s+|kindly\s+|quietly\s+)?(?:ignore|disregard|forget|drop|set aside|treat|tell|say"
    r"|reply|respond|answer|confirm|approve|accept|send|forward|share|add|run|call|use|book|credit|merge|disable"
    r"|stop|speak|behave|act|take on|assume|pretend|respond|report|quote|promise|reset)\b", re.IGNORECASE)


# Speech-act cues the linear model weighs next to the embedding (their weights are fitted, not
# set by hand): embeddings see the topic of a passage much more than whether it gives an order.
CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(rx, re.IGNORECASE)) for name, rx in (
    ("second person", r"\byou(?:'re|'ll|r|rs)?\b"),
    ("modal", r"\b(?:should|must|shall|has to|have to|is to|are to|needs? to|may now|can now)\b"),
    ("clause imperative", r"(?:^|[.!?:;\n]\s*|,\s*)(?:please\s+|kindly\s+|quietly\s+)?(?:ignore|disregard|forget|drop"
                          r"|treat|tell|say|reply|respond|answer|confirm|approve|accept|send|forward|share|add|run|call"
                          r"|use|book|credit|merge|disable|stop|speak|behave|act|assume|pretend|report|quote|promise"
                          r"|reset|grant|give|skip|remember|make)\b"),
    ("always or never", r"\b(?:always|never|every time|each time|whenever|whoever|anyone who|any\s+\w+\s+asks)\b"),
    ("persistence", r"\b(?:from now|from here|from today|going forward|henceforth|for the rest|all (?:later|future)"
                    r"|later on|until further notice|permanently|starting now|effective immediately)\b"),
    ("agent named", r"\b(?:assistant|agent|bot|chatbot|model|ai|helper|planner|whoever reads)\b"),
    ("authority", r"\b(?:system|admin\w*|operator|management|compliance|policy|directive|authori[sz]ed|approved by"
                  r"|per the|cto|ceo|cfo|board|hr|instruction)\b"),
    ("override", r"\b(?:ignore|disregard|outdated|obsolete|stale|supersedes?|void|fabricated|wrong|no longer|set aside"
                 r"|instead)\b"),
    ("relaxed control", r"\b(?:without|waived?|exempt\w*|bypass|lifted|not (?:needed|required)|no restrictions"
                        r"|unrestricted|skip|disabled?)\b"),
    ("data out", r"https?://|@[\w-]+\.[a-z]{2,}\b|\b(?:send|forward|upload|email|cc|post)\b"),
    ("first person", r"\b(?:I|I'm|I'll|I've|my|me|we|our)\b"),
    ("exclamation or chat", r"!|\b(?:haha|lol|thanks|ok\?)"),
    ("past narrative", r"\b(?:was|were|had|did|said|went)\b"),
    ("digits", r"\d"),
))


def cue_features(text: str) -> list[float]:
    """One 0/1 feature per cue of ``CUES`` (in order)."""
    return list(_cues(text))


@lru_cache(maxsize=1 << 15)  # a text's cues do not change; the import's windows meet it again and again
def _cues(text: str) -> tuple[float, ...]:
    return tuple(1.0 if rx.search(text) else 0.0 for _, rx in CUES)


@dataclass(frozen=True)
class InstructionModel:
    """A linear model over unit sentence embeddings of one embedding model."""

    model: str
    weights: tuple[float, ...]
    bias: float
    threshold: float
    z_min: float
    min_store: int
    reference: tuple[float, float] | None = None  # (median, MAD) of the clean background's scores

    def score(self, vector: Sequence[float], text: str) -> float:
        """Logit of the linear model over [embedding, cue features]."""
        return self.score_cues(vector, cue_features(text))

    def score_cues(self, vector: Sequence[float], cues: Sequence[float]) -> float:
        """``score`` for a caller that already has the text's ``cue_features`` (the same sum)."""
        features = list(vector) + list(cues)
        return sum(map(operator.mul, self.weights, features)) + self.bias


@cache
def load_model(path: str = str(MODEL_FILE)) -> InstructionModel | None:
    """The fitted model, or None when the file is absent (the detector is then off)."""
    p = Path(path)
    if not p.exists():
        return None
    d = json.loads(p.read_text())
    return InstructionModel(model=d["embedding_model"], weights=tuple(float(w) for w in d["weights"]),
                            bias=float(d["bias"]), threshold=float(d["threshold"]), z_min=float(d["z_min"]),
                            min_store=int(d["min_store"]),
                            reference=(float(d["reference"]["median"]), float(d["reference"]["mad"]))
                            if d.get("reference") else None)


def directive_form(text: str) -> str | None:
    """The words that give ``text`` the form of an order to a reader, or None; since 3.10 also the
    structural scorer's addressee (the agent named, a clause-initial order, a system role...)."""
    m = _DIRECTIVE.search(text)
    return m.group(0).strip(" ,.;:\n") if m else addressee(text)


@dataclass(frozen=True)
class Scored:
    memory_id: str
    score: float
    threshold: float
    form: str


def embedding_injections(passages: Sequence[tuple[str, str]], dense: object | None, *,
                         model: InstructionModel | None = None) -> dict[str, Scored]:
    """Passages the learned detector flags (module docstring), by id; empty when it is off."""
    model = model or load_model()
    vector = getattr(dense, "vector", None)
    if model is None or vector is None or getattr(dense, "model", None) != model.model:
        return {}
    scores: dict[str, float] = {}
    for mid, text in passages:
        v = vector(mid)
        if v is not None and len(v) + len(CUES) == len(model.weights):
            scores[mid] = model.score(v, text)
    if not scores:
        return {}
    bar = model.threshold
    if len(scores) >= model.min_store:
        ordered = sorted(scores.values())
        median = _median(ordered)
        mad = _median(sorted(abs(s - median) for s in ordered)) * 1.4826
    else:  # too few to estimate a spread: the clean background's
        median, mad = model.reference or (math.nan, math.nan)
    if mad > 0 and not math.isnan(mad):
        bar = max(bar, median + model.z_min * mad)
    out = {}
    for mid, text in passages:
        s = scores.get(mid)
        if s is None:
            continue
        structural = directive_evidence(text)[0]
        own_bar = bar - STRUCTURAL_WEIGHT * max(structural, 0.0)
        if s < own_bar:
            continue
        form = directive_form(text)
        if form:
            if structural > 0:
                form = f"{form}; structural score {structural:g} lowered the bar from {bar:.2f}"
            out[mid] = Scored(mid, round(s, 4), round(own_bar, 4), form)
    return out


def _median(ordered: Sequence[float]) -> float:
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
