"""Words and questions as the engine compares them (pure: no Django, no model).

One place for what "the same word" and "the same question" mean, so that the expansion (which
must not import the reach: the reach builds on it) and the reach judge a record's question alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

# A word (letters and digits, joined by an apostrophe, a period or a hyphen) or one punctuation mark.
WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*|[^\w\s]", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$")
# Function words: what a question or a passage says nothing particular with.
FUNCTION = frozenset(
    "a an the of in on at to for from by with and or but as is are was were be been being it its "
    "this that these those which who whom whose what when where why how not no yes do does did "
    "has have had will would can could should may might must there their they them he she his her "
    "we our you your i me my so if then than about after before over under into out up down".split())


def word(w: str) -> str:
    """A word's identity: case-folded, a possessive "'s" dropped ("James's dogs" is about James)."""
    return _POSSESSIVE.sub("", w.casefold()) or w.casefold()


def tokens(text: str) -> frozenset[str]:
    return frozenset(word(w) for w in WORD.findall(text) if w[0].isalnum())


def whole(span: str, *, word_edges_only: bool = False) -> str:
    """The pattern of `span` as a whole word or phrase: no word character just before or after
    it (`word_edges_only`: only where its own edge is one), and a number no part of a longer
    number — a decimal or thousands separator between digits joins one ("0" is not in "20.0"
    or "0.5", "1" not in "1,400"; "0." ending a sentence and "1, 2" are whole)."""
    before = "" if word_edges_only and not span[:1].isalnum() else r"(?<!\w)"
    after = "" if word_edges_only and not span[-1:].isalnum() else r"(?!\w)"
    if span[:1].isdigit():
        before += r"(?<!\d[.,])"
    if span[-1:].isdigit():
        after += r"(?![.,]\d)"
    return before + re.escape(span) + after


def mentions(span: str, text: str) -> bool:
    """`span` occurs in `text` as a whole word or phrase (case-insensitive, `whole`)."""
    return re.search(whole(span.casefold()), text.casefold()) is not None


def names(claim: str, text: str) -> bool:
    """`text` names `claim` as a claim of its own: `mentions`, except that a claim naming a month
    is a date, named only whole — not as the month of a more precise date ("July 2023" is not
    named by "10 July 2023", "July" not by "July 10, 2023": `whole_claims`). What a record
    claims is compared this way, one record's claim against another's; whether an answer is
    right is not (a precise date is still right where only its month was asked for)."""
    return any(True for _ in whole_claims(claim.casefold(), text.casefold()))


def occurrences(span: str, text: str) -> Iterator[re.Match[str]]:
    """Where `span` occurs in `text` as a whole word or phrase (case-insensitive, `whole`)."""
    return re.finditer(whole(span), text, re.IGNORECASE)


def whole_claims(claim: str, text: str) -> Iterator[re.Match[str]]:
    """Where `text` names `claim` as a whole word or phrase (case-insensitive), a claim naming a
    month not as the month of a longer date: a day or year number just before or after it
    ("17th July 2023", "July 10, 2023")."""
    date = any(t in _MONTHS for t in tokens(claim))
    for m in occurrences(claim, text):
        if not (date and (_DAY_BEFORE.search(text[:m.start()]) or _NUMBER_AFTER.match(text[m.end():]))):
            yield m


_DAY_BEFORE = re.compile(r"(?<!\w)\d{1,4}(?:st|nd|rd|th)?(?: of)?[ ,]*$", re.IGNORECASE)
_NUMBER_AFTER = re.compile(r"[ ,]*\d")


def normalized(s: str | None) -> str:
    """A text's identity for equality: case-folded, whitespace collapsed (None is "")."""
    return " ".join((s or "").casefold().split())


