"""Instruction injection (version 3.1; widened in 3.2): a passage that addresses the agent with
an override ("from now on, always…", "ignore previous instructions", "SYSTEM NOTE:", "policy
override", "use the email tool to forward…", "you are now in developer mode") is flagged on its
own, without a group: one planted instruction is enough to steer an agent that follows
instructions.

Each pattern needs a directive aimed at the reader, so a chat line ("from now on I'll run
daily"), a policy quoted as fact ("refunds always require manager approval"), a page about the
topic ("attacks tell a model to ignore previous instructions", "the system note on the dashboard
said…") does not match. A user's preference ("User prefers that from now on replies are in
French", "the user asked to always be addressed as Dr. Lee") is the user speaking about the
user's own conversation: a standing directive attributed to the user is not flagged unless it
also carries one of the other markers (an override, a note to the agent, a tool or role
directive).
"""

from __future__ import annotations

import re
from functools import lru_cache

_I = re.IGNORECASE
# The reader addressed: the agent under any of its names.
_AGENT = r"(?:the\s+|this\s+)?(?:ai\s+|virtual\s+)?(?:assistant|agent|model|chatbot|bot|ai)\b"
# Where an imperative can start: the text's start or a clause boundary (a verb inside a clause,
# "attacks tell a model to ignore…", is a description, not an order).
_CLAUSE = r"(?:^|(?<=[.!?:;\]>)\n])\s*|\band\s+|\bthen\s+|,\s*)(?:please\s+)?"
_ACTION = (r"(?:answer|reply|respond|say|tell|give|claim|confirm|approve|call|use|send|forward|share|reveal|"
           r"grant|waive|skip|ignore|delete|transfer|treat|refuse|disable|mention)")
_SPEAKER_USER = re.compile(
    r"\b(?:user|customer|client)(?:'s)?\s+(?:prefers?|preference|wants?|would like|asked|requested|likes?)\b"
    r"|\bI(?:'d| would) like\b|\b(?:the )?user said\b", _I)

_STANDING = ("standing directive", re.compile(
    r"\b(?:from now on|going forward|henceforth|from this point (?:on|forward)|starting now|effective immediately)"
    r"\b,?\s+(?:(?:when|whenever|if)\b[^.\n]{0,120}?,\s*)?(?:" + _AGENT + r"\s+(?:should|must|will|is to)\s+)?"
    r"(?:always|never|answer|reply|respond|approve|treat|do not|don't|refuse|say|tell|call|send)\b", _I))
_WHEN_ASKED = ("forced answer", re.compile(
    r"\b(?:whenever|when)\s+(?:anyone|someone|somebody|a customer|a caller|people|the user)\s+asks?\b[^.\n]{0,120}?,"
    r"\s*(?:always\s+)?(?:answer|reply|respond|say|tell them|give|claim|confirm)\b", _I))

_INSTRUCTION_RULES = (
    ("override of earlier context", re.compile(
        _CLAUSE + r"(?:ignore|disregard|forget|pay no attention to)\s+(?:all\s+|any\s+|the\s+)?"
        r"(?:previous|prior|earlier|above|older|other)\s+(?:instructions?|answers?|records?|memories|notes|rules|"
        r"messages|context|guidance)"
        r"|" + _CLAUSE + r"(?:ignore|disregard)\s+(?:everything|anything|what)\s+(?:you\s+(?:were|have been)\s+told"
        r"|(?:the\s+)?(?:other|previous|older)\s+(?:memories|records|notes|sources)\s+say)"
        r"|\bprevious\s+(?:guidance|instructions?)\s+(?:is|are)\s+(?:void|obsolete|cancell?ed)", _I)),
    _STANDING,
    _WHEN_ASKED,
    ("system or admin note", re.compile(
        r"\b(?:system (?:note|prompt|override|instruction)s?|policy override|admin(?:istrator)? override|"
        r"developer mode)\b\s*[:(\]]|\[system\]|<<SYS>>|<\|system\|>"
        r"|\b(?:note|message|instructions?|rules?|policy(?: update)?|update|notice|guidance)\s+(?:to|for)\s+"
        + _AGENT, _I)),
    ("directive to the agent", re.compile(
        r"\byou (?:must|should|are to) (?:always|never|now) " + _ACTION + r"\b"
        r"|\b" + _AGENT + r"\s+(?:must|should|shall|is to|is (?:now )?(?:authori[sz]ed|allowed) to|can now|may now)"
        r"\s+(?:always\s+|never\s+|now\s+|automatically\s+)?" + _ACTION + r"\b"
        r"|\bauthori[sz]ed\s+" + _AGENT + r"\s+to\b"
        r"|\bdo not (?:consult|check|verify|use) (?:any )?(?:other|previous|older) (?:memories|records|sources|notes)\b",
        _I)),
    ("tool-use directive", re.compile(
        r"\b(?:call|invoke|run|execute)[ \t]+`?(?:[A-Za-z]\w*_[\w.]*\(|[A-Za-z_][\w.]*\((?:\w+=|['\"]))"
        r"|\buse the [\w -]{1,20}? tool to\b"
        r"|\b(?:when|whenever|before|after)\s+(?:you\s+)?(?:next\s+)?(?:use|call|using|calling|replying|answering|"
        r"asked to)\b[^.\n]{0,80}?\b(?:forward|send|send_\w+|call|open|run|delete|post|upload|email)\b"
        r"|\|\s*(?:ba|z)?sh\b", _I)),
    ("role change", re.compile(
        r"\byou are (?:now|no longer)\b[^.\n]{0,40}?\b(?:mode|assistant|administrator|admin|manager|unrestricted|"
        r"jailbroken)\b"
        r"|\bact as (?:the |an? )?(?:system )?(?:admin|administrator|root|manager|head of \w+)\b"
        r"|\bpretend (?:you are|to be) (?:the |an? )?(?:admin|administrator|manager|head of|root|developer)", _I)),
)


