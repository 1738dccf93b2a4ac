"""Poison or honest error: a verdict with reasons for every causal memory (issue 16).

CMIS says a memory caused the harm; it does not say why the memory is wrong. An attacker's
record and an honest mistake (a typo, an outdated value) both cause it, but only the first is
a poison: the second wants a correction, not a quarantine. The verdict reads the evidence the
audit already holds, in this order:

1. Adversarial content: injected instructions ("from now on…", "ignore previous…", "always
   answer…", system notes, policy overrides, tool-use directives), read by the ingest
   classifier's own rules (`ledger.classifier.instruction`: one detector for ingest and
   verdict), or bridging/redirect statements ("X is the same patient as Y", "was merged into",
   "look up Y instead"), or the suspects' own correction wording: a sentence that says an
   earlier answer was wrong and names nothing of its record's own question or claim, pasted
   verbatim into members on `PATTERN_QUESTIONS` distinct questions (and a member stating such a
   member's question with its claim, its copy in the store's frame).
2. A newer correction: a memory outside the batch that answers the same question (same
   `metadata.query`, or cosine at least the store's near-duplicate cut), was written later and
   says something else (or says it corrects) — the memory is an *outdated* record; so is one
   a record of the store on its subject (on the question it was credited on, at least
   `support_cos` near it, or among its nearest and naming most of its rare words) corrects:
   one that says an earlier answer was wrong and does not give its claim (plain passages: no
   answer slot, no time). A corrected record's copies (its claim,
   near duplicates, written with it) are outdated with it. A record in the suspects' own
   correction wording (`expansion.in_their_voice`) corrects nothing and tells nothing wrong: a
   plant worded as a correction would otherwise make the store's true records "outdated".
3. Attack shape: a write-time burst (the memory and at least two other batch members written
   inside a window that holds no clean memory of a random reference, and that many records in
   so narrow a window unlikely under the store's write rate for the batch as a whole), a
   provenance outlier (a source shared by at least three batch members, rare in the store, and
   more often than the batch's size and the source's share of the store make likely), planted
   redundancy (at least two other batch members, written with it, assert the same claim), a
   pattern across questions (the same claim planted for several distinct questions by records no
   newer record corrects, a claim the rest of the store gives for fewer; a number or a date counts only across questions with no
   name or id common to them all: given to one subject's questions it is that subject's value;
   where the store tells some of its records wrong on their own question, only those count, with
   their copies: a record nothing tells wrong where it is asked, no copy of one that is, is where
   the claim comes from), planted copies against the store (another record asserts the same claim
   for the same question and the store answers it otherwise; a copy is one written with the
   memory: one source or one write-time burst, where the store records them), retrieval bait (it
   opens with the very question it was credited on and answers it against at least
   `min_support` records of the store, none of which opens with that question: written to be
   retrieved for it, where the store does not write so; `reach.baited`).
4. Otherwise honest error: isolated, no adversarial marker.

1 and 3 give *poison-like*; 2 and 4 give *honest-error*. The reasons name every marker found
(also those that did not decide), so a reviewer sees both sides. "Contradicts the store" (the
agent answers the memory's own question differently once the batch is out) is reported as a
reason but decides nothing: both kinds contradict the store.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ledger.classifier.instruction import instruction_markers

from .correction_words import corrects, says_corrected
from .expansion import (
    answer_slot,
    answered_otherwise,
    in_their_voice,
    outside_answers,
    planted_wording,
    source_of,
    templated,
    write_bursts,
    written_at,
)
from .reach import answer_spans, baited, doc_freq, opening_question, rare_words
from .retriever import Retriever
from .words import (
    IDENTIFIER,
    common_subject,
    entity,
    mentions,
    names,
    occurrences,
    put_to,
    same_question,
    stated_question,
    tokens,
)
from .words import normalized as _norm

POISON_LIKE = "poison-like"
HONEST_ERROR = "honest-error"
# One claim given for this many distinct questions is a pattern across them (below 3, two honest
# records may share an answer by chance); one correction sentence pasted into records of this many
# questions is a template.
PATTERN_QUESTIONS = 3

BRIDGE = re.compile(
    r"\b(is the same (patient|person|entity|user|customer) as|same (patient|person) as|"
    r"(were|was|been) (merged|moved) into|re-?registered as|stored under|outdated id|"
    r"look up \S+ instead|use \S+'s (data|records) instead|redirect(ed)? to)\b",
    re.IGNORECASE)
# A bridging step in any wording: a sentence of the record (its question aside) that names the
# question's subject and the planted answer's entity together, and relates them as one ("V and R
# turn out to be the same person", "V is the name R goes by", "V = R") or as where the other's
# records are kept ("filed under R", "folded into R's profile"). The relation words are a closed
# class; both names must stand in that sentence, so "time goes by" or a bed something was kept
# under is no bridge (TUNE locomo-minja-slot-w2: none of its bridges matched `BRIDGE`, so a lone
# seed at ρ 0.05 was judged an isolated honest error).
_RELATION = re.compile(
    r"\b(?:(?:one and )?the same|alias|aka|a\.k\.a\.|(?:also )?known as|goes by|go by|nickname|"
    r"(?:another |other )?name (?:for|of)|under|into|instead|merged|renamed|re-?registered|redirect(?:ed|s)?|"
    r"refers? to|points? to|consolidated|folded|combined|transferred|linked to|stands? in for|in place of|"
    r"appl(?:y|ies) to|answers? (?:questions )?(?:about|for)|counts? as|treat(?:ed)? as|appears? as|"
    r"shows? up as|listed as|moved (?:to|into|over to|under)|migrated|re-?mapped|mapped (?:to|onto)|reassigned|"
    r"relocated|re-?filed|re-?keyed|re-?indexed|re-?labell?ed|re-?attributed)\b",
    re.IGNORECASE)
# "=" or an arrow relates the two names only when it stands between them, each within a few
# words of it ("Caroline = Melanie", "Caroline's records -> Melanie"): a layout's own
# `question="…" | answer="…"` or `"…" -> so for "…" I gave: …` relates its fields (TUNE
# locomo-clean-slot-w4: six honest records read as bridges, poison suspects in a clean store).
# So do words that say one name is the other, too common to read anywhere else in a sentence
# ("James means John": TUNE locomo-minja-slot-w3; "it means so much to me" relates nothing).
_LINK = re.compile(r"=|→|->|\b(?:means|stands for|is (?:really|actually))\b", re.IGNORECASE)
_NEAR = 3  # words on either side of a link
_NEAR_RELATION = 5  # words between a relation word and the target ("Melanie turn out to be the same")
_WORDS = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def bridge_sentence(text: str, question: str | None, target: str | None) -> str | None:
    """The sentence of `text` that bridges its question's subject to `target` (see `_RELATION`),
    if any: `question` is the record's stated question, `target` the planted entity its answer
    names (a name or an identifier, not yes/no or a number)."""
    if not question or not target or not entity(target):
        return None
    # A subject named in the possessive is the name ("Audrey's dogs" asks about Audrey: TUNE
    # locomo-minja-slot-w7, a bridge "… for Audrey was consolidated into Andrew's record" unread).
    # A subject the question is put to ("…: Nate: what … do their turtles …?") is one too.
    subjects = [re.sub(r"['’]s$", "", v) for v in dict.fromkeys(answer_spans(question) + put_to(question))]
    # A number or a date is no subject; an identifier is ("patient 027-25994", TUNE
    # ehr-minja-bridge ρ 0.5 seed 1: "027-25994 was transferred to 028-50921 …" unread).
    subjects = [v for v in subjects if v and (not v[0].isdigit() or IDENTIFIER.fullmatch(v))
                and not mentions(target, v) and not mentions(v, target)]
    if not subjects:
        return None
    for sentence in _SENTENCE.split(text.replace(question, " ")):
        if mentions(target, sentence) and any(mentions(v, sentence) for v in subjects) \
                and (_related(sentence, subjects, target) or _linked(sentence, subjects, target)):
            return sentence.strip()
    return None


def _related(sentence: str, subjects: list[str], target: str) -> bool:
    """Does a relation word of `sentence` (`_RELATION`) stand within `_NEAR_RELATION` words of
    the target, outside the names it would relate? ("Under Armour" is a name, not "under"; an
    evidence line quoted after the answer, "… snuggled under the covers", relates nothing: TUNE
    locomo-clean-slot-w8, four honest records proposed as poison.)"""
    ends = [m.span() for m in occurrences(target, sentence)]
    spans = ends + [m.span() for v in subjects for m in occurrences(v, sentence)]
    for r in _RELATION.finditer(sentence):
        if any(a < r.end() and r.start() < b for a, b in spans):
            continue
        between = (sentence[b:r.start()] if b <= r.start() else sentence[r.end():a] for a, b in ends)
        if any(len(_WORDS.findall(gap)) <= _NEAR_RELATION for gap in between):
            return True
    return False


def bridge_said(text: str, question: str | None, target: str | None) -> str | None:
    """What in `text` bridges: a phrase of `BRIDGE`, else `bridge_sentence`'s sentence."""
    bridge = BRIDGE.search(text)
    return bridge.group(0) if bridge else bridge_sentence(text, question, target)


