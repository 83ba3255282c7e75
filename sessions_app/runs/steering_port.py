"""``agent.ports.Steering`` over the process-wide run registry's inbox (``steering.py``)."""
from __future__ import annotations

from agent.ports import SteerNote
from sessions_app.runs.instance import get_run_registry


class RegistrySteering:
    """Takes the messages queued for a run, whichever process queued them."""

    async def take(self, session_id: str, run_id: str) -> list[SteerNote]:
        items = await get_run_registry().inbox.take(str(session_id), run_id)
        return [SteerNote(id=i.id, content=i.content) for i in items]
