"""Step 6: take back planted passages the core missed or the checks set aside.

A paraphrase that drops one question word ("television series" for "TV series") falls out of
the core's support. A passage is re-admitted when it states the answer every member states (all
shared numbers; names, allowing the last word of a multi-word name alone), covers most of the
words most members share, is written to the same length, and is as close (idf cosine) to the
members as they are to each other.

6b (version 3, with embeddings): a paraphrase that words the question its own way ("inaugural"
for "first", "America" for "USA") is re-admitted when its embedding is as close to the members
as they are to each other (``dense_readmit_ratio`` of their mean pairwise cosine) and it is
written to the same length. Embeddings barely see numbers, so the numbers still decide: it must
not both leave out a shared number and state one of its own (the honest passage: "23 episodes"
where the members say 24), nor leave out most of the shared numbers' weight. Names: it may leave
out shared names only if it names nobody else instead (the honest passage names a different
answer; a name it only denies does not count), or if it is nearly as close as the members
(``dense_sure_ratio``: "United States" for "America").
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

from ledger.classifier.answer import lacks_answer, numbers, shared_answer
from ledger.classifier.corpus import Corpus
from ledger.classifier.model import Dense, Group, Params
from ledger.classifier.refutation import refuted
from ledger.classifier.text import Passage, chat_marked


@dataclass(frozen=True)
class _Profile:
    """What the group's members share, which a re-admitted passage must share too."""

    reps: list[Passage]
    counts: Counter[str]
    answer: set[str]
    numbers: set[str]
    soft: frozenset[str]
    soft_w: float
    mid_words: int
    cohesion: float
    dense_cohesion: float
    refuted: frozenset[str]
    chat: bool


def readmit(group: Group, corpus: Corpus, *, params: Params, dense: Dense | None = None) -> Group:
    """The group with the passages steps 6 and 6b take back added to its members."""
    prof = _profile(group, corpus, params=params, dense=dense)
    core = frozenset(group.core)
    hits: Counter[int] = Counter()
    if prof.answer:
        for t in sorted(prof.soft):
            if corpus.informative(t):
                hits.update(corpus.postings[t])
    near: set[int] = set()
    if dense is not None:
        for r in prof.reps:
            near.update(corpus.index_of[b] for b, c in dense.neighbours(r.memory_id)
                        if c >= params.dense_readmit and b in corpus.index_of)
    members = set(group.members)
    extra = []
    for b in sorted(set(hits) | near):
        cand = corpus.items[b]
        if cand.memory_id in members:
            continue
        if not prof.mid_words / params.length_spread <= cand.words <= prof.mid_words * params.length_spread:
            continue
        if chat_marked(cand.text) and not prof.chat:
            continue  # a chat turn about the same topic is not one more restatement of a claim (3.7)
        if dense is not None and (refuted(cand.text, core) - prof.refuted) & prof.answer:
            continue  # it denies the answer the members state
        if b in near and _close_in_meaning(cand, prof, corpus, params=params, dense=dense):
            extra.append(cand.memory_id)
        elif hits[b] >= params.min_shared and _close_in_words(cand, prof, corpus, params=params):
            extra.append(cand.memory_id)
    if not extra:
        return group
    return dataclasses.replace(group, members=tuple(sorted(members.union(extra))))


def _profile(group: Group, corpus: Corpus, *, params: Params, dense: Dense | None) -> _Profile:
    reps = [corpus.items[corpus.index_of[m]] for m in group.members]
    n = len(reps)
    answer, counts = shared_answer(reps, quorum=n)
    need = math.ceil(params.soft_core_quorum * n)
    soft = frozenset(t for t, c in counts.items() if c >= need)
    dense_cohesion = 0.0
    core = frozenset(group.core)
    if dense is not None:
        dense_pairs = [dense.cosine(x.memory_id, y.memory_id) for i, x in enumerate(reps) for y in reps[i + 1 :]]
        dense_cohesion = sum(dense_pairs) / len(dense_pairs) if dense_pairs else 0.0
    return _Profile(
        reps=reps, counts=counts, answer=answer, numbers=numbers(answer), soft=soft,
        soft_w=corpus.weight(soft), mid_words=sorted(r.words for r in reps)[n // 2],
        cohesion=corpus.mean_pairwise(reps), dense_cohesion=dense_cohesion,
        refuted=frozenset().union(*(refuted(r.text, core) for r in reps)) if dense else frozenset(),
        chat=2 * sum(1 for r in reps if chat_marked(r.text)) > n,
    )


def _own_numbers(cand: Passage, prof: _Profile) -> set[str]:
    return {t for t in cand.tokens if t.isdigit() and t not in prof.counts}


def _close_in_meaning(cand: Passage, prof: _Profile, corpus: Corpus, *, params: Params, dense: Dense) -> bool:
    """6b: as close in meaning as the members, and the numbers and names do not disagree."""
    close = sum(dense.cosine(cand.memory_id, r.memory_id) for r in prof.reps) / len(prof.reps)
    missing = prof.answer - cand.tokens
    missing_numbers = missing & prof.numbers
    own_names = {t for t in cand.proper if t not in prof.counts} - refuted(cand.text, cand.proper)
    names_kept = not (missing - prof.numbers) or not own_names
    # Leaving most of the shared numbers out is another answer only when something else is named
    # instead (3.6): a paraphrase that drops the supporting years and names nobody else
    # ("making Glanville the younger of the two") still states the members' answer.
    numbers_kept = (not missing_numbers or 2 * corpus.weight(missing_numbers) < corpus.weight(prof.numbers)
                    or not own_names)
    return (close >= params.dense_readmit_ratio * prof.dense_cohesion
            and not (missing_numbers and _own_numbers(cand, prof))
            and numbers_kept
            and (names_kept or close >= params.dense_sure_ratio * prof.dense_cohesion))


def _close_in_words(cand: Passage, prof: _Profile, corpus: Corpus, *, params: Params) -> bool:
    """6: states the shared answer and no number of its own, covers the soft core, and is as
    close (idf cosine) to the members as they are to each other."""
    missing = prof.answer - cand.tokens
    if _own_numbers(cand, prof) or lacks_answer(missing, prof.answer, corpus):
        return False
    if corpus.weight(cand.tokens & prof.soft) < params.readmit_cover * prof.soft_w:
        return False
    mean = sum(corpus.cosine(cand, r) for r in prof.reps) / len(prof.reps)
    return mean >= params.readmit_ratio * prof.cohesion