def same_question(a: str | None, b: str | None, *, bar: float = 0.6) -> bool:
    """Two stated questions are one when their words overlap (Jaccard) at least `bar`, question
    words of one kind counted as one ("which" / "what", "whom" / "who"); a question asked after a
    lead-in ("Sorry if I asked this before, but which …?", "Quick question: when …?") is also
    compared from the first clause after it that opens as a question does ("…, Caroline: what …
    have they …?" asks about Caroline). Auxiliaries of one verb count as one, third-person
    pronouns not at all; two questions naming people (or ids), none of them the same, are two questions
    whatever words they share, and so are two each naming an occasion the other does not
    (`_occasions`: "his fourth tournament", "his first tournament"), or one naming an occasion
    and the other none of it ("… total hospital cost of patient X until 2103?" is not "… total
    hospital cost of patient X?"), and two each asking about two things the other does not ("… the
    adoption meeting?", "… the LGBTQ conference?"; a paraphrase swaps one word). What follows a question's
    last question mark is the asker's aside ("… with Anna? I'm trying to remember from their
    chats."), no part of it. A record that states no question (a plain passage) is judged by its
    cosine alone."""
    if not a or not b:
        return True
    a, b = _without_aside(a), _without_aside(b)

    def jaccard(tx: frozenset[str], ty: frozenset[str]) -> float:
        return len(tx & ty) / len(tx | ty) if tx | ty else 0.0

    pa, pb = _proper(a), _proper(b)
    na, nb = _names(pa), _names(pb)
    if na and nb and not na & nb:
        return False
    oa, ob = _occasions(pa), _occasions(pb)
    if (oa - ob and ob - oa) or (oa | ob and not oa & ob):
        return False
    wa, wb = _asked_words(pa), _asked_words(pb)
    ca, cb = wa - FUNCTION, wb - FUNCTION
    if len(ca - cb) >= 2 and len(cb - ca) >= 2:
        return False
    if jaccard(_asked_words(a), _asked_words(b)) >= bar:
        return True
    return (pa, pb) != (a, b) and jaccard(wa, wb) >= bar


def _without_aside(q: str) -> str:
    """A question up to its last question mark, when words follow it."""
    end = q.rfind("?")
    return q[:end + 1] if end >= 0 and q[end + 1:].strip() else q


# Question words of one kind: "which sort of art" asks what "what kind of art" asks, "on what
# date" what "when" asks.
_WH = {"which": "what", "whom": "who", "whose": "who"}
_WH_PHRASE = ((re.compile(r"\b(?:(?:on|at|in|by) )?(?:what|which) (?:date|day|time|year|month)\b", re.I), "when"),
              (re.compile(r"\b(?:(?:in|at|to) )?(?:what|which) (?:place|location)\b", re.I), "where"),
              (re.compile(r"\b(?:what|which) (?:person|people)\b", re.I), "who"),
              (re.compile(r"\b(?:in )?(?:what|which) (?:way|manner)\b", re.I), "how"),
              (re.compile(r"\b(?:what|which) number of\b", re.I), "how many"))
# A spaced dash between clauses ("I forgot - Nate: …"): one of the clause breaks below.
_DASH = r"\s[-–—](?=\s)"
# Where a question proper opens after a lead-in: a clause break (a spaced dash among them: "I
# forgot - Nate: …?", TUNE locomo-minja-slot-w12), then a question word (maybe
# after a preposition: "…: in what country …?") or an auxiliary ("…, but which …?", "…? When
# …?", "…: is it true that …?"). The first such clause:
# a lead-in comes first, and a question may go on in clauses of its own ("When did she go, and
# how did she feel?").
_OPENING = re.compile(rf"(?:[,;:?!]|{_DASH}|\bbut)\s+((?:(?:(?:in|on|at|for|from|to|with|by|of|since|until|during|after|before)\s+)?"
                      r"(?:what|which|who|whom|whose|when|where|why|how)|is|are|was|were|"
                      r"do|does|did|has|have|had|can|could|would|will|should)\b.*)$", re.IGNORECASE | re.DOTALL)


# Auxiliaries of one verb count as one ("have they attended" asks what "has Caroline attended"
# asks), and a third-person pronoun names no one: the question's names do.
_AUX = {"has": "have", "had": "have", "does": "do", "did": "do", "is": "be", "are": "be", "was": "be",
        "were": "be", "am": "be"}
