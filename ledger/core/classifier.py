"""Deterministic ingest-time classifier (MutMem section "Ingest-time classifier").

Flags passages that share a *suspicious query pattern*: the content of one question,
restated across several distinct passages, each asserting the same answer. That is the shape
of PoisonedRAG's targeted passages (Zou et al., 2024: for every target question the attacker
writes five passages that contain or paraphrase the question and assert the incorrect
answer, so that they are retrieved for the question and outvote the truth) and of MINJA's
repeated planted records.

Pure Python, standard library only, no Django. Deterministic: every loop runs over sorted
ids, ties are broken by id, no hashing of Python objects that varies between runs.

Algorithm (one pass over a batch; the batch is the whole store, or a new batch together with
the existing passages so that a pattern split across batches is still seen):

1. Normalise each passage into content tokens: NFKC, lower case, alphanumeric words, English
   stop words removed, number words and ordinals folded to digits ("fourth" -> "4"), light
   plural stemming. Proper-noun tokens (capitalised, not sentence-initial, or in a title line)
   are remembered separately.
2. Document frequency over the batch; a token is *informative* when 2 <= df <= max_df (a cap
   that grows with the batch, so the inverted index never enumerates common words). Weights
   are idf = ln(N / df).
3. Candidate neighbours of each passage: passages sharing at least ``min_shared`` informative
   tokens, found through the inverted index (no all-pairs comparison).
4. Group growth from each seed: greedily add the neighbour that keeps the largest idf weight
   of the common token set (the *core*); stop before the core drops below ``min_core_tokens``
   tokens or ``min_core_weight``. The core of a PoisonedRAG group is the question's content
   plus the asserted answer.
5. The group is the *support* of the core: every passage of the batch holding all core tokens.
   It is suspicious when
   a. it has at least ``min_group`` distinct passages (near-duplicate copies count once),
   b. the core is question-sized (``min_core_tokens`` .. ``max_core_tokens`` tokens) and
      the support is small (a pattern shared by many passages is boilerplate or a template,
      not a targeted attack),
   c. the members are about the same subject: a template family (villages of one district,
      mountains of one range) shares its predicate while every member names its own subject
      (a proper noun found in no other member); restated questions name the same one,
   d. the core is a large enough share of each member (a short claim restated, not two long
      articles that happen to share names).
   Before these rules (version 2.0), members that are not part of the pattern are set aside:
   e. passages written to one recipe have similar lengths: a member whose length is more than
      ``length_spread`` times off the group median is dropped, and the median must be at most
      ``max_words`` words (short, self-contained claims, not encyclopedic paragraphs);
   f. every member must carry the asserted answer: the numbers and proper nouns that all the
      other members state (all but one when there are six or more). Since 2.1 a member that
      leaves out a minor shared name ("NHL" for "National Hockey League") stays, unless it
      also lacks a shared number, lacks half the shared names by idf weight, or states a
      number or name of its own (the honest passage on the same question, which gives a
      different answer);
   g. a member much less similar (idf-weighted cosine) to the others than they are to each
      other (``outlier_ratio``) is peeled off; the rest must keep ``min_cohesion``;
   h. chat is not a claim: first/second person or chat markers ("!", "thanks") in most members
      (repeated small talk) clear the group.
6. (2.1) Re-admission: a passage outside the group that states every shared number, most of
   the shared names, covers ``readmit_cover`` of the words most members share, has the
   recipe's length and an idf cosine to the members of at least ``readmit_ratio`` times the
   group's cohesion is added (a paraphrase that dropped one question word from the core).
7. Every member of a suspicious group gets one :class:`Flag` whose reason names the repeated
   pattern, the group size and a similarity figure; evidence holds the core tokens, the group
   ids and the figures, so a reviewer can check the decision.

Version 3.0 takes the passages' sentence embeddings (a :class:`Dense`; the ledger passes the
store's MiniLM vectors) when there are any; without them it is the lexical 2.1 pipeline:

4b. Groups are also seeded from embedding neighbourhoods (``dense_seed``): the words a seed
    shares with its nearest neighbours are cores judged like the lexical ones. A group one
    passage short is completed by paraphrases close in meaning (6b) before it is judged.
5i. Members must be close in meaning (``dense_min_cohesion``; it replaces the word-overlap
    ``min_cohesion``, which paraphrases fail) and a member much further than the rest is
    peeled (``dense_outlier_ratio``).
5j. Embeddings do not see negation: a member that names part of the core only inside a denial
    ("not red, white and blue", "unlike most clock dials") is the other side of the question.
    The minority side is set aside; an even split is no pattern.
6b. Re-admission by meaning: see :func:`_readmit`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

CLASSIFIER_NAME = "ingest-classifier"
CLASSIFIER_VERSION = "3.1"

_STOP = frozenset(
    """a about above after again against all almost along also although am among an and
    another any anyone anything are aren around as at away be because been before being
    below between both but by can cannot could did didn do does doesn doing don done down
    during each either else even ever every few for from further get gets got had hadn has
    hasn have haven having he her here hers herself him himself his how however i if in into
    is isn it its itself just least less let like ll many may me might more most much must
    my myself neither no nor not now of off often on once only onto or other others our ours
    ourselves out over own per quite rather re really s same shall she should shouldn since
    so some such t than that the their theirs them themselves then there these they this
    those though through thus to too toward towards under until up upon us ve very via was
    wasn we were weren what whatever when where whether which while who whom whose why will
    with within without won would wouldn yet you your yours yourself yourselves d m o y
    one's""".split()
)
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
).split()
_CARDINALS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(_CARDINALS)}
_NUMBER_WORDS.update({w: str(i + 1) for i, w in enumerate(_ORDINALS)})
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)
_ORDINAL_SUFFIX = re.compile(r"(\d+)(?:st|nd|rd|th)")
_PERSONAL = re.compile(r"\b(?:I|[Mm]y|[Mm]e|[Ww]e|[Oo]ur|[Uu]s|[Yy]ou|[Yy]our)\b")
_QUOTED = re.compile(r"(?<!\w)['\"\u2018\u201c].*?['\"\u2019\u201d](?!\w)")
_CHATTY = re.compile(r"!|\b(?:[Tt]hanks?|[Hh]ey|[Hh]i|[Ww]ow|[Yy]eah|[Yy]ep|[Ll]et's)\b")
_SENTENCE_END = re.compile(r"[.!?:;\"\n]")
# Negation (version 3): a cue negates the phrase after it, up to the next comma, "but" or the
# end of the sentence ("instead of 'IV', it is 'IIII'", "not 'Little Boy' but 'Big Man'").
# Not a denial: "not only", "not until", "not often", and a negated factive verb ("may not know
# that he wrote it" presupposes that he did).
_NEGATION = re.compile(
    r"(?:\b(?:instead of|rather than|unlike|contrary to|in contrast to|as opposed to|not)\b|n't\b)"
    r"(?! (?:only|until|often|just|merely|also|know|realise|realize|notice)\b)", re.IGNORECASE)
