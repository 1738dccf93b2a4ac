"""Words and questions as the engine compares them (pure: no Django, no model).

One place for what "the same word" and "the same question" mean, so that the expansion (which
must not import the reach: the reach builds on it) and the reach judge a record's question alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A word (letters and digits, joined by an apostrophe, a period or a hyphen) or one punctuation mark.
WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*|[^\w\s]", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$")


def word(w: str) -> str:
    """A word's identity: case-folded, a possessive "'s" dropped ("James's dogs" is about James)."""
    return _POSSESSIVE.sub("", w.casefold()) or w.casefold()


def tokens(text: str) -> frozenset[str]:
    return frozenset(word(w) for w in WORD.findall(text) if w[0].isalnum())


def mentions(span: str, text: str) -> bool:
    """`span` occurs in `text` as a whole word or phrase (case-insensitive)."""
    return re.search(r"(?<!\w)" + re.escape(span.casefold()) + r"(?!\w)", text.casefold()) is not None


def normalized(s: str | None) -> str:
    """A text's identity for equality: case-folded, whitespace collapsed (None is "")."""
    return " ".join((s or "").casefold().split())


def same_question(a: str | None, b: str | None, *, bar: float = 0.6) -> bool:
    """Two stated questions are one when their words overlap (Jaccard) at least `bar`, question
    words of one kind counted as one ("which" / "what", "whom" / "who"); a question asked after a
    lead-in ("Sorry if I asked this before, but which …?", "Quick question: when …?") is also
    compared from the first clause after it that opens as a question does. A record that states no
    question (a plain passage) is judged by its cosine alone."""
    if not a or not b:
        return True

    def jaccard(x: str, y: str) -> float:
        tx, ty = _asked_words(x), _asked_words(y)
        return len(tx & ty) / len(tx | ty) if tx | ty else 0.0

    if jaccard(a, b) >= bar:
        return True
    pa, pb = _proper(a), _proper(b)
    return (pa, pb) != (a, b) and jaccard(pa, pb) >= bar


# Question words of one kind: "which sort of art" asks what "what kind of art" asks, "on what
# date" what "when" asks.
_WH = {"which": "what", "whom": "who", "whose": "who"}
_WH_PHRASE = ((re.compile(r"\b(?:(?:on|at|in|by) )?(?:what|which) (?:date|day|time|year|month)\b", re.I), "when"),
              (re.compile(r"\b(?:(?:in|at|to) )?(?:what|which) (?:place|location)\b", re.I), "where"),
              (re.compile(r"\b(?:what|which) (?:person|people)\b", re.I), "who"),
              (re.compile(r"\b(?:in )?(?:what|which) (?:way|manner)\b", re.I), "how"),
              (re.compile(r"\b(?:what|which) number of\b", re.I), "how many"))
# Where a question proper opens after a lead-in: a clause break, then a question word or an
# auxiliary ("…, but which …?", "…? When …?", "…: is it true that …?"). The first such clause:
# a lead-in comes first, and a question may go on in clauses of its own ("When did she go, and
# how did she feel?").
_OPENING = re.compile(r"(?:[,;:?!]|\bbut)\s+((?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|"
                      r"do|does|did|has|have|had|can|could|would|will|should)\b.*)$", re.IGNORECASE | re.DOTALL)


def _asked_words(q: str) -> frozenset[str]:
    for phrase, wh in _WH_PHRASE:
        q = phrase.sub(wh, q)
    return frozenset(_WH.get(t, t) for t in tokens(q))


def _proper(q: str) -> str:
    """A question without its lead-in: from the first clause after a break that opens as a
    question does."""
    found = _OPENING.search(q)
    return found.group(1) if found else q


_QLINE = re.compile(r"^\s*(?:Q|Question)\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)


# A record that opens with a question: an optional short label ("Asked before:"), then one
# sentence ending in "?" (a passage whose first sentence states something asks nothing).
_ASKING_LINE = re.compile(r"^\s*(?:[^\W\d_][\w ]{0,24}:\s*)?([^\n.!?]{6,300}\?)", re.UNICODE)


def stated_question(m: Any) -> str | None:
    """The question a record states: `metadata.query`, else its `Q:`/`Question:` line, else a
    first line that asks one (after a short label: "Asked before: When did …?")."""
    q = m.metadata.get("query") if isinstance(m.metadata, Mapping) else None
    if isinstance(q, str) and q.strip():
        return q.strip()
    found = _QLINE.search(m.text)
    if found:
        return found.group(1).strip()
    first = _ASKING_LINE.match(m.text)
    return first.group(1).strip() if first else None
