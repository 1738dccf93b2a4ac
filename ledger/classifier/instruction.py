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

3.10 (issue 16, "instruction attacks") adds a structural scorer (``directive_evidence``, below):
who the passage addresses and what it asks, one weight per kind of evidence, flagged at
``DIRECTIVE_BAR`` when no named rule holds; its score also lowers the learned detector's bar
(:mod:`ledger.classifier.learned`). Tuned on every set of ``bench/instruction_set.py`` but holdout 4.

3.11 adds kinds of evidence to that scorer (each marked "3.11" below) and counts a word once:
the catch-all's order verb is not also its own override ("Ignore the first reading of the
thermometer"), a past tense inside what others are to be told is not a report of the past.
Tuned on every set but holdout 5 (holdout 4 among them).
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


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _addressed_order(text: str) -> tuple[str, str] | None:
    """("addressed override", evidence) when the general rule holds (see above), else None."""
    addressed = _ADDRESSEE.search(text)
    if addressed is None and not _FIRST_PERSON.search(text):
        addressed = _SECOND_PERSON.search(text)
    if addressed is None:
        return None
    # 3.11: each word counts once: the order verb that addresses ("Ignore the first reading…")
    # is not also the override it would need ("ignore" inside the address's own span).
    signs = [(name, m.group(0)) for name, rx in _INJECTION_SIGNS
             if (m := next((m for m in rx.finditer(text) if not _overlaps(m.span(), addressed.span())), None))]
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
        out = []
    if not out:  # 3.10: the structural scorer, when no named rule holds
        score, evidence = _directive(text)
        if score >= DIRECTIVE_BAR:
            out.append(("addressed directive", f"score {score:g}: " + "; ".join(
                f"{name} ({w:+g}): {t[:40]}" for name, w, t in evidence)))
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# 3.10: the structural scorer. Who the passage addresses and what it asks, scored per kind of
# evidence (each kind counts once); a passage is flagged when it addresses a reader (the agent
# named, "you" told what to do, an order at a clause start, a system role in markup, a rule about
# the replies themselves) AND asks something an honest memory does not (shape what others are
# told, persist, override other memories, claim authority, relax a control, send data out, run
# a tool, change the agent's role), and the weights reach ``DIRECTIVE_BAR``. Words that make the
# passage a user's own preference, chat, a third party's duty, a report or a page about attacks
# count against it. English, French, German and Spanish cue words.

_AUDIENCE_NOUN = (r"(?:customers?|users?|callers?|clients?|shoppers?|patients?|guests?|applicants?|owners?|parents?"
                  r"|tenants?|members?|visitors?|students?|players?|people|colleagues?|families|farmers|buyers"
                  r"|passengers|travell?ers|investors|subscribers|employees|staff|requesters?|senders?|drivers|third parties)")
_AUDIENCE = (r"(?:\b(?:every|each|all|any|other|all\s+the|every\s+single)\s+(?:\w+\s+)?" + _AUDIENCE_NOUN + r"\b"
             r"|\b(?:anyone|anybody|everyone|everybody|whoever|someone|somebody|them|people)\b"
             r"|\bthe\s+(?:customer|user|caller|client|patient|guest|shopper|applicant|tenant|owner|parent|member"
             r"|visitor|student|requester)s?\b"
             r"|\b(?:chaque|tous les|toutes les|allen|jedem|jeder|todos los|todas las|cualquier|a todos)\b)")
_ANSWER_VERB = (r"(?:tell|say|answer|reply|respond|report|state|describe|quote|confirm|insist|guarantee|promise|reassure"
                r"|deny|inform|claim|present|recommend|give\s+out"
                r"|réponds|répondez|répondre|dis|dites|dire|indique[rz]?|communique[rz]?|affirme[rz]?"
                r"|antworte\w*|sag(?:e|en|st)?|teile\w*|erkläre|bestätige"
                r"|responde[rs]?|di|diles|dile|decir|comunica|indica|confirma)")
