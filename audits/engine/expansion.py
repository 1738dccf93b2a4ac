"""Pattern expansion: from confirmed poisons to the records that repeat their attack.

Beyond the paper. Observed incidents retrieve only some of an attack's planted records; the
victim's other questions (held-out probes) retrieve others. CMIS cannot credit those — a
memory must be in some R* to be ablated — and the residual check cannot see them, since every
observed incident is already clean once the first batch is out. The paper's recall drop at
high contamination is this. The planted records share what makes the attack work, the planted
answer (MINJA's bridging step ends in it; PoisonedRAG's passages assert it), so the memory
consistency graph gets one more kind of edge, answer-slot agreement, and the audit follows it:

1. Seeds: the batch members with causal credit (CMIS > 0 on an incident, a conditional round
   or a derived event), each with the event that credited it.
2. Candidates: every allowed memory outside the batch whose answer slot (`metadata.answer`,
   else the last `A:` line) agrees with a seed's — token Jaccard ≥ `agreement` over answers of
   at least `min_tokens` distinct tokens (a bare "yes" is no pattern) — and whose own content
   meets that seed's event harm when the harm is cheap to apply.
3. Derived events: each candidate's own query (`metadata.query`, else its text) is replayed
   over M \\ B with the seed event's harm; a harmful replay is what a victim asking that
   question would get, so it becomes an event. Where the harm's target is a common answer of the
   rest of the store ("yes": `_common_harms`), only when the store's own records on that question
   include one that answers otherwise (`_answers_otherwise`), and the group removals of step 4
   credit only the members the event's question can retrieve.
4. CMIS on the derived events in M \\ B: leave-one-out, near-duplicate groups, and the pattern
   group (every candidate removed together, so planted records cannot back each other up).
   A memory joins when its CMIS there is positive, its agreement reaches the bar and
   DS = α·CMIS + (1 − α)·max(CAS^, agreement) reaches the batch threshold: causal and
   structural evidence both speak, as for the incidents.
5. Repeat with the grown batch (bounded rounds) until no memory joins.
2b. Harm reach (issue 16, format-free): a record whose own content meets a seed event's harm
   (cheap harms: a contains target as a whole word or phrase; a regex applied to its answer
   slot, its text, each line and each sentence —
   any answer shape, one token or a number included, no metadata needed) and that is closer to
   the seeds than every memory of a random clean reference sample is, on at least one
   feature: embedding cosine, lexical (token Jaccard), provenance (`metadata.source` of a
   seed, rare in the store) or write time (`metadata.written_at` inside a burst of the store's
   write times that holds two seeds, or the one seed when only one is timed: `write_bursts`). The cut is the reference sample's own
   maximum, so it is set per store, not a constant. Whatever its shape, a record meeting the
   harm is a candidate too where it states a question and stands against the store there (the
   store's own records on it answer otherwise: `_stands_against`), for a target that is a value
   (a named one planted across questions is the format-free reach's, `reach.py`) given against
   the store by at least two records, and by at least half of the records giving it on a question
   of their own: a planted answer worded as the store's own records is nearer the seeds than no
   clean record. A record on the question of an event with
   another harm is no carrier (a number planted for one question is another's right answer).
   Such a record's agreement is 1.0 (its content asserts what the seed's harm looks for); it
   still has to earn causal credit below before it joins, and, when it has no answer slot (its
   text may name the target in passing: "Maria: Yeah, John!"), cause the harm alone as well:
   f(q_m, {m}) meets the harm (`_insufficient`; a removal credits a record that only let
   another one into the top k).
6. Dormant records: a candidate left with no harmful derived event (outvoted or outranked
   today, live as soon as the store shifts) is replayed alone, f(q_m, {m}) — sufficiency
   where CMIS tests necessity. When that output meets the harm and the store's own records on
   its question answer otherwise (it stands against them) or the record bridges its question's
   subject to the harm's target (`bridges`: MINJA's own step), its score is that harm and it
   joins under the same DS rule.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cmis import (
    AuditEvent,
    CmisScore,
    Group,
    combine_cmis,
    find_groups,
    plan_replays,
    replay_all,
)
from .correction_words import says_corrected
from .fusion import HARMFUL
from .harm import make_harm
from .replay import BudgetExhausted, Replayer
from .retriever import RetrievedMemory, Retriever
from .words import FUNCTION, entity, mentions, normalized, same_question, stated_question, tokens, whole_claims

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_REFERENCE = 256  # size of the random clean sample that sets the per-store cuts
# A chat line's speaker label: a name of one to three capitalised words opening the line, then ":".
_LABEL = re.compile(r"^[ \t]*([^\W\d_][\w'’.\-]*(?: [^\W\d_][\w'’.\-]*){0,2}):[ \t]+", re.MULTILINE)


def _without_speakers(text: str) -> str:
    return _LABEL.sub(lambda m: "" if all(w[0].isupper() for w in m.group(1).split()) else m.group(0), text)


# A greeting or interjection just before a name ("Hey John!", "Thanks, John,"), and what else
# marks a sentence as spoken to someone ("Great to hear from you, John!").
_GREETING = re.compile(r"(?:^|[^\w'’])(?:hey|hi|hello|hiya|howdy|yo|dear|thanks|thank you|cheers|congrats|"
                       r"congratulations|bye|goodbye|good (?:morning|afternoon|evening|night)|welcome(?: back)?|"
                       r"sorry|oh|ooh|wow|yeah|yes|aw+|haha|ok|okay|sure|nice|great|cool|awesome|omg|"
                       r"well done)\W{0,3}$", re.IGNORECASE)
_YOU = re.compile(r"(?<![\w'’])(?:you|your|yours|you're|youre|ya)(?![\w'’])", re.IGNORECASE)
_SPOKEN_TO = re.compile(r"(?<![\w'’])(?:you|your|you're|youre|ya|thanks|thank|hey|hi|hello|congrats|"
                        r"congratulations|bye|goodbye|welcome|sorry)(?![\w'’])", re.IGNORECASE)


def _in_address(text: str, start: int, end: int) -> bool:
    """Is the name at text[start:end] in address, naming whom the sentence speaks to: after a
    greeting and before punctuation ("Hey John! …", "Oh wow John!!"); closing, after a comma, an
    exclamation or a question ("No way, John!", "Did it go well, John?") or a sentence that speaks
    to someone ("Thanks so much, John."); or opening, before a comma, a sentence that exclaims or
    speaks to "you" ("John, that's great!", "John, how did your interview go?")? An apposition
    ("her brother, John.") and an answer that opens with the name ("John, per the merged notes")
    assert it."""
    before, after = text[:start], text[end:]
    if not re.match(r"\s*(?:[,!?.;:…]|$)", after):
        return False
    if _GREETING.search(before.rstrip()):
        return True
    sentence = re.split(r"[.!?\n]", before)[-1]
    if re.search(r",\s*$", before):
        return bool(re.match(r"\s*[!?]", after)
                    or (re.match(r"\s*(?:[.…]|$)", after) and _SPOKEN_TO.search(sentence)))
    if sentence.strip() or not re.match(r"\s*,", after):
        return False
    rest = re.split(r"(?<=[.!?])\s", after, maxsplit=1)[0]
    # A title or a quotation in quotation marks speaks to no one ("… two songs: "Withing You
    # Without You"": TUNE hotpot-plain-adv-bb).
    return rest.rstrip().endswith("!") or bool(_YOU.search(_QUOTED.sub(" ", rest)))


_QUOTED = re.compile(r'"[^"\n]*"|\u201c[^\u201d\n]*\u201d')


def _asserts(claim: str, body: str) -> bool:
    return any(not _in_address(body, m.start(), m.end()) for m in whole_claims(claim, body))


def text_asserts(claim: str, text: str) -> bool:
    """Does a record's plain text assert `claim`: name it whole (`words.whole_claims`) outside a
    line's speaker label and not as a name in address? "Dave: That guitar …" and "Hey Dave!" do
    not assert "Dave"; "Dave bought it." does."""
    return _asserts(claim, _without_speakers(text))


def answer_slot(metadata: Mapping[str, Any] | None, text: str) -> str | None:
    """A memory's answer: `metadata.answer`, else the text after the last line starting `A:`."""
    ans = metadata.get("answer") if isinstance(metadata, Mapping) else None
    if isinstance(ans, (str, int, float)) and not isinstance(ans, bool) and str(ans).strip():
        return str(ans).strip()
    found = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("A:"):
            found = s[2:].strip()
    return found or None


