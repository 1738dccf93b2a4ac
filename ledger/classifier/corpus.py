"""Step 2: the batch's statistics the rules share: document frequency, idf weights, the inverted
index, and which tokens are informative."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ledger.classifier.model import Params
from ledger.classifier.text import Facts, Passage, prepare


@dataclass
class Corpus:
    """The prepared passages (sorted by id) with df, idf and postings over them.

    A token is *informative* when ``2 <= df <= max_df`` (a cap that grows with the batch, so the
    inverted index never enumerates common words).
    """

    items: list[Passage]
    df: Counter[str]
    idf: dict[str, float]
    postings: dict[str, list[int]]
    index_of: dict[str, int]
    max_df: int

    @classmethod
    def build(cls, passages: Iterable[tuple[str, str]] | Mapping[str, str], *, params: Params,
              known: Mapping[str, Facts] | None = None) -> Corpus:
        items = prepare(passages, known=known)
        n = len(items)
        df: Counter[str] = Counter()
        for p in items:
            df.update(p.tokens)
        idf = {t: math.log(n / d) for t, d in df.items()}
        for p in items:
            p.weight = sum(idf[t] for t in p.tokens)
        postings: dict[str, list[int]] = defaultdict(list)
        for i, p in enumerate(items):
            for t in sorted(p.tokens):
                postings[t].append(i)
        return cls(items=items, df=df, idf=idf, postings=postings,
                   index_of={p.memory_id: i for i, p in enumerate(items)},
                   max_df=max(params.max_df_floor, int(n * params.max_df_share)))

    def informative(self, token: str) -> bool:
        return 2 <= self.df[token] <= self.max_df

    def weight(self, tokens: Iterable[str]) -> float:
        return sum(self.idf[t] for t in tokens)

    def support(self, core: frozenset[str]) -> list[int]:
        """Indices of every passage holding all the core's tokens."""
        ordered = sorted(core, key=lambda t: (self.df[t], t))
        result = set(self.postings[ordered[0]])
        for t in ordered[1:]:
            result.intersection_update(self.postings[t])
            if not result:
                break
        return sorted(result)

    def cosine(self, x: Passage, y: Passage) -> float:
        """idf-weighted cosine of two passages' token sets."""
        idf = self.idf
        nx = math.sqrt(sum(idf[t] ** 2 for t in x.tokens))
        ny = math.sqrt(sum(idf[t] ** 2 for t in y.tokens))
        return sum(idf[t] ** 2 for t in x.tokens & y.tokens) / (nx * ny) if nx and ny else 0.0

    def mean_pairwise(self, reps: list[Passage]) -> float:
        """Mean idf cosine over all pairs of ``reps`` (0 for fewer than two)."""
        pairs = [self.cosine(x, y) for i, x in enumerate(reps) for y in reps[i + 1 :]]
        return sum(pairs) / len(pairs) if pairs else 0.0
