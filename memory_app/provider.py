"""The agent's MemoryProvider (agent.ports): the summary injected into every run."""
from __future__ import annotations

from memory_app.models import MemorySummary


class DjangoMemoryProvider:
    async def summary_for(self, user_id: int) -> str | None:
        """The user's narrative summary, or None when there is none (fetched fresh on every call)."""
        text = await MemorySummary.objects.filter(user_id=user_id).values_list("text", flat=True).afirst()
        text = (text or "").strip()
        return text or None
