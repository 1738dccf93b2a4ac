"""Instruction injection (version 3.1): a passage that addresses the agent with an override
("from now on, always…", "ignore previous instructions", "SYSTEM NOTE", "policy override") is
flagged on its own, without a group: one planted instruction is enough to steer an agent that
follows instructions. Each pattern needs a directive aimed at the reader, so a chat line like
"from now on I'll run daily" or a page about a policy does not match."""

from __future__ import annotations

import re

_INSTRUCTION_RULES = (
    ("override of earlier context", re.compile(
        r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|earlier|above|"
        r"older|other)\s+(?:instructions?|answers?|records?|memories|notes|rules|messages|context)",
        re.IGNORECASE)),
    ("standing directive", re.compile(
        r"\bfrom now on\b,?\s+(?:(?:when|whenever|if)\b[^.\n]{0,120}?,\s*)?(?:always|never|answer|"
        r"reply|respond|approve|treat|do not|don't|refuse|say|tell|call|send)\b", re.IGNORECASE)),
    ("system or admin note", re.compile(
        r"\b(?:system (?:note|prompt|override|instruction)|policy override|admin(?:istrator)? override|"
        r"developer mode)\b", re.IGNORECASE)),
    ("directive to the agent", re.compile(
        r"\byou (?:must|should|are to) (?:always|never|now) (?:answer|reply|respond|say|approve|call|"
        r"use|send|ignore)\b|\bdo not (?:consult|check|verify|use) (?:any )?(?:other|previous|older) "
        r"(?:memories|records|sources|notes)\b", re.IGNORECASE)),
)


def instruction_markers(text: str) -> list[tuple[str, str]]:
    """(rule, matched text) for every instruction-injection rule the passage meets."""
    out = []
    for name, rx in _INSTRUCTION_RULES:
        m = rx.search(text)
        if m:
            out.append((name, m.group(0)))
    return out
