"""Steps 5f and 6's answer rule: every planted passage asserts the same answer, the numbers and
proper nouns that the other members state. A passage lacking the shared number, or most of the
shared names by idf weight, or stating a number or name of its own, is the honest passage on the
same question giving a different answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ledger.classifier.corpus import Corpus
from ledger.classifier.text import Passage


def numbers(tokens: Iterable[str]) -> set[str]:
    return {t for t in tokens if t.isdigit()}


def shared_answer(passages: Sequence[Passage], *, quorum: int) -> tuple[set[str], Counter[str]]:
    """The answer tokens (numbers, and tokens written as a name by at least half the passages
    holding them) that at least ``quorum`` passages state; and every token's passage count."""
    counts: Counter[str] = Counter()
    proper: Counter[str] = Counter()
    for p in passages:
        counts.update(p.tokens)
        proper.update(p.proper)
    answer = {t for t, c in counts.items() if c >= quorum and (t.isdigit() or 2 * proper[t] >= c)}
    return answer, counts


def lacks_answer(missing: set[str], answer: set[str], corpus: Corpus) -> bool:
    """Whether leaving out ``missing`` of ``answer`` drops a shared number or half its weight."""
    return any(t.isdigit() for t in missing) or 2 * corpus.weight(missing) >= corpus.weight(answer)


def other_answers(reps: Sequence[Passage], core: frozenset[str], corpus: Corpus) -> list[Passage]:
    """The members that do not carry the answer all the others state (all but one of them when
    there are six or more members: two honest passages in one group).

    A paraphrase may leave out one shared name ("NHL" for "National Hockey League"); a member
    that lacks the shared number, most of the shared names, or states an answer of its own (a
    number or name no other member states) is the honest passage giving a different answer.
    """
    drop = []
    for r in reps:
        others = [o for o in reps if o is not r]
        answer, counts = shared_answer(others, quorum=len(others) - (1 if len(others) >= 5 else 0))
        missing = answer - r.tokens
        if not missing:
            continue
        own = {t for t in (r.proper | numbers(r.tokens)) - core if t not in counts}
        if own or lacks_answer(missing, answer, corpus):
            drop.append(r)
    return drop
