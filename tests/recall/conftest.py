"""Recall test helpers: captured Celery sends and after-commit events, a scripted headless run."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone


class Sent:
    """What the code under test sent: fire tasks (recall_id, due) and events (session_id, event)."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, datetime]] = []
        self.events: list[tuple[str, dict[str, Any]]] = []

    def types(self) -> list[str]:
        return [e["type"] for _, e in self.events]

    def recall_updates(self) -> list[dict[str, Any]]:
        return [e for _, e in self.events if e["type"] == "recall_update"]


@pytest.fixture(autouse=True)
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Never talk to a real broker from these tests; record what would be sent instead.

    Events are recorded and still published (tests that subscribe to a group see them)."""
    from recall_app import enqueue, notify

    record = Sent()
    real_publish = notify._publish
    monkeypatch.setattr(enqueue, "fire_occurrence", lambda rid, due: record.tasks.append((rid, due)))

    def publish(session_id: str, event: dict[str, Any]) -> None:
        record.events.append((session_id, event))
        real_publish(session_id, event)

    monkeypatch.setattr(notify, "_publish", publish)
    return record


@pytest.fixture
def session(user: Any) -> Any:
    from sessions_app.services import session_create

    return session_create(owner=user)


@pytest.fixture
def other_session(other_user: Any) -> Any:
    from sessions_app.services import session_create

    return session_create(owner=other_user)


def make_recall(session: Any, *, call_type: str = "once", due_in: float = -1, interval: int | None = None,
                status: str = "pending", **fields: Any) -> Any:
    """A recall inserted directly (no task sent): ``due_in`` seconds from now (negative: overdue)."""
    from recall_app.models import Recall

    trigger = (timezone.now() + timedelta(seconds=due_in)).replace(microsecond=0)
    if call_type == "recurring" and interval is None:
        interval = 300
    return Recall.objects.create(session=session, call_type=call_type, trigger_at=trigger, interval_seconds=interval,
                                 status=status, additional_context_message="Read /tmp/build.log with filesystem.",
                                 **fields)


class FakeRun:
    """Replaces the headless seam: records calls, returns ``outcome`` or raises ``error``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.outcome = "success"
        self.error: BaseException | None = None
        self.during: Callable[[], Any] | None = None

    async def __call__(self, *, session: Any, recall: Any, instruction: str, on_end: Any = None) -> str:
        from agent import ctx

        self.calls.append({"session_id": str(session.id), "recall_id": str(recall.id), "instruction": instruction,
                           "user_id": ctx.current_user_id.get(), "role": ctx.current_user_role.get(),
                           "ctx_session": ctx.current_session_id.get()})
        if self.during is not None:
            import inspect

            from asgiref.sync import sync_to_async

            if inspect.iscoroutinefunction(self.during):
                await self.during()
            else:  # ORM work, like the agent's own writes
                await sync_to_async(self.during)()
        if self.error is not None:
            raise self.error
        return self.outcome


@pytest.fixture
def fake_run(monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    from recall_app import headless

    fake = FakeRun()
    monkeypatch.setattr(headless, "run_headless", fake)
    monkeypatch.setattr(headless, "session_is_busy", lambda session_id: False)
    return fake
