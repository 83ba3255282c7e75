"""Hooks the apps fill so the agent core never imports app models (STYLE.md "Layout")."""
from __future__ import annotations

from typing import Protocol


class MemoryProvider(Protocol):
    async def summary_for(self, user_id: int) -> str | None:
        """The narrative summary of what Navi remembers about the user, or None."""
        ...


_memory_provider: MemoryProvider | None = None


def set_memory_provider(provider: MemoryProvider | None) -> None:
    global _memory_provider
    _memory_provider = provider


def memory_provider() -> MemoryProvider | None:
    return _memory_provider