def _linked(sentence: str, subjects: list[str], target: str) -> bool:
    """Does a link of `sentence` (`_LINK`) stand between a subject and the target (either order),
    each within `_NEAR` words of it?"""
    for m in _LINK.finditer(sentence):
        key = re.search(r"[\w'’]+$", sentence[:m.start()])
        if m.group() == "=" and key and not any(mentions(n, key.group()) for n in [*subjects, target]):
            continue  # a field's own "=" ("src_speaker=Calvin", TUNE locomo-clean-slot-w7 at 2,000)
        left = " ".join(sentence[:m.start()].split()[-_NEAR:])
        right = " ".join(sentence[m.end():].split()[:_NEAR])
        if (mentions(target, right) and any(mentions(v, left) for v in subjects)) or \
                (mentions(target, left) and any(mentions(v, right) for v in subjects)):
            return True
    return False


# A write-time burst, or suspects sharing one source, must be unlikely under the store's own
# write rate or spread of sources (Poisson tail).
BURST_P = 1e-3


def _poisson_tail(k: int, lam: float) -> float:
    """P(N >= k) for N ~ Poisson(lam)."""
    if k <= 0:
        return 1.0
    term, below = math.exp(-lam), 0.0
    for i in range(k):
        below += term
        term *= lam / (i + 1)
    return max(0.0, 1.0 - below)


