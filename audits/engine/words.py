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
    """Two stated questions are one when their tokens overlap (Jaccard) at least `bar`; a record
    that states no question (a plain passage) is judged by its cosine alone."""
    if not a or not b:
        return True
    ta, tb = tokens(a), tokens(b)
    return bool(ta | tb) and len(ta & tb) / len(ta | tb) >= bar


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