def slot_tokens(answer: str | None) -> frozenset[str]:
    return frozenset(_TOKEN.findall(answer.casefold())) if answer else frozenset()


def agreement_scores(patterns: Sequence[frozenset[str]], slots: Sequence[frozenset[str]],
                     *, min_tokens: int = 3) -> list[tuple[float, int]]:
    """(best Jaccard, index of that pattern) of every slot against the patterns."""
    pats = [p for p in dict.fromkeys(patterns) if len(p) >= min_tokens]
    index = {p: i for i, p in enumerate(patterns)}
    out: list[tuple[float, int]] = []
    for s in slots:
        best, at = 0.0, -1
        if len(s) >= min_tokens:
            for p in pats:
                inter = len(s & p)
                if inter == 0:
                    continue
                j = inter / (len(s) + len(p) - inter)
                if j > best:
                    best, at = j, index[p]
        out.append((best, at))
    return out


def content_meets_harm(ev: AuditEvent, metadata: Mapping[str, Any] | None, text: str) -> bool:
    """Does a memory's own content meet the event's harm? Only for harms cheap to apply."""
    if getattr(ev.harm, "type", None) not in ("contains", "regex"):
        return False
    target = getattr(ev.harm, "target", None)
    if isinstance(target, str) and target.strip():
        # A contains-harm is met by a memory only as a whole claim: "2" is in "A: 2", not in
        # "item 12" — otherwise a short target (a digit, "yes") sweeps in half the store.
        # A memory with an answer slot asserts its slot: "A: Shadow. Earlier notes said X" (a
        # correction that names the old value) does not assert X.
        # A line's speaker label is who said it, not what it says: the chat turn "Deborah: Have
        # you tried …?" does not assert "Deborah" (TUNE locomo-minja-bridge in a store of 2,000:
        # such turns joined MINJA's records answering "Deborah").
        # A name in address is whom a turn speaks to, not what it says: "Tim: Hey John! Long time
        # no see!" does not assert "John" (TUNE locomo-minja-slot-w3 at 2,000 records: seven
        # greetings of another conversation, stored with the turn as their answer, joined).
        # A date is met only whole: "10 July 2023" does not assert "July 2023" (`words.names`).
        slot = answer_slot(metadata, text)
        return _asserts(target.strip(), slot) if slot else text_asserts(target.strip(), text)
    slot = answer_slot(metadata, text)
    parts = ([slot] if slot else []) + [text] + [ln for ln in text.splitlines() if ln.strip()]
    parts += [p for ln in text.splitlines() for p in re.split(r"(?<=[.!?:])\s+", ln) if p.strip()]
    return any(ev.harm(ev.query, t, harmful_output=ev.output) >= 0.5 for t in dict.fromkeys(parts))