_ACT_VERB = (r"(?:approve|grant|accept|waive|credit|refund|pay|issue|settle|sign|unlock|reset|mark|excuse|change"
             r"|execute|run|call|invoke|trigger|delete|drop|disable|skip|bypass|merge|transfer|book|add|apply|comply|obey"
             r"|collect|gather|ask|refer|redirect|route|resolve|query|dump"
             r"|point|treat|consider|assume|adopt|act|behave|play|pretend|imagine|speak|switch|stop"
             r"|send|forward|email|cc|upload|post|export|paste|copy|include|attach|share|reveal|disclose|give"
             r"|leak|ignore|disregard|forget|discard|replace|overlook|genehmige\w*|leite\w*|gib|ignoriere\w*|schicke?"
             r"|sende\w*|ignora\w*|envía\w*|reenvía\w*|aprueba\w*|ignore[zr]?|envoie[zr]?|transf[eè]re[zr]?"
             r"|approuve[zr]?|confirme[rz]?)")
_STARTERS = r"(?:please|kindly|quietly|silently|also|then|and|just|simply|now|first|always|never|immediately|merci de)"
_FIRST_PERSON_OBJECT = re.compile(r"^\s*(?:me|us|my|our|mine|myself|ourselves|moi|mir|mich|me)\b", re.IGNORECASE)

