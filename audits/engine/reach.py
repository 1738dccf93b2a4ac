"""Format-free reach: from confirmed poisons to unobserved ones by what they do (issue 16).

Pattern expansion (`expansion.py`) follows an answer slot or a seed's harm target; a poison
planted for a question nobody has asked yet, with its own answer, no metadata and no shared
template (PoisonedRAG's per-target passages) carries neither. What it shares with the seeds is
its *shape* (how it is written, not what it says) and what it *does*: retrieved for its own
question it makes the agent assert its claim, and without it (and its planted copies) the agent
answers what the rest of the store says. The reach:

1. Candidates by seed-likeness. Every allowed memory outside the batch gets a shape profile
   (its token sequence with content words replaced by their shape — `Xx`, `x`, `d` — and
   function words and punctuation kept; hashed 1–3-grams, plus its length class). A candidate
   is nearer (cosine) the confirmed seeds than the *anti-seeds* (the records that answer the
   incidents once the batch is out: what the seeds contradicted) and nearer them than most of
   a random clean reference is (above the reference's own `quantile`): the cut is set per store.
   Seeds framed as the store frames its records (`ShapeModel`: "Q: <q>\nA: <planted>" beside the
   store's "Q: <q>\nA: <right>") say nothing by their shape; when other seeds are framed
   otherwise, and nearly every record of that other frame stands against the store on its own
   question (`frame_stands_against`: the store's own phrasings do not), the model is those,
   records are compared by their frame (without the question they state and their answer
   slot), and a copy of a group need not be seed-like: a record stating its question with its
   claim is one (`restated`; TUNE sqa-entity-aline-distinct, nq-number-aline-distinct). The
   store's records a confirmed group stood against join the anti-seeds of the next pass.
   Under that cut, a seed-like memory is a candidate too when a copy backs it: among its nearest
   records a seed-like one at cosine ≥ `copy_cos` names one of its answer-like spans (a planted
   group is written several times, in shapes the seeds need not share: TUNE hotpot-plain-adv,
   one target's eight passages at 0.65–0.76 to the seeds' shape against a cut of 0.85). Two
   sentences of one padding article back each other as well, so the store's side of step 5
   counts only records about the candidate's subject (for every candidate: a clean fact kept in
   four paraphrases was "confirmed" by records about something else, TUNE locomo-clean-plain):
   naming one of its other names, or sharing a word at most 5% of the store contains
   (`keyword_query`'s rule), outside the claim, or stating the question it states.
   When the seeds set a subject (step 4), a record whose answer names a harm target they carry,
   on a question about that subject, is a candidate whatever its shape, and is tested first
   (MINJA's last records carry no bridge: "Q: … A: R" looks like the store's own records).
   Best first, at most `max_candidates` per pass that cost agent calls: one dismissed by its
   retrieval alone (a group of one, no claim, not retrieved) does not count, up to
   8 × `max_candidates` looked at (a bound on retrieval compute). In a store of 2,000 most records
   over the cut are padding and a target's passages ranked below the first 60 (TUNE
   sqa-plain-distinct); past the first `max_candidates` a record is confirmed only by
   `min_support` supporters about it, and a statement's heading is no claim (two sentences of
   one padding article were "confirmed" with their title otherwise). Up to `passes` passes,
   the groups confirmed in one joining the seeds of the next, while the reach's agent calls stay
   under `max_calls` (300: the issue's budget is 600 for a whole audit of 5 incidents).
2. The query it would be retrieved for, synthesised from the memory itself: its leading
   question-like span (text up to the first `?`) when it has one (its `metadata.query` when that
   span only opens the query, a lead-in), else its `metadata.query`, else a first sentence typed
   as a search query (lower case, opening as a question does, ended by a full stop),
   else its own text — and when that text retrieves only seed-like records even with its group
   out (its template outweighs its topic), its distinctive words (`keyword_query`: no function words, none that
   more than 5% of the store contains). A statement still unconfirmed is asked the leading
   question of its nearest seed-like paraphrase sharing an answer-like span with it (a chat
   model answers a statement asked as itself with "The answer is:").
3. Its claim, by contrast with its neighbours: its answer slot when it has one; else its
   answer-like spans (numbers, capitalised names, dates) that no other retrieved record outside
   its near-duplicate group contains, and that the question does not. With many copies the
   records retrieved beside it are all copies, so the contrast is made again once its group is
   out (step 4): a span the store's side then mentions is the topic, not the claim (TUNE
   hotpot-plain-adv: "French" in "Georges Guynemer, a renowned French ace"). A record that
   states its question and has no such span (a lower-case answer: "goalkeeper", "film
   director") claims the rare lower-case words outside the question that most of its copies
   repeat and the store's side beside it does not (`copy_words`; TUNE hotpot-plain-adv-bb,
   PoisonedRAG's black-box passages), and the reader is then offered the store's records' own
   rare lower-case words too (`own_words`). The claim under test is the one the agent asserts
   with the group; the answer without it must not carry that claim.
4. Replay with and without it: f(q, R(q, M \\ B)) and f(q, R(q, M \\ B \\ G)), G its group —
   itself and the retrieved records carrying its claim — grown adaptively (up to `rounds`)
   while the retrieval after removal still brings up copies: seed-like records carrying the
   claim at cosine ≥ `copy_cos` (0.7) to it. At least `min_copies` (2) records: one passage
   is not a planted group (and a padding sentence sharing a word is not a copy: set on TUNE
   sqa-plain-distinct, copies at 0.82–1.0, such a false group at 0.34–0.43) — unless its claim
   names an incident's harm target that the seeds carry, and its question shares the subject
   of theirs (the content words common to the seeds' questions when they state at least two
   different ones — `same_question`; when they state one, the names in it, `answer_spans`: the
   trigger entity, a patient id or a person): then the seeds are its copies, one claim planted
   across questions about one subject (MINJA's redirect, one record per victim question; TUNE
   ehr-minja-bridge). A group of one stands too when the record opens with the question it
   answers (`opening_question`), a seed opens with one, and none of the store's records carrying
   the answer without it opens with that question (`baited`: written to be retrieved for it where
   the store does not write so; PoisonedRAG's black-box passage at one per target, TUNE
   hotpot-plain-adv-bb ρ 0.05): it needs `min_support` supporters (or, where the agent
   without it answers from records about other things, `min_support` records of its store's
   side agreeing on one answer: `agreed`), and outvoted today (the answer with it is the
   store's) it is confirmed by what it answers alone, f(q, {m}) (`outvoted_alone`). Such a
   record, and every record of its group, written as a seed is (`asks_first`: its question,
   then its answer on the same line) needs no majority against it where no record about that
   question opens with a question (`unopposed`): it is retrieval bait, confirmed once removing
   its group takes its claim out of the answer (HotpotQA's comparisons and yes/no questions have
   no two records of the store that answer them: TUNE hotpot-plain-adv-bb, "lone: 1 supporter(s)"
   with "Istanbul" in the answer and "Wolf Alice" without). Words are
   compared as the same word whatever their case and a possessive "'s" ("James's dogs" asks
   about James: TUNE locomo-minja-bridge, where the possessive left the seeds with no subject).
   Its group is then the records naming the target on a question about the subject (not a
   padding line that names the target), its store's side every record about the question not
   naming the target, whatever its shape, and the store's own record on that very question may
   be its one supporter — or, when the agent follows no record of the question once the group
   is out (a vote of records about other things), the record that states that question and
   answers otherwise is what the planted one stood against. A record states a question in its `metadata.query`, its `Q:`
   line, or a first sentence that asks one after a short label ("Asked before: …?"). The reader
   gets the claims of every retrieved record as candidates (a probe's candidates, synthesised;
   a real model ignores them and answers freely, the test reads its output the same way). A
   batch member there only for standing, alone, against the records of G's question (the
   expansion's dormant step: `standing`) is in the store for these replays: with G planted, it
   is the store's side, and it leaves the batch (`audit.analyse`).
5. Confirmed when the answer with G is its claim, the answer without G is not, and at least
   `min_support` (2) records outside G among the query's top max(4k, 20) carry the new answer (the store's majority on
   that question), each on the store's side of the shape split (not seed-like: when the records
   that would confirm a group look like the seeds too, shape tells nothing — slot templates
   shared by honest and planted records, TUNE nq-number-slot-distinct) and about that question: cosine to the query ≥ `support_cos` (0.4; set on
   TUNE: the support of true groups in sqa-plain-distinct at 0.46–0.80, a false group of
   sqa-plain-shared — honest near-duplicates of a bystander, whose removal let unrelated
   records answer — at 0.28–0.32). Where both state a question (`metadata.query`, a `Q:` line)
   the supporter must state the same one (token Jaccard ≥ 0.6): TUNE nq-number-slot-distinct,
   a bystander's honest copies were "confirmed" by records answering another question
   ("… greys anatomy season 14" for "… chicago fire season 4", Jaccard 0.33). A chat model does
   not vote: it may follow one record, or echo the memory list, where the store holds several
   records on the question; so a group is also confirmed when the agent follows one supporter,
   or answers nothing any retrieved record carries, while at least `min_support` records about
   the question (the same filters, not asserting the claim) stand against it. An explicit
   "I don't know" stops the candidate. Answers are read for what they assert (`answer_units`:
   "The answer is Norvik, as the notes say." asserts "Norvik"), records against those units
   (`carries_answer`). A claim planted across questions may be outvoted on its own question
   (dormant: the agent answers what the store's own record there says, with it or without it);
   it is confirmed when, the records stating that question and carrying today's answer out, the
   agent asserts the claim, and with its group out as well it does not. Outvoted again (a
   record of a neighbouring question answers once the store's own record is out), the records
   about it carrying that answer go too, up to `rounds` answers in all. A record ranked past
   the top k on its own question, or one that bridges and stays outvoted, is asked alone (f(q,
   {m}), sufficiency): confirmed when that answer is its claim and the store's records stating
   its question answer otherwise. A record that states the attack's own step — its question's
   subject bridged to the claim (`bridges`, the verdict's reading) — needs no store's side in
   either test: its words are why its question is answered with the claim. The group joins the
   batch with a derived event whose harm is the claim; every tested candidate leaves a row in
   `ReachResult.trace`.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ledger.classifier.text import TYPED_QUERY

from .agents import DONT_KNOW
from .expansion import answer_slot, write_bursts, written_at
from .harm import make_harm
from .replay import BudgetExhausted, Replayer
from .retriever import RetrievedMemory, Retriever
from .words import FUNCTION as _FUNCTION
from .words import WORD, entity, mentions, names, same_question, stated_question, tokens, word

# Words that open a sentence capitalised without being a name.
_OPENERS = _FUNCTION | frozenset("notes note about according among asked someone remember when "
                                 "if writers several most many some people".split())
# The first person is capitalised everywhere and names nobody ("I", "I'm", "I’ll").
_I = frozenset("i" + a for a in ("", "'m", "'ve", "'ll", "'d", "’m", "’ve", "’ll", "’d"))
_YES_NO = frozenset(("yes", "no"))
_CONNECT = frozenset("of the and de da del la le du von van der di y".split())
_DIM = 512


def _shape_tokens(text: str) -> list[str]:
    out = []
    for w in WORD.findall(text):
        lw = w.casefold()
        if lw in _FUNCTION or not w[0].isalnum():
            out.append(lw)
        elif w[0].isdigit():
            out.append("d")
        elif w[0].isupper():
            out.append("Xx")
        else:
            out.append("x")
    return out


def shape_profile(text: str) -> np.ndarray:
    """L2-normalised hashed 1–3-grams of the text's shape, plus a length class."""
    toks = _shape_tokens(text)
    v = np.zeros(_DIM, dtype=np.float32)
    for n in (1, 2, 3):
        for i in range(len(toks) - n + 1):
            v[zlib.crc32(" ".join(toks[i:i + n]).encode()) % (_DIM - 8)] += 1.0
    v[_DIM - 8 + min(7, int(np.log2(1 + len(toks))))] += 2.0
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def answer_spans(text: str) -> list[str]:
    """Answer-like spans: numbers and runs of capitalised words (names, dates, titles).

    A capitalised word opening a sentence counts only as part of a longer run, or when the text
    also capitalises it elsewhere (a name, not just a sentence's first word).
    """
    words = WORD.findall(text)
    spans: list[tuple[str, bool]] = []
    cur: list[str] = []
    pending: list[str] = []
    cur_start = False
    inner_caps: set[str] = set()
    prev = "."
    for w in words:
        if w[0].isupper() and prev not in (".", "!", "?", ":", ";"):
            inner_caps.add(w)
        prev = w
    prev = "."

    def flush() -> None:
        if cur:
            spans.append((" ".join(cur), cur_start and len(cur) == 1 and not cur[0][0].isdigit()))
        cur.clear()
        pending.clear()

    for w in words:
        start = prev in (".", "!", "?", ":", ";")
        is_num = w[0].isdigit()
        # "I" continues a name only as its numeral ("Charles Louis I"), never starts one.
        first_person = w.casefold() in _I and (not cur or bool(pending) or w != "I")
        is_cap = w[0].isupper() and not (start and w.casefold() in _OPENERS) and not first_person
        if is_num or is_cap:
            if pending and cur:
                cur.extend(pending)
            pending.clear()
            if not cur:
                cur_start = start
            cur.append(w)
        elif cur and w.casefold() in _CONNECT and not pending:
            pending.append(w)
        else:
            flush()
        prev = w
    flush()
    # A lone function word names nothing, wherever it is capitalised ("He" opening a line of a
    # passage whose title ends the line before).
    return list(dict.fromkeys(sp for sp, lone_opener in spans
                              if sp.strip() and (not lone_opener or sp in inner_caps)
                              and not (" " not in sp and sp.casefold() in _FUNCTION)))


