"""Deterministic ingest-time classifier (MutMem section "Ingest-time classifier").

Flags passages that share a *suspicious query pattern*: the content of one question,
restated across several distinct passages, each asserting the same answer. That is the shape
of PoisonedRAG's targeted passages (Zou et al., 2024: for every target question the attacker
writes five passages that contain or paraphrase the question and assert the incorrect
answer, so that they are retrieved for the question and outvote the truth) and of MINJA's
repeated planted records.

Pure Python, standard library only, no Django (``tests/test_architecture.py`` holds it to
that; it lives outside ``ledger.core``, the crypto core, since issue 12). Deterministic: every loop runs over sorted
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
6b. Re-admission by meaning: see :mod:`ledger.classifier.readmit`.

Version 3.1 flags instruction injections one passage at a time (no group needed: one planted
instruction steers an agent that follows instructions); 3.2 widens that rule and adds a catch-all
(a passage that addresses the agent and persists, overrides, relaxes a control, claims authority
or sends data out): see :mod:`ledger.classifier.instruction`.

Version 3.3 adds a learned instruction detector (:mod:`ledger.classifier.learned`): a linear
model over the passage's embedding and speech-act cues, fitted offline on the tune sets, with a
bar calibrated on the store's own score distribution; it needs ``Dense.vector``.

Version 3.6-3.9 (issue 16, from the misses on PoisonedRAG HotpotQA and MS MARCO) changes only
re-admission (6b): a paraphrase that leaves the shared numbers out but names nobody else instead is
re-admitted ("making Glanville the younger of the two" without the birth years); only a denied
*answer* (a shared name or number) keeps a passage out, not a denied question word ("is not
located in Salt Lake County", "not communicable": how many planted passages state their claim);
and a chat turn (chat markers) is not re-admitted into a group of claims. The core-size bounds
tried in 3.6-3.7 (2..40 tokens) were taken back in 3.9: see docs/benchmarks.md section 1.

Version 3.10 (issue 16, "instruction attacks") adds a structural instruction scorer in
:mod:`ledger.classifier.instruction` (who the passage addresses and what it asks; pure rules, so
the ingest path without vectors has it) whose score also lowers the learned detector's bar.
Version 3.11 gives that scorer new kinds of evidence (a preference that rules for others, a
request put politely, a headed note, an order record in markup, secrets gathered, a command's
damage, concealment) and counts a word once (the 3.2 catch-all's "Ignore" is not also its own
override; a past tense inside what others are to be told is no report).
Version 3.13 changes no rule or weight: in a store too small for a spread of its own the learned
detector's bar borrows the spread of the clean background it was fitted against (3.12, a refit on
every spent set, was measured and not adopted).

Version 3.14 (2026-12-07) changes rule 5b only: members that all open with one question, verbatim
(PoisonedRAG's published black-box passages, `question + "." + text`), have that question as the
pattern's question part whatever its length; only the rest of the core must be question-sized
(``judge._shared_question``). Read on PoisonedRAG HotpotQA in that form; MS MARCO and NQ in it
held out (``bench/classifier_eval.py --loso``, docs/benchmarks.md section 1b).

Version 3.15 (2026-12-07) changes rule 5e only: that shared opening question is no part of the
members' length either, so ``max_words`` bounds the claim after it (HotpotQA's long questions put
13 of its 14 groups missed at 3.14 over the bound). Read on PoisonedRAG HotpotQA in that form;
MS MARCO and NQ in it held out.

Modules, one per rule family: ``text`` (step 1), ``corpus`` (step 2), ``grouping`` (steps 3-4,
4b), ``judge`` (step 5), ``answer`` (5f and 6: numbers and names), ``refutation`` (5j),
``readmit`` (6, 6b), ``instruction`` (3.1), ``learned`` (3.3), ``pipeline`` (7), ``model`` (datatypes).
"""

from ledger.classifier.grouping import find_groups
from ledger.classifier.instruction import instruction_markers
from ledger.classifier.model import (
    CLASSIFIER_NAME,
    CLASSIFIER_VERSION,
    DEFAULT_PARAMS,
    Dense,
    DenseVectors,
    Flag,
    Group,
    Known,
    Params,
)
from ledger.classifier.pipeline import ACTOR, classify
from ledger.classifier.text import tokenize

__all__ = [
    "ACTOR",
    "CLASSIFIER_NAME",
    "CLASSIFIER_VERSION",
    "DEFAULT_PARAMS",
    "Dense",
    "DenseVectors",
    "Flag",
    "Group",
    "Known",
    "Params",
    "classify",
    "find_groups",
    "instruction_markers",
    "tokenize",
]
