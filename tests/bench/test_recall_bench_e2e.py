"""bench/recall_bench.py --end-to-end-memories at a tiny size: the store is built through the
product's services and verifies, recall is timed over the ANN graph, and a memory whose chains
do not verify is reported (so a broken build cannot pass as a measurement)."""

from __future__ import annotations

import pytest
from django.db import connection

pytest.importorskip("faiss")
pytest.importorskip("hnswlib")

from bench import recall_bench  # noqa: E402
from ledger.embedding_store import ann_forget, index_invalidate  # noqa: E402
from ledger.models import GenesisEntry, LogLeaf, Memory  # noqa: E402
from ledger.recall import verification_cache_clear  # noqa: E402
from tests.ledger.test_verification import disable_triggers  # noqa: E402

TEXTS = [f"Note {i}: the {w} committee met on day {i % 7} to discuss item {i * 13 % 97}."
         for i, w in enumerate(["budget", "safety", "hiring", "travel", "audit", "garden", "music", "library"] * 5)]
QUERIES = ["When did the budget committee meet?", "What did the safety committee discuss?",
           "Which item did the audit committee look at?", "Who met about the library?"]


@pytest.fixture
def e2e(organization, housekeeper, settings, tmp_path):
    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    settings.VAR_DIR = tmp_path / "var"
    settings.RECALL_ANN_MIN = 100  # the graph path, as at 1M
    index_invalidate()
    verification_cache_clear()
    ann_forget()
    store, build = recall_bench.e2e_build(organization, 300, TEXTS, base=len(TEXTS), work=tmp_path, log=lambda m: None)
    yield organization, store, build, tmp_path
    index_invalidate()
    verification_cache_clear()
    ann_forget()


def test_the_built_store_verifies_recall_over_its_graph_is_exact_and_a_tampered_memory_is_reported(e2e):
    organization, store, build, work = e2e
    assert Memory.objects.filter(store=store, chain_head__isnull=False).count() == 300
    assert GenesisEntry.objects.filter(memory__store=store).count() == 300
    assert build["quarantined"] == 2 and build["weights_moved"] == 6  # i % 200 == 7; i % 50 == 3
    assert build["prepare"]["verified"] == 300 and build["prepare"]["failed"] == 0
    assert build["prepare"]["ann_rows"] == 300

    out = recall_bench.e2e_time(store, QUERIES, 5, verify_sample=300, write_after=True)
    assert out["ann"] and out["ann_rows"] == 300 and out["unindexed"] == 0
    assert out["quarantined"] == 2 and out["weights_moved"] == 6
    assert out["receipts_stored"] == 3 * len(QUERIES)
    assert out["cold"]["verified"]["ahead"] == 5 * len(QUERIES)  # the worker's record covers every result
    assert out["cold_verify_in_request"]["verified"]["now"] > 0  # and without it, the request verifies
    assert out["recall_at_5_vs_exact_ties_counted"] == 1.0 and out["recall_at_5_vs_exact"] >= 0.9  # ties: rows 9, 17, 25
    assert out["same_results_every_pass"]
    check = out["verification_check"]
    assert check["memories"] == 300 and check["failed"] == 0
    after = out["after_a_write"]
    for write in ("transition", "label", "new_memory"):  # each brings the index forward, no full rebuild
        assert len(after[write]["recalls_ms"]) == 3 and after[write]["full_rebuilds"] == 0, write
    prepare = after["worker_prepare"]  # the worker's run after the writes re-reads only the moved memories
    assert prepare["before_the_writes"]["index"] == "built" and prepare["after_the_writes"]["index"] == "patched"
    assert prepare["after_the_writes"]["verified"] == 3 and prepare["after_the_writes"]["failed"] == 0

    again, report = recall_bench.e2e_build(organization, 300, TEXTS, base=len(TEXTS), work=work, reuse=True)
    assert again.pk == store.pk and report["reused"]
    assert LogLeaf.objects.filter(organization=organization).count() > build["prepare"]["log_position"] + 1 + 2

    # A memory whose chains no longer verify is reported (one store build for both halves: fast).
    victim = Memory.objects.filter(store=store).order_by("pk")[10]
    disable_triggers(Memory._meta.db_table)  # rolled back with the test transaction
    with connection.cursor() as cur:  # a raw edit of the text and its hash, past the write path
        cur.execute(f"UPDATE {Memory._meta.db_table} SET text = %s, content_sha256 = %s WHERE id = %s",
                    ["tampered", b"\x01" * 32, victim.pk])
    out = recall_bench.e2e_time(store, QUERIES[:1], 5, verify_sample=300)
    assert out["verification_check"]["failed"] == 1
    assert victim.pk in out["verification_check"]["failures"]


def test_the_sweep_scores_each_setting_against_exact_search_and_restores_the_products(e2e, monkeypatch):
    from ledger import ann, recall

    _, store, _, _ = e2e
    product = ann.NPROBE, recall.ANN_POOL_MIN
    seen = set()
    search = ann.AnnIndex.search

    def recorded(self, q, n, **kwargs):  # what each search of the step was asked for
        seen.add((ann.NPROBE, n))
        return search(self, q, n, **kwargs)

    monkeypatch.setattr(ann.AnnIndex, "search", recorded)
    sets = {"tune": QUERIES[:2], "report": QUERIES[2:]}
    out = recall_bench.e2e_sweep(store, sets, 5, nprobes=[1, 64], pools=[50, 300], tune=["tune"], target=0.98)
    assert (ann.NPROBE, recall.ANN_POOL_MIN) == product
    assert {(1, 50), (64, 50)} <= seen  # each setting reached the index (a pool of 300 is the whole store: brute force)
    assert [(r["nprobe"], r["pool"]) for r in out["settings"]] == [(1, 50), (1, 300), (64, 50), (64, 300)]
    by = {(r["nprobe"], r["pool"]): r["sets"] for r in out["settings"]}
    assert all(by[(64, 300)][s]["recall"] == 1.0 for s in sets)  # the whole store: the exact search itself
    assert all(0.0 <= by[key][s]["recall"] <= 1.0 for key in by for s in sets)
    passing = [{"nprobe": n, "pool": p} for (n, p), v in by.items() if v["tune"]["recall"] >= 0.98]
    assert out["chosen"] in passing