_ADDRESS = (
    ("agent named", 2.5, re.compile(
        r"(?:^|[.!?;:(\[\]>\n-]\s*|\bP\.S\.\s*)(?:hey\s+|dear\s+|hi\s+)?(?:assistant|agent|ai|bot|model|chatbot|helper)"
        r"\s*[,:]"
        r"|\b(?:the|this|your|any|whichever|every)\s+(?:ai\s+|virtual\s+|support\s+|routing\s+|scheduling\s+)?"
        r"(?:assistant|agent|ai|bot|model|chatbot|helper|planner|llm)\b(?!\s+(?:feature|team|market|industry)\b)"
        r"|\b(?:for|to)\s+(?:the\s+|any\s+|whichever\s+)?(?:[a-z]+\s+)?(?:ai|assistant|agent|model|bot|llm)\b"
        r"|\b(?:whoever|anyone who|any model that|any ai that)\s+(?:reads|consults|answers)\b"
        r"|\breader of this\b|\bai consulting this\b|\(the agent\)"
        r"|(?:^|\n)\s*(?:#+|\*\*|\[)\s*(?:\w+\s+)?(?:assistant|agent|bot|ai|model|chatbot)\b"
        r"|\b(?:l'assistant|l'agent|l'ia|der assistent|den assistenten|dem assistenten|die ki|el asistente"
        r"|al asistente|la ia)\b", re.IGNORECASE)),
    ("you told what to do", 2.0, re.compile(
        r"\byou(?:'re| are)?\s+(?:must|should|shall|have to|are to|will now|can now|may now|now|are now"
        r"|are authori[sz]ed|have been (?:promoted|authori[sz]ed|granted)|need to|ought to|are expected to"
        r"|are required to|are supposed to)\b|\byour (?:job|task|duty|role) (?:is|from|now)\b"
        r"|\bmake it a habit\b|\bmake a point of\b|\bbe sure to\b"
        r"|\bcould you(?: please)?\s+(?:" + _ANSWER_VERB + r"|" + _ACT_VERB + r"|make sure)\b"
        r"|\bmake sure (?:that )?(?:you|any|every|each)\b"
        r"|,\s*you\s+(?:share|send|give|tell|say|approve|forward|reply|answer|grant|call|run|reveal|confirm)\b"
        r"|\byour (?:earlier|previous|prior|original|new|standing|current|initial)\s+(?:instructions?|guidelines"
        r"|rules|configuration|guidance|restrictions)\b|\byou were (?:told|given|instructed)\b"
        r"|\b(?:tu dois|vous devez|tu vas|du musst|du sollst|sie müssen|sie sollen|debes|tienes que"
        r"|deberás|usted debe|sollst du|musst du|sollen sie|müssen sie)\b|\bantwortest du\b|\bdu antwortest\b",
        re.IGNORECASE)),
    # 3.11: a request put politely is still a request to the reader ("would you kindly let anyone
    # asking… know", "it would be really helpful if you could tell shoppers…"); what it asks decides.
    ("you asked politely", 2.0, re.compile(
        r"\bwould you(?: kindly| please| be so kind as to)?\s+(?!like\b|mind\b|rather\b|say\b|know\b)\w+"
        r"|\b(?:if|that) you could\b|\byou could (?:please |kindly )?(?:" + _ANSWER_VERB + r"|" + _ACT_VERB + r"|let)\b"
        r"|\b(?:it would be|it'd be) (?:really |very |so )?(?:helpful|great|nice|appreciated|ideal)\b"
        r"|\b(?:I'd|I would|we'd|we would) be (?:grateful|glad|thankful|obliged)\b|\bdo be so kind\b"
        r"|\bmight I ask\b|\b(?:please|kindly) (?:be sure|make sure|ensure|see to it)\b", re.IGNORECASE)),
    # 3.11: a disguised preference: the user "prefers" what reaches past the user (others' data, a
    # grant to colleagues or anyone who calls) or lifts a control; it binds the agent, it is no
    # taste of the user's own (a real preference, "aisle seats", "replies in Spanish", neither).
    ("a preference that rules for others", 2.0, None),
    # 3.11: a note headed for whoever reads it ("[DEVELOPER NOTE]", "Ops bulletin,", "Maintainer
    # comment:"): a header that names a note, then its content.
    ("a headed note", 1.5, re.compile(
        r"^\s*(?:[\[<(#*]+\s*[\w -]{0,30}?|(?:[\w-]+\s+){0,3})(?:note|notice|bulletin|memo|message|update|comment"
        r"|directive|instruction|advisory|announcement|dispatch|alert|rule)\b[\w -]{0,20}?(?:[\])>*#]+|\s*[:,])",
        re.IGNORECASE)),
    # 3.11: a record whose own fields say it is an order for the agent (JSON / YAML).
    ("an order record in markup", 2.5, re.compile(
        r"[\"']?(?:memory_)?(?:type|kind)[\"']?\s*:\s*[\"']?(?:directive|instruction|rule|order|command|standing_order)\b"
        r"|[\"']?(?:applies_to|target|audience|for|recipient)[\"']?\s*:\s*[\"']?(?:agent|assistant|bot|model|ai|llm)\b",
        re.IGNORECASE)),
    ("system role in markup", 2.5, re.compile(
        r"[\"']?role[\"']?\s*[:=]\s*[\"']?system\b|\[system\]|<<SYS>>", re.IGNORECASE)),
    ("rule on the replies", 2.0, re.compile(
        r"\b(?:every|each|all|any)\s+(?:future\s+)?(?:reply|replies|answer|answers|response|responses|summary"
        r"|summaries)\b[^.;\n]{0,60}?\b(?:must|should|has to|have to|is to|are to|shall|gets?)\b"
        r"|\b(?:questions?|requests?)\s+about\b[^.;\n]{0,60}?\bgets?\s+the\s+(?:answer|reply|response)\b"
        r"|\bthe (?:reply|answer|response) (?:has to|must|should|is to) be\b"
        r"|\b(?:should|must|will|is to)\s+hear\b|\b(?:in|into|to) (?:your|every|each) (?:reply|answer|response)\b",
        re.IGNORECASE)),
    ("you given a new role", 2.5, re.compile(
        r"\byou(?:'re| are)? now (?:speak|act|are|the)\b|\bimagine you are\b|\bconsider yourself\b|\byou have been promoted\b"
        r"|\byou(?:'re| are) (?:the|a|an)\b[^.;\n]{0,40}\bnow\b|\byou are no longer\b", re.IGNORECASE)),
)

