"""Step 5: judge the support of one core. Members that are not part of the pattern are set aside
first (5d-5j), then the figures of what is left decide whether it is a suspicious group (5a-5c,
5h), and the Group records why not when it is not."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ledger.classifier.answer import other_answers
from ledger.classifier.corpus import Corpus
from ledger.classifier.model import Dense, Group, Params
from ledger.classifier.refutation import minority_side
from ledger.classifier.text import TYPED_QUERY, Passage, chatty, jaccard, pattern_sentence, tokenize

TOO_FEW = "too few distinct passages"

Similarity = Callable[[Passage, Passage], float]


@dataclass
class _Selection:
    """The members still in the pattern and their distinct representatives (near-duplicate
    copies of one passage, one source ingested twice, count once)."""

    members: list[Passage]
    reps: list[Passage]
    near_duplicate: float

    @classmethod
    def of(cls, members: list[Passage], *, near_duplicate: float) -> _Selection:
        reps: list[Passage] = []
        for m in members:
            if not any(jaccard(m.tokens, r.tokens) >= near_duplicate for r in reps):
                reps.append(m)
        return cls(members=members, reps=reps, near_duplicate=near_duplicate)

    def keep(self, reps: list[Passage]) -> None:
        """Keep ``reps`` and the members that are one of them or a near-duplicate copy of one."""
        self.reps = reps
        self.members = [m for m in self.members
                        if any(jaccard(m.tokens, r.tokens) >= self.near_duplicate for r in reps)]


@dataclass(frozen=True)
class _Figures:
    cohesion: float
    dense_cohesion: float | None
    median_words: int
    own_share: float
    first_share: float
    personal_share: float
    min_share: float
    median_share: float
    named: bool
    similarity: float


def judge(corpus: Corpus, held: Sequence[int], core: frozenset[str], *, params: Params,
          dense: Dense | None = None, readmitted: int = 0) -> Group:
    """Judge the passages ``held`` (the core's support); ``readmitted`` passages found by
    re-admission (step 6b) count towards the group size."""
    core_w = corpus.weight(core)
    # Only passages for which the core is a real share of what they say take part: a long
    # article that merely mentions the same names is not a restatement of the pattern.
    sel = _Selection.of([corpus.items[i] for i in held
                         if corpus.items[i].weight and core_w / corpus.items[i].weight >= params.min_core_share],
                        near_duplicate=params.near_duplicate)
    _drop_off_soft_core(sel, corpus, params)
    _drop_off_length(sel, params)
    # Every planted passage asserts the same answer (answer.other_answers).
    while len(sel.reps) >= params.min_group:
        drop = other_answers(sel.reps, core, corpus)
        if not drop:
            break
        sel.keep([r for r in sel.reps if r not in drop])
    # A claim and its refutation share their words: members that name part of the core only
    # under a negation against members that state it are two sides of one question (version 3,
    # with embeddings, which cannot tell them apart). The minority side is set aside.
    split_sides = False
    if dense:
        minority, split_sides = minority_side(sel.reps, core)
        if minority:
            sel.keep([r for r in sel.reps if r not in minority])
    # Peel passages much less similar to the rest than the rest are to each other: the honest
    # passage on the same question shares its words, not the repeated assertion. With
    # embeddings (version 3) the same is then done by meaning.
    _peel(sel, corpus.cosine, ratio=params.outlier_ratio, params=params)
    if dense:
        _peel(sel, _dense_similarity(dense), ratio=params.dense_outlier_ratio, params=params)
    # Members that all open with one question, verbatim, are written to be retrieved for it
    # (PoisonedRAG's black-box passages: `question + "." + text`): that question is the
    # pattern's question part whatever its length, and only the rest of the core must be
    # question-sized (3.14); it is no part of the claim either, so the members' length is read
    # without it (3.15: HotpotQA's long questions made 13 of its 14 groups missed at 3.14
    # "long articles").
    head = _shared_question(sel.reps)
    asked = frozenset(tokenize(head)[0]) if head else frozenset()
    fig = _figures(sel, corpus, core, core_w=core_w, params=params, dense=dense,
                   opening=len(head.split()) if head else 0)
    sized = max(params.min_core_tokens, len(core - asked)) if asked and len(core) >= params.min_core_tokens \
        else len(core)
    why_not = _why_not(fig, distinct=len(sel.reps) + readmitted, core_size=sized,
                       support_size=len(held), split_sides=split_sides, params=params)
    return Group(
        members=tuple(m.memory_id for m in sel.members),
        core=tuple(sorted(core, key=lambda t: (-corpus.idf[t], t))),
        core_weight=round(core_w, 3),
        distinct=len(sel.reps),
        own_subject_share=round(fig.own_share, 3),
        min_core_share=round(fig.min_share, 3),
        similarity=round(fig.similarity, 3),
        cohesion=round(fig.cohesion, 3),
        first_subject_share=round(fig.first_share, 3),
        median_core_share=round(fig.median_share, 3),
        named_core=fig.named,
        pattern=pattern_sentence(sel.reps[0].text, core) if sel.reps else "",
        suspicious=not why_not,
        why_not=why_not,
    )


def _dense_similarity(dense: Dense) -> Similarity:
    def similarity(x: Passage, y: Passage) -> float:
        return dense.cosine(x.memory_id, y.memory_id)

    return similarity


def _pairwise(reps: list[Passage], sim: Similarity) -> list[float]:
    return [sim(x, y) for i, x in enumerate(reps) for y in reps[i + 1 :]]


def _drop_off_soft_core(sel: _Selection, corpus: Corpus, params: Params) -> None:
    """Soft core: tokens most members share (question words plus the asserted answer, even
    where one paraphrase drops a word). A member missing much of it (the honest passage on the
    same question, which lacks the planted answer) is not part of the pattern."""
    if len(sel.reps) < params.min_group:
        return
    counts: Counter[str] = Counter()
    for r in sel.reps:
        counts.update(r.tokens)
    need = math.ceil(params.soft_core_quorum * len(sel.reps))
    soft = frozenset(t for t, c in counts.items() if c >= need)
    soft_w = corpus.weight(soft)
    keep = [r for r in sel.reps if corpus.weight(r.tokens & soft) >= params.soft_core_cover * soft_w]
    if len(keep) < len(sel.reps):
        sel.keep(keep)


def _drop_off_length(sel: _Selection, params: Params) -> None:
    """Passages written to one recipe have similar lengths; an honest passage that happens to
    share the pattern (a long encyclopedic paragraph, a one-line caption) does not."""
    if not sel.reps:
        return
    mid = sorted(r.words for r in sel.reps)[len(sel.reps) // 2]
    sel.keep([r for r in sel.reps if mid / params.length_spread <= r.words <= mid * params.length_spread])


# A passage's opening question up to its first "?" (or a typed query: `text.TYPED_QUERY`).
_ASKED_FIRST = re.compile(r"^\s*([^\n?]{10,300}\?)")


def _shared_question(reps: Sequence[Passage]) -> str:
    """The question every member opens with, verbatim (case aside); "" when they do not all open
    with the same one."""
    heads = {(m.group(1).strip().casefold() if (m := _ASKED_FIRST.match(r.text) or TYPED_QUERY.match(r.text)) else None)
             for r in reps}
    if len(heads) != 1 or None in heads:
        return ""
    return next(iter(heads))


def _peel(sel: _Selection, sim: Similarity, *, ratio: float, params: Params) -> None:
    while len(sel.reps) > params.min_group:
        reps = sel.reps
        mean = {id(r): sum(sim(r, o) for o in reps if o is not r) / (len(reps) - 1) for r in reps}
        worst = min(reps, key=lambda r: (mean[id(r)], r.memory_id))
        rest = [r for r in reps if r is not worst]
        pairs = _pairwise(rest, sim)
        if mean[id(worst)] >= ratio * (sum(pairs) / len(pairs)):
            break
        sel.keep(rest)


def _figures(sel: _Selection, corpus: Corpus, core: frozenset[str], *, core_w: float, params: Params,
             dense: Dense | None, opening: int = 0) -> _Figures:
    """`opening`: the words of a question every member opens with (`_shared_question`), left out
    of their length."""
    reps, members = sel.reps, sel.members
    dense_pairs = _pairwise(reps, _dense_similarity(dense)) if dense else []
    own = 0
    for m in reps:
        others = set().union(*(r.proper for r in reps if r is not m)) if len(reps) > 1 else set()
        if {t for t in m.proper - core - others if corpus.df[t] <= params.own_subject_max_df}:
            own += 1
    shares = sorted((core_w / m.weight if m.weight else 0.0) for m in members) or [0.0]
    # A passage with a title line is about its title: members titled with different subjects
    # are a family of articles (relatives, films of a series), not one question restated.
    first_own = sum(1 for m in reps if m.title and not m.title <= core)
    core_sentences = [frozenset(tokenize(pattern_sentence(m.text, core))[0]) for m in reps]
    pair = [
        len(core & core_sentences[i] & core_sentences[j]) / max(1, len(core_sentences[i] | core_sentences[j]))
        for i in range(len(reps))
        for j in range(i + 1, len(reps))
    ]
    return _Figures(
        cohesion=corpus.mean_pairwise(reps),
        dense_cohesion=sum(dense_pairs) / len(dense_pairs) if dense_pairs else None,
        median_words=sorted(r.words - opening for r in reps)[len(reps) // 2] if reps else 0,
        own_share=own / len(reps) if reps else 1.0,
        first_share=first_own / len(reps) if reps else 1.0,
        # Pronouns inside quotes are titles ("I Can't Help Falling in Love with You"), not speakers.
        personal_share=sum(1 for m in reps if chatty(m.text)) / max(1, len(reps)),
        min_share=shares[0],
        median_share=shares[len(shares) // 2],
        named=any(t.isdigit() or any(t in m.proper for m in reps) for t in core),
        similarity=sum(pair) / len(pair) if pair else 0.0,
    )


def _why_not(fig: _Figures, *, distinct: int, core_size: int, support_size: int, split_sides: bool,
             params: Params) -> str:
    """The first rule the group fails, in order; "" when it is suspicious."""
    rules = (
        (distinct < params.min_group, TOO_FEW),
        (not params.min_core_tokens <= core_size <= params.max_core_tokens, "core is not question-sized"),
        (support_size > params.max_support, "pattern too common (boilerplate or template)"),
        (fig.median_words > params.max_words, "members are long articles, not short claims"),
        (fig.cohesion < params.min_cohesion and fig.dense_cohesion is None, "members are not close to each other"),
        (fig.dense_cohesion is not None and fig.dense_cohesion < params.dense_min_cohesion,
         "members are not close in meaning"),
        (split_sides, "members split between stating and refuting the pattern"),
        (fig.personal_share > params.max_personal_share,
         "members are first/second-person conversation, not claims about the world"),
        (fig.first_share > params.max_first_subject_share or fig.own_share > params.max_own_subject_share,
         "members name different subjects (template family)"),
    )
    return next((why for failed, why in rules if failed), "")