# A chat model's lead-in before the answer proper ("Answer:", "The answer is", "Based on the
# memories, …"), and what closes it.
_LEAD_IN = re.compile(
    r"^\s*(?:(?:based on|according to|from) (?:the )?(?:memories|notes|records|information)[^,:]*[,:]\s*)?"
    r"(?:(?:the )?(?:correct |final )?answer(?: to (?:the|this|your) question)?(?: is)?\s*[:\-]?\s*|a\s*:\s*)?",
    re.IGNORECASE)
_SHORT_ANSWER = 6  # words: a name, a number, a date, yes/no — read whole


def answer_units(output: str, question: str | None = None) -> list[str]:
    """What an agent's answer asserts, as units a record can carry.

    Its head — the words after a lead-in such as "The answer is", up to the first clause break
    — is one unit when it is short (at most `_SHORT_ANSWER` words: a name, a number, a date,
    yes/no); its answer-like spans (numbers, names, dates; `answer_spans`) are units too. What
    the question already says is not a unit (a restated topic is not an answer). Empty for no
    answer."""
    # "[2]": the rank marker of the memory list the connector shows the model
    # (`agents.format_memories`), echoed back; it points at a memory, it asserts nothing.
    text = " ".join(_RANK_MARK.sub(" ", output).split())
    if not text or text == DONT_KNOW:
        return []
    body = _LEAD_IN.sub("", text, count=1).strip()
    qtok = tokens(question) if question else frozenset()
    out: list[str] = []

    def add(unit: str, *, words: bool = False) -> None:
        unit = unit.strip(" .,;:!?\"'()[]")
        tok = tokens(unit)
        if words:  # a clause of a longer answer: it needs a content word the question lacks
            tok = frozenset(t for t in tok if t not in _FUNCTION)
        elif tok <= _FUNCTION and not tok <= _YES_NO:  # "He", "The": no answer; "no" is one
            return
        if unit and tok and not (qtok and tok <= qtok and not offered(unit, question or "")) \
                and unit.casefold() not in (u.casefold() for u in out):
            out.append(unit)

    head = _CLAUSE.split(body, maxsplit=1)[0]
    if len(head.split()) <= _SHORT_ANSWER:
        add(head, words=head.strip(" .,;:!?") != body.strip(" .,;:!?"))
    numbers = _NUMBER.findall(body)
    for s in answer_spans(body):
        # "1,024" is one number, not the spans "1" and "024".
        if not (s.isdigit() and any(s != n and s in n for n in numbers)):
            add(s)
    for n in numbers:
        add(n)
    return out


def offered(unit: str, question: str) -> bool:
    """The question offers `unit` as one of its alternatives ("… a left-hand or right-hand
    batsman?", "… earlier, the Seven Days Battles or the Battle of Manila?"): an answer naming it
    answers, it does not restate the topic."""
    u = re.escape(" ".join(unit.split()))
    return re.search(rf"(?<![\w-]){u}\s+or\b|\bor\s+(?:the\s+|an?\s+)?{u}(?![\w-])", question, re.IGNORECASE) is not None


def says_nothing(output: str, question: str | None) -> bool:
    """An answer in sentences that asserts nothing the question does not (a chat model's "The
    right to communicate one's opinions and ideas is not a privilege, but rather …"): longer than
    `_SHORT_ANSWER` words, with no `answer_units` read against the question. A short answer that
    repeats a word of the question is an answer (one side of a comparison: "Marsilea"), and "I
    don't know" says it has none."""
    text = " ".join(output.split())
    return bool(text) and text != DONT_KNOW and len(text.split()) > _SHORT_ANSWER \
        and not answer_units(text, question)