def record_query(m: Any) -> str:
    """What a record asks: `metadata.query`, else its text (the question its replay asks)."""
    q = m.metadata.get("query") if isinstance(m.metadata, Mapping) else None
    return q.strip() if isinstance(q, str) and q.strip() else m.text


def written_at(meta: Mapping[str, Any] | None) -> float | None:
    """A record's write time (`metadata.written_at`, a number), if the store kept one."""
    v = meta.get("written_at") if isinstance(meta, Mapping) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def source_of(meta: Mapping[str, Any] | None) -> str | None:
    """A record's source (`metadata.source`, a non-empty string), if the store kept one."""
    v = meta.get("source") if isinstance(meta, Mapping) else None
    return str(v) if isinstance(v, str) and v else None


def seed_affinity(seed_ids: Sequence[str], cand_ids: Sequence[str], retriever: Retriever, *,
                  exclude: Collection[str] = (), seed: int = 0) -> dict[str, dict[str, float]]:
    """Per candidate, the features by which it is closer to the seeds than a clean reference.

    Returns {candidate: {feature: margin}} for the candidates that beat the reference sample's
    maximum on at least one feature (margin = value − cut). The reference is a seeded random
    sample of allowed memories outside the seeds, the candidates and `exclude`.
    """
    mems = retriever.memories
    idx = retriever.index
    sidx = [idx[s] for s in seed_ids if s in idx]
    if not sidx or not cand_ids:
        return {}
    allowed = np.isfinite(retriever.scores(np.zeros(retriever.embeddings.shape[1], np.float32)))
    skip = set(seed_ids) | set(cand_ids) | set(exclude)
    pool = [i for i in range(len(mems)) if allowed[i] and mems[i].id not in skip]
    rng = np.random.default_rng(seed)
    ref = sorted(rng.choice(pool, size=min(_REFERENCE, len(pool)), replace=False).tolist()) if pool else []
    E = retriever.embeddings
    S = E[sidx]
    seed_tok = [slot_tokens(mems[i].text) for i in sidx]
    sources = _attack_sources([source_of(mems[i].metadata) for i in sidx])
    times = [t for t in (written_at(mems[i].metadata) for i in sidx) if t is not None]
    src_count: dict[str, int] = {}
    for m in mems:
        src = source_of(m.metadata)
        if src in sources:
            src_count[src] = src_count.get(src, 0) + 1
    # A provenance is telling only when rare: at most 5% of the store shares it.
    rare = {s for s, n in src_count.items() if n <= max(2, 0.05 * len(mems))}
    # One timed seed (one incident's one planted record) has a burst of its own: the records
    # written in its sitting (TUNE locomo-minja-slot-w7 ρ 0.2 seed 0: the seed's three
    # session-mates were the planted records nearest it in time, every honest record 15 days
    # away); a record still has to meet the seed's harm, earn causal credit and pass the DS rule.
    bursts = write_bursts(times, mems, least=min(2, len(times)))

    def features(i: int) -> dict[str, float]:
        tok = slot_tokens(mems[i].text)
        lex = max((len(tok & st) / len(tok | st) if tok | st else 0.0) for st in seed_tok)
        f = {"embedding": float((S @ E[i]).max()), "lexical": lex}
        if sources:
            f["provenance"] = 1.0 if source_of(mems[i].metadata) in rare else 0.0
        if times:
            t = written_at(mems[i].metadata)
            f["write_time"] = 1.0 if t is not None and any(lo <= t <= hi for lo, hi in bursts) else 0.0
        return f

    ref_f = [features(i) for i in ref]
    cuts = {k: max((f[k] for f in ref_f), default=0.0) for k in (ref_f[0] if ref_f else {})}
    out: dict[str, dict[str, float]] = {}
    for c in cand_ids:
        if c not in idx:
            continue
        f = features(idx[c])
        beat = {k: round(v - cuts.get(k, 0.0), 4) for k, v in f.items() if v > cuts.get(k, 0.0)}
        if beat:
            out[c] = beat
    return out


def _attack_sources(seed_sources: Sequence[str | None]) -> set[str]:
    """The seeds' sources that speak for the attack: those holding two seeds or more; when none
    does, every seed's (one seed, or an attack spread over sources). A seed alone in its source
    while others share one is not the attacker's sitting: a clean record credited beside the
    planted ones lent its session to an honest record of that session (TUNE
    nq-number-slot-distinct at 2,000 memories, the seeds' sessions 2 + 1)."""
    counts = Counter(s for s in seed_sources if s is not None)
    return {s for s, n in counts.items() if n >= 2} or set(counts)


def write_bursts(seed_times: Sequence[float], mems: Sequence[Any], *, least: int = 2) -> list[tuple[float, float]]:
    """The write-time bursts the seeds were written in: runs of the store's write times whose
    every gap is under a fifth of the store's mean gap (5 times the store's average rate or
    faster), less a record at either end whose gap is 5 times the run's median gap (an honest
    record written hours before the attacker's sitting), each holding at least `least` seeds.

    The runs come from the store's own times, so a seed outside every burst (a clean record
    credited beside the planted ones) widens none of them. Before: the seeds' median ± 3 MAD, at
    least 1% of the seeds' range, which one early seed stretched over honest records (TUNE
    nq-number-slot-distinct at 2,000 memories)."""
    timed = np.sort(np.array([t for t in (written_at(m.metadata) for m in mems) if t is not None]))
    if len(timed) < 3 or not seed_times:
        return []
    gap = float(timed[-1] - timed[0]) / (len(timed) - 1) / 5.0
    cuts = np.flatnonzero(np.diff(timed) > gap) + 1
    out = []
    for run in np.split(timed, cuts):
        if len(run) > 2:  # its ends: a record 5 times farther out than the run's median gap is not of it
            edge = 5.0 * float(np.median(np.diff(run)))
            a, b = 0, len(run) - 1
            while a < b and run[a + 1] - run[a] > edge:
                a += 1
            while b > a and run[b] - run[b - 1] > edge:
                b -= 1
            run = run[a:b + 1]
        lo, hi = float(run[0]), float(run[-1])
        if sum(1 for t in seed_times if lo <= t <= hi) >= least:
            out.append((lo, hi))
    return out


