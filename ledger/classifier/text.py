"""Step 1: passages as content tokens (normalised, stop words out, numbers folded, light stems),
the proper nouns among them, and the text measures the rules share (Jaccard, chat markers, the
sentence holding a pattern)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
SENTENCE_END = re.compile(r"[.!?:;\"\n]")
# A query typed into a search box, as a text's first sentence: lower case, opening as a question
# does, no question mark, ended by a full stop ("who sings does he love me with reba.Linda Davis
# …": PoisonedRAG's black-box passages on NQ and MS MARCO). Group 1 is the query.
TYPED_QUERY = re.compile(r"^\s*((?:who|whom|whose|what|when|where|which|why|how|is|are|was|were|do|does|did|"
                         r"can|could|will|would|should|has|have|had)\b[^\n.!?]{6,300})\.")


@dataclass
class Passage:
    """One passage as the rules see it; ``weight`` (sum of its tokens' idf) is set per batch."""

    memory_id: str
    text: str
    tokens: frozenset[str]
    proper: frozenset[str]
    first_proper: str
    title: frozenset[str]
    weight: float = 0.0

    @property
    def words(self) -> int:
        return len(self.text.split())


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("\u2019", "'")


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
    """Content tokens in order, and the subset written as a proper noun."""
    toks, proper, _ = _tokenize(text)
    return toks, proper


def _tokenize(text: str) -> tuple[list[str], set[str], str]:
    """Content tokens in order, the subset written as a proper noun, and the first of those.

    A proper noun is a capitalised word that does not open a sentence, or any capitalised
    word of a short first line (a title).
    """
    text = normalise(text)
    tokens: list[str] = []
    proper: set[str] = set()
    first_line_end = text.find("\n")
    has_title = 0 < first_line_end < 120
    prev_end = 0
    first = ""
    for m in _WORD.finditer(text):
        raw = m.group(0)
        sentence_start = prev_end == 0 or bool(SENTENCE_END.search(text[prev_end : m.start()]))
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


Facts = tuple[frozenset[str], frozenset[str], str, frozenset[str]]


def passage_facts(text: str) -> Facts:
    """What step 1 makes of one text: (content tokens, proper nouns, the first proper noun, the
    title line's tokens). A function of the text alone, so a caller that meets a passage many
    times (the ledger's bounded pass, in every window) may compute it once and hand it back to
    :func:`prepare`."""
    toks, proper, first = _tokenize(text)
    head, sep, _ = text.partition("\n")
    title: frozenset[str] = frozenset()
    if sep and 0 < len(head) < 120 and not SENTENCE_END.search(head.rstrip(".")):
        title = frozenset(_tokenize(head)[0])
    return frozenset(toks), frozenset(proper), first, title


def prepare(passages: Iterable[tuple[str, str]] | Mapping[str, str], *,
            known: Mapping[str, Facts] | None = None) -> list[Passage]:
    """The passages sorted by id, tokenised; a repeated id is refused. ``known`` gives the
    :func:`passage_facts` of some of them by id (each must be that passage's text's)."""
    items = passages.items() if isinstance(passages, Mapping) else passages
    seen: dict[str, str] = {}
    for memory_id, text in items:
        if memory_id in seen:
            raise ValueError(f"duplicate passage id {memory_id!r}")
        seen[str(memory_id)] = text or ""
    known = known or {}
    out = []
    for memory_id in sorted(seen):
        text = seen[memory_id]
        facts = known.get(memory_id)
        tokens, proper, first, title = passage_facts(text) if facts is None else facts
        out.append(Passage(memory_id, text, tokens, proper, first, title))
    return out


def chatty(text: str) -> bool:
    """First/second person (outside quoted titles) or chat markers: conversation, not claims."""
    text = text.replace("\u2019", "'")
    return bool(_PERSONAL.search(_QUOTED.sub(" ", text)) or _CHATTY.search(text))


def chat_marked(text: str) -> bool:
    """Chat markers ("!", "thanks", "wow", "let's"): a turn of a conversation, whoever it addresses."""
    return bool(_CHATTY.search(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def pattern_sentence(text: str, core: frozenset[str]) -> str:
    """The sentence of ``text`` holding most core tokens: the restated question, for the reason."""
    best, best_hits = "", -1
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        toks, _ = tokenize(sentence)
        hits = len(core.intersection(toks))
        if hits > best_hits:
            best, best_hits = sentence.strip(), hits
    return best[:160]
