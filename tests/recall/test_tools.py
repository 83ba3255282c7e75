"""schedule_recall / manage_recall as the model calls them (context vars set like the loop does)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agent import ctx
from recall_app.models import Recall
from recall_app.tools import ManageRecallTool, ScheduleRecallTool
from tests.recall.conftest import make_recall
from tools_app.base import ToolError

pytestmark = pytest.mark.django_db

GOOD = "Read /tmp/build.log with filesystem. If errors, read last 50 lines and report."


@pytest.fixture
def in_session(session, user) -> Iterator[Any]:
    saved = ctx.snapshot()
    ctx.current_session_id.set(str(session.id))
    ctx.current_user_id.set(user.pk)
    yield session
    ctx.restore(saved)


def call(tool: Any, **params: Any) -> Any:
    return async_to_sync(tool.execute)(params)


def test_descriptions_teach_the_rules() -> None:
    schema = ScheduleRecallTool().schema()["function"]
    assert schema["name"] == "schedule_recall"
    assert set(schema["parameters"]["properties"]) == {
        "call_type", "when", "timezone_offset", "interval_seconds", "internal_comment", "additional_context_message",
        "on_approval", "allowed_tools", "max_iterations", "max_seconds"}  # the run's own rules (issue 20)
    assert "BAD" in schema["description"] and "GOOD" in schema["description"]
    assert "manage_recall" in schema["description"]
    manage = ManageRecallTool().schema()["function"]
    assert manage["parameters"]["properties"]["action"]["enum"] == ["cancel", "skip", "list"]


def test_schedule_confirms_with_iso_and_relative_time(in_session) -> None:
    result = call(ScheduleRecallTool(), call_type="once", when="30m", additional_context_message=GOOD)
    recall = Recall.objects.get(session=in_session)
    assert result.success and result.output.startswith("Recall scheduled: once recall")
    assert recall.trigger_at.isoformat() in result.output and "(in 30 minutes)" in result.output
    # ... and what it will do, in the instruction's words (the line a user reads as an honest summary).
    assert result.output.endswith(f"Instruction: {' '.join(GOOD.split())}")


def test_an_instruction_navi_framed_confirms_as_the_users_words(in_session) -> None:
    # Shown "Instruction: When due: remind the user of what they asked, …", both models quoted the framing to the
    # user as the reminder (round 29): the model reads the user's words, the recall keeps the framing for its run.
    from recall_app.tools import ASKED_CLOSE, ASKED_OPEN

    framed = f"{ASKED_OPEN}ping me to stretch my legs{ASKED_CLOSE}"
    result = call(ScheduleRecallTool(), call_type="once", when="3m", additional_context_message=framed)
    assert result.success and result.output.endswith('(in 3 minutes), status pending. Reminder: "ping me to stretch my legs"')
    assert "When due" not in result.output
    assert Recall.objects.get(session=in_session).additional_context_message == framed


def test_schedule_recurring_mentions_the_interval(in_session) -> None:
    result = call(ScheduleRecallTool(), call_type="recurring", when="5m", interval_seconds=300,
                  additional_context_message=GOOD)
    assert "every 5 minutes" in result.output


def test_schedule_errors_go_back_to_the_model(in_session) -> None:
    call(ScheduleRecallTool(), call_type="once", when="1h", additional_context_message=GOOD)
    with pytest.raises(ToolError, match=r'manage_recall\(action="cancel"\)'):
        call(ScheduleRecallTool(), call_type="once", when="2h", additional_context_message=GOOD)
    with pytest.raises(ToolError, match="not in the future"):
        call(ScheduleRecallTool(), call_type="once", when="2001-01-01T00:00:00Z", additional_context_message=GOOD)


def test_cancel_skip_list(in_session) -> None:
    tool = ManageRecallTool()
    assert "no pending recall" in call(tool, action="cancel").output
    make_recall(in_session, status="fired")
    recall = make_recall(in_session, call_type="recurring", due_in=600, interval=600)
    skipped = call(tool, action="skip").output
    assert skipped.startswith("Skipped one occurrence") and "(in 20 minutes)" in skipped
    listing = call(tool, action="list").output
    assert str(recall.id) in listing and "fired" in listing and "every 10 minutes" in listing
    assert call(tool, action="cancel").output == f"Cancelled the recurring recall {recall.id}."


def test_session_id_may_name_another_own_session(in_session, user) -> None:
    from sessions_app.services import session_create

    mine = session_create(owner=user)
    make_recall(mine, due_in=600)
    assert "Cancelled" in call(ManageRecallTool(), action="cancel", session_id=str(mine.id)).output


def test_another_users_session_is_not_found(in_session, other_session) -> None:
    recall = make_recall(other_session, due_in=600)
    for action in ("cancel", "skip", "list"):
        with pytest.raises(ToolError, match="not found"):
            call(ManageRecallTool(), action=action, session_id=str(other_session.id))
    assert Recall.objects.get(pk=recall.id).status == "pending"


def test_bad_action(in_session) -> None:
    with pytest.raises(ToolError, match="cancel', 'skip' or 'list'"):
        call(ManageRecallTool(), action="delete")


def test_tools_are_registered_builtins() -> None:
    from tools_app.registry import get_registry

    names = {info.name for info in get_registry().all()}
    assert {"schedule_recall", "manage_recall"} <= names