_PRONOUN = frozenset("he him his she her hers they them their theirs".split())
# A name a question is put to before a colon ("Quick question, Caroline: what … have they …?"):
# its subject, which the question then calls "they" (every word capitalised: "Quick question:"
# is a lead-in).
_BREAK = re.compile(rf"[,;:?!]|{_DASH}\s|\bbut\b")
_WH_WORDS = frozenset("what which who whom whose when where why how".split())


def _asked_words(q: str) -> frozenset[str]:
    for phrase, wh in _WH_PHRASE:
        q = phrase.sub(wh, q)
    return frozenset(_WH.get(t, _AUX.get(t, t)) for t in tokens(q) if t not in _PRONOUN)


# What tells one occasion of a question from another: ordinals, numbers, months ("may" and
# "march" are verbs as often).
_ORDINAL = re.compile(r"^(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|\d+(?:st|nd|rd|th))$")
_MONTHS = frozenset("january february april june july august september october november december".split())


def _occasions(q: str) -> frozenset[str]:
    """The words of a question that name one occasion of it: "his fourth tournament", "on 9
    November, 2022". Two questions each naming one the other does not are two questions."""
    return frozenset(t for t in tokens(q) if _ORDINAL.match(t) or t.isdigit() or t in _MONTHS)


# An identifier that opens with a digit: letters and digits in hyphen-joined groups, not an ISO
# date ("patient 027-25994").
IDENTIFIER = re.compile(r"(?!\d{4}-\d{1,2}-\d{1,2}$)\d[\dA-Za-z]*(?:-[\dA-Za-z]+)+")


def entity(target: str) -> bool:
    """A target that can be a planted entity (a redirect): a name or an identifier, not yes/no,
    a number or a date."""
    t = target.strip()
    return t.casefold() not in ("yes", "no") and (any(ch.isalpha() for ch in t) or bool(IDENTIFIER.fullmatch(t)))


def _names(q: str) -> frozenset[str]:
    """The names a question asks about: its capitalised words after the first, acronyms and "I"
    aside, and its identifiers (case-folded; "patient 015-58787" and "patient 015-52724" are two)."""
    words = [w for w in WORD.findall(q) if w[0].isalnum()]
    return frozenset(word(w) for k, w in enumerate(words) if IDENTIFIER.fullmatch(w) or (
        k and w[0].isupper() and not w.isupper() and word(w) not in _WH_WORDS))


def common_subject(questions: Iterable[str]) -> frozenset[str]:
    """The names (people, identifiers) that every one of `questions` asks about (`_names` of each
    question without its lead-in); empty when one names none."""
    found = [_names(_proper(_without_aside(q))) for q in questions]
    return frozenset.intersection(*found) if found else frozenset()


def _proper(q: str) -> str:
    """A question without its lead-in: from the first clause after a break that opens as a
    question does, with the name it is put to when a colon sets one ("…, Caroline: what …?")."""
    found = _OPENING.search(q)
    if not found:
        return q
    lead = q[:found.start(1)].rstrip()
    label = _BREAK.split(lead[:-1])[-1].split() if lead.endswith(":") else []
    if 0 < len(label) <= 3 and all(w[0].isupper() for w in label):
        return f"{found.group(1)} ({' '.join(label)})"
    return found.group(1)


# A name a question is put to by a colon anywhere in it ("Quick one, can you check my notes:
# Nate: for how long …?"): one to three capitalised words after a clause break, then ":".
# The colon after a name is looked at, not taken: a lead-in label before it ("Quick question: Nate:
# what is …?", TUNE locomo-minja-slot-w11) would otherwise take the colon the name follows.
_PUT_TO = re.compile(rf"(?:^|[,;:?!]\s+|{_DASH}\s+)([^\W\d_][\w'’\-]*(?: [^\W\d_][\w'’\-]*){{0,2}})(?=:\s)")


def put_to(q: str) -> list[str]:
    """The names a question is put to with a colon ("…: Nate: for how long have they …?")."""
    return [n for n in _PUT_TO.findall(q) if all(w[0].isupper() for w in n.split())]


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