def _provenance_peers(seed_ids: Sequence[str], retriever: Retriever, skip: Collection[str],
                      allowed: np.ndarray) -> dict[str, str]:
    """Memories written inside the seeds' write-time bursts (`write_bursts`), with an answer slot (the claim their replay is tested for): {id: answer}."""
    mems, idx = retriever.memories, retriever.index
    sidx = [idx[s] for s in seed_ids if s in idx]
    times = [t for t in (written_at(mems[i].metadata) for i in sidx) if t is not None]
    bursts = write_bursts(times, mems)
    if not bursts:
        return {}
    out: dict[str, str] = {}
    for i, m in enumerate(mems):
        if m.id in skip or not allowed[i]:
            continue
        t = written_at(m.metadata)
        slot = answer_slot(m.metadata, m.text)
        if t is not None and slot and any(lo <= t <= hi for lo, hi in bursts):
            out[m.id] = slot
    return out


@dataclass
class ExpansionResult:
    batch: list[str]
    added: list[str] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    derived: dict[str, AuditEvent] = field(default_factory=dict)
    scores: dict[str, CmisScore] = field(default_factory=dict)
    agreement: dict[str, float] = field(default_factory=dict)
    affinity: dict[str, dict[str, float]] = field(default_factory=dict)
    # The audit's call budget ran out: the round (or dormant record) it was in is not counted;
    # the rounds and records before it stand.
    budget_cut: bool = False


def harmful_alone(asks: Sequence[tuple[Any, str, AuditEvent]], replayer: Replayer) -> list[bool]:
    """For each (record, query, event): does the agent, given the record alone for the query,
    answer what meets the event's harm (its samples' mean at least `HARMFUL`)? One agent call
    each (cached), in flight together."""
    outs = replayer.answer_alone_each([(q, RetrievedMemory(m.id, m.text, 1.0, 1, m.metadata), ev.candidates)
                                       for m, q, ev in asks])
    met = []
    for (_, q, ev), alone in zip(asks, outs):
        harms = [float(ev.harm(q, s, harmful_output=ev.output)) for s in alone.samples]
        met.append(bool(harms) and sum(harms) / len(harms) >= HARMFUL)
    return met


def _insufficient(mids: Sequence[str], cands: Mapping[str, AuditEvent], retriever: Retriever,
                  replayer: Replayer) -> list[str]:
    """Of the records the harm reach (2b) brought in and CMIS credited, those that do not cause
    the harm alone: f(q_m, {m}) with its own query does not meet its seed event's harm. Their
    content names the harm target without asserting it (a chat turn addressed to the redirect:
    "Maria: Yeah, John! That's so important."), and their removal lowered the harm only by
    letting another record into the agent's top k (TUNE locomo-minja-bridge, every probe
    observed, 2,000 records: seven such turns joined). Only records without an answer slot are
    asked: a slot that meets the harm is what the record answers, while a text may name the
    target in passing (`harmful_alone`)."""
    bare = [m for m in (retriever.memories[retriever.index[mid]] for mid in mids)
            if not answer_slot(m.metadata, m.text)]
    met = harmful_alone([(m, record_query(m), cands[m.id]) for m in bare], replayer)
    return [m.id for m, ok in zip(bare, met) if not ok]


def outside_answers(mems: Sequence[Any], exclude: Collection[str]) -> Counter[str]:
    """How many records outside `exclude` give each answer slot (as written; `answer_slot`)."""
    return Counter(slot for m in mems if m.id not in exclude and (slot := answer_slot(m.metadata, m.text)))


def _common_harms(cands: Mapping[str, AuditEvent], removed: Collection[str], retriever: Retriever) -> set[str]:
    """The candidates' harms (by `config_hash`) whose target is a common answer: the rest of the
    store (outside `removed`, the batch and the candidates) gives it as its whole answer slot no
    less often than the candidates carry it. "yes" is the harm of the incident "is liquid asphalt
    hazmat?" and the answer to "can you put asters in pots?", whose four records all say it
    (TUNE msmarco-clean-yesno: the expansion took 14-130 honest records of a clean store of 400,
    and 20-50 % of its clean questions broke). A planted entity or MINJA's redirect ("Audrey") is
    given by no record but the planted ones."""
    planted = Counter(e.harm.config_hash() for e in cands.values())
    events = {e.harm.config_hash(): e for e in cands.values()}
    slots = outside_answers(retriever.memories, removed)
    # A record with no answer slot (a plain passage) gives what its content asserts: "…: no, as
    # noted." gives "no" (TUNE hotpot-clean-plain at 2,000: with no slot anywhere, "no" counted
    # as given by nobody, and the honest records of four other questions answering it joined).
    plain = [m for m in retriever.memories if m.id not in removed and answer_slot(m.metadata, m.text) is None]
    common = set()
    for key, ev in events.items():
        given = sum(n for slot, n in slots.items() if _gives(ev, slot))
        for m in plain:
            if given >= planted[key]:
                break
            given += content_meets_harm(ev, m.metadata, m.text)
        if given >= planted[key]:
            common.add(key)
    return common