_PHRASE_END = re.compile(r"[,.!?;\n]|\bbut\b", re.IGNORECASE)


# Instruction injection (version 3.1): a passage that addresses the agent with an override
# ("from now on, always…", "ignore previous instructions", "SYSTEM NOTE", "policy override")
# is flagged on its own, without a group: one planted instruction is enough to steer an agent
# that follows instructions. Each pattern needs a directive aimed at the reader, so a chat
# line like "from now on I'll run daily" or a page about a policy does not match.
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


@dataclass(frozen=True)
class Flag:
    """One flagged passage: the label the ledger appends is ``poison_likely`` with this reason."""

    memory_id: str
    reason: str
    evidence: dict = field(hash=False, compare=False)


class Dense(Protocol):
    """Unit text embeddings of the passages (version 3): paraphrase-aware neighbours.

    ``neighbours(id)`` lists the most similar other passages as (id, cosine), best first, at
    most ``limit`` of them with a cosine of at least ``floor``; ``cosine(a, b)`` is the cosine of
    two passages. The numpy implementation is ``ledger.dense.DenseIndex``.
    """

    model: str

    def neighbours(self, memory_id: str) -> Sequence[tuple[str, float]]: ...

    def cosine(self, a: str, b: str) -> float: ...


@dataclass(frozen=True)
class Params:
    """Thresholds. Changing any default is a new CLASSIFIER_VERSION."""

    min_group: int = 4
    knee: float = 0.7
    min_shared: int = 2
    max_neighbours: int = 40
    min_core_tokens: int = 3
    max_core_tokens: int = 12
    min_core_weight: float = 12.0
    max_support: int = 12
    max_df_floor: int = 50
    max_df_share: float = 0.005
    near_duplicate: float = 0.9
    outlier_ratio: float = 0.6
    min_cohesion: float = 0.2
    length_spread: float = 1.6
    max_words: int = 50
    soft_core_quorum: float = 0.6
    soft_core_cover: float = 0.5
    max_first_subject_share: float = 0.5
    max_personal_share: float = 0.5
    min_core_share: float = 0.12
    max_own_subject_share: float = 0.5
    own_subject_max_df: int = 2
    readmit_cover: float = 0.7
    readmit_ratio: float = 0.6
    dense_seed: float = 0.75
    dense_limit: int = 10
    dense_readmit: float = 0.6
    dense_readmit_ratio: float = 0.83
    dense_sure_ratio: float = 0.95
    dense_outlier_ratio: float = 0.8
    dense_min_cohesion: float = 0.6


