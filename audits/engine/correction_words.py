"""What a record says of an earlier one: is it a correction? (issue 16; pure: no Django, no model).

The verdict calls a causal memory *outdated* when a record of the store corrects it. With
metadata (a `metadata.query` and a `written_at`) a newer record answering the same question
otherwise says so by itself; a plain note has neither, and only its words tell a correction
("Correction: …", "the earlier notes were outdated", "I had the day wrong", "… (supersedes the
weight logged in March)") from a record that merely answers otherwise. The signals:

- a correction's own words: correction, corrected, erratum, retracted, supersedes, amended
  record, "my mistake", "I misremembered", "got that wrong", "to set the record straight",
  "overwrite the entry", "update to my previous note", "prev. logged as";
- a judgement of an earlier record in the sentence that names it, either way round: an earlier
  record (earlier, previous, prior, old, original, last time, on file, my notes, the saved …,
  what I had / saved / noted / wrote) and a judgement (wrong, incorrect, mistaken, an error, a
  typo, outdated, out of date, obsolete, stale, disregard, ignore, scratch, no longer, replaces);
- a contrast that names the wrong value: "March 14, not March 4".

Written from general English and the TUNE set of `bench/correction_eval.py` (notes written by a
model that never saw these rules; its HOLDOUT set was not read). A record that merely answers
otherwise, or uses these words in passing ("the earlier train was cancelled"), is no correction.

`corrects(text, claim)`: the text corrects an earlier record and does not give `claim` as its
own: the claim may appear only where the text names the wrong value ("not 500 mg", "prev.
logged as 500 mg", "the old note naming Marco is out of date").
"""

from __future__ import annotations

import re

_EARLIER = (r"(?:earlier|previous(?:ly)?|prior|old|older|original(?:ly)?|formerly|"
            r"last (?:time|note|entry|summary|week)|on file|(?:the|that) other note|"
            r"(?:my|our|the) (?:notes?|records?|entry|entries)|"
            r"(?:the|that) (?:saved|stored|logged|noted|recorded)|"
            r"(?:i|i'd|i had|we) (?:had|saved|noted|wrote|logged|stored|recorded)|"
            r"(?:saved|stored|logged|noted|recorded|written|wrote) (?:down|before|previously|earlier|in memory))")
_WRONG = (r"(?:wrong(?:ly)?|incorrect(?:ly)?|mistaken|a mistake|in error|an error|a typo|inaccurate|"
          r"outdated|out of date|obsolete|stale|replaces|disregard|ignore|scratch|"
          r"overwrite|no longer|(?:was|were|is) off|should not be relied on)")
_OWN_WORDS = (r"(?:correction|corrected|erratum|errata|retract(?:ed|ing|ion)|amended record|supersed(?:es|ed|ing)|"
              r"my mistake|misremembered|mixed (?:it|that|them) up|got (?:it|that|this) wrong|"
              r"set the record straight|overwrite (?:the|my|that|this)|"
              r"(?:update|fix|amendment|revision) (?:to|of|on) (?:my|the|our) (?:previous|earlier|last|old|prior)|"
              r"(?:prev\.|previously|originally|earlier) (?:logged|noted|recorded|saved|listed|stored|written|given|stated) as)")
_CORRECTION = re.compile(
    rf"(?<!\w){_OWN_WORDS}(?!\w)"
    rf"|\b{_EARLIER}\b[^.;!?\n]{{0,80}}\b{_WRONG}\b|\b{_WRONG}\b[^.;!?\n]{{0,80}}\b{_EARLIER}\b"
    r"|\w,\s+not\s+(?:the\s+)?[\w$]",
    re.IGNORECASE)
# Where a correction names the wrong value: after "not", "instead of", an earlier-record word.
_STALE_BEFORE = re.compile(rf"(?:\bnot|\binstead of|\brather than|\bfrom|\bprev\b|\b{_EARLIER})\W+(?:\S+\s+){{0,4}}$",
                           re.IGNORECASE)
_STALE_AFTER = re.compile(rf"^\W*(?:\S+\s+){{0,4}}?(?:is|was|were|are)?\s*\b{_WRONG}\b", re.IGNORECASE)


def says_corrected(text: str) -> re.Match[str] | None:
    """The words that make `text` a correction of an earlier record, if any."""
    return _CORRECTION.search(text)


def corrects(text: str, claim: str) -> re.Match[str] | None:
    """`text` corrects an earlier record and does not give `claim` as its own value (see the
    module docstring); the signal's match, else None."""
    fix = says_corrected(text)
    if fix is None or not claim:
        return fix
    for hit in re.finditer(r"(?<!\w)" + re.escape(claim) + r"(?!\w)", text, re.IGNORECASE):
        before, after = text[max(0, hit.start() - 60):hit.start()], text[hit.end():hit.end() + 60]
        if not (_STALE_BEFORE.search(before) or _STALE_AFTER.search(after)):
            return None
    return fix