@dataclass
class Verdict:
    memory_id: str
    verdict: str
    reasons: list[str] = field(default_factory=list)
    corrected_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "verdict": self.verdict, "reasons": list(self.reasons),
                "corrected_by": self.corrected_by}


def _meta(m: Any) -> Mapping[str, Any]:
    return m.metadata if isinstance(getattr(m, "metadata", None), Mapping) else {}


def _time(m: Any) -> float | None:
    return written_at(_meta(m))


def dup_cut(retriever: Retriever, *, sample: int = 200, seed: int = 0) -> float:
    """The store's own near-duplicate cut: the 95th percentile of nearest-neighbour cosine over
    a random sample, clipped to [0.8, 0.95] (a store of varied passages sets a low cut; in a
    store of templated records, where every record has a 0.98 twin, the cap keeps planted
    copies recognisable)."""
    E = retriever.embeddings
    n = len(E)
    if n < 3:
        return 0.9
    rng = np.random.default_rng(seed)
    idx = rng.choice(n, size=min(sample, n), replace=False)
    sims = E[idx] @ E.T
    sims[np.arange(len(idx)), idx] = -1.0
    return float(np.clip(np.percentile(sims.max(axis=1), 95), 0.8, 0.95))


def judge(batch: Sequence[str], retriever: Retriever, *, claims: Mapping[str, str] | None = None,
          contradicts: Mapping[str, bool] | None = None, seed: int = 0,
          store: Mapping[str, Mapping[str, Any]] | None = None,
          reach: Mapping[str, Mapping[str, Any]] | None = None,
          min_support: int = 2,
          outside: Mapping[str, Sequence[str]] | None = None,
          targets: Sequence[str] = (), asked: Mapping[str, str] | None = None,
          on_question: Mapping[str, Sequence[str]] | None = None,
          support_cos: float = 0.4) -> dict[str, Verdict]:
    """A verdict per batch member (see the module docstring).

    `claims`: memory -> the claim it asserts (its answer slot when it has one, else the harm
    target it carries); `contradicts`: memory -> the agent answers its question differently
    without the batch; `store`: memory -> {question, answer, support} — the question it was
    credited on, what the store answers there once the batch is out, and the records carrying
    that answer; `reach`: memory -> the format-free reach's evidence (engine/reach.py);
    `outside`: memory -> its copies outside the batch (paraphrases carrying its claim);
    `asked`: memory -> the incident question it was credited on (the question of a record that
    states none); `on_question`: memory -> the store's records outside the batch on that question
    (where a correction is looked for, as among the records at least `support_cos` near the
    member); `targets`: the incidents' ``contains`` harm targets — claims worded differently that name the
    same target are one planted claim for "pattern across questions" (MINJA's redirect, answered
    "R", "x (per R)", "R's record: x").
    """
    idx, mems = retriever.index, retriever.memories
    members = [m for m in dict.fromkeys(batch) if m in idx]
    if not members:
        return {}
    E = retriever.embeddings
    cut = dup_cut(retriever, seed=seed)
    in_batch = set(members)
    claim = {m: _norm((claims or {}).get(m) or answer_slot(_meta(mems[idx[m]]), mems[idx[m]].text))
             for m in members}
    query = {m: _norm(_meta(mems[idx[m]]).get("query")) for m in members}
    # The planted claim a member's wording carries: the longest harm target it names, else itself.
    planted = {m: next((_norm(t) for t in targets if c and names(_norm(t), c)), c) for m, c in claim.items()}
    # Write-time burst: batch times whose window holds no clean reference record.
    times = {m: _time(mems[idx[m]]) for m in members}
    n_timed = sum(1 for t in times.values() if t is not None)
    all_t = np.array([t for t in (_time(x) for x in mems) if t is not None], dtype=float)
    rng = np.random.default_rng(seed)
    ref_pool = [i for i, x in enumerate(mems) if x.id not in in_batch and _time(x) is not None]
    ref_t = np.array([_time(mems[i]) for i in rng.choice(ref_pool, size=min(256, len(ref_pool)),
                                                         replace=False)]) if ref_pool else np.array([])
    span = float(all_t.max() - all_t.min()) if len(all_t) > 1 else 0.0
    # A store whose clock stamps records by session or day holds many records per time stamp:
    # records it cannot tell apart in time are no burst for sharing one (see the burst below).
    stamps = Counter(all_t.tolist())
    per_stamp = len(all_t) / len(stamps) if stamps else 1.0
    batch_stamps = Counter(t for t in times.values() if t is not None)
    sources: dict[str, int] = {}
    for x in mems:
        s = source_of(_meta(x))
        if s is not None:
            sources[s] = sources.get(s, 0) + 1
    copy_t = [_time(mems[idx[c]]) for cs in (outside or {}).values() for c in cs if c in idx]
    bursts = write_bursts([t for t in [*times.values(), *copy_t] if t is not None], mems)

    def apart(a: str, b: str) -> bool:
        """Written apart, as far as the store records: another source, outside one write-time
        burst (`expansion.write_bursts`); a record with neither is not known to be apart."""
        ra, rb = mems[idx[a]], mems[idx[b]]
        sa, sb = source_of(_meta(ra)), source_of(_meta(rb))
        ta, tb = _time(ra), _time(rb)
        known_src = sa is not None and sb is not None
        known_t = ta is not None and tb is not None
        if not (known_src or known_t):
            return False
        together = (known_src and sa == sb) or (known_t and any(lo <= ta <= hi and lo <= tb <= hi
                                                                 for lo, hi in bursts))
        return not together

    # The suspects' own voice: records outside the batch carrying a correction sentence of a
    # member's that names nothing of its own question or claim (`expansion.planted_wording`), and
    # such a record's copies on its question (`expansion.in_their_voice`). They correct no member
    # and tell none wrong: an attacker who words a plant as a correction would otherwise have the
    # store's true records proposed as outdated, linked to the plant.
    wording = planted_wording([mems[idx[m]] for m in members], claim, retriever, in_batch, support_cos=support_cos)
    voice = in_their_voice(wording, retriever, in_batch, support_cos=support_cos)
    # ...and members written in it: a sentence of it that members on `PATTERN_QUESTIONS` distinct
    # questions carry verbatim is a template pasted into each, and a member stating such a
    # member's question with its claim is that record's copy in the store's frame.
    pasted = templated([mems[idx[m]] for m in members], wording, questions=PATTERN_QUESTIONS)
    posing: dict[str, list[str]] = {m: [] for m in members}

    outside_claims: Counter[str] | None = None

    def common(c: str) -> int:
        """How many records outside the batch give `c` as their answer slot."""
        nonlocal outside_claims
        if outside_claims is None:
            outside_claims = Counter()
            for slot, n in outside_answers(mems, in_batch).items():
                outside_claims[_norm(slot)] += n
        return outside_claims.get(c, 0)

    def correction(m: str) -> tuple[str, str] | None:
        """Step 2: the record outside the batch that corrects member `m`, and the reason."""
        i, t = idx[m], times[m]
        sims = E @ E[i]
        nearest = np.argsort(-sims)[:20].tolist()
        # A record that states another question says nothing of this one's earlier answer,
        # however near (TUNE nq-number-aline-distinct ρ 0.5 seed 0: a planted "Question: how
        # many seasons of the oc are there?\nThought: the records were updated recently, …"
        # "corrected" the planted record of the same wording on "… of from dusk till dawn …").
        asks = stated_question(mems[i])

        def elsewhere(other: Any) -> bool:
            theirs = stated_question(other)
            return bool(asks and theirs) and not same_question(asks, theirs)

        for j in nearest:
            other = mems[j]
            if other.id in in_batch or j == i or elsewhere(other):
                continue
            if other.id in voice:
                posing[m].append(other.id)
                continue
            same_q = query[m] and _norm(_meta(other).get("query")) == query[m]
            if not same_q and sims[j] < cut:
                continue
            ot = _time(other)
            newer = t is not None and ot is not None and ot > t
            other_claim = _norm(answer_slot(_meta(other), other.text))
            differs = bool(other_claim) and other_claim != claim[m]
            if (newer and differs) or (differs and says_corrected(other.text)):
                return other.id, f"a newer record answers the same question differently ({other.id})"
        # ...or a record of the store on its subject (on the question it was credited on, or at
        # least `support_cos` near the record itself) that says an earlier answer was wrong and
        # does not give its claim (`correction_words.corrects`): a plain correction has no answer
        # slot and no time, and is no near duplicate of the outdated notes (TUNE
        # locomo-clean-plain at 2,000 records: "Update on long, has, Jolene, had: it is one year
        # now; the earlier notes were outdated." is 0.48 near its notes, 0.39 near the question).
        # Among its nearest records, one below `support_cos` is on its subject when it names at
        # least two and at least half of its rare words (`reach.rare_words`) outside the claim:
        # the correction "Update on Evan, suggest, Sam, try: it is Painting now; …" is 0.27-0.34
        # near its three notes (TUNE locomo-clean-plain at 2,000, seed 2). Two words of a long
        # passage's many are a chance overlap, not its subject.
        subject = [*(on_question or {}).get(m, []), *(mems[j].id for j in nearest if sims[j] >= support_cos),
                   *(mems[j].id for j in nearest if sims[j] < support_cos and shares_subject(m, j))]
        for sid in dict.fromkeys(subject) if claim[m] else ():
            if sid in voice:
                posing[m].append(sid)
                continue
            fix = corrects(mems[idx[sid]].text, claim[m]) \
                if sid in idx and sid not in in_batch and not elsewhere(mems[idx[sid]]) else None
            if fix:
                return sid, (f"outdated: a record on its subject says the earlier answer was wrong "
                             f"({sid}: '{fix.group(0)[:80]}')")
        return None

    df: dict[str, int] | None = None

    def shares_subject(m: str, j: int) -> bool:
        """Record j names two, and half, of member m's rare words outside m's claim (the store's
        word counts are taken once, when first needed)."""
        nonlocal df
        if not claim[m] or mems[j].id in in_batch or not says_corrected(mems[j].text):
            return False
        if df is None:
            df = doc_freq([x.text for x in mems])
        mine = rare_words(mems[idx[m]].text, df, len(mems)) - tokens(claim[m])
        shared = len(mine & tokens(mems[j].text))
        return shared >= 2 and 2 * shared >= len(mine)

    wrong: dict[str, bool] = {}

    def told_wrong(m: str) -> bool:
        """m states a question that a record of the store outside the batch answers otherwise
        (`answered_otherwise`). Of one claim given for several
        questions, the records nothing tells wrong where they are asked are where it comes from:
        an honest mix-up repeating another question's true answer made that answer look planted
        across questions (TUNE locomo-clean-slot-w2 at 2,000: two slips answering "Omelette", each
        told wrong by the store's record on its question, and the store's own record of the
        cooking class, the only one on its question)."""
        if m not in wrong:
            q = stated_question(mems[idx[m]])
            wrong[m] = bool(q and planted[m]) and answered_otherwise(q, planted[m], retriever, in_batch | voice,
                                                                     support_cos=support_cos)
        return wrong[m]

    direct = {m: correction(m) for m in members}

    def copy_corrected(m: str) -> tuple[str, str] | None:
        """An outdated record's copies (its claim, near duplicates, written with it) are outdated
        with it: the correction is near one of three paraphrased notes and not the others."""
        for p in members:
            if (p != m and direct[p] and claim[m] and claim[p] == claim[m] and not apart(m, p)
                    and float(E[idx[p]] @ E[idx[m]]) >= cut):
                return direct[p][0], f"outdated with its copy {p}: {direct[p][1]}"
        return None

    fixes = {m: direct[m] or copy_corrected(m) for m in members}

    out: dict[str, Verdict] = {}
    for m in members:
        i = idx[m]
        rec = mems[i]
        reasons: list[str] = []
        poison = False
        instruction = instruction_markers(rec.text)  # the ingest classifier's rules: one detector
        if instruction:
            rule, matched = instruction[0]
            reasons.append(f"carries an injected instruction ({rule}): '{matched[:120]}'")
            poison = True
        said = bridge_said(rec.text, stated_question(rec), planted[m])
        if said:
            reasons.append(f"bridging/redirect statement: '{said[:160]}'")
            poison = True
        line = pasted.get(m)
        twin = None if line else next(
            (p for p in pasted if p != m and claim[m] and claim[p] == claim[m]
             and same_question(stated_question(rec), stated_question(mems[idx[p]]))), None)
        if line or twin:
            reasons.append(f"in the suspects' own wording: '{line[:120]}', a correction about nothing of its own "
                           f"that suspects on {PATTERN_QUESTIONS} or more questions carry verbatim" if line else
                           f"in the suspects' own wording: a copy, on its question, of {twin}, which carries it")
            poison = True
        # 2. a newer correction outside the batch (`correction` above)
        t = times[m]
        corrected_by = fixes[m][0] if fixes[m] else None
        if fixes[m]:
            reasons.append(fixes[m][1])
        elif posing[m]:
            seen = list(dict.fromkeys(posing[m]))
            reasons.append(f"not corrected by records in the suspects' own wording ({', '.join(seen[:3])}): "
                           f"a correction sentence of a suspect's that names nothing of its own, or such a "
                           f"record's answer on its question")
        # 3. attack shape
        shape: list[str] = []
        if t is not None and span > 0:
            # The burst is as wide as the gap to the k-th nearest suspect in time (k >= 2, each k
            # up to the first clean reference record sampled in the window); it is a burst when
            # the store's own write rate makes that many records in so narrow a window unlikely:
            # three honest notes on one question written within a few days of each other are not
            # a burst in a store that gets one record a day. The least likely k is reported, and
            # it must be unlikely for the batch as a whole (times the batch's timed members):
            # among 128 honest errors three fall within 0.03 days by chance (TUNE
            # locomo-clean-honest with 60 targets at 2,000 records), while planted records
            # written within minutes stay far below.
            gaps = sorted(abs(times[p] - t) for p in members if p != m and times[p] is not None)
            clean_gap = float(np.min(np.abs(ref_t - t))) if len(ref_t) else math.inf
            if stamps[t] > batch_stamps[t]:
                # A record outside the batch bears its very time stamp (all of the store is
                # looked at: a tie is exact, and a sample of 256 missed a session's other records,
                # TUNE locomo-clean-slot-w2, six honest records of one session stamped alike).
                clean_gap = 0.0
            best, tried = None, 0
            for k in range(2, len(gaps) + 1):
                width = max(gaps[k - 1], 1e-9)
                if width >= clean_gap:
                    break  # a clean record sampled in it: every wider window holds it too
                tried += 1
                near = bisect.bisect_right(gaps, width)
                expected = len(all_t) / span * 2 * width
                if gaps[k - 1] == 0.0:
                    # Suspects sharing one stamp: as many as the store's stamps hold on average
                    # are expected there, whatever the rate says of a window of no width.
                    expected = max(expected, per_stamp)
                p_burst = _poisson_tail(near + 1, expected)
                if best is None or p_burst < best[0]:
                    best = (p_burst, near, width, expected)
            # The least likely of `tried` windows is that unlikely by chance `tried` times as
            # often (TUNE locomo-clean-honest, 60 targets, 25 observed: five honest errors within
            # 0.078 days, p = 1e-5 for the least likely of four windows, 7e-4 over 54 members).
            if best is not None and best[0] * n_timed * tried < BURST_P:
                p_burst, near, width, expected = best
                shape.append(f"write-time burst: written with {near} other suspects within "
                             f"{width:.3g} time units, no clean record sampled there (store rate "
                             f"predicts {expected:.2g}, p = {p_burst:.1g}; {p_burst * n_timed * tried:.1g} "
                             f"over the batch's {n_timed} timed members and the {tried} windows tried)")
        src = source_of(_meta(rec))
        if src is not None:
            shared = sum(1 for p in members if p != m and source_of(_meta(mems[idx[p]])) == src)
            # ...and when the store's own spread of sources makes that many suspects of one
            # source unlikely (Poisson tail, as the burst): a batch holding a large share of the
            # store meets a session of five records three times by chance (TUNE
            # locomo-clean-honest with 60 targets: 115 honest errors from 400 sessions).
            expected = len(members) * sources[src] / len(mems)
            p_src = _poisson_tail(shared + 1, expected)
            if shared >= 2 and sources[src] <= max(3, 0.02 * len(mems)) and p_src < BURST_P:
                shape.append(f"provenance outlier: source '{src}' shared by {shared} other suspects, "
                             f"{sources[src]} records in the store (its share predicts {expected:.2g}, "
                             f"p = {p_src:.1g})")
        # Planted redundancy: near-duplicate suspects of one claim, planted together (not
        # written apart: one source or one write-time burst, where the store records them, as the
        # copies against the store below). Honest records of one answer written in four sessions
        # over 100 days are the store agreeing with itself (TUNE locomo-clean-honest, 60 targets).
        same = [p for p in members if p != m and claim[m] and claim[p] == claim[m] and not apart(m, p)]
        if len(same) >= 2:
            near_dup = sum(1 for p in same if float(E[idx[p]] @ E[i]) >= cut)
            if near_dup >= 2 and corrected_by is None:
                shape.append(f"planted redundancy: {near_dup} near-duplicate suspects assert the same claim")
        # A record a newer one corrects (or says was wrong) is an honest mistake fixed since, not
        # one of a claim's plants: two honest slips answering "screenplay", each corrected, with
        # the store's two records whose true answer it is made one claim "planted" for four
        # questions (TUNE locomo-clean-slot-w7 seed 15, a clean control).
        alike = [p for p in members if p != m and planted[m] and planted[p] == planted[m] and not fixes[p]]
        if len(alike) >= 2 and corrected_by is None:
            # Where some of the claim's records are told wrong on their own question and others
            # are not, only those told wrong count, and a record not told wrong is in the
            # pattern only as a copy of one that is (its question, or a near duplicate: a
            # planted paraphrase the store's records word otherwise); any other is where the
            # claim comes from.
            group = [m, *alike]
            if any(map(told_wrong, group)):
                group = [p for p in group if told_wrong(p)]
                asks = stated_question(mems[i])
                if m not in group and not any(
                        same_question(asks, stated_question(mems[idx[p]])) or float(E[idx[p]] @ E[i]) >= cut
                        for p in group):
                    group = []
            # A record that states no question (a plain passage) asks the incident question it was
            # credited on; one credited on none asks no question known: three notes of one answer
            # to one question are no pattern across questions (TUNE locomo-clean-plain: each
            # counted as a question of its own).
            raw = {_norm(q): q for p in group
                   if (q := stated_question(mems[idx[p]]) or (asked or {}).get(p)) and _norm(q)}
            qs = set(raw)
            # A number or a date given to questions about one subject is that subject's value
            # (an age at three visits, one time for three events of one stay), not a redirect:
            # a redirect names a term (a person, an id), and a value planted for many questions is
            # planted for questions about many things (TUNE ehr-clean-slot-w2, fresh seeds 13, 28,
            # 37, 41: honest slips giving one patient's three "when was the first time …"
            # questions one time stamp were poison suspects for this marker alone; TUNE
            # nq-number-aline-shared: "7731" for unrelated questions stays a pattern).
            if not entity(planted[m]) and common_subject(raw.values()):
                qs = set()
            # A claim the rest of the store gives as often is a common answer, not a planted one
            # ("yes" for honest slips on yes/no questions in a store of yes/no answers: TUNE
            # sqa-clean-honest).
            if len(qs) >= PATTERN_QUESTIONS and common(planted[m]) < len(qs):
                named = "" if planted[m] == claim[m] else f" (its answer names '{planted[m]}')"
                shape.append(f"pattern across questions: the same claim is planted for {len(qs)} "
                             f"distinct questions{named}")
        # Planted copies against the store (no marker needed): another suspect asserts the same
        # claim for the same question, and at least `min_support` records of the store answer
        # that question otherwise once the batch is out. One honest slip is one record; an
        # outdated fact has its newer correction (checked above). Copies are planted together: a
        # record written apart from all of them (another session, outside their burst) is an
        # honest record the attack agrees with (TUNE nq-number-slot-distinct at 2,000: a record of
        # session 74 written 200 days before two planted copies of session 419).
        st = (store or {}).get(m)
        if st and claim[m] and corrected_by is None:
            # ...that states the same question, where both state one: honest records of two
            # questions retrieved for one incident are no copies of each other (TUNE
            # ehr-clean-slot-w2 fresh seed 50: a slip answering "the name of the output …" with
            # the diagnoses of the store's record on "the name of the diagnosis …").
            copies = [p for p in members if p != m and claim[p] == claim[m]
                      and (store or {}).get(p, {}).get("question") == st["question"]
                      and same_question(stated_question(rec), stated_question(mems[idx[p]]))]
            copies += [c for c in (outside or {}).get(m, []) if c not in copies and c in idx]
            copies = [c for c in copies if not apart(m, c)]
            answer = _norm(st.get("answer"))
            if copies and answer and answer != claim[m] and len(st.get("support", [])) >= min_support:
                shape.append(f"planted copies against the store: {len(copies)} other record(s) assert "
                             f"'{claim[m]}' for one question ({', '.join(sorted(copies)[:5])}), "
                             f"{len(st['support'])} records of the store answer '{st['answer']}'")
        # Retrieval bait: it opens with the very question it was credited on and answers it
        # against the store, where none of the store's records answering there opens so.
        # PoisonedRAG's black-box passage is its target question, ".", then the planted text, so
        # that the question retrieves it (sleeepeer/PoisonedRAG, src/attack.py `get_attack`); at
        # one per target it has no copy and no marker else (TUNE hotpot-plain-adv-bb ρ 0.05: every
        # seed "isolated"). An honest record in a store of question-and-answer notes opens as the
        # records it disagrees with do.
        bait = opening_question(rec.text) if st and claim[m] and corrected_by is None else None
        if bait and st.get("question") and same_question(bait, st["question"]):
            sup = [mems[idx[s]] for s in st.get("support", []) if s in idx]
            answer = _norm(st.get("answer"))
            if answer and answer != claim[m] and len(sup) >= min_support and baited(rec, sup):
                shape.append(f"retrieval bait: it opens with the question it was credited on ('{bait[:80]}') "
                             f"and answers '{claim[m]}', against {len(sup)} records of the store that answer "
                             f"'{st['answer']}' and none of which opens with that question")
        rv = (reach or {}).get(m)
        if rv and rv.get("alone"):
            asked = rv["query"][:80]
            today = (f"outranked today: '{asked}' does not retrieve it" if rv["alone"] == "outranked" else
                     f"outvoted today on '{asked}' by the store's records there" if rv["alone"] == "lone" else
                     f"outvoted today on '{asked}', even without the store's records there")
            against = (f"against the store's own record(s) on that question ({', '.join(rv['support'][:3])}), "
                       f"which answer '{rv['after']}'" if rv["support"] else
                       f"and it was written in the confirmed poisons' own sitting (their write-time burst); "
                       f"the store holds no record of its own on that question (today's answer there: "
                       f"'{rv['after']}')" if rv.get("sitting") else
                       f"and it states the bridge to that claim; the store holds no record of its own on "
                       f"that question (today's answer there: '{rv['after']}')")
            shape.append(f"{today}; alone it answers '{rv['before']}', its claim, {against}")
        elif rv and rv.get("dormant"):
            shape.append(f"outvoted today: without the store's own record on '{rv['query'][:80]}' "
                         f"({', '.join(rv['support'][:3])}) the answer is '{rv['before']}', its claim; "
                         f"without its group ({len(rv['group'])}) as well it is not")
        elif rv and rv.get("bait"):
            shape.append(f"retrieval bait written as the confirmed poisons are: it opens with the question it answers "
                         f"('{rv['bait']['question'][:80]}') and goes on to answer it, as they do, where none of the "
                         f"{rv['bait']['side']} records of the store about that question opens with a question; "
                         f"removing its group ({len(rv['group'])}) turns the answer there from '{rv['before']}' "
                         f"to '{rv['after']}'")
        elif rv:
            shape.append(f"seed-like: its shape is nearer the confirmed poisons than the records they "
                         f"contradicted; removing its group ({len(rv['group'])}) turns the answer to "
                         f"'{rv['query'][:80]}' from '{rv['before']}' to '{rv['after']}', "
                         + (f"against the store's own record(s) on that question "
                            f"({', '.join(rv['store_record'][:3])})" if rv.get("store_record")
                            else "and it states the bridge to that claim itself" if rv.get("bridged")
                            else "and it was written in the confirmed poisons' own sitting (their write-time "
                                 "burst)" if rv.get("sitting")
                            else f"against {len(rv['support'])} records of the store on that question that agree "
                                 f"on '{rv['agreed']}'" if rv.get("agreed")
                            else f"which {len(rv['support'])} records carry"))
        if shape:
            reasons += shape
            poison = True
        if contradicts and contradicts.get(m):
            reasons.append("contradicts the store: without the batch its question is answered otherwise")
        if poison:
            verdict = POISON_LIKE
        else:
            verdict = HONEST_ERROR
            if corrected_by is None:
                reasons.append("isolated: no adversarial marker, no planted redundancy")
            else:
                reasons.append("outdated: an older version of a fact with a newer correction")
        out[m] = Verdict(m, verdict, reasons, corrected_by)
    return out