DEFAULT_PARAMS = Params()


@dataclass
class _Passage:
    memory_id: str
    text: str
    tokens: frozenset[str]
    proper: frozenset[str]
    first_proper: str
    title: frozenset[str]
    weight: float = 0.0


def _stem(word: str) -> str:
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word]
    m = _ORDINAL_SUFFIX.fullmatch(word)
    if m:
        return m.group(1)
    if word.endswith("'s"):
        word = word[:-2]
    word = word.replace("'", "")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> tuple[list[str], set[str]]:
    toks, proper, _ = _tokenize(text)
    return toks, proper


def _tokenize(text: str) -> tuple[list[str], set[str], str]:
    """Content tokens in order, and the subset written as a proper noun.

    A proper noun is a capitalised word that does not open a sentence, or any capitalised
    word of a short first line (a title).
    """
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'")
    tokens: list[str] = []
    proper: set[str] = set()
    first_line_end = text.find("\n")
    has_title = 0 < first_line_end < 120
    prev_end = 0
    first = ""
    for m in _WORD.finditer(text):
        raw = m.group(0)
        sentence_start = prev_end == 0 or bool(_SENTENCE_END.search(text[prev_end : m.start()]))
        prev_end = m.end()
        word = raw.lower()
        if word in _STOP:
            continue
        stem = _stem(word)
        if not stem or stem in _STOP or (len(stem) < 2 and not stem.isdigit()):
            continue
        tokens.append(stem)
        in_title = has_title and m.start() < first_line_end
        if raw[0].isupper() and (in_title or not sentence_start):
            proper.add(stem)
            if not first:
                first = stem
    return tokens, proper, first


def _prepare(passages: Iterable[tuple[str, str]] | Mapping[str, str]) -> list[_Passage]:
    items = passages.items() if isinstance(passages, Mapping) else passages
    seen: dict[str, str] = {}
    for memory_id, text in items:
        if memory_id in seen:
            raise ValueError(f"duplicate passage id {memory_id!r}")
        seen[str(memory_id)] = text or ""
    out = []
    for memory_id in sorted(seen):
        text = seen[memory_id]
        toks, proper, first = _tokenize(text)
        head, sep, _ = text.partition("\n")
        title: frozenset[str] = frozenset()
        if sep and 0 < len(head) < 120 and not _SENTENCE_END.search(head.rstrip(".")):
            title = frozenset(_tokenize(head)[0])
        out.append(_Passage(memory_id, text, frozenset(toks), frozenset(proper), first, title))
    return out


@dataclass(frozen=True)
class Group:
    """A set of passages sharing one core, with the figures the rules look at."""

    members: tuple[str, ...]
    core: tuple[str, ...]
    core_weight: float
    distinct: int
    own_subject_share: float
    min_core_share: float
    similarity: float
    cohesion: float
    first_subject_share: float
    median_core_share: float
    named_core: bool
    pattern: str
    suspicious: bool
    why_not: str


