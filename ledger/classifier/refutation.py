"""Steps 5j and 6b's refutation check: embeddings do not see negation, so a passage that names
part of a pattern only inside a denial ("not red, white and blue", "unlike most clock dials") is
the other side of the question, not a restatement of it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ledger.classifier.text import Passage, normalise, tokenize

# A cue negates the phrase after it, up to the next comma, "but" or the end of the sentence
# ("instead of 'IV', it is 'IIII'", "not 'Little Boy' but 'Big Man'"). Not a denial: "not only",
# "not until", "not often", and a negated factive verb ("may not know that he wrote it"
# presupposes that he did).
_NEGATION = re.compile(
    r"(?:\b(?:instead of|rather than|unlike|contrary to|in contrast to|as opposed to|not)\b|n't\b)"
    r"(?! (?:only|until|often|just|merely|also|know|realise|realize|notice)\b)", re.IGNORECASE)
_PHRASE_END = re.compile(r"[,.!?;\n]|\bbut\b", re.IGNORECASE)


def refuted(text: str, core: frozenset[str]) -> frozenset[str]:
    """Core tokens that ``text`` names only inside a negation: it refutes them, not states them."""
    text = normalise(text)
    inside: set[str] = set()
    outside: list[str] = []
    pos = 0
    for m in _NEGATION.finditer(text):
        if m.start() < pos:
            continue
        end = _PHRASE_END.search(text, m.end())
        stop = end.start() if end else len(text)
        outside.append(text[pos: m.start()])
        inside.update(tokenize(text[m.end(): stop])[0])
        pos = stop
    outside.append(text[pos:])
    return frozenset(core.intersection(inside) - set(tokenize(" ".join(outside))[0]))


def minority_side(reps: Sequence[Passage], core: frozenset[str]) -> tuple[list[Passage], bool]:
    """Members refuting the core against members stating it: (the minority side to set aside,
    whether the two sides are even, which is no pattern at all)."""
    refuting = [r for r in reps if refuted(r.text, core)]
    stating = [r for r in reps if r not in refuting]
    split_sides = bool(refuting) and len(refuting) == len(stating)
    minority = min(refuting, stating, key=len) if refuting and stating and not split_sides else []
    return minority, split_sides