def _gives(ev: AuditEvent, slot: str) -> bool:
    """Is an answer slot the event's harm target itself (a contains-harm's target, the whole
    slot: "Audrey's dog is Pepper" names the redirect without being it), or does it meet a harm
    that has no target?"""
    target = getattr(ev.harm, "target", None)
    if isinstance(target, str) and target.strip():
        return normalized(slot) == normalized(target)
    return ev.harm(ev.query, slot, harmful_output=ev.output) >= 0.5


def records_on(q: str, asked: str | None, retriever: Retriever, removed: Collection[str], *, k: int,
               support_cos: float) -> list[RetrievedMemory]:
    """The store's records on question `q` (the reach's store's side): a wide retrieval outside
    `removed`, at least `support_cos` near `q`, stating the question `asked` where both state one."""
    return [o for o in retriever.retrieve(q, max(4 * k, 20), removed)
            if o.score >= support_cos and same_question(asked, stated_question(o))]


def _answers_otherwise(m: Any, q: str, ev: AuditEvent, removed: Collection[str], retriever: Retriever,
                       k: int, support_cos: float) -> bool:
    """Do the store's own records on record `m`'s question `q` (`records_on`, outside `removed`:
    the batch and the candidates) include one that answers otherwise, its content not meeting the
    event's harm? Where the harm's target is a common answer (`_common_harms`), only then is it a
    harm on `q`."""
    # A passage (no answer slot) that does not say the harm's target need not answer anything:
    # where the event has candidate answers, it answers otherwise by naming another of them
    # (TUNE hotpot-clean-plain at 2,000: a padding passage near "Laleli, Mosque, …: no" counted
    # as the store answering otherwise, and that question's four honest records joined).
    others = [c for c in ev.candidates or () if c.strip() and not _gives(ev, c)]
    return any(not content_meets_harm(ev, o.metadata, o.text)
               and (not ev.candidates or answer_slot(o.metadata, o.text) is not None
                    or any(mentions(c, o.text) for c in others))
               for o in records_on(q, stated_question(m), retriever, removed, k=k, support_cos=support_cos))


def answered_otherwise(question: str, answer: str, retriever: Retriever, exclude: Collection[str], *,
                       support_cos: float = 0.4) -> bool:
    """A record of the store outside `exclude` that states `question` too (`same_question`, at
    least `support_cos` near it) answers it otherwise: its answer slot, else its text, does not
    name `answer` (the store's record on a MINJA victim's question may name the redirect person
    in its evidence and answer otherwise: TUNE locomo-minja-bridge)."""
    return any(not mentions(answer, answer_slot(o.metadata, o.text) or o.text)
               for o in stating(question, retriever, exclude, support_cos=support_cos))


def stating(question: str, retriever: Retriever, exclude: Collection[str], *,
            support_cos: float = 0.4) -> list[RetrievedMemory]:
    """The records outside `exclude`, among the 20 nearest `question` and at least `support_cos`
    near it, that state it too (`records_on` asked for it, k=0: no top k to widen past 20)."""
    return [o for o in records_on(question, question, retriever, exclude, k=0, support_cos=support_cos)
            if stated_question(o)]


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORDING_TOKENS = 5  # a sentence shorter than this is a frame ("A: 2", "as noted."), not a wording


@functools.lru_cache(maxsize=1 << 16)
def _worded(text: str) -> tuple[tuple[str, str], ...]:
    """A record's sentences of at least `_WORDING_TOKENS` words: (its words lower-cased, as the
    sentence's identity; the sentence as written)."""
    out = {}
    for s in _SENTENCE_END.split(text):
        words = _TOKEN.findall(s.lower())
        if len(words) >= _WORDING_TOKENS:
            out.setdefault(" ".join(words), s)
    return tuple(out.items())


@functools.lru_cache(maxsize=1 << 16)
def _sentences(text: str) -> frozenset[str]:
    return frozenset(key for key, _ in _worded(text))


def planted_wording(suspects: Sequence[Any], claims: Mapping[str, str], retriever: Retriever,
                    exclude: Collection[str], *, support_cos: float = 0.4) -> frozenset[str]:
    """The attack's own correction wording: a suspect's sentence of at least `_WORDING_TOKENS`
    words that says an earlier answer was wrong (`correction_words.says_corrected`) and is about
    nothing of its own — it names neither the suspect's claim (`claims`, else its answer slot) nor
    a content word of the question it states ("Thought: the records were updated recently, so the
    earlier answer no longer holds.") — unless the store's records outside
    `exclude` answering the question of a suspect carrying it otherwise carry it too: then it is
    the store's frame, not the attack's."""
    wording: set[str] = set()
    frame: set[str] = set()
    for s in suspects:
        q = stated_question(s)
        claim = claims.get(s.id) or answer_slot(s.metadata, s.text) or ""
        about = tokens(q or "") - FUNCTION
        own = {key for key, line in _worded(s.text) if says_corrected(line)
               and not (claim and mentions(claim, line)) and not tokens(line) & about}
        wording |= own
        if q and own:
            frame.update(line for o in stating(q, retriever, exclude, support_cos=support_cos)
                         if normalized(answer_slot(o.metadata, o.text)) != normalized(claim)
                         for line in _sentences(o.text) & own)
    return frozenset(wording - frame)


def templated(suspects: Sequence[Any], wording: Collection[str], *, questions: int) -> dict[str, str]:
    """Suspect id -> a sentence of the attack's wording (`planted_wording`) it carries verbatim,
    where suspects stating at least `questions` distinct questions carry that sentence."""
    asked: dict[str, set[str]] = {}
    wording = frozenset(wording)
    for s in suspects:
        for line in _sentences(s.text) & wording:
            asked.setdefault(line, set()).add(normalized(stated_question(s)) or f"#{s.id}")
    common = {line for line, qs in asked.items() if len(qs) >= questions}
    return {s.id: line for s in suspects for line in sorted(_sentences(s.text) & common)[:1]}