def _refuted(text: str, core: frozenset[str]) -> frozenset[str]:
    """Core tokens that ``text`` names only inside a negation: it refutes them, not states them."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'")
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


def _chatty(text: str) -> bool:
    """First/second person (outside quoted titles) or chat markers: conversation, not claims."""
    text = text.replace("\u2019", "'")
    return bool(_PERSONAL.search(_QUOTED.sub(" ", text)) or _CHATTY.search(text))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _pattern_sentence(text: str, core: frozenset[str]) -> str:
    """The sentence of ``text`` holding most core tokens: the restated question, for the reason."""
    best, best_hits = "", -1
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        toks, _ = tokenize(sentence)
        hits = len(core.intersection(toks))
        if hits > best_hits:
            best, best_hits = sentence.strip(), hits
    return best[:160]


def find_groups(
    passages: Iterable[tuple[str, str]] | Mapping[str, str],
    *,
    params: Params = DEFAULT_PARAMS,
    keep_all: bool = False,
    dense: Dense | None = None,
) -> list[Group]:
    """Steps 1-6 of the module docstring. ``keep_all`` also returns groups judged benign.

    With ``dense`` (version 3) groups are also seeded from embedding neighbourhoods and
    paraphrases are re-admitted by embedding similarity (steps 4b and 6b)."""
    items = _prepare(passages)
    n = len(items)
    if n == 0:
        return []
    df: Counter[str] = Counter()
    for p in items:
        df.update(p.tokens)
    idf = {t: math.log(n / d) for t, d in df.items()}
    for p in items:
        p.weight = sum(idf[t] for t in p.tokens)
    max_df = max(params.max_df_floor, int(n * params.max_df_share))
    postings: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(items):
        for t in sorted(p.tokens):
            postings[t].append(i)

    index_of = {p.memory_id: i for i, p in enumerate(items)}

    def informative(t: str) -> bool:
        return 2 <= df[t] <= max_df

    def weight(tokens: Iterable[str]) -> float:
        return sum(idf[t] for t in tokens)

    def support(core: frozenset[str]) -> list[int]:
        ordered = sorted(core, key=lambda t: (df[t], t))
        result = set(postings[ordered[0]])
        for t in ordered[1:]:
            result.intersection_update(postings[t])
            if not result:
                break
        return sorted(result)

    seen_cores: set[frozenset[str]] = set()
    groups: list[Group] = []

    def consider(core: frozenset[str]) -> None:
        if core in seen_cores:
            return
        seen_cores.add(core)
        held = support(core)
        group = _judge(items, held, core, idf, df, weight, params, dense)
        if dense is not None and group.why_not == _TOO_FEW and group.distinct == params.min_group - 1:
            # One short of a group: paraphrases close in meaning may complete it (step 6b); the
            # other rules are then judged on the passages that hold the core.
            grown = _readmit(group, items, index_of, postings, informative, idf, weight, params, dense)
            extra = len(grown.members) - len(group.members)
            if extra:
                group = _judge(items, held, core, idf, df, weight, params, dense, readmitted=extra)
                if group.suspicious:
                    group = dataclasses.replace(group, members=grown.members)
        if group.suspicious:
            group = _readmit(group, items, index_of, postings, informative, idf, weight, params, dense)
        if group.suspicious or keep_all:
            groups.append(group)

    for a, seed in enumerate(items):
        shared: Counter[int] = Counter()
        for t in sorted(seed.tokens):
            if informative(t):
                shared.update(postings[t])
        shared.pop(a, None)
        cands = [b for b, c in shared.items() if c >= params.min_shared]
        if len(cands) < params.min_group - 1:
            continue
        cands.sort(key=lambda b: (-weight(seed.tokens & items[b].tokens), items[b].memory_id))
        cands = cands[: params.max_neighbours]
        core = seed.tokens
        grown = 1
        remaining = list(cands)
        while remaining:
            scored = [(weight(core & items[b].tokens), -b, b) for b in remaining]
            w, _, b = max(scored)
            nxt = core & items[b].tokens
            if len(nxt) < params.min_core_tokens or w < params.min_core_weight:
                break
            # Past the minimum group size, stop at the knee: a member that costs the core
            # much of its weight (typically the answer) belongs to a wider topic, not the group.
            if grown >= params.min_group and w < params.knee * weight(core):
                break
            core = nxt
            grown += 1
            remaining.remove(b)
        if grown >= params.min_group:
            consider(frozenset(core))
    if dense is not None:
        # 4b. Embedding neighbourhoods: paraphrases of one claim that share few rare words (the
        # question's words are common in the corpus, or each passage words it differently) are
        # still each other's nearest neighbours. The cores tried are the words shared by the
        # seed and its closest neighbours, the closest first; each is judged like a lexical core.
        for seed in items:
            near = [b for b, c in dense.neighbours(seed.memory_id)[: params.dense_limit]
                    if c >= params.dense_seed and b in index_of]
            if len(near) < params.min_group - 1:
                continue
            core = seed.tokens
            for size, b in enumerate(near, start=2):
                core = core & items[index_of[b]].tokens
                if len(core) < params.min_core_tokens or weight(core) < params.min_core_weight:
                    break
                if size >= params.min_group:
                    consider(frozenset(core))
    groups.sort(key=lambda g: (g.members, g.core))
    return groups


def _cosine(x: _Passage, y: _Passage, idf: Mapping[str, float]) -> float:
    nx = math.sqrt(sum(idf[t] ** 2 for t in x.tokens))
    ny = math.sqrt(sum(idf[t] ** 2 for t in y.tokens))
    return sum(idf[t] ** 2 for t in x.tokens & y.tokens) / (nx * ny) if nx and ny else 0.0


def _readmit(group, items, index_of, postings, informative, idf, weight, params, dense=None) -> Group:
    """Step 6: take back planted passages the core missed or the checks set aside.

    A paraphrase that drops one question word ("television series" for "TV series") falls out
    of the core's support. A passage is re-admitted when it states the answer every member
    states (all shared numbers; names, allowing the last word of a multi-word name alone),
    covers most of the words most members share, is written to the same length, and is as
    close (idf cosine) to the members as they are to each other.

    6b (version 3, with embeddings): a paraphrase that words the question its own way
    ("inaugural" for "first", "America" for "USA") is re-admitted when its embedding is as
    close to the members as they are to each other (``dense_readmit_ratio`` of their mean
    pairwise cosine) and it is written to the same length. Embeddings barely see numbers, so
    the numbers still decide: it must not both leave out a shared number and state one of its
    own (the honest passage: "23 episodes" where the members say 24), nor leave out most of
    the shared numbers' weight. Names: it may leave out shared names only if it names nobody
    else instead (the honest passage names a different answer; a name it only denies does not
    count), or if it is nearly as close as the members (``dense_sure_ratio``: "United States"
    for "America").
    """
    reps = [items[index_of[m]] for m in group.members]
    n = len(reps)
    counts: Counter[str] = Counter()
    proper: Counter[str] = Counter()
    for r in reps:
        counts.update(r.tokens)
        proper.update(r.proper)
    answer = {t for t, c in counts.items() if c == n and (t.isdigit() or 2 * proper[t] >= c)}
    numbers = {t for t in answer if t.isdigit()}
    need = math.ceil(params.soft_core_quorum * n)
    soft = frozenset(t for t, c in counts.items() if c >= need)
    soft_w = weight(soft)
    lengths = sorted(len(r.text.split()) for r in reps)
    mid = lengths[n // 2]
    pairs = [_cosine(x, y, idf) for i, x in enumerate(reps) for y in reps[i + 1 :]]
    cohesion = sum(pairs) / len(pairs) if pairs else 0.0
    hits: Counter[int] = Counter()
    if answer:
        for t in sorted(soft):
            if informative(t):
                hits.update(postings[t])
    near: set[int] = set()
    dense_cohesion = 0.0
    core = frozenset(group.core)
    refuted = frozenset().union(*(_refuted(r.text, core) for r in reps)) if dense else frozenset()
    if dense is not None:
        dense_pairs = [dense.cosine(x.memory_id, y.memory_id) for i, x in enumerate(reps) for y in reps[i + 1 :]]
        dense_cohesion = sum(dense_pairs) / len(dense_pairs) if dense_pairs else 0.0
        for r in reps:
            near.update(index_of[b] for b, c in dense.neighbours(r.memory_id) if c >= params.dense_readmit and b in index_of)
    members = set(group.members)
    extra = []
    for b in sorted(set(hits) | near):
        cand = items[b]
        if cand.memory_id in members:
            continue
        if not mid / params.length_spread <= len(cand.text.split()) <= mid * params.length_spread:
            continue
        missing = answer - cand.tokens
        own_numbers = {t for t in cand.tokens if t.isdigit() and t not in counts}
        if dense is not None and _refuted(cand.text, core) - refuted:
            continue  # it refutes what the members state
        if b in near:
            close = sum(dense.cosine(cand.memory_id, r.memory_id) for r in reps) / n
            missing_numbers = missing & numbers
            own_names = {t for t in cand.proper if t not in counts} - _refuted(cand.text, cand.proper)
            names_kept = not (missing - numbers) or not own_names
            if (close >= params.dense_readmit_ratio * dense_cohesion
                    and not (missing_numbers and own_numbers)
                    and (not missing_numbers or 2 * weight(missing_numbers) < weight(numbers))
                    and (names_kept or close >= params.dense_sure_ratio * dense_cohesion)):
                extra.append(cand.memory_id)
                continue
        if hits[b] < params.min_shared:
            continue
        if own_numbers or any(t.isdigit() for t in missing) or 2 * weight(missing) >= weight(answer):
            continue
        if weight(cand.tokens & soft) < params.readmit_cover * soft_w:
            continue
        mean = sum(_cosine(cand, r, idf) for r in reps) / n
        if mean < params.readmit_ratio * cohesion:
            continue
        extra.append(cand.memory_id)
    if not extra:
        return group
    return dataclasses.replace(group, members=tuple(sorted(members.union(extra))))


_TOO_FEW = "too few distinct passages"


def _copies_of(members: list[_Passage], reps: list[_Passage], params: Params) -> list[_Passage]:
    """The members that are a kept distinct passage or a near-duplicate copy of one."""
    return [m for m in members if any(_jaccard(m.tokens, r.tokens) >= params.near_duplicate for r in reps)]


def _judge(items, member_idx, core, idf, df, weight, params, dense=None, readmitted=0) -> Group:
    core_w = weight(core)
    support_size = len(member_idx)
    # Only passages for which the core is a real share of what they say take part: a long
    # article that merely mentions the same names is not a restatement of the pattern.
    members = [items[i] for i in member_idx if items[i].weight and core_w / items[i].weight >= params.min_core_share]
    # Near-duplicate copies of one passage count once (one source ingested twice).
    reps: list[_Passage] = []
    for m in members:
        if not any(_jaccard(m.tokens, r.tokens) >= params.near_duplicate for r in reps):
            reps.append(m)
    # Soft core: tokens most members share (question words plus the asserted answer, even
    # where one paraphrase drops a word). A member missing much of it (the honest passage on
    # the same question, which lacks the planted answer) is not part of the pattern.
    if len(reps) >= params.min_group:
        counts: Counter[str] = Counter()
        for r in reps:
            counts.update(r.tokens)
        need = math.ceil(params.soft_core_quorum * len(reps))
        soft = frozenset(t for t, c in counts.items() if c >= need)
        soft_w = weight(soft)
        keep = [r for r in reps if weight(r.tokens & soft) >= params.soft_core_cover * soft_w]
        if len(keep) < len(reps):
            reps = keep
            members = _copies_of(members, reps, params)
    # Passages written to one recipe have similar lengths; an honest passage that happens to
    # share the pattern (a long encyclopedic paragraph, a one-line caption) does not.
    if reps:
        lengths = sorted(len(r.text.split()) for r in reps)
        mid = lengths[len(lengths) // 2]
        reps = [r for r in reps if mid / params.length_spread <= len(r.text.split()) <= mid * params.length_spread]
        members = _copies_of(members, reps, params)
    # Every planted passage asserts the same answer: a name or number that all the other
    # members state. A member lacking such a token (the honest passage on the question, which
    # gives a different answer) is not part of the pattern. With six or more members one other
    # may lack it too (two honest passages in one group).
    while len(reps) >= params.min_group:
        drop = []
        for r in reps:
            others = [o for o in reps if o is not r]
            quorum = len(others) - (1 if len(others) >= 5 else 0)
            counts: Counter[str] = Counter()
            proper: Counter[str] = Counter()
            for o in others:
                counts.update(o.tokens)
                proper.update(o.proper)
            answer = {t for t, c in counts.items() if c >= quorum and (t.isdigit() or 2 * proper[t] >= c)}
            missing = answer - r.tokens
            if not missing:
                continue
            # A paraphrase may leave out one shared name ("NHL" for "National Hockey League");
            # a member that lacks the shared number, most of the shared names, or states an
            # answer of its own (a number or name no other member states) is the honest
            # passage giving a different answer.
            own = {t for t in (r.proper | {t for t in r.tokens if t.isdigit()}) - core if t not in counts}
            if own or any(t.isdigit() for t in missing) or 2 * weight(missing) >= weight(answer):
                drop.append(r)
        if not drop:
            break
        reps = [r for r in reps if r not in drop]
        members = _copies_of(members, reps, params)
    # A claim and its refutation share their words: members that name part of the core only
    # under a negation ("in contrast to our red, white and blue") against members that state it
    # are two sides of one question (version 3, with embeddings, which cannot tell them apart).
    # The minority side is not part of the pattern; an even split is no pattern at all.
    refuting = [r for r in reps if _refuted(r.text, core)] if dense else []
    stating = [r for r in reps if r not in refuting]
    split_sides = bool(refuting) and len(refuting) == len(stating)
    minority = min(refuting, stating, key=len) if refuting and stating and not split_sides else []
    if minority:
        reps = [r for r in reps if r not in minority]
        members = _copies_of(members, reps, params)
    # Peel passages that are much less similar to the rest than the rest are to each other:
    # the honest passage on the same question shares its words, not the repeated assertion.
    # With embeddings (version 3) the same is then done by meaning.
    def cos(x: _Passage, y: _Passage) -> float:
        return _cosine(x, y, idf)

    def dense_cos(x: _Passage, y: _Passage) -> float:
        return dense.cosine(x.memory_id, y.memory_id)

    peels = [(cos, params.outlier_ratio)] + ([(dense_cos, params.dense_outlier_ratio)] if dense else [])
    for sim, ratio in peels:
        while len(reps) > params.min_group:
            mean = {id(r): sum(sim(r, o) for o in reps if o is not r) / (len(reps) - 1) for r in reps}
            worst = min(reps, key=lambda r: (mean[id(r)], r.memory_id))
            rest = [r for r in reps if r is not worst]
            pairs = [sim(x, y) for i, x in enumerate(rest) for y in rest[i + 1 :]]
            if mean[id(worst)] >= ratio * (sum(pairs) / len(pairs)):
                break
            reps = rest
            members = _copies_of(members, reps, params)
    dense_pairs = [dense_cos(x, y) for i, x in enumerate(reps) for y in reps[i + 1 :]] if dense else []
    dense_cohesion = sum(dense_pairs) / len(dense_pairs) if dense_pairs else None
    median_words = sorted(len(r.text.split()) for r in reps)[len(reps) // 2] if reps else 0
    cos_pairs = [cos(x, y) for i, x in enumerate(reps) for y in reps[i + 1 :]]
    cohesion = sum(cos_pairs) / len(cos_pairs) if cos_pairs else 0.0
    own = 0
    for m in reps:
        others = set().union(*(r.proper for r in reps if r is not m)) if len(reps) > 1 else set()
        own_names = {t for t in m.proper - core - others if df[t] <= params.own_subject_max_df}
        if own_names:
            own += 1
    own_share = own / len(reps) if reps else 1.0
    shares = sorted((core_w / m.weight if m.weight else 0.0) for m in members) or [0.0]
    min_share = shares[0]
    median_share = shares[len(shares) // 2]
    # A passage with a title line is about its title: members titled with different subjects
    # are a family of articles (relatives, films of a series), not one question restated.
    first_own = sum(1 for m in reps if m.title and not m.title <= core)
    first_share = first_own / len(reps) if reps else 1.0
    # Pronouns inside quotes are titles ("I Can't Help Falling in Love with You"), not speakers.
    personal_share = sum(1 for m in reps if _chatty(m.text)) / max(1, len(reps))
    named = any(t.isdigit() or any(t in m.proper for m in reps) for t in core)
    sims = []
    for i in range(len(reps)):
        for j in range(i + 1, len(reps)):
            sims.append(_jaccard(reps[i].tokens, reps[j].tokens))
    core_sentences = []
    for m in reps:
        toks, _ = tokenize(_pattern_sentence(m.text, core))
        core_sentences.append(frozenset(toks))
    pair = [
        len(core & core_sentences[i] & core_sentences[j]) / max(1, len(core_sentences[i] | core_sentences[j]))
        for i in range(len(reps))
        for j in range(i + 1, len(reps))
    ]
    similarity = sum(pair) / len(pair) if pair else 0.0
    why_not = ""
    if len(reps) + readmitted < params.min_group:
        why_not = _TOO_FEW
    elif not params.min_core_tokens <= len(core) <= params.max_core_tokens:
        why_not = "core is not question-sized"
    elif support_size > params.max_support:
        why_not = "pattern too common (boilerplate or template)"
    elif median_words > params.max_words:
        why_not = "members are long articles, not short claims"
    elif cohesion < params.min_cohesion and dense_cohesion is None:
        why_not = "members are not close to each other"
    elif dense_cohesion is not None and dense_cohesion < params.dense_min_cohesion:
        why_not = "members are not close in meaning"
    elif split_sides:
        why_not = "members split between stating and refuting the pattern"
    elif personal_share > params.max_personal_share:
        why_not = "members are first/second-person conversation, not claims about the world"
    elif first_share > params.max_first_subject_share or own_share > params.max_own_subject_share:
        why_not = "members name different subjects (template family)"
    pattern = _pattern_sentence(reps[0].text, core) if reps else ""
    return Group(
        members=tuple(m.memory_id for m in members),
        core=tuple(sorted(core, key=lambda t: (-idf[t], t))),
        core_weight=round(core_w, 3),
        distinct=len(reps),
        own_subject_share=round(own_share, 3),
        min_core_share=round(min_share, 3),
        similarity=round(similarity, 3),
        cohesion=round(cohesion, 3),
        first_subject_share=round(first_share, 3),
        median_core_share=round(median_share, 3),
        named_core=named,
        pattern=pattern,
        suspicious=not why_not,
        why_not=why_not,
    )


def classify(
    passages: Iterable[tuple[str, str]] | Mapping[str, str],
    *,
    only: Iterable[str] | None = None,
    params: Params = DEFAULT_PARAMS,
    dense: Dense | None = None,
) -> list[Flag]:
    """Flag passages that share a suspicious query pattern; one Flag per passage, sorted by id.

    ``passages`` is the batch together with whatever existing passages should be considered
    (the whole store, or the store's neighbourhood of the batch). ``only`` restricts the flags
    returned to those ids (the newly ingested batch), while the pattern is still found across
    all passages given. ``dense`` holds the passages' sentence embeddings (version 3 steps);
    without it the lexical rules alone decide.
    """
    wanted = None if only is None else set(only)
    flags: dict[str, Flag] = {}
    if isinstance(passages, Mapping):
        passages = list(passages.items())
    else:
        passages = list(passages)
    for mid, text in sorted(passages):
        if wanted is not None and mid not in wanted:
            continue
        marks = instruction_markers(text)
        if marks:
            flags[mid] = Flag(
                memory_id=mid,
                reason="instruction injection: the passage addresses the agent with "
                       + "; ".join(f"{n} ('{t}')" for n, t in marks),
                evidence={"classifier": f"{CLASSIFIER_NAME}@{CLASSIFIER_VERSION}",
                          "rule": "instruction", "markers": [{"rule": n, "text": t} for n, t in marks]},
            )
    for g in find_groups(passages, params=params, dense=dense):
        core_text = ", ".join(g.core[:8])
        reason = (
            f"{g.distinct} passages repeat the question pattern '{g.pattern}' "
            f"(core terms: {core_text}; similarity {g.similarity:.2f}) each asserting an answer"
        )
        for mid in g.members:
            if wanted is not None and mid not in wanted:
                continue
            if mid in flags:
                continue
            flags[mid] = Flag(
                memory_id=mid,
                reason=reason,
                evidence={
                    "classifier": f"{CLASSIFIER_NAME}@{CLASSIFIER_VERSION}",
                    "group": list(g.members),
                    "core": list(g.core),
                    "core_weight": g.core_weight,
                    "distinct_passages": g.distinct,
                    "similarity": g.similarity,
                    "pattern": g.pattern,
                    "embedding_model": dense.model if dense is not None else None,
                },
            )
    return [flags[k] for k in sorted(flags)]