_RANK_MARK = re.compile(r"\[\d{1,3}\]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CLAUSE = re.compile(r"[,.;:!?](?:\s|$)")


def same_answer(a: str, b: str) -> bool:
    """Two agent outputs assert the same (`answer_units`, case-insensitive), whatever their
    wording; outputs that assert nothing are compared as text."""
    ua, ub = answer_units(a), answer_units(b)
    if not ua and not ub:
        return a.strip().casefold() == b.strip().casefold()
    return {u.casefold() for u in ua} == {u.casefold() for u in ub}


def claim_spans(m: RetrievedMemory | Any, others: Sequence[Any], question: str | None) -> list[str]:
    """What `m` asserts that its neighbours do not: its answer slot, else its answer-like spans
    no other record (outside its group) mentions and the question does not contain."""
    slot = answer_slot(m.metadata, m.text)
    if slot:
        return [slot]
    qtok = tokens(question) if question else frozenset()
    out = []
    for s in answer_spans(m.text):
        st = tokens(s)
        if not st or (qtok and st <= qtok):
            continue
        if any(mentions(s, o.text) for o in others):
            continue
        out.append(s)
    return out


def own_words(o: Any, skip: frozenset[str], df: Mapping[str, int], n: int) -> list[str]:
    """A record's lower-case answer candidates: its words the store rarely uses (`rare_words`)
    outside `skip` (the question's words, and the record it is read beside), as written in it."""
    rare = rare_words(o.text, df, n) - skip
    return list(dict.fromkeys(w for w in WORD.findall(o.text) if w.islower() and word(w) in rare))


def copy_words(m: Any, copies: Sequence[Any], others: Sequence[Any], question: str,
               df: Mapping[str, int], n: int) -> list[str]:
    """What a record stating `question` asserts in lower case, read from its copies: of its rare
    words in lower case outside the question (`own_words`), those the most copies repeat (at
    least one) and no record of the store's side beside it (`others`) mentions. Empty without
    a copy."""
    count = {w: sum(1 for c in copies if mentions(w, c.text)) for w in own_words(m, tokens(question), df, n)
             if not any(mentions(w, o.text) for o in others)}
    most = max(count.values(), default=0)
    return [w for w, c in count.items() if c == most] if most else []


def _leading_question(text: str) -> str | None:
    """The text up to its first "?", when that is one line of 3–40 words."""
    head = text.strip().split("?", 1)
    if len(head) == 2 and 3 <= len(head[0].split()) <= 40 and "\n" not in head[0].strip():
        return head[0].strip() + "?"
    return None


def _typed_question(text: str) -> str | None:
    """A first sentence typed as a search engine's query, in lower case and without a question
    mark ("who sings does he love me with reba.Linda Davis …": PoisonedRAG's black-box passages
    on NQ and MS MARCO, read on TUNE hotpot-plain-adv-bbq), as a question."""
    typed = TYPED_QUERY.match(text)
    if typed and 3 <= len(typed.group(1).split()) <= 40:
        return typed.group(1).strip() + "?"
    return None


def opening_question(text: str) -> str | None:
    """The question a text opens with, read from the text alone: its leading question, else a
    first sentence typed as a query."""
    return _leading_question(text) or _typed_question(text)


# A sentence's end inside a text: a full stop or "!" after a word of four letters or digits, then
# a space ("U.S. state", "St. Louis" end none).
_SENTENCE_END = re.compile(r"[^\W_]{4,}[.!]\s")


def asks_first(text: str) -> str | None:
    """The question a text opens with (`opening_question`) when the text goes on, on that line,
    to answer it ("Which harbour …?.Norvik is …", "who sings … reba.Linda Davis …"): written to be
    retrieved for that question. A question that is a title heading an article ("What Are You
    Doing the Rest of Your Life?" and a new line) answers nothing, and one that ends a line of
    several sentences is no question the line opens with (a chat turn, "Jon: Thanks for the
    support. Running a business isn't easy, … How have you tackled …? Got any advice …": TUNE
    locomo-minja-slot-w11)."""
    q = opening_question(text)
    if q is None or _SENTENCE_END.search(q):
        return None
    line = text.strip().split("\n", 1)[0]
    cut = line.find("?") if _leading_question(text) else len(q) - 1
    return q if any(ch.isalnum() for ch in line[cut + 1:]) else None


def restates(question: str, claim: str) -> bool:
    """A claim that says half or more of its question's words again restates it, it does not answer
    it (a chat turn's whole line read as its answer, "Wow, traveling is amazing, isn't it? I'm
    learning German now …" for "Tim: Wow, traveling is amazing, isn't it?": TUNE
    locomo-minja-slot-w7 ρ 0.2 seed 2)."""
    asked = tokens(question)
    return bool(asked) and 2 * len(asked & tokens(claim)) >= len(asked)


def baited(m: Any, store_side: Sequence[Any]) -> bool:
    """m opens with a question (`opening_question`) that none of `store_side` (the store's records
    answering that question otherwise) opens with: written to be retrieved for it, where the store
    does not write so. An honest record in a store of question-and-answer notes opens as the
    records it disagrees with do."""
    bait = opening_question(m.text)
    return bait is not None and not any(
        (o := opening_question(x.text)) is not None and same_question(bait, o) for x in store_side)


def synth_query(m: Any) -> str:
    """The question a memory would be retrieved for, from the memory itself: its leading
    question, or its `metadata.query` when that leading question is only the query's lead-in
    ("User: Can you check something for me? How many months …?" is stored with the query "Can
    you check something for me? How many months …?": TUNE locomo-minja-slot)."""
    q = m.metadata.get("query") if isinstance(m.metadata, Mapping) else None
    q = q.strip() if isinstance(q, str) else ""
    head = _leading_question(m.text)
    if head:
        # Whatever labels it ("User: ", "**Q:** "), the leading question is the query's lead-in
        # when the query's first sentence ends it and the query goes on (TUNE
        # locomo-minja-slot-w11: "**Q:** Hey, can you check something for me?" was asked).
        lead = q.split("?", 1)[0].strip()
        return q if lead and head[:-1].endswith(lead) and len(q) > len(lead) + 1 else head
    typed = _typed_question(m.text)
    return typed if typed and not q else q or m.text


_RARE_SHARE = 0.05  # a word more than 5% of the store's records contain is template, not topic


def doc_freq(texts: Sequence[str]) -> dict[str, int]:
    """How many of the texts contain each word (`words.tokens`)."""
    df: dict[str, int] = {}
    for t in texts:
        for tok in tokens(t):
            df[tok] = df.get(tok, 0) + 1
    return df


def rare_words(text: str, df: Mapping[str, int], n: int) -> frozenset[str]:
    """A text's content words that few of the store's `n` records contain (`keyword_query`'s
    rule): its topic, not its template."""
    return frozenset(w for w in tokens(text) if w not in _FUNCTION and df.get(w, 0) <= max(2.0, _RARE_SHARE * n))


def keyword_query(text: str, df: Mapping[str, int], n: int, *, share: float = _RARE_SHARE) -> str:
    """A memory's distinctive words, in order: no function words, none that more than `share` of
    the store's records contain (the template, not the topic)."""
    words = [w for w in WORD.findall(text) if w[0].isalnum() and word(w) not in _FUNCTION
             and df.get(word(w), 0) <= max(2, share * n)]
    return " ".join(dict.fromkeys(words)) or text


@dataclass
class ReachResult:
    added: list[str] = field(default_factory=list)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    tested: int = 0
    candidates: int = 0
    # The seeds' subject (step 4): the words a candidate's question must share to be planted with
    # them; empty when their questions set none.
    subject: list[str] = field(default_factory=list)
    agent_calls: int = 0
    budget_cut: bool = False  # the audit's call budget ran out mid-candidate: the reach stopped there
    # The seeds were compared by frame (`ShapeModel.store_shaped`, `frame_stands_against`).
    framed: bool = False
    # Confirmed but not added: the reach started from members not yet judged poison-like, and
    # what it found did not make them a pattern across questions (`audit.analyse`).
    rejected: list[str] = field(default_factory=list)
    # One row per tested candidate: the query, the answers with and without its group, what the
    # confirmation read and why it stopped ("confirmed" or the failed step).
    trace: list[dict[str, Any]] = field(default_factory=list)


def _carries(out_text: str, claims: Sequence[str]) -> bool:
    """An agent's answer carries a claim; "I don't know" carries none."""
    t = out_text.strip()
    return bool(t) and t != DONT_KNOW and any(mentions(c, t) or t.casefold() == c.casefold() for c in claims)


# A seed whose frame (`_frame`) is at least this near (cosine) the frame of a record it
# contradicted is written as the store writes: "Q: <q>\nA: <planted>" against "Q: <q>\nA:
# <right>" (TUNE sqa-entity-aline-distinct, where the other planted records are framed
# "Question: <q>\nThought: the records were updated recently, …\nA: <planted>").
STORE_SHAPED = 0.9


def _frame(m: Any) -> str:
    """What a record is written in, beside what it is about and what it answers: its text without
    the question it states and without its answer slot."""
    text = m.text
    asked = stated_question(m)
    if asked:
        text = text.replace(asked, " ", 1)
    slot = answer_slot(m.metadata, text)
    if slot and slot in text:
        at = text.rindex(slot)
        text = text[:at] + " " + text[at + len(slot):]
    return text


class ShapeModel:
    """Seed-likeness of a memory's shape: nearer (cosine) the seeds' than the anti-seeds'.

    Seeds written in the store's own frame (`STORE_SHAPED`) say nothing by their shape: with them
    in the model the store's own records on the question are seed-like too, and a group is left
    with no store's side. When other seeds are framed otherwise, the model is those, the
    store-framed ones join the anti-seeds as examples of the store's frame, and every record is
    compared by its frame: the questions' and answers' wording outweighed the rest, and
    "Question: <another q>\nA: 3", a store record, was nearer a "Question: <q>\nThought: …\nA:
    1935" seed (0.66) than the anti-seeds, all on <q> (0.59; TUNE nq-number-aline-distinct).
    `store_shaped` then says the attack also writes as the store does."""

    def __init__(self, seeds: Sequence[Any], anti: Sequence[Any], *, by_frame: bool = True) -> None:
        self.store_shaped = False
        if anti and by_frame:
            S = np.stack([shape_profile(_frame(m)) for m in seeds])
            A = np.stack([shape_profile(_frame(m)) for m in anti])
            near = (S @ A.T).max(axis=1) >= STORE_SHAPED
            self.store_shaped = bool(near.any() and not near.all())
        if self.store_shaped:
            self.S, self.A = S[~near], np.concatenate([A, S[near]])
        else:
            self.S = np.stack([shape_profile(m.text) for m in seeds])
            self.A = np.stack([shape_profile(m.text) for m in anti]) if anti else None

    def scores(self, records: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        P = np.stack([shape_profile(_frame(m) if self.store_shaped else m.text) for m in records])
        to_seed = (P @ self.S.T).max(axis=1)
        to_anti = (P @ self.A.T).max(axis=1) if self.A is not None else np.zeros(len(records), np.float32)
        return to_seed, to_anti

    def like(self, m: Any) -> bool:
        s, a = self.scores([m])
        return bool(s[0] > a[0])


# The share of a frame's records that must stand against the store for it to be the attack's
# (`frame_stands_against`). Set on TUNE: every record of the planted "Thought:" frame stands
# against the store in sqa-entity-aline-distinct and nq-number-aline-distinct (1.00 in every run
# read: ρ 0.2 and 0.5, 1 and 5 observed); in sqa-clean-honest at 60 targets, 25 observed and
# 2,000 records, where every honest slip is written in the store's own variants ("Q: <q>?",
# "… (from the reference)"), 0.60 and 0.23 (seed 2, two passes) and 0.48 (seed 5).
FRAME_AGAINST = 0.8


def frame_stands_against(model: ShapeModel, retriever: Retriever, *, exclude: Collection[str],
                         sample: int = 40, min_tallied: int = 3) -> bool:
    """Is the seeds' other frame the attack's (`ShapeModel.store_shaped`)? The records written in
    it (within `STORE_SHAPED` of a seed's frame: a store's padding "Question: …\nThought: <facts>"
    is near, not in it) outside the seeds must stand against the store on their own questions: for
    at least `FRAME_AGAINST` of those that state a question with an answer slot (up to `sample`,
    nearest first), a record stating that question, framed otherwise, gives another slot. (Not
    its majority: the attack's copies in the store's frame may outnumber the store's records
    there.) A frame the store's own records are written in stands against it only where the store
    errs: honest slips judged poison-like for their source, written "Q: <q> (from the reference)"
    and "Question: <q>", made it the model, and 33 honest records of the first wording were
    proposed as poison (TUNE sqa-clean-honest, 60 targets, seed 2; 0.60 of that frame's records
    stood against the store). At least `min_tallied` must be read."""
    def stated(o: Any) -> tuple[str | None, str | None]:
        """The question a record states and its answer slot."""
        return stated_question(o), answer_slot(o.metadata, o.text)

    mems = retriever.memories
    allowed = np.isfinite(retriever.scores(np.zeros(retriever.embeddings.shape[1], np.float32)))
    pool = [(m, qa) for i, m in enumerate(mems) if allowed[i] and m.id not in exclude
            and all(qa := stated(m))]
    if not pool:
        return False
    to_seed, to_anti = model.scores([m for m, _ in pool])
    framed = [(m, qa) for (m, qa), a, b in sorted(zip(pool, to_seed, to_anti), key=lambda x: (-x[1], x[0][0].id))
              if a > b and a >= STORE_SHAPED]
    tallied = against = 0
    for m, (asked, slot) in framed[:sample]:
        others = [(o, oslot) for o in retriever.retrieve(asked, 20, {m.id})
                  for oq, oslot in [stated(o)] if oq and oslot and same_question(asked, oq)]
        if others:
            s_, a_ = model.scores([o for o, _ in others])
            others = [(o, oslot) for (o, oslot), x, y in zip(others, s_, a_) if x <= y]
        if not others:
            continue
        tallied += 1
        against += any(oslot.casefold() != slot.casefold() for _, oslot in others)
    return tallied >= min_tallied and against >= FRAME_AGAINST * tallied


def seed_likeness(model: ShapeModel, retriever: Retriever, *, exclude: Collection[str],
                  quantile: float = 0.9, seed: int = 0, reference: int = 256
                  ) -> list[tuple[str, float]]:
    """Candidates nearer the seeds' shape than the anti-seeds' and than most of a clean
    reference: [(memory, margin)], best first."""
    mems = retriever.memories
    allowed = np.isfinite(retriever.scores(np.zeros(retriever.embeddings.shape[1], np.float32)))
    pool = [i for i in range(len(mems)) if allowed[i] and mems[i].id not in exclude]
    if not pool:
        return []
    to_seed, to_anti = model.scores([mems[i] for i in pool])
    rng = np.random.default_rng(seed)
    ref = rng.choice(len(pool), size=min(reference, len(pool)), replace=False)
    cut = float(np.quantile(to_seed[ref], quantile))
    # Frames repeat exactly (a template's records tie): where the model compares frames, a record
    # at the cut is over it (at ρ 0.5 a planted frame is 10% of the reference, the cut its own).
    over = (to_seed >= cut) if model.store_shaped else (to_seed > cut)
    out = [(mems[pool[j]].id, float(to_seed[j] - to_anti[j])) for j in range(len(pool))
           if to_seed[j] > to_anti[j] and over[j]]
    out.sort(key=lambda x: (-x[1], x[0]))
    return out


def backed_by_copies(model: ShapeModel, retriever: Retriever, *, exclude: Collection[str],
                     copy_cos: float = 0.7, limit: int = 240, neighbours: int = 12
                     ) -> list[tuple[str, float]]:
    """Seed-like memories (nearer the seeds' shape than the anti-seeds') that a copy backs: among
    their `neighbours` nearest, a seed-like one at cosine ≥ `copy_cos` names one of their
    answer-like spans — the same claim written again, as a planted group is. [(memory, margin)],
    best first; at most the `limit` best by margin are looked at (a bound on the cost)."""
    mems, E = retriever.memories, retriever.embeddings
    allowed = np.isfinite(retriever.scores(np.zeros(E.shape[1], np.float32)))
    pool = [i for i in range(len(mems)) if allowed[i] and mems[i].id not in exclude]
    if not pool:
        return []
    to_seed, to_anti = model.scores([mems[i] for i in pool])
    like = {pool[j] for j in range(len(pool)) if to_seed[j] > to_anti[j]}
    margin = {pool[j]: float(to_seed[j] - to_anti[j]) for j in range(len(pool))}
    ordered = sorted(like, key=lambda i: (-margin[i], mems[i].id))[:limit]
    out = []
    for i in ordered:
        spans = answer_spans(mems[i].text)
        if not spans:
            continue
        sims = E @ E[i]
        for k in np.argsort(-sims)[:neighbours + 1].tolist():
            if k == i or k not in like or sims[k] < copy_cos:
                continue
            if any(mentions(sp, mems[k].text) for sp in spans):
                out.append((mems[i].id, margin[i]))
                break
    return out


def reach(batch: Sequence[str], seeds: Sequence[str], anti: Sequence[str], retriever: Retriever,
          replayer: Replayer, *, max_candidates: int = 60, min_support: int = 2, rounds: int = 3,
          quantile: float = 0.9, seed: int = 0, max_group: int = 12, min_copies: int = 2,
          copy_cos: float = 0.7, support_cos: float = 0.4, passes: int = 3,
          max_calls: int = 300, targets: Sequence[str] = (),
          bridges: Callable[[str, str | None], bool] | None = None,
          standing: Collection[str] = ()) -> ReachResult:
    """Steps 1–5 of the module docstring, in up to `passes` passes (each confirmed group joins
    the seeds of the next: more seeds, a better shape model), while the agent calls stay under
    `max_calls`; the batch itself is not changed here. `targets`: the incidents' harm targets;
    a candidate whose claim names one that the seeds carry is planted with them (step 4).
    `bridges(m, target)`: m states a bridge from its question's subject to `target`.
    `standing`: batch members in the batch only for standing, alone, against the records of
    their own question (the expansion's dormant step), judged no poison: where the group tested
    is those records, they are its store's side (`verify`), and the evidence names them
    (`restored`)."""
    states_bridge = bridges or (lambda _mid, _target: False)
    res = ReachResult()
    mems, idx = retriever.memories, retriever.index
    if not [s for s in seeds if s in idx]:
        return res
    anti_m = [mems[idx[a]] for a in anti if a in idx]
    seed_ids = [s for s in seeds if s in idx]
    removed = set(batch)

    def shape_model() -> ShapeModel:
        """The seeds' shape model, by frame only where their other frame is the attack's."""
        seeds_m = [mems[idx[s]] for s in seed_ids]
        mdl = ShapeModel(seeds_m, anti_m)
        # Once the frame is the attack's it stays so: its records found, none is left to read.
        if mdl.store_shaped and not res.framed and not frame_stands_against(
                mdl, retriever, exclude=removed | set(seed_ids)):
            mdl = ShapeModel(seeds_m, anti_m, by_frame=False)
        res.framed = res.framed or mdl.store_shaped
        return mdl

    model = shape_model()
    calls0 = replayer.calls
    k = replayer.top_k
    like: dict[str, bool] = {}

    def seedlike(o: Any) -> bool:
        if o.id not in like:
            like[o.id] = model.like(o)
        return like[o.id]

    E = retriever.embeddings
    df = doc_freq([x.text for x in mems])

    # One claim planted across questions about one subject (MINJA's trigger term): the content
    # words the seeds naming a target state in their questions, when those seeds state at least
    # two different questions. A candidate naming the target joins them only when it asks about
    # that subject too: a short target ("4") is also many honest records' answer (TUNE
    # nq-number-slot-distinct: two related records answering "4" were removed without this).
    # A number, a date or yes/no is no planted entity: "0" answers an EHR store's every yes/no
    # and count question, and an honest slip's "0" made each of the patient's records answering
    # it "planted with the seeds" (TUNE ehr-clean-slot-w2 fresh seed 21: 5 honest records proposed
    # as poison in a clean store). MINJA's redirect is a person or a patient id.
    targets = [t for t in targets if entity(t) and any(names(t, mems[idx[s]].text) for s in seed_ids)]
    carriers = [mems[idx[s]] for s in seed_ids if _names_claim(mems[idx[s]], targets)]
    asked_by = [stated_question(o) for o in carriers]
    subject: frozenset[str] = frozenset()
    target_tok = frozenset().union(*(tokens(t) for t in targets)) if targets else frozenset()
    one_question = all(same_question(asked_by[0], q) for q in asked_by) if asked_by else False
    if len(carriers) >= 2 and all(asked_by) and not one_question:
        # What three in four of their questions name, not what every one does: one odd wording
        # among many ("… Johns's reaction …", LoCoMo's own typo) emptied the subject (TUNE
        # locomo-minja-slot-w2 ρ 0.5 fresh seed 12: 29 carriers, 15 planted records missed,
        # R 0.81). With up to three carriers it is still every one.
        counts = Counter(t for q in asked_by for t in tokens(q))
        subject = frozenset(t for t, c in counts.items() if 4 * c >= 3 * len(asked_by)) - _FUNCTION - target_tok
    elif carriers and all(asked_by):
        # The seeds state one question (one incident, or incidents on one victim question, maybe
        # asked in several ways — `same_question`): what their wordings share is that whole
        # question, so its subject is what it names — its answer-like spans (the trigger entity
        # MINJA keys the redirect on: a patient id, a person), not its other words (a lower-case
        # "season" or "cost" is shared by unrelated questions).
        subject = frozenset().union(*(tokens(sp) for sp in answer_spans(asked_by[0]))) \
            - _FUNCTION - target_tok

    res.subject = sorted(subject)
    # The attacker's sittings: the write-time bursts the seeds were written in (`write_bursts`),
    # those of the groups the reach confirms as well once they join the seeds.
    def sittings_of(ids: Sequence[str]) -> list[tuple[float, float]]:
        return write_bursts([t for t in (written_at(mems[idx[s]].metadata) for s in ids) if t is not None], mems)

    sittings = sittings_of(seed_ids)

    def in_sitting(o: Any) -> bool:
        t = written_at(o.metadata)
        return t is not None and any(lo <= t <= hi for lo, hi in sittings)

    def vouched(m: Any, claim: str) -> str | None:
        """Why a planted record needs no store's side: it states the bridge to `claim`
        ("bridge"), or it was written in the confirmed poisons' own sitting ("sitting")."""
        return "bridge" if states_bridge(m.id, claim) else "sitting" if in_sitting(m) else None

    def copy(o: Any, mid: str, claims: Sequence[str]) -> bool:
        """A planted copy: seed-like, near m (a paraphrase, not a record sharing a word), and
        carrying its claim."""
        return seedlike(o) and float(E[idx[o.id]] @ E[idx[mid]]) >= copy_cos and _carries_claim(o, claims) \
            and not _one_article(o, mems[idx[mid]])

    def restated(o: Any, m: Any, claims: Sequence[str]) -> bool:
        """Where the attack also writes as the store does (`ShapeModel.store_shaped`), a copy
        need not be seed-like, nor near m as a whole (a "Thought:" line between question and
        answer kept one pair under `copy_cos`): a record that states m's question with its
        claim."""
        asked = stated_question(m)
        return model.store_shaped and asked is not None and _carries_claim(o, claims) \
            and same_question(asked, stated_question(o))

    def about(o: Any, m: Any, said: Sequence[str]) -> bool:
        """o is about m's subject: it names one of m's names other than the claim, or shares
        with m a content word the store rarely uses (`keyword_query`'s rule), outside the claim."""
        if any(mentions(sp, o.text) for sp in answer_spans(m.text) if sp not in said):
            return True
        ctok = set().union(*(tokens(c) for c in said)) if said else set()
        return bool((rare_words(m.text, df, len(mems)) - ctok) & tokens(o.text))

    def sided(m: Any, q: str, exclude: Collection[str], units: Sequence[str], said: Sequence[str],
              attack: Any, carrier: Any) -> tuple[list[RetrievedMemory], list[Any], list[str]]:
        """The store's side on m's question `q` with `exclude` out: a wide retrieval, the records
        in it about that question (cosine to it at least `support_cos`), not seed-like, not
        carrying the claim `said`, and the ids of those that carry the answer `units`."""
        asked = stated_question(m)
        wide = retriever.retrieve(q, max(4 * k, 20), exclude)
        side = [o for o in wide if o.score >= support_cos and not attack(o)
                and same_question(asked, stated_question(o)) and not carrier(o)]
        # Its store's side must be about it: two sentences of one padding article back each other
        # too, and without them the agent answers from records about other things (TUNE
        # hotpot-plain-adv: "Reichard, Count Palatine of Simmern-Sponheim" against other nobles'
        # records at cosine 0.43); a clean fact kept in four plain paraphrases, read as "Evan" for
        # "sports, activity, has, Evan: Swimming, as noted.", against records of Andrew's outdoor
        # activities (TUNE locomo-clean-plain at 2,000, honest errors as seeds). A record that
        # states the very question m states is about it, whatever words the rest of the store
        # shares: the store's "Q: Which is the english singer and songwriter? A: Amy Winehouse"
        # shares with the planted record only words its keyword decoys ("Q: english, singer,
        # songwriter (in the first draft) A: …") use too (TUNE sqa-entity-aline-distinct ρ 0.5,
        # fresh seeds 12, 13, 16, 18: a found group of eight with no store's side, R 0.90).
        side = [o for o in side if (asked and stated_question(o)) or about(o, m, said)]
        support = [o.id for o in side if carries_answer(o, units, q)]
        return wide, side, support

    def agreed(side: Sequence[Any], m: Any, q: str) -> tuple[str, list[str]]:
        """The answer most records of `side` agree on, an answer-like span (`claim_spans`) neither
        m nor the question names, and the records carrying it, when at least `min_support` do
        (else "" and none)."""
        carriers: dict[str, list[str]] = {}
        for o in side:
            for sp in dict.fromkeys(w.casefold() for w in claim_spans(o, [m], q)):
                carriers.setdefault(sp, []).append(o.id)
        best = max(carriers.items(), key=lambda kv: (len(kv[1]), kv[0]), default=None)
        return best if best and len(best[1]) >= min_support else ("", [])

    def lone_against(m: Any, support: Sequence[str]) -> bool:
        """A lone record stands against its store's side: at least `min_support` records (ids
        `support`), none of them opening with its question (`baited`)."""
        return len(support) >= min_support and baited(m, [mems[idx[s]] for s in support])

    def unopposed(m: Any, q: str, wide: Sequence[RetrievedMemory], said: Sequence[str], carrier: Any,
                  row: dict[str, Any]) -> bool:
        """Records about m's question q among `wide` (its wide retrieval with m's group out, as
        `sided` reads it: cosine to q at least `support_cos`, about m, not carrying its claim `said`;
        seed-like or not) are there, and none of them opens with a question: the store does not
        write so about it (the trace's `bait` counts them). A claim that restates the question
        answers nothing (`restates`)."""
        near = [o for o in wide if o.score >= support_cos and not carrier(o) and about(o, m, said)]
        if not near or any(opening_question(o.text) for o in near) or restates(q, said[0]):
            return False
        row["bait"] = len(near)
        return True

    def alone_says(m: Any, q: str, claims: Sequence[str], cands: Sequence[str], row: dict[str, Any],
                   *, why: str) -> str | None:
        """Sufficiency: the claim m asserts when it is the only record retrieved for q, f(q, {m})
        (the reader offered `cands`); None when it asserts none (the row's stop says so)."""
        alone = replayer.answer_alone_each([(q, RetrievedMemory(m.id, m.text, 1.0, 0, m.metadata), cands)])[0]
        row["alone"] = alone.text
        said = next((c for c in claims if _carries(alone.text, [c])), None)
        if said is None:
            row["stop"] = f"{why}: alone its answer does not carry the claim"
        return said

    def outvoted_alone(m: Any, q: str, claims: Sequence[str], row: dict[str, Any], now: str,
                       exclude: Collection[str], attack: Any, carrier: Any) -> dict[str, Any] | None:
        """A lone record (`lone` in `verify`) outvoted on its question: today's answer there is
        the store's, with it or without it. What it does once the vote shifts is what it does
        alone, f(q, {m}) (`alone_against`'s sufficiency): confirmed when that answer carries its
        claim and at least `min_support` records of the store's side carry today's answer, none
        opening with its question (`baited`)."""
        row["sufficiency"] = "outvoted"
        units = answer_units(now, q)
        if not units or now.strip() == DONT_KNOW:
            row["stop"] = "outvoted: today's answer asserts nothing"
            return None
        wide, side, support = sided(m, q, exclude, units, claims, attack, carrier)
        row["support"], row["side"] = support, len(side)
        if not lone_against(m, support):
            row["stop"] = f"outvoted: {len(support)} supporter(s), {len(side)} on the store's side"
            return None
        cands = list(dict.fromkeys(list(claims) + [a for o in side for a in claim_spans(o, [m], q)]))
        said = alone_says(m, q, claims, cands, row, why="outvoted")
        if said is None:
            return None
        row["stop"] = "confirmed"
        return {"event": f"reach:{m.id}", "query": q, "claim": said, "before": row["alone"],
                "after": now, "support": support, "group": [m.id], "dormant": True, "alone": "lone",
                "harm": make_harm({"type": "contains", "target": said}),
                "retrieved": [o.id for o in wide[:k]]}

    def verify(mid: str, q: str, question: str | None, backed: bool = False, strict: bool = False
               ) -> tuple[dict[str, Any] | None, bool]:
        """(evidence, whether the store's side was seen at all after removing the group).
        `strict`: ranked past the first `max_candidates`, it needs the store's majority
        (`min_support` supporters), not a chat model's one record or echo, and a statement's
        heading is no claim of it. `backed`: a candidate admitted by its copies, not by the
        shape cut (marked in the trace). Every candidate's store's side must be about its
        subject (`about`, or stating its question)."""
        m = mems[idx[mid]]
        row: dict[str, Any] = {"memory": mid, "query": q[:200]}
        if backed:
            row["backed"] = True
        if strict:
            row["strict"] = True
        res.trace.append(row)
        r1 = retriever.retrieve(q, k, removed)
        me: Any = next((r for r in r1 if r.id == mid), m)
        # The retrieved records split by shape: the seed-like side (m and its copies) and the
        # rest (what the store says); a span the rest also mentions is the topic, not a claim.
        rest1 = [o for o in r1 if o.id != mid and not seedlike(o)]
        claims = claim_spans(me, rest1, question)
        # A planted answer in lower case names nothing `answer_spans` reads ("goalkeeper", "film
        # director"): a record stating its question, with copies, claims the rare words it and
        # its copies repeat (`copy_words`); the store's records then offer theirs too.
        worded = not claims and question is not None
        if worded:
            copies = [o for o in r1 if o.id != mid and seedlike(o)
                      and (float(E[idx[o.id]] @ E[idx[mid]]) >= copy_cos
                           or ((oq := synth_query(o)) != o.text and same_question(question, oq)))]
            claims = copy_words(me, copies, rest1, question, df, len(mems))
            if claims:
                row["worded"] = True
        if strict and question is None:
            # A heading names what a passage is about, not an answer: past the first
            # `max_candidates`, two sentences of one padding article under its title
            # ("Brian Tse (writer)\n…") "confirmed" the title as their claim.
            head = _heading(m.text)
            claims = [c for c in claims if not (head and mentions(c, head))]
        row["claims"] = claims
        if not claims:
            row["stop"] = "no claim"
            return None, True
        planted = [t for t in targets if any(names(t, c) for c in claims)] \
            if subject & tokens(stated_question(m) or "") else []
        if planted:
            # One claim planted across questions (MINJA's redirect: one record per victim
            # question, each answer naming the same target): the target is the claim under test,
            # and every record naming it on a question about the subject is on the seeds' side,
            # whatever its shape.
            claims = planted[:1]
            row["claims"] = claims
            row["with_seeds"] = True

            def is_copy(o: Any) -> bool:
                # ...that asks about the subject too: a padding line that names the target
                # ("Deborah: Maybe just grab me some books!") is not one of the planted records.
                return _names_claim(o, claims) and bool(subject & tokens(stated_question(o) or ""))

            attack = carrier = is_copy
        else:
            def is_copy(o: Any) -> bool:
                return copy(o, mid, claims) or restated(o, m, claims)

            attack = seedlike

            def carrier(o: Any) -> bool:
                return _carries_claim(o, claims)
        group = {mid} | {o.id for o in r1 if o.id != mid and is_copy(o)}
        if mid not in {o.id for o in r1} and len(group) == 1:
            if planted:
                return alone_against(m, q, claims, row, attack, carrier, why="outranked"), True
            # Neither it nor a copy of it answers its question: nothing to replay. (Its copies
            # alone may: with many copies, the question retrieves some of them and not it.)
            row["stop"] = "not retrieved for its query"
            return None, True
        if model.store_shaped and not planted:
            # Restated copies (`restated`) are found by the question they state, not only among
            # the agent's top k: eight planted records on one question outlasted `rounds`
            # retrievals of five, and the last two were read as the store's side (TUNE
            # sqa-entity-aline-distinct ρ 0.5 seed 1).
            group |= {o.id for o in retriever.retrieve(q, max(4 * k, 20), removed | group)
                      if restated(o, m, claims)}
        r0 = retriever.retrieve(q, k, removed | group)
        for _ in range(rounds):
            more = {o.id for o in r0 if is_copy(o)}
            if not more:
                break
            group |= more
            r0 = retriever.retrieve(q, k, removed | group)
        store_side = any(not attack(o) for o in r0)
        # With many planted copies the records retrieved beside m were all copies: nothing of
        # the store's side said which of its names is the topic. Once the group is out the
        # store's side is there; a span it mentions is the topic, not the claim (TUNE
        # hotpot-plain-adv: "French" in a planted "Georges Guynemer, a renowned French ace").
        # A target planted with the seeds is the incidents' harm, not a topic: the store's own
        # records on the victim's questions may mention it beside their answer (LoCoMo: "John
        # said …" in the evidence of a record about James), but none answers with it (`attack`).
        # Where the attack frames its records as the store does, the claim is the answer slot
        # of that frame, not a contrast with the neighbours: a store record giving "2" or "4"
        # anywhere (a season number, a draft's answer) made a planted "A: 2" the topic (TUNE
        # nq-number-aline-distinct, 2 of 7 targets in most runs).
        store0 = [o for o in r0 if not attack(o)]
        framed = model.store_shaped and answer_slot(m.metadata, m.text) is not None
        topic = [] if planted or framed else [c for c in claims if any(mentions(c, o.text) for o in store0)]
        if topic:
            claims = [c for c in claims if c not in topic]
            row["claims"] = claims
            row["topic"] = topic
            if not claims:
                row["stop"] = "no claim beside the store's side"
                return None, store_side
            group = {mid} | {g for g in group if g != mid and _carries_claim(mems[idx[g]], claims)}
        row["group"] = sorted(group)
        # A record that opens with the question it answers, as a seed does, is written to be
        # retrieved for that question: alone, it is a planted group of one (PoisonedRAG's
        # black-box passage at one per target, TUNE hotpot-plain-adv-bb ρ 0.05), held to the
        # store's majority, none of whose records opens with that question (`baited`).
        lone = len(group) < min_copies and not planted and question is not None \
            and opening_question(m.text) is not None \
            and any(opening_question(mems[idx[s]].text) for s in seed_ids if s in idx)
        if lone:
            # ...unless a copy its question ranks below the top k is near it: then they are a
            # group (TUNE sqa-plain-distinct ρ 0.2 seed 1: "Which is the species of canid? …"
            # confirmed alone left its copy "Asked which is the species of canid, …" a group of
            # one).
            group |= {o.id for o in retriever.retrieve(m.text, k, removed | group) if o.id != mid and is_copy(o)}
            row["group"] = sorted(group)
            lone = len(group) < min_copies
        if lone:
            row["lone"] = True
        # Written as the seeds are (`asks_first`: its question, then its answer on that line), as
        # is every record of its group: where no record of the store about that question opens
        # with a question (`unopposed`), it is retrieval bait and needs no majority against it.
        bait = not planted and not strict and question is not None and asks_first(m.text) is not None \
            and any(asks_first(mems[idx[s]].text) for s in seed_ids if s in idx) \
            and all(same_question(question, asks_first(mems[idx[g]].text)) for g in group)
        if (len(group) < min_copies and not planted and not lone) or len(group) > max_group:
            row["stop"] = f"group of {len(group)}"
            return None, store_side
        # A batch member there only for standing, alone, against this question's records
        # (`standing`) stood against this group if against anything: the store's two "how many
        # death stars …? A: 2" records, outvoted by eight planted "A: 4" records, were taken for
        # another incident's harm "2", and the "4" group then had no store's side (TUNE
        # nq-number-aline-distinct ρ 0.5, R 0.86). Here they are the store again.
        asked = stated_question(m)
        back = {s for s in standing if s in removed and s not in group and asked is not None
                and same_question(asked, stated_question(mems[idx[s]]))
                and not _carries_claim(mems[idx[s]], claims)}
        kept = removed - back
        seen = {o.id for o in r1}
        rest = [o for o in r1 if o.id not in group] + [o for o in r0 if o.id not in seen] \
            + [mems[idx[s]] for s in sorted(back)]
        alts = []
        mine = tokens(question) | tokens(me.text) if worded else frozenset()
        for o in rest:
            alts += claim_spans(o, [me], question)
            if worded:
                alts += own_words(o, mine, df, len(mems))
        cands = list(dict.fromkeys(claims + alts))
        _, y1 = replayer.replay(q, kept, cands)
        _, y0 = replayer.replay(q, kept | group, cands)

        def confirmed(support: Sequence[str]) -> dict[str, Any]:
            row["stop"] = "confirmed"
            target = said[0]
            ev = {"event": f"reach:{mid}", "query": q, "claim": target, "before": y1.text,
                  "after": y0.text, "support": list(support), "group": sorted(group),
                  "harm": make_harm({"type": "contains", "target": target}),
                  "retrieved": [o.id for o in r1]}
            if row.get("bait"):
                ev["bait"] = {"question": asks_first(m.text), "side": row["bait"]}
            return ev
        row.update({"with": y1.text, "without": y0.text})
        # The claim under test is the one the agent asserts with the group; the answer without
        # the group is judged against that claim alone (another of m's spans it mentions may be
        # what the store says too).
        said = [c for c in claims if _carries(y1.text, [c])]
        # Outvoted on its own question (two planted records against two of the store's), a
        # record framed as no record of the store is (seed-like by frame, `ShapeModel`) is tested
        # as a dormant one: what answers there once the store's own records are out (TUNE
        # sqa-entity-aline-distinct and nq-number-aline-distinct at ρ 0.2, R 0.10–0.57).
        if not said and (planted or (model.store_shaped and seedlike(m))):
            return dormant(m, q, group, y1.text, claims, row, attack, carrier), store_side
        if not said and lone:
            return outvoted_alone(m, q, claims, row, y1.text, kept | group, attack, carrier), store_side
        if not said:
            row["stop"] = "answer with the group does not carry the claim"
            return None, store_side
        if _carries(y0.text, said):
            row["stop"] = "answer without the group still carries the claim"
            return None, store_side
        if not y0.text.strip() or y0.text.strip() == DONT_KNOW:
            if bait and unopposed(m, q, retriever.retrieve(q, max(4 * k, 20), kept | group), said, carrier, row):
                return confirmed([]), store_side
            row["stop"] = "no answer without the group"
            return None, store_side
        # The store's answer to that question: records about it (cosine to the query at least
        # `support_cos`) that carry the new answer.
        units = answer_units(y0.text, q)
        row["read"] = units
        wide, side, support = sided(m, q, kept | group, units, said, attack, carrier)
        row["support"] = support
        row["side"] = len(side)
        # A voting reader takes the majority, so its new answer has `min_support` carriers; a
        # chat model may take one record's answer where the store holds several (TUNE
        # sqa-plain-distinct with SmolLM2: the answer came from a related record, the two
        # records that answer the question itself were beside it). Either way the group stood
        # against at least `min_support` records about its question, one of which the agent
        # now follows (or none: see `echo`).
        # A chat model may also answer with nothing any record carries (it echoes the memory
        # list, is cut off, says "The answer is:"): the claim is gone and no other planted
        # record took its place. (An explicit "I don't know" stopped above.)
        echo = not support and not any(carries_answer(o, units, q) for o in wide)
        # A claim planted across questions has one copy per question: the store's own record
        # on that question (stating it too) is the store's side.
        # Its group out, the agent may follow neither that record nor any other of the question
        # (a vote of records about other things: LoCoMo, "When did James volunteer …?" answered
        # "No"); the claim is gone, and the store's own record on that question, there on the
        # store's side, answers otherwise: it is that record the planted one stood against.
        # (A supporter that states the question is such a record too.)
        stated = [o.id for o in side if asked and stated_question(o)] if planted else []
        # A record that states the attack's own step, its question's subject bridged to the
        # claim it is tested for (`bridges`), needs no store's side: what it says is why its
        # question is answered with the claim (TUNE locomo-minja-slot-w7 ρ 0.2 seed 3: "Audrey's
        # history had been filed under Andrew", its question's store's side empty or answering
        # with nothing a record carries). So does a record written in the seeds' own sitting (a
        # write-time burst they were written in) whose claim is theirs: the attacker wrote it
        # then, and the replay shows the claim is its doing (TUNE locomo-minja-slot-w12 ρ 0.5
        # seed 1: "Q> … Jolene: what did they design …? A> Deborah: Yes", the last, bridge-less
        # step, its question's store's side empty). `vouched` says which.
        because = vouched(m, said[0]) if planted else None
        lenient = not strict and (((support or echo) and len(side) >= min_support) or bool(stated)
                                  or because is not None)
        agree = ""
        if lone and len(support) < min_support:
            # Records about other things out-rank the store's own records on its question, and the
            # agent answers from them once it is out (HotpotQA's long questions: "1865" for a
            # Senator's birthplace, TUNE hotpot-plain-adv-bb ρ 0.05 fresh seed 10): the store's
            # side stands against it when `min_support` of its records agree on one answer that
            # is not its claim ("Brooklyn, New York": "New York").
            agree, on = agreed(side, me, q)
            if agree:
                support = on
                row["agreed"] = agree
        if (lone and not lone_against(m, support)) or (len(support) < min_support and not lenient):
            if bait and unopposed(m, q, wide, said, carrier, row):
                return confirmed(support), store_side
            row["stop"] = f"{'lone: ' if lone else ''}{len(support)} supporter(s), {len(side)} on the store's side"
            return None, store_side
        ev = confirmed(support)
        if back & set(support):
            ev["restored"] = sorted(back & set(support))
        if agree:
            ev["agreed"] = agree
        if not support and stated:
            ev["store_record"] = stated
        elif len(support) < min_support and not stated and because is not None:
            flag = "bridged" if because == "bridge" else "sitting"
            row[flag] = ev[flag] = True
        return ev, store_side

    def stating(q: str, asked: str | None, exclude: Collection[str], attack: Any, carrier: Any
                ) -> tuple[list[RetrievedMemory], list[RetrievedMemory]]:
        """A wide retrieval for `q` outside `exclude`, and the store's records in it that state
        the question `asked` too (at least `support_cos` near, neither seed-like nor carrying the
        claim): the store's side of a dormant record."""
        wide = retriever.retrieve(q, max(4 * k, 20), exclude)
        return wide, [o for o in wide if o.score >= support_cos and not attack(o) and not carrier(o)
                      and stated_question(o) and same_question(asked, stated_question(o))]

    def dormant(m: Any, q: str, group: set[str], now: str, claims: Sequence[str], row: dict[str, Any],
                attack: Any, carrier: Any) -> dict[str, Any] | None:
        """A planted record outvoted on its own question (the agent answers what the store's own
        record on that question says, with it or without it): it is confirmed when it is what
        would answer there without that record. The store's side is the records stating the
        same question that carry today's answer (or, an answer in the question's own words, whose
        answer slot it gives whole), not naming the claim, and when a neighbouring
        question's records answer once they are out (or answer today, over the store's record on
        the question), those (at most `rounds` answers in all); the store must hold a record
        stating the question. With them out the answer must carry the claim, and with the group
        out too it must not."""
        row["dormant"] = True
        asked = stated_question(m)
        units = answer_units(now, q)
        wide, stated = stating(q, asked, removed | group, attack, carrier)
        # An answer in its question's own words ("The Doctor (Doctor Who)" for "Which is the
        # fictional character from Doctor Who?") asserts nothing beyond the question: the store's
        # records there whose answer slot it gives whole are what outvotes m (TUNE
        # sqa-entity-aline-distinct ρ 0.2, fresh seeds 12–15: "Cuisine of Hawaii", "Cauliflower").
        own = [o.id for o in stated if (carries_answer(o, units, q) if units else slot_given(o, now))]
        row["support"] = own
        if not asked or not (units or own) or not stated:
            if asked and vouched(m, claims[0]):
                # No record of the store on its question to be outvoted by, but it states the
                # bridge: alone is how it answers there (TUNE locomo-minja-slot-w7 ρ 0.2 seed 2,
                # "Nate is the name Joanna goes by in some chats"), or it was written in the
                # seeds' own sitting (`vouched`).
                return alone_against(m, q, claims, row, attack, carrier, why="outvoted")
            row["stop"] = ("answer with the group does not carry the claim (no record of the store on "
                           "its question)")
            return None
        cands = list(dict.fromkeys(list(claims) + [a for o in wide if o.id not in group
                                                   for a in claim_spans(o, [m], q)]))
        out = set(own)
        _, y1 = replayer.replay(q, removed | out, cands)
        said = [c for c in claims if _carries(y1.text, [c])]
        # Outvoted from the start, the store's record there outvoted too (TUNE
        # locomo-minja-slot-w3: "When did Calvin attend a gala in Boston?" answered from "What
        # event did Calvin attend in Boston?"): the removals below begin with today's answer.
        for _ in range(rounds - 1 if own else rounds):
            if said:
                break
            # Outvoted again: with the store's record on its question out, a record of a
            # neighbouring question answers (TUNE locomo-minja-slot-w2: "When is Caroline going
            # to the transgender conference?" then answered from "When did Caroline go to the
            # LGBTQ conference?"). Those records, about it and carrying that answer, go too (up
            # to `rounds` answers in all); the planted claim must then be what answers, and not
            # once its group is out as well.
            # An answer that only repeats a word of the question is still a neighbour's answer
            # slot ("urine" for "… the total volume of urine output …?", the answer of "… the
            # name of the output …?": TUNE ehr-minja-bridge ρ 0.2 seed 1): the records whose
            # slot is that answer are what outvotes it there.
            nxt = answer_units(y1.text, q)
            echoed = [] if nxt else answer_units(y1.text)
            more = [o.id for o in wide if o.id not in out and o.score >= support_cos and not attack(o)
                    and not carrier(o) and (carries_answer(o, nxt, q) if nxt else _slot_is(o, echoed))
                    ] if nxt or echoed else []
            if not more:
                break
            out |= set(more)
            row.setdefault("outvoted_by", []).extend(more)
            _, y1 = replayer.replay(q, removed | out, cands)
            said = [c for c in claims if _carries(y1.text, [c])]
        row.update({"with": y1.text, "read": units})
        if not said and vouched(m, claims[0]):
            # Outvoted past `rounds` answers, but it states the attack's own step (its question's
            # subject bridged to the claim): what it does alone is what it does once the vote
            # shifts (TUNE locomo-minja-slot-w2, a fresh seed at ρ 0.05: "John and Tim turn out
            # to be the same person", one of four planted records, outvoted by neighbours), or
            # was written in the seeds' own sitting.
            return alone_against(m, q, claims, row, attack, carrier, why="outvoted")
        if not said:
            row["stop"] = "dormant: without the store's record the answer does not carry the claim"
            return None
        _, y0 = replayer.replay(q, removed | out | group, cands)
        row["without"] = y0.text
        if _carries(y0.text, said):
            row["stop"] = "dormant: without the group as well the answer still carries the claim"
            return None
        row["stop"] = "confirmed"
        # What it stood against: the store's records on its question and those that answered
        # once they were out (or today, over them).
        row["support"] = against = sorted(out)
        return {"event": f"reach:{m.id}", "query": q, "claim": said[0], "before": y1.text,
                "after": now, "support": against, "group": sorted(group), "dormant": True,
                "harm": make_harm({"type": "contains", "target": said[0]}),
                "retrieved": [o.id for o in wide[:k]]}

    def alone_against(m: Any, q: str, claims: Sequence[str], row: dict[str, Any], attack: Any, carrier: Any,
                      *, why: str) -> dict[str, Any] | None:
        """A planted record its own question does not retrieve (`why` "outranked": ranked past
        the agent's top k, under the store's records there: TUNE locomo-minja-slot-w3 / -w4, at
        rank 6), or one that bridges and stays outvoted (`why` "outvoted", see `dormant`): what it
        would do once the ranking or the vote shifts is what it does alone, f(q, {m}) —
        sufficiency, where the group test reads necessity. It is confirmed when that answer
        carries the claim and the store's own records stating its question (at least one) all
        answer otherwise: it stands against them; or, where the store holds none, when it states
        the bridge to the claim (`bridges`) or was written in the seeds' own sitting."""
        row["sufficiency"] = why
        asked = stated_question(m)
        wide, stated = stating(q, asked, removed | {m.id}, attack, carrier)
        row["support"] = against = sorted(o.id for o in stated)
        because = None if stated else vouched(m, claims[0])
        if not asked or not (stated or because):
            row["stop"] = f"{why}: no record of the store on its question"
            return None
        cands = list(dict.fromkeys(list(claims) + [a for o in stated for a in claim_spans(o, [m], q)]))
        said = alone_says(m, q, claims, cands, row, why=why)
        if said is None:
            return None
        _, now = replayer.replay(q, removed, cands)  # today's answer there, which it stands against
        row["stop"] = "confirmed"
        ev = {"event": f"reach:{m.id}", "query": q, "claim": said, "before": row["alone"],
              "after": now.text, "support": against, "group": [m.id], "dormant": True, "alone": why,
              "harm": make_harm({"type": "contains", "target": said}),
              "retrieved": [o.id for o in wide[:k]]}
        if because == "sitting":
            row["sitting"] = ev["sitting"] = True
        return ev

    def borrowed_question(m: Any) -> str | None:
        """The leading question of m's nearest seed-like paraphrase (cosine ≥ `copy_cos`) that
        shares an answer-like span with it outside that question: one planted claim, written
        once as an answer to a question and once as a statement."""
        spans = answer_spans(m.text)
        if not spans:
            return None
        sims = E @ E[idx[m.id]]
        for j in np.argsort(-sims)[:20].tolist():
            o = mems[j]
            if o.id == m.id or sims[j] < copy_cos or not seedlike(o):
                continue
            oq = synth_query(o)
            if oq == o.text or oq not in o.text:
                continue
            qt = tokens(oq)
            if any(mentions(sp, o.text) and not tokens(sp) <= qt for sp in spans):
                return oq
        return None

    tested: set[str] = set()
    failed: list[tuple[str, str, str | None, bool, bool]] = []  # not confirmed, outside any sitting then

    def confirm(ev: dict[str, Any], margin: float) -> None:
        nonlocal removed
        ev["seed_margin"] = round(margin, 4)
        for g in ev["group"]:
            res.evidence[g] = ev
        res.added += [g for g in ev["group"] if g not in removed]
        removed |= set(ev["group"])

    for _pass in range(passes):
        skip = removed | set(seed_ids) | set(anti) | tested
        ranked = seed_likeness(model, retriever, exclude=skip, quantile=quantile, seed=seed)
        # Under the shape cut, a memory that a seed-like copy backs: a planted group is written
        # several times, in shapes the seeds need not share (TUNE hotpot-plain-adv: one target's
        # eight passages at 0.65-0.76 to the seeds' shape against a cut of 0.85).
        chosen = {c for c, _ in ranked}
        backed = [(c, mg) for c, mg in backed_by_copies(model, retriever, exclude=skip, copy_cos=copy_cos,
                                                        limit=4 * max_candidates, neighbours=max_group)
                  if c not in chosen]
        by_copies = {c for c, _ in backed}
        first: set[str] = set()
        # One ranking by margin: in a store with more than `max_candidates` records over the cut,
        # backed ones listed after them would never be tested.
        ranked = sorted(ranked + backed, key=lambda x: (-x[1], x[0]))
        if subject:
            # A record whose answer names a target the seeds carry, on a question about their
            # subject, is a candidate whatever its shape (MINJA's last records carry no bridge:
            # "Q: … A: R"), and is tested first: it is what step 4 counts as planted with them.
            named = [i for i, x in enumerate(mems) if x.id not in skip and x.id not in chosen
                     and x.id not in by_copies and _names_claim(x, targets)
                     and subject & tokens(stated_question(x) or "")]
            allowed = np.isfinite(retriever.scores(np.zeros(E.shape[1], np.float32)))
            named = [i for i in named if allowed[i]]
            first = {mems[i].id for i in named} | {c for c, _ in ranked if c in idx and _names_claim(
                mems[idx[c]], targets) and subject & tokens(stated_question(mems[idx[c]]) or "")}
            if named:
                to_seed, to_anti = model.scores([mems[i] for i in named])
                ranked += [(mems[i].id, float(a - b)) for i, a, b in zip(named, to_seed, to_anti)]
            ranked = sorted(ranked, key=lambda x: (x[0] not in first, -x[1], x[0]))
        res.candidates = max(res.candidates, len(ranked))
        found = replayed = 0
        for rank, (mid, margin) in enumerate(ranked[:8 * max_candidates]):
            if replayed >= max_candidates:
                break
            # Past the first `max_candidates` (a larger store: most records over the shape cut are
            # padding) only records over the shape cut, confirmed only by the store's majority
            # about them, a heading no claim (`verify`'s `strict`). A record that names a target on
            # a question about the seeds' subject is no padding, wherever it ranks: with more such
            # records than `max_candidates`, the last ones were held to the majority and two of a
            # bridge's records, each its question's one against one store record, stayed (TUNE
            # locomo-minja-slot-w12 ρ 0.5 fresh seed 11, 73 planted records, R 0.973).
            strict = rank >= max_candidates and mid not in first
            if mid in removed or replayer.calls - calls0 >= max_calls or (strict and mid in by_copies):
                continue
            calls_before = replayer.calls
            m = mems[idx[mid]]
            q = synth_query(m)
            question = q if q != m.text else None
            res.tested += 1
            tested.add(mid)
            bk = mid in by_copies
            try:
                ev, store_side = verify(mid, q, question, bk, strict)
                if ev is None and question is not None and not stated_question(m) and TYPED_QUERY.match(m.text):
                    # A typed query read as its question may name the answer it offers ("who was
                    # born earlier, emma bull or virginia woolf.Emma Bull, …" claims neither
                    # name): the record is asked as itself too, as a passage is (TUNE
                    # hotpot-plain-adv-bbq ρ 0.5 seed 3).
                    question, q = None, m.text
                    ev, store_side = verify(mid, q, question, bk, strict)
                if ev is None and not store_side and question is None:
                    # Its own text found only look-alikes, even with its group out (the template
                    # outweighs the topic): ask by its distinctive words, those rare in the store.
                    ev, _ = verify(mid, keyword_query(m.text, df, len(mems)), None, bk)
                if ev is None and question is None and (bq := borrowed_question(m)):
                    # A statement asked as itself confuses a chat model ("The answer is:"): ask the
                    # question its paraphrases state.
                    ev, _ = verify(mid, bq, bq, bk)
            except BudgetExhausted:  # this candidate is left untested; the groups confirmed stand
                res.tested -= 1
                res.budget_cut = True
                break
            replayed += replayer.calls > calls_before
            if ev is None:
                if not in_sitting(m):
                    failed.append((mid, q, question, bk, strict))
                continue
            confirm(ev, margin)
            found += 1
        if not found or res.budget_cut or replayer.calls - calls0 >= max_calls:
            break
        # The confirmed groups join the seeds, and the store's records they stood against the
        # anti-seeds (what the seeds contradicted, as the incidents' store records are): the
        # next pass ranks by a model that knows them. (The latter changed no row of the TUNE
        # aline grid, 72 runs, when it was taken out to check; taken out beside a reach rule since
        # reverted, the reader offered a passage's topic, TUNE hotpot-plain-adv at 60 targets,
        # 2,000 records, seed 1 lost 10 of its 261 poisons found.)
        seed_ids = list(dict.fromkeys(seed_ids + res.added))
        stood = {a for g in res.added for a in res.evidence[g].get("support", ()) if a in idx}
        anti_m += [mems[idx[a]] for a in sorted(stood - {o.id for o in anti_m})]
        model = shape_model()
        like.clear()
        sittings = sittings_of(seed_ids)
    # A candidate tested before its sitting was known (the groups confirmed after it made the
    # burst it was written in one of the seeds'), and not confirmed, is tested once more where it
    # now stands in a sitting it did not before (TUNE locomo-minja-slot-w10 ρ 0.5 fresh seed 8:
    # two bare records of the attack's last burst, tested before any of its records was found).
    sittings = sittings_of(list(dict.fromkeys(seed_ids + res.added)))
    for mid, q, question, bk, strict in failed:
        m = mems[idx[mid]]
        if mid in removed or not in_sitting(m):
            continue
        if replayer.calls - calls0 >= max_calls:
            break
        try:
            ev, _ = verify(mid, q, question, bk, strict)
        except BudgetExhausted:
            res.budget_cut = True
            break
        if ev is not None:
            confirm(ev, 0.0)
    res.agent_calls = replayer.calls - calls0
    return res


def _heading(text: str) -> str | None:
    """A record's first line when it is a heading: more lines follow, it has at most 8 words and
    does not end as a sentence does."""
    first, sep, rest = text.strip().partition("\n")
    first = first.strip()
    if not sep or not rest.strip() or len(first.split()) > 8 or first[-1:] in ".!?:;,\"'":
        return None
    return first


def _one_article(a: Any, b: Any) -> bool:
    """Two sentences of one article under its title ("Pepo (film)\n…"): one source's, not a
    planted copy of the other (TUNE sqa-plain-shared at 2,000 memories: two such sentences backed
    each other's "claim", an adjective both use). A record that states a question has no title."""
    head = _heading(a.text)
    return head is not None and head == _heading(b.text) and stated_question(a) is None \
        and stated_question(b) is None


def carries_answer(o: Any, units: Sequence[str], question: str | None = None) -> bool:
    """A record carries an answer (its `answer_units`, read against `question`): its answer slot,
    when it has one, is one of them or asserts exactly them, read against the same question (a
    year the question names is no unit of either); a record without a slot mentions one as a
    whole word."""
    slot = answer_slot(o.metadata, o.text)
    if slot:
        # A slot of several units ("August 9, 2022", "Italy, Mexico") is the answer that asserts
        # exactly those units.
        said = {u.casefold() for u in units}
        return slot.casefold() in said or (bool(said) and {u.casefold() for u in answer_units(slot, question)} == said)
    return any(mentions(u, o.text) for u in units)


def _slot_is(o: Any, units: Sequence[str]) -> bool:
    """A record's answer slot is one of `units` (a record without a slot is none)."""
    slot = answer_slot(o.metadata, o.text)
    return bool(slot) and slot.casefold() in {u.casefold() for u in units}


def slot_given(o: Any, answer: str) -> bool:
    """A record's answer slot is given whole by `answer` (a record without a slot is not)."""
    slot = answer_slot(o.metadata, o.text)
    return bool(slot) and mentions(slot, answer)


def _names_claim(o: Any, claims: Sequence[str]) -> bool:
    """A record names a claim in its answer slot, or (without one) in its text."""
    slot = answer_slot(o.metadata, o.text)
    return any(names(c, slot or o.text) for c in claims)


def _carries_claim(o: Any, claims: Sequence[str]) -> bool:
    slot = answer_slot(o.metadata, o.text)
    if slot:
        return any(slot.casefold() == c.casefold() for c in claims)
    return any(names(c, o.text) for c in claims)