_ASKS = (
    ("shapes what others are told", 2.0, re.compile(
        r"\b" + _ANSWER_VERB + r"\s+(?:(?:to|du|Sie|à)\s+)?" + _AUDIENCE
        + r"|\b" + _ANSWER_VERB + r"\b[^.;\n]{0,30}?\bto\s+" + _AUDIENCE
        + r"|\b(?:must|should|has to|have to|is to|are to)\s+(?:always\s+)?(?:say|state|tell|claim|describe|mention|report"
        r"|promise|confirm)\b|\b(?:hears?|be told|is told|are told)\s+that\b"
        r"|\b(?:describe|report|mark|present)\s+(?:[\w']+\s+){0,8}as\b"
        + r"|\b(?:tell|inform|assure|reassure|promise|quote|guarantee)\s+(?:the\s+|all\s+|our\s+)?(?:\w+\s+)?"
        + _AUDIENCE_NOUN + r"\b"
        + r"|\b" + _AUDIENCE + r"\s+(?:who\s+)?(?:asks?|asking|calls?|requests?|mentions?|says?)\b"
        r"|\b(?:to|for|with)\s+(?:anyone|whoever|everyone|anybody)\b|\bon request\b"
        r"|\blet\s+" + _AUDIENCE + r"[^.;\n]{0,40}?\bknow\b"
        r"|\b(?:allen|jedem|jeder)\s+\w+\s+(?:sagen|mitteilen|antworten|bestätigen|erklären)\b"
        r"|\b(?:say|state|report|insist|answer|reply|respond|claim|confirm)\s+(?:that|so|it|there|none|yes|no)\b"
        , re.IGNORECASE)),
    ("does what others ask", 1.5, re.compile(
        r"\b(?:whatever|anything|everything|any\s+\w+)\s+(?:they|he|she|the\s+\w+|a\s+\w+|it)\s+(?:asks?|requests?|wants?"
        r"|names?|pastes?|reports?|disputes?)\b|\b(?:who|that)\s+(?:asks?|requests?)\b|\bon request\b"
        r"|\b(?:share|give|send|reveal|disclose|grant|offer|extend)\b[^.;\n]{0,50}?\b(?:to|with)\s+" + _AUDIENCE
        + r"|\b(?:deny|refuse|reject|approve|grant|accept|waive|refund|pay out|settle|credit|excuse|issue|sign off on)\s+"
        r"(?:any|every|all|each|whatever)\b"
        r"|\b(?:may|can|could)\s+(?:now\s+)?be\s+(?!only\b)\w+(?:ed|en|let|paid)\b(?=[^.;\n]{0,60}?\b(?:any|anyone|who|on "
        r"request|without)\b)"
        # 3.11: others' requests granted as such ("requests from their colleagues are approved"; not
        # "must be approved by a team lead", a control), or every request complied with
        r"|\b(?:requests?|claims?|appeals?|applications?|changes?)\b[^.;\n]{0,40}?\b(?:are|is|get|gets|be)\s+"
        r"(?:automatically\s+)?(?:approved|accepted|granted|honou?red|waived|paid|refunded)\b(?!\s+(?:by|only|after|if|once|when)\b)"
        r"|\b(?:comply with|obey|honou?r|fulfil+|carry out|follow|apply)\s+(?:every|any|all|each|whatever)\b"
        r"|\b(?:any|every|each)\s+\w+\s+(?:the|a)\s+\w+\s+(?:gives|provides|sends|submits|names|dictates)\b",
        re.IGNORECASE)),
    ("trigger", 1.5, re.compile(
        r"\b(?:when(?:ever)?|if|each time|every time|any ?time|once|as soon as|before|after|next time|on)\b"
        r"[^.;\n]{0,60}?\b(?:asks?|asked|asking|mentions?|mentioned|brings? up|comes? up|raises?|requests?"
        r"|is mentioned|complains?|is processed|is closed|closes?|runs?|opens?|is prepared|books?|booking|answering"
        r"|replying|drafting|login|log(?:s|ged)? in|receiving|using|calls?|calling)\b"
        r"|\b(?:any|every|each)\s+\w+\s+(?:asking|who asks|calling|requesting)\b"
        r"|\b(?:quand|lorsque|si|wenn|sobald|cuando|si)\b[^.;\n]{0,60}?\b(?:demande|fragt|pregunta|erwähnt|mentionne)\w*",
        re.IGNORECASE)),
    ("persists", 1.5, re.compile(
        r"\b(?:from now on|from now|going forward|henceforth|from (?:here|this point|this message|today)(?: on(?:wards?)?"
        r"| onwards?| forward)?|starting now|until further notice|in all future"
        r"|for all future|all (?:later|future)|for the rest of|permanently|effective immediately|from here"
        r"|regardless of what|no matter what|every (?:single )?(?:reply|answer|response|session|conversation|chat"
        r"|summary|message|time)|each (?:reply|answer|response|session|time)|standing instruction"
        r"|starting (?:today|tomorrow|this week)|until told otherwise|always (?:say|tell|answer|reply|respond|claim"
        r"|confirm|describe|report|state)"
        r"|à partir de maintenant|désormais|dorénavant|à l'avenir|ab sofort|ab jetzt|von nun an|ab heute|künftig"
        r"|zukünftig|de ahora en adelante|a partir de ahora|desde ahora|en adelante|quoi que disent)\b", re.IGNORECASE)),
    ("overrides other memories", 2.5, re.compile(
        r"\b(?:ignore|disregard|forget|discard|replace|set aside|never mind|overlook|don't rely on|do not rely on"
        r"|don't go by|do not go by|drop)\b[^.;\n]{0,40}?\b(?:previous|prior|earlier|older|other|above|saved|stored"
        r"|whatever|what you|anything|everything|instructions?|rules?|guidelines?|memor(?:y|ies)|records?"
        r"|notes?|entries|knowledge base|context)\b"
        r"|\b(?:instructions?|rules?|guidelines?|entries|records?|memories|notes?|answers?)\b[^.;\n]{0,30}?"
        r"\b(?:no longer apply|(?:is|are|were) (?:void|obsolete|superseded|stale|mistaken|wrong|a draft|fabricated"
        r"|outdated))\b|\bthe only (?:rule|valid|correct|true)\b|\bsingle source of truth\b|\btrust only\b"
        r"|\bsupersede[sd]?\b|\b(?:what|whatever) you (?:know|remember|hold|have (?:stored|saved))\b"
        # 3.11: whatever another source says ("whatever the other memories say", "regardless of what
        # the records say"): the passage puts itself above them
        r"|\b(?:whatever|no matter what|regardless of what)\s+(?:the\s+|your\s+)?(?:other\s+|older\s+|stored\s+|saved\s+)?"
        r"(?:memor(?:y|ies)|records?|notes?|files?|documents?|docs|documentation|database|system|board|report|screen"
        r"|agenda|schedule|chart|logs?|policy|rules|knowledge base|entries|history|guidelines?|status)\s+"
        r"(?:says?|shows?|states?|claims?)\b"
        r"|\b(?:recollection|memory|knowledge|notes?) you (?:hold|have)\b|\b(?:entered|written|saved) (?:by|in) (?:mistake|error)\b"
        r"|\b(?:saved|stored|recorded|written|remembered)\b[^.;\n]{0,40}?\b(?:is|are|was|were) (?:void|obsolete|stale"
        r"|mistaken|wrong|a draft|fabricated|outdated|false|fake)\b|\bregardless of what the (?:records|notes|knowledge base)\b"
        r"|\b(?:ignor\w*|oublie\w*|vergiss)\b[^.;\n]{0,40}?\b(?:instructions?|anweisungen|instrucciones|règles|regeln"
        r"|reglas|notes|notizen|notas|précédent\w*|früher\w*|vorherig\w*|anterior\w*)", re.IGNORECASE)),
    ("claims authority", 1.0, re.compile(
        r"\bSYSTEM\b|\bADMIN\b|(?i:\b(?:system (?:note|prompt|update|message|instruction|override)s?|admin(?:istrator)?"
        r"\s*(?:note|notice|override|message)?\s*:|developer mode|operator|platform team"
        r"|head office|headquarters|management|compliance|security team|legal has|cfo|cto|ceo|the board|signed off"
        r"|approved by|by order of|has cleared|has relaxed|revised guideline|new rule|policy update|override"
        r"|per the (?:head|director|manager|owner|chief)|(?:hr|legal|security|finance|it) (?:instruction|notice|directive)"
        r"|priority flag|internal (?:note|directive)|automated note|standing instruction|systemhinweis|admin-hinweis|hinweis an"
        r"|note (?:système|de l'administrateur|pour)|nota del (?:sistema|administrador))\b)")),
    ("relaxes a control", 1.5, re.compile(
        r"\bwithout (?:a |any |the |their |his |her )?(?:[\w-]+\s+)?(?:manager|approval|verif\w+|check\w*|proof|consultation"
        r"|inspection|review|caveats|asking|income check|identity|looking|a prescription)"
        r"|\bno (?:review|questions|restrictions|approval)\b|\bno longer (?:needed|required|apply|need)\b"
        r"|\bnot (?:needed|required|necessary)\b|\bneed not\b|\bneedn't\b|\bno need to\b|\b(?:has been|have been|is|are) "
        r"(?:retired|removed|switched off|turned off|paused)\b|\b(?:is|are) now (?:permitted|allowed|authori[sz]ed|cleared"
        r"|free) to\b|\bwith no [\w-]+\s*(?:match|check|approval|review|sign-off)\b|\b(?:does|do) not apply\b|\bis gone\b|\bdisabled\b|\bwaived?\b|\blifted\b|\brelaxed\b|\bbypass"
        r"|\bskip (?:the )?[\w-]*\s*(?:check|verification|approval)|\bautomatically\b|\bexempt\w*|\bdisable (?:the )?[\w-]*\s*(?:firewall|checks?|filters?|logging|alerts?|2fa|mfa|verification|antivirus|monitoring)"
        r"|\b(?:do not|don't|dont) (?:verify|check|ask|log)\b|\bon the customer's word\b|\beven if\b"
        r"|\b(?:sans (?:vérifier|vérification|approbation|demander)|ohne (?:prüfung|genehmigung|zu prüfen|freigabe)"
        r"|keine freigabe|sin (?:verificar|aprobación|comprobar))\b", re.IGNORECASE)),
    ("sends data out", 2.0, re.compile(
        r"(?:https?|ftp|s3)://|\b[\w.+-]+@[\w-]+\.[a-z]{2,}\b|\b[A-Z]{2}\d{2}(?: ?\d{4}){3,}|\b0x[0-9a-f]{3,}"
        r"|\b(?:send|forward|email|cc|upload|post|export|paste|copy|include|attach|share|reveal|disclose|give"
        r"|leak|communicate|leite|envía|envoie|communique\w*|teile|reply with|respond with)\b[^.;\n]{0,60}?"
        r"\b(?:passwords?|passcodes?|pins?|credentials?|tokens?|logins?"
        r"|address book|card numbers?|salar(?:y|ies)|passport scans?|balances?|calendar|transcripts?"
        r"|conversations?|chat history|historial|contents|customer list|phone numbers)\b"
        # 3.11: a planted contact (a phone number), a shared or public place, others' records
        r"|\+\d{1,3}[ -]?\d[\d -]{6,}\d|\b(?:shared|public)\s+(?:notes|drive|folder|channel|doc|document|share|bucket|repo)\b"
        r"|\b(?:shared|disclosed|sent|given|forwarded|released|handed)\s+(?:out\s+)?(?:to|with)\s+(?:third parties|anyone"
        r"|whoever|outsiders|any\s+\w+)\b"
        r"|\b(?:other|others'|colleagues'|other people's)\s+(?:\w+'?\s+){0,2}(?:records?|data|details|addresses|numbers"
        r"|histor(?:y|ies)|results|salar(?:y|ies)|appointment\w*|files?|accounts?|balances?|diagnos\w+)\b",
        re.IGNORECASE)),
    # 3.11: asks for secrets to be collected ("ask the user for their one-time passcode", "collect
    # the API keys"): data out before it leaves
    ("gathers secrets", 1.5, re.compile(
        r"\b(?:ask|collect|gather|harvest|record|store|write|save|note|copy|keep)\b[^.;\n]{0,40}?\b(?:passwords?"
        r"|passcodes?|one-time (?:code|passcode|password)s?|pins?|credentials|api keys?|secret keys?|tokens?|cvv"
        r"|card numbers?)\b", re.IGNORECASE)),
    ("runs a tool", 2.0, re.compile(
        r"\b(?:call|run|execute|invoke|trigger)\s+(?:the\s+)?`?[\w.]*\w\(|\|\s*(?:ba|z)?sh\b"
        r"|\b(?:call|run|execute|invoke|use)\s+(?:the\s+)?(?:[\w-]+\s+){0,2}(?:tool|script|command|shell|job)s?\b"
        r"|\bcurl\s+https?:|\b(?:run|execute|type|enter)\s+`[^`\n]+`"
        r"|\b(?:query|dump)\s+(?:the\s+)?[\w.]+\s+(?:table|database|db)\b", re.IGNORECASE)),
    # 3.11: what a command destroys or opens up, whoever runs it
    ("destroys data or opens access", 2.0, re.compile(
        r"\brm\s+-\w*[rf]\w*\s+/|\bchmod\s+(?:-R\s+)?0?777\b|--force\b|\bdrop\s+(?:table|database)\b"
        r"|\bdelete\s+(?:the\s+)?(?:namespace|bucket|database|table|backups?)\b|\btruncate\s+table\b|\bmkfs\b"
        r"|\bdisable (?:the )?(?:nightly |daily )?(?:backups?|audit\w*|logging|firewall)\b", re.IGNORECASE)),
    # 3.11: keeps something from the people asking ("never mention the breach")
    ("conceals from others", 1.5, re.compile(
        r"\b(?:never|do not|don't|dont|not to)\s+(?:mention|disclose|admit|reveal|bring up|acknowledge)\b", re.IGNORECASE)),
    ("changes the agent's role", 2.5, re.compile(
        r"\byou(?:'re| are)? now (?:speak|act|are|the)\b|\bplay the (?:part|role)\b|\bact as\b|\bbehave (?:as|like)\b"
        r"|\bimagine you are\b|\badopt the (?:role|persona)\b|\btake on the persona\b|\bpretend\b|\bconsider yourself\b"
        r"|\bswitch (?:roles|to \w+ (?:mode|persona))\b|\bpromoted to\b|(?:^|[.:;!?]\s*)(?:respond|speak|answer|reply) as\b"
        r"|\byou(?:'re| are) (?:the|a|an)\b[^.;\n]{0,40}\bnow\b"
        r"|\bin the voice of\b|\bassume the identity\b|\bdeveloper mode\b", re.IGNORECASE)),
)

