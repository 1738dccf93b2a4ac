"""What a record says of an earlier one: is it a correction? (issue 16; pure: no Django, no model).

The verdict calls a causal memory *outdated* when a record of the store corrects it. With
metadata (a `metadata.query` and a `written_at`) a newer record answering the same question
otherwise says so by itself; a plain note has neither, and only its words tell a correction
("Correction: …", "the earlier notes were outdated", "I had the day wrong", "… (supersedes the
weight logged in March)") from a record that merely answers otherwise. The signals:

- a correction's own words: correction, erratum, retracted, supersedes, amended record, a record
  "corrected" / "revised" / "amended" / "fixed" ("Memory revised:", "Contact record fix:"),
  "recorded in error", "my mistake", "I misremembered / misread / misheard", "got that wrong",
  "I had it down as", "to set the record straight", "overwrite the entry", "Fixing that.",
  "update to my previous note", "prev. logged as";
- a judgement of an earlier record in the sentence that names it, either way round: an earlier
  record (earlier, previous, prior, old, original, the first time, last time, last month's, on
  file, my notes, the memory, the CRM note, the stale … setting, the saved …, what I had / saved /
  noted / wrote) and a judgement (wrong, incorrect, mistaken, an error, a transposition error, a
  typo, outdated, out of date, obsolete, stale, disregard, ignore, scratch, no longer, replaces,
  contrary to, overstated, should not be used, don't use); a record to delete or remove, or one
  that "has since" changed ("the stored memory … refers to a car they have since sold");
- a contrast that names the wrong value: "March 14, not March 4" — not chat's way of speaking
  ("No, not yet", "Wow, not bad").

Written from general English and two tuning sets of `bench/correction_eval.py` (notes written by
models that never saw these rules: ``tune``, and ``tune2``, the first HOLDOUT, whose misses were
read on 2026-12-05; ``holdout2`` is not read). A record that merely answers otherwise, or uses
these words in passing ("the earlier train was cancelled", "Dad corrected essays"), is no
correction.

`corrects(text, claim)`: the text corrects an earlier record and does not give `claim` as its
own: the claim may appear only where the text names the wrong value ("not 500 mg", "prev.
logged as 500 mg", "the old note naming Marco is out of date").
"""

from __future__ import annotations

import re

from .words import occurrences

# A stored record: the notes, the entry, the memory, last month's notes, the CRM note.
_RECORD = r"(?:notes?|records?|entry|entries|memor(?:y|ies)|figure|reminder|setting|flag)"
_EARLIER = (r"(?:earlier|previous(?:ly)?|prior|old|older|original(?:ly)?|formerly|the first time|"
            r"last (?:time|note|entry|summary|week)|(?:last (?:week|month|year)|yesterday)['’]s|on file|"
            r"(?:the|that) other note|"
            rf"(?:my|our|the|that|this) (?:\w+ ){{0,3}}?{_RECORD}|"
            r"(?:the|that) (?:saved|stored|logged|noted|recorded|listed)|"
            r"(?:i|i'd|i had|we) (?:had|saved|noted|wrote|logged|stored|recorded|entered|put)|"
            r"(?:saved|stored|logged|noted|recorded|written|wrote|listed|stated) (?:down|before|previously|earlier|in memory))")
_WRONG = (r"(?:wrong(?:ly)?|incorrect(?:ly)?|mistaken|(?:a|an) (?:\w+ )?(?:mistake|error)|in error|a typo|inaccurate|"
          r"outdated|out of date|obsolete|stale|replaces|disregard|ignore|scratch|overstated|understated|"
          r"overwrite|no longer|(?:was|were|is) off|should not be (?:relied on|used)|do(?:n't| not) use|"
          r"contrary to)")
_OWN_WORDS = (r"(?:correction|erratum|errata|retract(?:ed|ing|ion)|amended record|supersed(?:es|ed|ing)|"
              rf"(?:{_RECORD}|list|details?) (?:corrected|amended|revised|fix(?:ed)?)|corrected (?:to|:)|"
              rf"(?:delete|remove) (?:the|that|this) (?:\S+ ){{0,3}}?{_RECORD}|"
              rf"(?:the|that|this) (?:\S+ ){{0,3}}?{_RECORD}\b[^.;!?\n]{{0,80}}\b(?:ha(?:ve|s|d)) since|"
              r"recorded in error|my mistake|mis(?:remembered|read|heard|typed|spelled|stated|quoted|noted)|"
              r"mixed (?:it|that|them) up|got (?:it|that|this) wrong|(?:i|i'd|we) had it (?:down|written|noted) as|"
              r"set the record straight|overwrite (?:the|my|that|this)|(?:^|(?<=[.!?;]\s))fixing (?:that|this|it)(?=[.!;]|$)|"
              r"(?:update|fix|amendment|revision) (?:to|of|on) (?:my|the|our) (?:previous|earlier|last|old|prior)|"
              r"(?:prev\.|previously|originally|earlier) (?:logged|noted|recorded|saved|listed|stored|written|given|stated) as)")
# Within one sentence: a period only inside a number ("$1,482.50").
_SAME_SENTENCE = r"(?:[^.;!?\n]|(?<=\d)\.(?=\d))"
_CORRECTION = re.compile(
    rf"(?<!\w){_OWN_WORDS}(?!\w)"
    rf"|\b{_EARLIER}\b{_SAME_SENTENCE}{{0,80}}\b{_WRONG}\b|\b{_WRONG}\b{_SAME_SENTENCE}{{0,80}}\b{_EARLIER}\b"
    r"|(?P<contrast>(?P<before>[\w)]+),\s+not\s+(?:the\s+)?(?P<after>[\w$]+))",
    re.IGNORECASE)
# "X, not Y" contrasts a value with the wrong one; in chat it is a way of speaking ("No, not yet",
# "Wow, not bad", "progress, not perfection" is kept: a value).
_DISCOURSE = frozenset("nope nah yeah yep wow oh ok okay well hmm hmmm hey hi sure thanks however but".split())
_NOT_A_VALUE = frozenset("yet really sure bad just too everything only quite exactly necessarily always much "
                         "now that this in on at for to so even all".split())
# Where a correction names the wrong value: after "not", "instead of", an earlier-record word.
_STALE_BEFORE = re.compile(rf"(?:\bnot|\binstead of|\brather than|\bfrom|\bprev\b|\b{_EARLIER})\W+(?:\S+\s+){{0,4}}$",
                           re.IGNORECASE)
_STALE_AFTER = re.compile(rf"^\W*(?:\S+\s+){{0,4}}?(?:is|was|were|are)?\s*\b{_WRONG}\b", re.IGNORECASE)


def says_corrected(text: str) -> re.Match[str] | None:
    """The words that make `text` a correction of an earlier record, if any."""
    for hit in _CORRECTION.finditer(text):
        if not hit.group("contrast") or (hit.group("before").casefold() not in _DISCOURSE
                                         and hit.group("after").casefold() not in _NOT_A_VALUE):
            return hit
    return None


def corrects(text: str, claim: str) -> re.Match[str] | None:
    """`text` corrects an earlier record and does not give `claim` as its own value (see the
    module docstring); the signal's match, else None."""
    fix = says_corrected(text)
    if fix is None or not claim:
        return fix
    for hit in occurrences(claim, text):
        before, after = text[max(0, hit.start() - 60):hit.start()], text[hit.end():hit.end() + 60]
        if not (_STALE_BEFORE.search(before) or _STALE_AFTER.search(after)):
            return None
    return fix
