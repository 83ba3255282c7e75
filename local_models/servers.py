"""The models of the configured model servers, for the chat's model picker.

- Ollama (``OLLAMA_HOST``): ``GET /api/tags`` lists the pulled models (name, size in bytes, details
  with ``parameter_size`` / ``quantization_level`` / ``family``); ``POST /api/show`` gives each one's
  ``capabilities`` (``completion``, ``tools``, ``thinking``, ``vision``, ``embedding``, …), cached per
  model digest (a re-pulled model has a new digest).
- OpenAI-compatible (``OPENAI_BASE_URL``): ``GET /models`` → ``{"data": [{"id": …}]}``; such servers
  report neither size nor capabilities, so those are ``None`` ("not reported"), not guessed.

A server that cannot be reached, or answers nonsense, is reported with a message a person can act on
(``ServerModels.error``); the other server's list is still shown.
"""
from __future__ import annotations

import asyncio
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import structlog
from django.conf import settings

from agent.llm.base import LLMError
from agent.llm.http_common import check_network_guard, error_text, llm_client, timeout, transport_error

log = structlog.get_logger(__name__)

BACKENDS = ("ollama", "openai")
LIST_TIMEOUT = timeout(3.0, 10.0)
SHOW_CONCURRENCY = 4
MAX_LIST_BODY = 4 * 1024 * 1024
MAX_MODELS = 500
CAPABILITIES = ("tools", "vision", "thinking")
MAX_NAME = 200
# An Ollama model name: [host/][namespace/]model[:tag] of letters, digits and ._-; no spaces, no scheme.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*){0,2}(?::[A-Za-z0-9][A-Za-z0-9._-]*)?$")

_show_cache: dict[tuple[str, str, str], tuple[str, ...]] = {}


class ModelNameError(ValueError):
    """A model name that no server could have; the message says what a name looks like."""


def clean_model_name(raw: object) -> str:
    """The name, stripped. Raises ModelNameError for an empty name, spaces, a URL or other characters."""
    name = str(raw if raw is not None else "").strip()
    if not name:
        raise ModelNameError("The model name is empty: give a name like 'qwen3:4b'.")
    if len(name) > MAX_NAME:
        raise ModelNameError(f"The model name is too long (at most {MAX_NAME} characters).")
    if "://" in name or name.lower().startswith(("http:", "https:", "www.")):
        raise ModelNameError(f"'{name[:80]}' is a URL, not a model name: give the model's name as Ollama lists it, "
                             "like 'qwen3:4b' or 'hf.co/user/repo:tag'.")
    if any(c.isspace() for c in name):
        raise ModelNameError(f"'{name[:80]}' contains spaces: a model name has none (like 'qwen3:4b').")
    if not _NAME.match(name):
        raise ModelNameError(f"'{name[:80]}' is not a model name: use letters, digits, '.', '-', '_', "
                             "an optional namespace with '/' and a tag after ':' (like 'qwen3:4b').")
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    backend: str
    name: str
    size: int | None = None  # bytes on the server's disk; None: not reported
    parameter_size: str = ""
    quantization: str = ""
    family: str = ""
    modified_at: str = ""
    capabilities: tuple[str, ...] | None = None  # of CAPABILITIES; None: the server does not report them

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["capabilities"] = list(self.capabilities) if self.capabilities is not None else None
        return data


@dataclass(slots=True, kw_only=True)
class ServerModels:
    backend: str
    url: str
    reachable: bool = True
    error: str = ""
    models: list[ModelInfo] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "url": self.url, "reachable": self.reachable, "error": self.error,
                "can_pull": self.backend == "ollama", "models": [m.to_dict() for m in self.models]}

    def find(self, name: str) -> str | None:
        """The listed name of model ``name`` (Ollama lists 'llama3:latest' for 'llama3'), or None."""
        names = {m.name for m in self.models}
        if name in names:
            return name
        if self.backend == "ollama" and ":" not in name and f"{name}:latest" in names:
            return f"{name}:latest"
        return None


def server_url(backend: str) -> str:
    return str(settings.OLLAMA_HOST if backend == "ollama" else settings.OPENAI_BASE_URL).rstrip("/")


def _setting(backend: str) -> str:
    return "OLLAMA_HOST" if backend == "ollama" else "OPENAI_BASE_URL"