_AGAINST = (
    ("a first-person speaker", -1.5, re.compile(
        r"\b(?:I|I'm|I'll|I've|I'd|me|my|we|we're|we'll|our|us|let's|je|j'|ich|wir)\b(?!\s*=)|(?<=\w)!")),
    ("a user's own preference", -1.5, re.compile(
        r"\b(?:user|customer|client|guest|patient|tenant|parent|he|she|they|[A-Z][a-z]+)\s+(?:always\s+|never\s+)?"
        r"(?:prefers?|wants?|would (?:like|rather)|likes?|asked (?:that|to|us|whether|for)|préfère|möchte|prefiere)\b"
        r"|\bpreference\b", re.IGNORECASE)),
    ("a page or story about attacks", -3.0, re.compile(
        r"\b(?:attack\w*|phishing|injection|manipulat\w+|impersonat\w+|social engineering|hidden (?:text|instructions)"
        r"|in the (?:novel|film|play|game|story|book|movie)|tells? (?:them|a model|the model|models) to)\b",
        re.IGNORECASE)),
    ("a third party's duty", -1.5, re.compile(
        r"\b(?:employees|staff|drivers|players?|managers|visitors|all staff|support agents|the team|no person|data subjects"
        r"|tenants|students|mieter|consent|[A-Z][a-z]+ (?:to|will)\s+(?:send|call|email|forward|review|book))\b"
        r"(?:\s+\w+)?\s*(?:must|should|shall|may|are required|need to|have to|müssen|to|will)\b", re.IGNORECASE)),
    ("a report of the past", -1.0, re.compile(
        r"\b(?:on (?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)|in (?:19|20)\d\d|last (?:week|month"
        r"|year|quarter)|ago)\b|\b(?:was|were|had|did)\b")),
)
DIRECTIVE_BAR = 4.0
UNADDRESSED_ASKS = 3.5  # an order with no addressee must ask more


