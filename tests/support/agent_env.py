"""Fixtures for agent tests: a session on a test profile, with the fake model server wired in."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.loop import get_agent


@dataclass
class AgentEnv:
    session_id: str
    fake: Any
    user: Any

    async def run(self, text: str = "hello", **kw: Any) -> list[dict[str, Any]]:
        return [e.to_dict() async for e in get_agent().run_stream(self.session_id, text, **kw)]

    async def set_profile(self, **fields: Any) -> None:
        from profiles_app.models import AgentProfile

        await sync_to_async(AgentProfile.objects.filter(pk="tester").update)(**fields)

    def requests(self) -> list[dict[str, Any]]:
        return [r.json for r in self.fake.chat_requests]

    async def messages(self, buffer: str = "display") -> list[Any]:
        from sessions_app import selectors
        from sessions_app.models import Session

        def load() -> list[Any]:
            if buffer == "context":
                return list(selectors.context_messages(session_id=self.session_id))
            return list(selectors.display_messages(session=Session.objects.get(pk=self.session_id)))

        return await sync_to_async(load)()


def types(events: list[dict[str, Any]], collapse: bool = True) -> list[str]:
    out: list[str] = []
    for e in events:
        t = e["type"]
        if collapse and out and out[-1] == t and t in ("thinking_delta", "stream_delta"):
            continue
        out.append(t)
    return out


@pytest.fixture
def agent_env(transactional_db, fake_ollama, settings, tmp_path) -> AgentEnv:
    from agent.llm.registry import reset_backends
    from profiles_app.models import AgentProfile
    from sessions_app.services import session_create
    from tests.support.users import make_user
    from tools_app.registry import reset_registry

    settings.OLLAMA_HOST = fake_ollama.url
    settings.OLLAMA_DEFAULT_MODEL = "fake-model"
    settings.LLM_STREAM_POLL_INTERVAL = 0.1
    settings.TOOLS_DIR = tmp_path / "tools"
    settings.TOOLS_DIR.mkdir()
    settings.BUNDLED_TOOLS_DIR = None  # only the test's own tools
    reset_registry()
    reset_backends()  # capability caches must not leak between tests
    user = make_user("alice", staff=True)
    AgentProfile.objects.create(
        id="tester", name="Tester", system_prompt="You test things.", temperature=0.5, max_iterations=6,
        enabled_tools=["todo", "scratchpad", "spawn_agent", "switch_profile", "filesystem", "image_view", "reflect"],
        subagent_tools=["todo", "filesystem"], planning_enabled=False,
        iteration_budget_enabled=False, goal_anchoring_enabled=False, anti_stall_enabled=False,
    )
    session = session_create(owner=user, profile_id="tester")
    yield AgentEnv(session_id=str(session.id), fake=fake_ollama, user=user)
    reset_registry()


@pytest.fixture
def stop_after():
    """Set a stop event after a delay, from the test's loop; with ``once``, the delay starts only when
    ``once()`` holds (e.g. the model server has the request), so a slow machine does not stop the
    turn before it reached the stage under test."""
    def make(delay: float, *, once: Any = None) -> asyncio.Event:
        ev = asyncio.Event()
        loop = asyncio.get_running_loop()

        def fire() -> None:
            ev.fired_at = time.monotonic()  # type: ignore[attr-defined]
            ev.set()

        def arm() -> None:
            if once is None or once():
                loop.call_later(delay, fire)
            else:
                loop.call_later(0.01, arm)

        arm()
        return ev
    return make