def _server_name(backend: str) -> str:
    return "Ollama server" if backend == "ollama" else "OpenAI-compatible server"


async def _get_json(client: httpx.AsyncClient, method: str, url: str, backend: str, **kw: Any) -> Any:
    check_network_guard(url, setting=_setting(backend))
    try:
        response = await client.request(method, url, **kw)
        body = await response.aread()
    except httpx.HTTPError as exc:
        raise transport_error(exc, url=url, server=_server_name(backend), setting=_setting(backend)) from exc
    if len(body) > MAX_LIST_BODY:
        raise LLMError(f"the {_server_name(backend)} at {url} sent more than {MAX_LIST_BODY // 2**20} MB; refused")
    if response.status_code != 200:
        raise LLMError(f"the {_server_name(backend)} at {url} answered {response.status_code}: {error_text(body)}")
    try:
        return response.json()
    except ValueError:
        raise LLMError(f"the {_server_name(backend)} at {url} did not answer with JSON — "
                       f"is {_setting(backend)} the right address?") from None


def _caps(raw: Any) -> tuple[str, ...]:
    found = {str(c).lower() for c in raw} if isinstance(raw, list) else set()
    return tuple(c for c in CAPABILITIES if c in found)


async def _ollama(client: httpx.AsyncClient, base: str) -> list[ModelInfo]:
    data = await _get_json(client, "GET", f"{base}/api/tags", "ollama")
    rows = data.get("models") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise LLMError(f"the Ollama server at {base} answered /api/tags without a 'models' list — is OLLAMA_HOST right?")
    limit = asyncio.Semaphore(SHOW_CONCURRENCY)

    async def one(row: dict[str, Any]) -> ModelInfo | None:
        name = str(row.get("name") or row.get("model") or "")
        if not name:
            return None
        details = row.get("details") if isinstance(row.get("details"), dict) else {}
        key = (base, name, str(row.get("digest") or row.get("modified_at") or ""))
        caps = _show_cache.get(key)
        if caps is None:
            async with limit:
                try:
                    shown = await _get_json(client, "POST", f"{base}/api/show", "ollama", json={"model": name})
                    caps = _caps(shown.get("capabilities") if isinstance(shown, dict) else None)
                    _show_cache[key] = caps
                except LLMError as exc:
                    log.warning("model_show_failed", model=name, error=str(exc)[:200])
        size = row.get("size")
        return ModelInfo(backend="ollama", name=name, size=int(size) if isinstance(size, int | float) else None,
                         parameter_size=str(details.get("parameter_size") or ""),
                         quantization=str(details.get("quantization_level") or ""),
                         family=str(details.get("family") or ""), modified_at=str(row.get("modified_at") or ""),
                         capabilities=caps)

    found = await asyncio.gather(*(one(r) for r in rows[:MAX_MODELS] if isinstance(r, dict)))
    return sorted((m for m in found if m is not None), key=lambda m: m.name)


async def _openai(client: httpx.AsyncClient, base: str) -> list[ModelInfo]:
    headers = {"Authorization": f"Bearer {settings.OPENAI_API_KEY}"} if settings.OPENAI_API_KEY else {}
    data = await _get_json(client, "GET", f"{base}/models", "openai", headers=headers)
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise LLMError(f"the OpenAI-compatible server at {base} answered /models without a 'data' list — "
                       "is OPENAI_BASE_URL right (it usually ends in /v1)?")
    names = sorted({str(r["id"]) for r in rows[:MAX_MODELS] if isinstance(r, dict) and r.get("id")})
    return [ModelInfo(backend="openai", name=n) for n in names]


async def server_models(backend: str) -> ServerModels:
    """One server's models; never raises for the server's trouble (``error`` says what is wrong)."""
    base = server_url(backend)
    result = ServerModels(backend=backend, url=base)
    try:
        async with llm_client(LIST_TIMEOUT) as client:
            result.models = await (_ollama(client, base) if backend == "ollama" else _openai(client, base))
    except LLMError as exc:
        text = str(exc)
        result.reachable, result.error = False, text[:1].upper() + text[1:]
    return result


async def all_models() -> list[ServerModels]:
    return list(await asyncio.gather(*(server_models(b) for b in BACKENDS)))


def reset_cache() -> None:
    _show_cache.clear()