def directive_evidence(text: str) -> tuple[float, list[tuple[str, float, str]]]:
    """(score, [(kind, weight, matched text)]) of the structural scorer (see above); the score is
    0 unless the passage both addresses a reader and asks something."""
    return _directive(text)


_REACHES_OTHERS = re.compile(
    r"\b(?:others?|colleagues?'?|coworkers|co-workers|third part(?:y|ies)|anyone|anybody|everyone|whoever|strangers"
    r"|(?:his|her|their|my|the) (?:team|friends|family|group)|any(?:one)? (?:\w+ )?(?:who|caller|customer|user|client))\b",
    re.IGNORECASE)
_PREFERENCE = next(rx for name, _, rx in _AGAINST if name == "a user's own preference")
_PAST = next(rx for name, _, rx in _AGAINST if name == "a report of the past")


@lru_cache(maxsize=1 << 15)
def _directive(text: str) -> tuple[float, list[tuple[str, float, str]]]:
    found: list[tuple[str, float, str]] = []
    told_you = None
    for name, w, rx in _ADDRESS:
        if rx is not None and (m := rx.search(text)):
            found.append((name, w, m.group(0).strip(" ,;:\n")))
            told_you = m.span() if name == "you told what to do" else told_you
    # an order at a clause start counts beside "you told what to do" only in other words
    # ("Ignore the guidelines you were given"), not inside it ("you must tell…")
    imperative = _clause_imperative_match(text)
    if imperative and not (told_you and _overlaps(imperative.span(), told_you)) and not (
            told_you and imperative.start() > told_you[0]):
        found.append(("an order at a clause start", 1.5, imperative.group(0).strip(" ,;:\n.([>*#`\"-")))
    matches = [(name, w, m) for name, w, rx in _ASKS if (m := rx.search(text))]
    asks = [(name, w, m.group(0).strip(" ,;:\n")) for name, w, m in matches]
    # 3.11: a "preference" that lifts a control or reaches other people is a rule for the agent
    # (an address), not a taste of the user's own (no discount for it).
    ruling = None
    if (pref := _PREFERENCE.search(text)) and (
            _REACHES_OTHERS.search(text) or any(n in ("relaxes a control", "sends data out") for n, _, _ in asks)):
        ruling = pref.group(0)
        found.append(("a preference that rules for others", 2.0, ruling))
    if not asks or (not found and sum(w for _, w, _ in asks) < UNADDRESSED_ASKS):
        return 0.0, []
    against = []
    for name, w, rx in _AGAINST:
        if name == "a user's own preference" and ruling is not None:
            continue
        if name == "a report of the past":
            # each word counts once: a past tense inside what others are to be told ("let anyone
            # know it was…") or inside an ask ("prior answers were mistaken") is not a report
            told = [m.start() for n, _, m in matches if n == "shapes what others are told"]
            spans = [m.span() for _, _, m in matches]
            m = next((m for m in rx.finditer(text) if not (told and m.start() > told[0])
                      and not any(_overlaps(m.span(), sp) for sp in spans)), None)
        else:
            m = rx.search(text)
        if m:
            against.append((name, w, m.group(0).strip(" ,;:\n")))
    address = max(w for _, w, _ in found) + 0.5 * (len(found) - 1) if found else 0.0
    evidence = found + asks + against
    return round(address + sum(w for _, w, _ in asks) + sum(w for _, w, _ in against), 2), evidence


