"""One call to the user's model for memory work: backend and model of a profile, explicit timeout, budgets."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings

from agent.llm.base import ChatMessage, LLMError

CHARS_PER_TOKEN = 3
DEFAULT_TIMEOUT = 180.0
MAX_ANSWER_TOKENS = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTarget:
    backend: str
    model: str


def target_for_profile(profile: Any | None) -> ModelTarget:
    """The backend/model of a profile (settings.OLLAMA_DEFAULT_MODEL when it names none)."""
    backend = getattr(profile, "llm_backend", "") or "ollama"
    model = getattr(profile, "model", "") or settings.OLLAMA_DEFAULT_MODEL
    return ModelTarget(backend=backend, model=model)


def input_budget_chars() -> int:
    """Characters of prompt that fit the context window, leaving room for the answer."""
    total = settings.OLLAMA_NUM_CTX * CHARS_PER_TOKEN
    answer = min(total // 4, MAX_ANSWER_TOKENS * CHARS_PER_TOKEN)
    return total - answer


def call_timeout() -> float:
    """Seconds one memory call may take (MEMORY_LLM_TIMEOUT, default 180)."""
    return float(getattr(settings, "MEMORY_LLM_TIMEOUT", DEFAULT_TIMEOUT))


async def _complete(
    target: ModelTarget, messages: Sequence[ChatMessage], *, format: dict[str, Any] | None, temperature: float
) -> str:
    from agent.llm.registry import get_backend

    backend = get_backend(target.backend)
    seconds = call_timeout()
    try:
        completion = await asyncio.wait_for(
            backend.complete(messages, model=target.model, format=format, think=False, temperature=temperature,
                             num_ctx=settings.OLLAMA_NUM_CTX),
            seconds,
        )
    except TimeoutError:
        raise LLMError(f"the model {target.model} did not answer within {seconds:g} s") from None
    return completion.text or ""


def complete(
    target: ModelTarget, messages: Sequence[ChatMessage], *, format: dict[str, Any] | None = None,
    temperature: float = 0.1,
) -> str:
    """The answer text (call from sync code: Celery tasks, commands). Raises LLMError."""
    return async_to_sync(_complete)(target, messages, format=format, temperature=temperature)
