"""Which LLMBackend a profile gets: ``get_backend(profile.llm_backend)``.

Built-in backends are built lazily from Django settings and cached per process,
keyed on the settings they read, so a test (or an admin) that changes
``OLLAMA_HOST`` gets a fresh backend. Tests can plug in their own backend with
``register_backend``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from django.conf import settings

from agent.llm.base import LLMBackend, LLMError

BackendFactory = Callable[[], LLMBackend]

DEFAULT_BACKEND = "ollama"

_lock = threading.Lock()
_registered: dict[str, BackendFactory] = {}
_cache: dict[tuple[str, Hashable], LLMBackend] = {}


def _ollama_key() -> Hashable:
    return (settings.OLLAMA_HOST, settings.OLLAMA_KEEP_ALIVE, settings.LLM_MAX_OUTPUT_TOKENS)


def _build_ollama() -> LLMBackend:
    from agent.llm.ollama import OllamaBackend

    return OllamaBackend(settings.OLLAMA_HOST, keep_alive=settings.OLLAMA_KEEP_ALIVE,
                         max_tokens=settings.LLM_MAX_OUTPUT_TOKENS)


def _openai_key() -> Hashable:
    return (settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, settings.LLM_MAX_OUTPUT_TOKENS)


def _build_openai() -> LLMBackend:
    from agent.llm.openai_compat import OpenAICompatBackend

    return OpenAICompatBackend(settings.OPENAI_BASE_URL, api_key=settings.OPENAI_API_KEY,
                               max_tokens=settings.LLM_MAX_OUTPUT_TOKENS)


_BUILTIN: dict[str, tuple[Callable[[], Hashable], BackendFactory]] = {
    "ollama": (_ollama_key, _build_ollama),
    "openai": (_openai_key, _build_openai),
}


def get_backend(name: str | None = DEFAULT_BACKEND) -> LLMBackend:
    """The backend for a profile's ``llm_backend`` ("" / None → "ollama").

    Raises LLMError for an unknown name.
    """
    key_name = (name or DEFAULT_BACKEND).strip().lower()
    with _lock:
        if key_name in _registered:
            cache_key: tuple[str, Hashable] = (key_name, id(_registered[key_name]))
            factory = _registered[key_name]
        elif key_name in _BUILTIN:
            settings_key, factory = _BUILTIN[key_name]
            cache_key = (key_name, settings_key())
        else:
            raise LLMError(f"unknown llm_backend {name!r}: use {_choices()}")
        backend = _cache.get(cache_key)
        if backend is None:
            backend = _cache[cache_key] = factory()
        return backend


def _choices() -> str:
    names = [f"'{n}'" for n in sorted({*_BUILTIN, *_registered})]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def register_backend(name: str, factory: BackendFactory) -> None:
    """Use ``factory()`` (called once, then cached) for ``name``; overrides a built-in."""
    with _lock:
        _registered[name.strip().lower()] = factory
        _drop(name.strip().lower())


def unregister_backend(name: str) -> None:
    with _lock:
        _registered.pop(name.strip().lower(), None)
        _drop(name.strip().lower())


def reset_backends() -> None:
    """Forget registered factories and cached backends (tests)."""
    with _lock:
        _registered.clear()
        _cache.clear()


def _drop(name: str) -> None:
    for key in [k for k in _cache if k[0] == name]:
        del _cache[key]