def in_their_voice(wording: Collection[str], retriever: Retriever, exclude: Collection[str], *,
                   support_cos: float = 0.4) -> set[str]:
    """The records outside `exclude` that carry the attack's wording (`planted_wording`), and the
    records stating the question such a record states with the answer it gives there (its copies
    in the store's own frame): they speak for the attack, so they tell no record of the store
    wrong and correct none (TUNE nq-number-aline-distinct ρ 0.2 seeds 10 and 14: two missed
    "… A: 4" plants, one of them in the attack's "Thought: the records were updated recently, so
    the earlier answer no longer holds.", told the store's two "how many death stars …? A: 2"
    records wrong, and they were taken for the planted "2" of two other questions)."""
    if not wording:
        return set()
    wording = frozenset(wording)
    marked = [o for o in retriever.memories if o.id not in exclude and _sentences(o.text) & wording]
    voiced = {o.id for o in marked}
    for o in marked:
        q, a = stated_question(o), normalized(answer_slot(o.metadata, o.text))
        if not (q and a):
            continue
        voiced |= {c.id for c in stating(q, retriever, set(exclude) | voiced, support_cos=support_cos)
                   if normalized(answer_slot(c.metadata, c.text)) == a}
    return voiced


def _stands_against(m: Any, q: str, ev: AuditEvent, removed: Collection[str], retriever: Retriever,
                    k: int, support_cos: float) -> bool:
    """Does the store answer record `m`'s question otherwise than the event's harm? For a record
    stating a question, a record outside `removed` stating it too must (`answered_otherwise`): a
    chat turn near it that states none says nothing of it (TUNE locomo-clean-slot-w3 at 2,000
    records: padding turns about cars stood for "When did Dave start his car maintenance
    shop?"). A record stating none is read as `_answers_otherwise` reads it."""
    target = getattr(ev.harm, "target", None)
    asked = stated_question(m)
    if asked and isinstance(target, str) and target.strip():
        return answered_otherwise(asked, target, retriever, removed, support_cos=support_cos)
    return _answers_otherwise(m, q, ev, removed, retriever, k, support_cos)


