"""Steps 3-4 and 4b: seed candidate cores from word and embedding neighbourhoods, grow them, and
judge each distinct core once (step 5, ``judge``), re-admitting missed paraphrases (step 6)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ledger.classifier.corpus import Corpus
from ledger.classifier.judge import TOO_FEW, judge
from ledger.classifier.model import DEFAULT_PARAMS, Dense, Group, Params
from ledger.classifier.readmit import readmit
from ledger.classifier.text import Facts


def find_groups(
    passages: Iterable[tuple[str, str]] | Mapping[str, str],
    *,
    params: Params = DEFAULT_PARAMS,
    keep_all: bool = False,
    dense: Dense | None = None,
    known: Mapping[str, Facts] | None = None,
) -> list[Group]:
    """Steps 1-6 of the package docstring. ``keep_all`` also returns groups judged benign.

    With ``dense`` (version 3) groups are also seeded from embedding neighbourhoods and
    paraphrases are re-admitted by embedding similarity (steps 4b and 6b). ``known``: the
    passages' :func:`ledger.classifier.text.passage_facts` already computed, by id."""
    corpus = Corpus.build(passages, params=params, known=known)
    if not corpus.items:
        return []
    search = _Search(corpus=corpus, params=params, dense=dense, keep_all=keep_all)
    for core in lexical_cores(corpus, params=params):
        search.consider(core)
    if dense is not None:
        for core in dense_cores(corpus, params=params, dense=dense):
            search.consider(core)
    return sorted(search.groups, key=lambda g: (g.members, g.core))


@dataclass
class _Search:
    corpus: Corpus
    params: Params
    dense: Dense | None
    keep_all: bool
    seen: set[frozenset[str]] = field(default_factory=set)
    groups: list[Group] = field(default_factory=list)

    def consider(self, core: frozenset[str]) -> None:
        """Judge ``core`` once; keep its group when suspicious (or always with ``keep_all``)."""
        if core in self.seen:
            return
        self.seen.add(core)
        corpus, params, dense = self.corpus, self.params, self.dense
        held = corpus.support(core)
        group = judge(corpus, held, core, params=params, dense=dense)
        if dense is not None and group.why_not == TOO_FEW and group.distinct == params.min_group - 1:
            # One short of a group: paraphrases close in meaning may complete it (step 6b); the
            # other rules are then judged on the passages that hold the core.
            grown = readmit(group, corpus, params=params, dense=dense)
            extra = len(grown.members) - len(group.members)
            if extra:
                group = judge(corpus, held, core, params=params, dense=dense, readmitted=extra)
                if group.suspicious:
                    group = dataclasses.replace(group, members=grown.members)
        if group.suspicious:
            group = readmit(group, corpus, params=params, dense=dense)
        if group.suspicious or self.keep_all:
            self.groups.append(group)


def lexical_cores(corpus: Corpus, *, params: Params) -> Iterator[frozenset[str]]:
    """Steps 3-4: for each seed, its candidate neighbours (passages sharing ``min_shared``
    informative tokens, from the inverted index: no all-pairs comparison), grown greedily by
    the neighbour that keeps the largest idf weight of the common token set; stop before the
    core drops below ``min_core_tokens`` or ``min_core_weight``, or past the group size at the
    knee."""
    items = corpus.items
    for a, seed in enumerate(items):
        shared: Counter[int] = Counter()
        for t in sorted(seed.tokens):
            if corpus.informative(t):
                shared.update(corpus.postings[t])
        shared.pop(a, None)
        cands = [b for b, c in shared.items() if c >= params.min_shared]
        if len(cands) < params.min_group - 1:
            continue
        cands.sort(key=lambda b: (-corpus.weight(seed.tokens & items[b].tokens), items[b].memory_id))
        core, grown = _grow(corpus, seed.tokens, cands[: params.max_neighbours], params=params)
        if grown >= params.min_group:
            yield frozenset(core)


def _grow(corpus: Corpus, core: frozenset[str], remaining: list[int], *,
          params: Params) -> tuple[frozenset[str], int]:
    grown = 1
    remaining = list(remaining)
    while remaining:
        scored = [(corpus.weight(core & corpus.items[b].tokens), -b, b) for b in remaining]
        w, _, b = max(scored)
        nxt = core & corpus.items[b].tokens
        if len(nxt) < params.min_core_tokens or w < params.min_core_weight:
            break
        # Past the minimum group size, stop at the knee: a member that costs the core much of
        # its weight (typically the answer) belongs to a wider topic, not the group.
        if grown >= params.min_group and w < params.knee * corpus.weight(core):
            break
        core = nxt
        grown += 1
        remaining.remove(b)
    return core, grown


def dense_cores(corpus: Corpus, *, params: Params, dense: Dense) -> Iterator[frozenset[str]]:
    """4b. Embedding neighbourhoods: paraphrases of one claim that share few rare words (the
    question's words are common in the corpus, or each passage words it differently) are still
    each other's nearest neighbours. The cores tried are the words shared by the seed and its
    closest neighbours, the closest first."""
    for seed in corpus.items:
        near = [b for b, c in dense.neighbours(seed.memory_id)[: params.dense_limit]
                if c >= params.dense_seed and b in corpus.index_of]
        if len(near) < params.min_group - 1:
            continue
        core = seed.tokens
        for size, b in enumerate(near, start=2):
            core = core & corpus.items[corpus.index_of[b]].tokens
            if len(core) < params.min_core_tokens or corpus.weight(core) < params.min_core_weight:
                break
            if size >= params.min_group:
                yield frozenset(core)