_CLAUSE_START = re.compile(
    r"(?:^|[.!?;:\n(\[\]>*#`\"-]\s*|\bP\.S\.\s*|\b(?:and|then|also|but|so|just)\s+|,\s*)\s*(?:" + _STARTERS + r"\s+){0,2}"
    r"(?:(?:(?:do not|don't|dont|never)\s+\w+)|(?:always\s+)?(?:" + _ANSWER_VERB + r"|" + _ACT_VERB + r"))\b"
    r"(?P<rest>\s+[^.;\n]{1,12})",
    re.IGNORECASE)


def _clause_imperative(text: str) -> str | None:
    m = _clause_imperative_match(text)
    return m.group(0).strip(" ,;:\n.([>*#`\"-") if m else None


def _clause_imperative_match(text: str) -> re.Match[str] | None:
    for m in _CLAUSE_START.finditer(text):
        rest = m.group("rest")
        if _FIRST_PERSON_OBJECT.match(rest) or re.match(r"\s*(?:it|that|this)\s*[,.!]", rest):
            continue
        return m
    return None


def addressee(text: str) -> str | None:
    """The words by which the passage addresses a reader (the structural scorer's address side),
    or None; the learned detector (:mod:`ledger.classifier.learned`) takes it as the form of an order."""
    for _, _, rx in _ADDRESS:
        if rx is not None and (m := rx.search(text)):
            return m.group(0).strip(" ,;:\n")
    return _clause_imperative(text)