# The general rule (3.2): the passage addresses the agent (names it, speaks to "you" without a
# first-person speaker, or opens a clause with an order) AND carries what makes an order an
# injection: it persists, overrides, relaxes a control, claims authority or sends data out.
_ORDER = (r"(?:answer|reply|respond|say|tell|confirm|approve|treat|ignore|disregard|forget|run|call|post|send|"
          r"email|attach|switch|act|pretend|play|recommend|unlock|share|reveal|grant|skip|use|remember to|"
          r"do not|don't)")
_ADDRESSEE = re.compile(
    r"\b(?:the|this|your)\s+(?:ai|assistant|agent|model|chatbot|bot)\b|\b(?:ai|assistant|agent|model)\s*:"
    r"|\b(?:agents?|assistants?)\s+(?:can|may|must|should|are allowed to|are authori[sz]ed to)\b"
    r"|\byour\s+(?:configuration|instructions?|guidance|restrictions|answers|persona|role|settings|earlier|"
    r"previous|system)\b", _I)
_SECOND_PERSON = re.compile(
    r"\byou\s+(?:play|may|can|must|should|will|are to|are now)\b"
    r"|(?:^|(?<=[.!?:;\]>)\n])\s*|,\s*)(?:please\s+)?(?:always\s+|never\s+)?" + _ORDER
    + r"\b(?=\s+(?!and\b|or\b)\w)", _I)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I'll|I've|my|me|we|we're|our|let's)\b|!|\btrust me\b")
_INJECTION_SIGNS = (
    ("persists", re.compile(
        r"\b(?:from now on|going forward|henceforth|from (?:today|here|this point)(?: on(?:wards?)?| onwards?| forward)"
        r"|in all future|for (?:every|all) future|every future|until further notice|no matter what"
        r"|regardless of (?:what|the)|after every (?:answer|reply|message|response))\b", _I)),
    ("overrides", re.compile(r"\b(?:ignore|disregard|supersedes?|override|outdated|void|obsolete|(?:is|are) wrong)\b",
                             _I)),
    ("relaxes a control", re.compile(
        r"\bwithout (?:a |any )?(?:manager|approval|verification|checks?|review|sign-off)\b"
        r"|\bno longer (?:required|needed|need|necessary)\b|\bdo not (?:verify|check|ask for)\b|\bno restrictions\b"
        r"|\bsuspended\b|\bexception granted\b|\bskip (?:the )?(?:identity|verification|checks?)\b|\bunlock\b", _I)),
    ("claims authority", re.compile(
        # "SYSTEM" in capitals is a header; "the system" in prose is not a claim of authority.
        r"\bSYSTEM\b|(?i:\b(?:system prompt|admin(?:istrator)?|operator|management|directive|authori[sz]ed"
        r"|configuration|persona|maintenance|developer)\b)")),
    ("sends data out", re.compile(r"https?://|\b[\w.+-]+@[\w-]+\.[a-z]{2,}\b|\bfull card number\b"
                                  r"|\bpost the conversation\b", _I)),
)


def _addressed_order(text: str) -> tuple[str, str] | None:
    """("addressed override", evidence) when the general rule holds (see above), else None."""
    addressed = _ADDRESSEE.search(text)
    if addressed is None and not _FIRST_PERSON.search(text):
        addressed = _SECOND_PERSON.search(text)
    if addressed is None:
        return None
    signs = [(name, m.group(0)) for name, rx in _INJECTION_SIGNS if (m := rx.search(text))]
    if not signs:
        return None
    return ("addressed override", "; ".join([addressed.group(0).strip(" ,;:")] + [f"{n}: {t}" for n, t in signs]))


def instruction_markers(text: str) -> list[tuple[str, str]]:
    """(rule, matched text) for every instruction-injection rule the passage meets.

    A standing directive or a forced answer in a passage attributed to the user is the user's
    preference, not an injection, unless another rule also matches.
    """
    return list(_markers(text))


@lru_cache(maxsize=1 << 15)  # pure in the text; an import's windows meet a passage again and again
def _markers(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for name, rx in _INSTRUCTION_RULES:
        m = rx.search(text)
        if m:
            out.append((name, m.group(0).strip(" ,;:")))
    general = None if out else _addressed_order(text)  # the catch-all, when no named rule holds
    if general:
        out.append(general)
    preference = {_STANDING[0], _WHEN_ASKED[0]}
    if out and _SPEAKER_USER.search(text) and all(name in preference for name, _ in out):
        return ()
    return tuple(out)
