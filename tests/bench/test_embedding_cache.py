"""bench/audit_bench.py's embedding cache: a torn file is no crash, a save is whole or absent."""

from __future__ import annotations

import numpy as np

import bench.audit_bench as ab
from ledger.embeddings import HashingEmbedder


def test_a_torn_cache_starts_empty_and_a_save_replaces_it_whole(tmp_path, monkeypatch, capsys):
    """Two family runs saving the cache at once left a torn zip ("Bad magic number for central
    directory"), and every later run died loading it. A cache that cannot be read is encoded
    again; a save writes a temporary file and renames it over the cache."""
    cache = tmp_path / "var" / "bench" / "embeddings.npz"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"PK\x03\x04 torn")
    monkeypatch.setattr(ab, "CACHE", cache)
    monkeypatch.setattr(ab, "Embedder", lambda: HashingEmbedder(dim=16))
    emb = ab.CachedEmbedder()
    assert emb.store == {} and "unreadable" in capsys.readouterr().err
    vecs = emb.encode(["one", "two"])
    emb.save()
    assert sorted(p.name for p in cache.parent.iterdir()) == ["embeddings.npz"]
    again = ab.CachedEmbedder()
    assert np.allclose(again.encode(["one", "two"]), vecs) and again.encoded == 0