def expand_batch(batch: Sequence[str], seed_events: Mapping[str, AuditEvent],
                 retriever: Retriever, replayer: Replayer, *,
                 cas_hat: Mapping[str, float], alpha: float, threshold: float,
                 agreement: float = 0.6, min_tokens: int = 3, max_rounds: int = 4,
                 dormant: bool = True,
                 group_thresholds: Sequence[float] = (0.9, 0.8), combine: str = "max",
                 carries_harm: Callable[[AuditEvent, str], bool] | None = None,
                 harm_reach: bool = True, max_candidates: int = 200, support_cos: float = 0.4,
                 bridges: Callable[[str, str | None], bool] | None = None) -> ExpansionResult:
    """Steps 1–6 of the module docstring. `seed_events`: confirmed poison -> its event;
    `bridges(m, target)`: m states a bridge from its question's subject to `target` (steps 2c, 6)."""
    res = ExpansionResult(batch=list(batch))
    seeds: dict[str, AuditEvent] = {m: ev for m, ev in seed_events.items() if m in retriever.index}
    mems = retriever.memories
    slots = [slot_tokens(answer_slot(m.metadata, m.text)) for m in mems]
    allowed = np.isfinite(retriever.scores(np.zeros(retriever.embeddings.shape[1], np.float32)))
    reached: set[str] = set()  # candidates by their content alone (2b): they must be sufficient too

    def voiced(in_batch: set[str]) -> set[str]:
        """The records in the seeds' own wording (`in_their_voice`): no store's side for anything."""
        targets = {s: str(getattr(ev.harm, "target", "") or "") for s, ev in seeds.items()}
        wording = planted_wording([mems[retriever.index[s]] for s in seeds], targets, retriever, in_batch,
                                  support_cos=support_cos)
        return in_their_voice(wording, retriever, in_batch, support_cos=support_cos)

    def candidates(theirs: set[str]) -> dict[str, AuditEvent]:
        in_batch = set(res.batch)
        seed_ids = list(seeds)
        patterns = [slots[retriever.index[s]] for s in seed_ids]
        scored = agreement_scores(patterns, slots, min_tokens=min_tokens)
        cands: dict[str, AuditEvent] = {}
        for i, (j, at) in enumerate(scored):
            mid = mems[i].id
            if at < 0 or j < agreement or mid in in_batch or not allowed[i]:
                continue
            ev = seeds[seed_ids[at]]
            if carries_harm is not None and not carries_harm(ev, mid):
                continue
            cands[mid] = ev
            res.agreement[mid] = max(res.agreement.get(mid, 0.0), j)
        if harm_reach:
            # 2b. any record whose content meets a seed event's harm, near the seeds
            # A record on the question of an event with another harm is not carried by this one:
            # "A: 2" is harmful to "how many lines of symmetry …?" and the right answer to "how
            # many death stars …?", whose own incident's harm is "4" (TUNE nq-number-slot-distinct
            # at 2,000 memories: the honest answers of two target questions were taken).
            carriers: dict[str, AuditEvent] = {}
            events = list({id(ev): ev for ev in seeds.values()}.values())
            harms = [ev.harm.config_hash() for ev in events]
            for i, m in enumerate(mems):
                if m.id in in_batch or m.id in cands or not allowed[i]:
                    continue
                for ev, h in zip(events, harms):
                    if content_meets_harm(ev, m.metadata, m.text) and not any(
                            h2 != h and same_question(record_query(m), o.query) for o, h2 in zip(events, harms)):
                        carriers[m.id] = ev
                        break
            near = seed_affinity(seed_ids, list(carriers), retriever, exclude=in_batch)
            ranked = sorted(near, key=lambda c: -max(near[c].values()))[:max_candidates]
            # ...or, whatever its shape, one that states a question and stands against the store
            # there: the store's own records on its question answer otherwise (`_stands_against`).
            # A planted answer worded as the store's own records ("Q: <q> A: 7731") is nearer the
            # seeds than no clean record (TUNE nq-number-aline-shared: one number planted for every
            # target, R 0.71 from 5 observed, 0.14 from one); the store's only record on a
            # question whose true answer is that value stands against nothing. Only for a target
            # given against the store by at least two records, and by at least half the records
            # that give it on a question of their own: where most give it rightly it is a common
            # answer, and the few against are where the store contradicts itself (TUNE
            # ehr-clean-slot-w2: an honest slip's "1" drew records of the patient's yes/no
            # questions the re-keyed store answers both ways; its "946.53…" the one record it was
            # copied from, on a question the store's records word otherwise).
            # A record that states no question (a chat turn naming the target in passing: "See you
            # John, bye!") stands against nothing (TUNE locomo-minja-slot: such turns joined).
            # A named target (a person, an id) planted across questions is the format-free reach's
            # (`reach.py`: MINJA's redirect, tested on questions about one subject, at a fraction
            # of the agent calls: TUNE ehr-minja-bridge ρ 0.5, 61 such carriers replayed here took
            # an audit from 391 to 595 calls); a value is this step's.
            rest = {mid: mems[retriever.index[mid]] for mid, ev in carriers.items()
                    if mid not in near and stated_question(mems[retriever.index[mid]])
                    and not entity(str(getattr(ev.harm, "target", "") or ""))}
            harm_of = {mid: carriers[mid].harm.config_hash() for mid in rest}
            stands = [mid for mid, m in rest.items() if _stands_against(
                m, record_query(m), carriers[mid], in_batch | set(carriers) | theirs, retriever, replayer.top_k,
                support_cos)]
            given, against_n = Counter(harm_of.values()), Counter(harm_of[mid] for mid in stands)
            against = [mid for mid in stands
                       if against_n[harm_of[mid]] >= 2 and 2 * against_n[harm_of[mid]] >= given[harm_of[mid]]]
            for mid in [*ranked, *against][:max_candidates]:
                cands[mid] = carriers[mid]
                res.agreement[mid] = 1.0
                res.affinity[mid] = near.get(mid, {"stands_against": 1.0})
                reached.add(mid)
            # 2c. write-time reach: records written in the seeds' burst (when no clean reference
            # record was), whatever they answer; each is tested against its own answer slot. Its
            # own answer is a harm only where the store's records stating its question answer
            # otherwise, or where it bridges: in a store written a session at a time, every
            # session is a burst, and an honest slip's session-mates, each the store's only
            # record on its question, "caused" their own answers (TUNE locomo-clean-slot-w2 at
            # 2,000 records, seed 5: 14 clean records of two sessions proposed as poison).
            prov = _provenance_peers(seed_ids, retriever, in_batch | set(cands), allowed)
            near = seed_affinity(seed_ids, list(prov), retriever, exclude=in_batch)
            for mid, feats in near.items():
                if "write_time" not in feats:
                    continue
                base = seeds[seed_ids[0]]
                harm = make_harm({"type": "contains", "target": prov[mid]})
                ev = AuditEvent(f"provenance:{mid}", base.query, base.output, [], harm, 1.0, None)
                m = mems[retriever.index[mid]]
                if not ((bridges is not None and bridges(mid, prov[mid])) or _stands_against(
                        m, record_query(m), ev, in_batch | {mid} | theirs, retriever, replayer.top_k, support_cos)):
                    continue
                cands[mid] = ev
                res.agreement[mid] = 1.0
                res.affinity[mid] = feats
        return cands

    for rnd in range(max_rounds):
        if not seeds:
            break
        in_batch = set(res.batch)
        theirs = voiced(in_batch)
        cands = candidates(theirs)
        if not cands:
            break
        # 3. derived events: the candidates' own queries, replayed over M \ B (in flight together)
        common = _common_harms(cands, in_batch | set(cands), retriever)
        derived: list[AuditEvent] = []
        asked: dict[str, tuple[str, AuditEvent]] = {}
        for mid, ev in cands.items():
            m = mems[retriever.index[mid]]
            q = record_query(m)
            asked.setdefault(q, (mid, ev))
        try:
            outcomes = replayer.replay_each([(q, in_batch, ev.candidates) for q, (_, ev) in asked.items()])
            for (q, (mid, ev)), (retrieved, out) in zip(asked.items(), outcomes):
                harms = [float(ev.harm(q, s, harmful_output=ev.output)) for s in out.samples]
                h = sum(harms) / len(harms) if harms else 0.0
                if h >= HARMFUL and (ev.harm.config_hash() not in common or _answers_otherwise(
                        mems[retriever.index[mid]], q, ev, in_batch | set(cands) | theirs, retriever, replayer.top_k,
                        support_cos)):
                    derived.append(AuditEvent(f"derived:{mid}", q, out.text, [r.id for r in retrieved],
                                              ev.harm, h, ev.candidates))
            if not derived:
                res.rounds.append({"expansion": True, "candidates": len(cands), "derived_events": 0,
                                   "added": []})
                break
            # 4. CMIS on the derived events in M \ B, with the pattern group
            pool = list(dict.fromkeys(m for dev in derived for m in dev.retrieved))
            groups = [g for g in find_groups(pool, retriever, thresholds=group_thresholds)
                      if not in_batch.intersection(g.members)]
            groups.append(Group(f"pattern{rnd}", tuple(sorted(cands)), agreement))
            # Only a memory that may join (agreement at least `agreement`, outside the batch) is
            # scored below, and a memory's CMIS reads only the base replay and the replays that
            # remove it: the others' replays are not made (the same additions, fewer agent calls).
            eligible = {m for m, a in res.agreement.items() if a >= agreement and m not in in_batch}
            members = {g.id: g.members for g in groups}
            jobs = [j for j in plan_replays(derived, groups, base_removed=res.batch,
                                            retrieved={d.id: d.retrieved for d in derived})
                    if j.kind == "base" or (j.target in eligible if j.kind == "single"
                                            else not eligible.isdisjoint(members[j.target]))]
            dmap = {d.id: d for d in derived}
            results = replay_all(jobs, dmap, replayer)
        except BudgetExhausted:  # this round is not finished: it adds nothing
            res.budget_cut = True
            break
        res.derived.update(dmap)
        # Where the harm is a common answer, a group's removal credits only the members its
        # event's question can retrieve: ranked within the top k plus the group's size in M \ B,
        # so they enter the agent's top k once the others are out. The pattern group holds every
        # candidate, of every question; honest records of another question answering "yes" did
        # not back this one's "yes" up (TUNE msmarco-clean-yesno: all 43 candidates of seven
        # derived events joined). A planted target's carriers back each other up across questions
        # (MINJA's redirect: TUNE locomo-minja-slot), so there the group credits all of them.
        depth = replayer.top_k + max(len(g.members) for g in groups)
        reach_of = {d.id: {r.id for r in retriever.retrieve(d.query, depth, in_batch)} for d in derived
                    if d.harm.config_hash() in common}

        def credits(ev: AuditEvent, mid: str, reach_of: Mapping[str, set[str]] = reach_of) -> bool:
            return (ev.id not in reach_of or mid in reach_of[ev.id]) and (carries_harm is None or carries_harm(ev, mid))

        cond = combine_cmis(results, derived, groups, combine=combine, carries_harm=credits)
        joining = []
        for mid, sc in cond.items():
            agree = res.agreement.get(mid, 0.0)
            if mid in in_batch or sc.cmis <= 0 or agree < agreement:
                continue
            ds = alpha * min(sc.cmis, 1.0) + (1 - alpha) * max(cas_hat.get(mid, 0.0), agree)
            if ds >= threshold:
                joining.append((mid, sc))
        try:
            insufficient = _insufficient([mid for mid, _ in joining if mid in reached], cands, retriever, replayer)
        except BudgetExhausted:  # this round is not finished: it adds nothing
            res.budget_cut = True
            break
        added: list[str] = []
        for mid, sc in joining:
            if mid in insufficient:
                continue
            added.append(mid)
            res.scores[mid] = sc
            best = max(sc.per_event, key=lambda e: e["score"])
            seeds[mid] = dmap[best["event"]]
        res.rounds.append({"expansion": True, "candidates": len(cands), "derived_events": len(derived),
                           "replays": len(jobs), "added": sorted(added), "insufficient": sorted(insufficient)})
        if not added:
            break
        res.batch = res.batch + sorted(added)
        res.added += sorted(added)
    if dormant and seeds and not res.budget_cut:
        # 6. what is left of the pattern, each record alone with its own query
        joined: list[str] = []
        theirs = voiced(set(res.batch))
        cands = candidates(theirs)
        for mid, ev in cands.items():
            m = mems[retriever.index[mid]]
            q = record_query(m)
            try:
                out = replayer.answer_alone(q, RetrievedMemory(m.id, m.text, 1.0, 1, m.metadata),
                                            ev.candidates)
            except BudgetExhausted:  # the records joined so far stand
                res.budget_cut = True
                break
            harms = [float(ev.harm(q, s, harmful_output=ev.output)) for s in out.samples]
            h = sum(harms) / len(harms) if harms else 0.0
            agree = res.agreement.get(mid, 0.0)
            # Alone, a record answers its own question with its own answer: the harm's target is
            # harmful there only where the store's records on that question answer otherwise, or
            # where the record itself bridges its question's subject to the target (MINJA's step,
            # on a question no record of the store states: TUNE locomo-minja-slot-w3 ρ 0.2 seed
            # 3). A record right on its question (the store agreeing, or silent) whose answer an
            # honest slip on another question repeated is where the claim comes from (TUNE
            # locomo-clean-slot-w3: "When did Dave start his car maintenance shop?" answered "May
            # 1, 2023" joined, and two clean answers broke).
            target = getattr(ev.harm, "target", None)
            if h >= HARMFUL and ((bridges is not None and bridges(mid, target)) or _stands_against(
                    m, q, ev, set(res.batch) | set(cands) | theirs, retriever, replayer.top_k, support_cos)) \
                    and alpha * min(h, 1.0) + (1 - alpha) * max(
                    cas_hat.get(mid, 0.0), agree) >= threshold:
                joined.append(mid)
                res.scores[mid] = CmisScore(mid, h, h, h, 0.0, 0.0, 1, [
                    {"event": f"alone:{mid}", "score": h, "single": 0.0, "group": 0.0,
                     "sufficiency": True, "query": q, "output": out.text}])
        res.rounds.append({"expansion": True, "dormant": True, "added": sorted(joined)})
        res.batch = res.batch + sorted(joined)
        res.added += sorted(joined)
    return res
