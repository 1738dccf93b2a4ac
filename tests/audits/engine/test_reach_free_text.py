"""The format-free reach with an agent that answers in sentences (a real chat model's way).

The simulated reader answers with a bare candidate, and the reach read that answer by matching
the whole output against the store's records. A chat model says "The answer is Norvik, as the
notes say." — no record contains that sentence, so no candidate was ever confirmed (SmolLM2 on
PoisonedRAG NQ: 0 of 70 candidates). These tests run the same scenario as test_reach with the
reader's answer wrapped in a sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

from audits.engine.agents import DONT_KNOW, AgentOutput, BuiltinReaderAgent
from audits.engine.audit import AuditParams, run_audit
from audits.engine.evaluate import ProbeRunner, incidents_from_probes
from audits.engine.reach import answer_units
from audits.engine.replay import Replayer
from audits.engine.retriever import RetrievedMemory, Retriever

from .test_reach import _PLACES, _WRONG, TopicEmbedder, plain_scenario


class SentenceReader(BuiltinReaderAgent):
    """The builtin reader's choice, said the way a chat model says it."""

    connector = "sentence-reader"

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        out = super().answer(query, retrieved, candidates).text
        if out == DONT_KNOW:
            return AgentOutput("I could not find that in the memories.")
        return AgentOutput(f"The answer is {out}, as the notes say.")


def _audit(sc, emb, **params):
    E = emb.encode([m.text for m in sc.memories])
    agent = SentenceReader({"connector": "sentence-reader"})
    ret = Retriever(sc.memories, E, None, embedder=emb)
    runner = ProbeRunner(sc, Replayer(agent, ret, sc.agent.top_k, {}), emb)
    before = runner.run(())
    res = run_audit(sc.memories, E, None, incidents_from_probes(before), agent, None,
                    AuditParams(top_k=sc.agent.top_k, **params), {}, embedder=emb)
    return res, before, runner.run(res.batch)


def test_a_sentence_answer_is_read_for_what_it_asserts():
    assert answer_units("The answer is Norvik, as the notes say.", "which harbour serves the Vellmoor fishermen?") \
        == ["Norvik"]
    assert answer_units("Norvik.", None) == ["Norvik"]
    assert answer_units("Answer: 1,024", None) == ["1,024"]
    # A memory's rank marker echoed from the prompt's list is not an answer.
    assert answer_units("The answer is: [1]", None) == []
    # What the question already says is not what the answer asserts.
    assert "Vellmoor" not in answer_units("Vellmoor fishermen land at Norvik.",
                                          "which harbour serves the Vellmoor fishermen?")


def test_reach_confirms_unobserved_poisons_when_the_agent_answers_in_sentences():
    sc = plain_scenario()
    res, before, after = _audit(sc, TopicEmbedder())
    assert sum(r["harmful"] for r in before) == 10
    assert set(res.batch) == sc.truth, (sorted(set(res.batch) - sc.truth), sorted(sc.truth - set(res.batch)))
    assert sum(r["harmful"] for r in after) == 0
    assert set(res.poison_suspects) == sc.truth
    unobserved = {m for m in sc.truth if int(m[1]) >= 4}
    assert unobserved <= set(res.signal_influence["reach"]["added"])


class PartlyFooledReader(SentenceReader):
    """Follows the planted answer for the first four regions only; for the others it answers
    what the honest records say, poisons or not."""

    connector = "partly-fooled-reader"

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        immune = set(_WRONG[4:])
        return super().answer(query, retrieved, [c for c in candidates or () if c not in immune])


def test_the_reach_never_removes_a_harm_its_replay_did_not_reproduce():
    sc = plain_scenario()
    E = TopicEmbedder().encode([m.text for m in sc.memories])
    agent = PartlyFooledReader({"connector": "partly-fooled-reader"})
    ret = Retriever(sc.memories, E, None, embedder=TopicEmbedder())
    runner = ProbeRunner(sc, Replayer(agent, ret, sc.agent.top_k, {}), TopicEmbedder())
    before = runner.run(())
    assert sum(r["harmful"] for r in before) == 4
    res = run_audit(sc.memories, E, None, incidents_from_probes(before), agent, None,
                    AuditParams(top_k=sc.agent.top_k), {}, embedder=TopicEmbedder())
    assert {m for m in res.batch if m.startswith("p") and int(m[1]) >= 4} == set()
    assert set(res.batch) == {m for m in sc.truth if int(m[1]) < 4}
    # Every reach row about an unreproduced poison stops at the replay with its group in place.
    rows = [r for r in res.signal_influence["reach"]["trace"] if r["memory"].startswith("p")]
    assert rows and {r["stop"] for r in rows} == {"answer with the group does not carry the claim"}


class ListEchoReader(SentenceReader):
    """For the unobserved regions, where it does not take the planted answer it echoes the
    memory list's first marker instead of answering (SmolLM2: "The answer is: [1] about …")."""

    connector = "list-echo-reader"

    def answer(self, query: str, retrieved: Sequence[RetrievedMemory],
               candidates: Sequence[str] | None = None) -> AgentOutput:
        out = super().answer(query, retrieved, candidates)
        honest = [p for p in _PLACES[4:] if p in out.text]
        return AgentOutput("The answer is: [1]") if honest else out


def test_a_group_whose_removal_leaves_an_echo_is_confirmed_against_the_stores_side():
    sc = plain_scenario()
    E = TopicEmbedder().encode([m.text for m in sc.memories])
    agent = ListEchoReader({"connector": "list-echo-reader"})
    ret = Retriever(sc.memories, E, None, embedder=TopicEmbedder())
    runner = ProbeRunner(sc, Replayer(agent, ret, sc.agent.top_k, {}), TopicEmbedder())
    before = runner.run(())
    assert sum(r["harmful"] for r in before) == 10
    res = run_audit(sc.memories, E, None, incidents_from_probes(before), agent, None,
                    AuditParams(top_k=sc.agent.top_k), {}, embedder=TopicEmbedder())
    assert set(res.batch) == sc.truth
    assert sum(r["harmful"] for r in runner.run(res.batch)) == 0
    rows = [r for r in res.signal_influence["reach"]["trace"] if r["stop"] == "confirmed"]
    assert rows and all(r["without"] == "The answer is: [1]" and not r["support"] for r in rows)
