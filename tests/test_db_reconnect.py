"""The database reads on a turn's way to the model survive a connection PostgreSQL dropped between
turns (a restart, pg_terminate_backend): each is read again on a new connection
(``navi_site.db_connections.reconnecting``) instead of failing the turn or, for memory and tool
switches, quietly leaving something out. The drop is simulated on this thread's connection: its
next query fails as psycopg reports an ended backend, so the tests run in both tiers (the live
PostgreSQL case is ``tests/faults/test_services.py``)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError, connection, transaction
from psycopg.errors import AdminShutdown

from profiles_app.models import AgentProfile
from profiles_app.source import DjangoProfileSource

pytestmark = pytest.mark.django_db(transaction=True)  # outside a transaction, as in a server's thread


@pytest.fixture
def dropped() -> Iterator[list[str]]:
    """This thread's connection was ended by the server: its next query fails (57P01, as PostgreSQL
    says after pg_terminate_backend); later ones, on the connection that replaces it, work. Yields
    the statements that failed."""
    failed: list[str] = []

    def ended_once(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not failed:
            failed.append(sql)
            try:
                raise AdminShutdown("terminating connection due to administrator command")
            except AdminShutdown as exc:
                raise OperationalError(str(exc)) from exc
        return execute(sql, params, many, context)

    with connection.execute_wrapper(ended_once):
        yield failed


@pytest.fixture
def profile() -> AgentProfile:
    return AgentProfile.objects.create(id="reconnect", name="Reconnect", system_prompt="Be brief.")


def test_a_profile_load_reads_again_on_a_new_connection(profile: AgentProfile, dropped: list[str]) -> None:
    loaded = DjangoProfileSource().load("reconnect")
    assert (loaded.id, loaded.system_prompt) == ("reconnect", "Be brief.")
    assert len(dropped) == 1  # it met the dropped connection, and was not failed by it


def test_the_active_profile_ids_read_again_on_a_new_connection(profile: AgentProfile, dropped: list[str]) -> None:
    assert "reconnect" in DjangoProfileSource().active_ids()
    assert len(dropped) == 1


def test_inside_a_transaction_the_drop_is_raised(profile: AgentProfile, dropped: list[str]) -> None:
    """What the outer transaction did was rolled back with the connection: it is not run again piecemeal."""
    with pytest.raises(OperationalError), transaction.atomic():
        DjangoProfileSource().load("reconnect")


def test_the_memory_summary_reads_again_on_a_new_connection(dropped: list[str]) -> None:
    from django.contrib.auth import get_user_model

    from memory_app.models import MemorySummary
    from memory_app.provider import DjangoMemoryProvider

    dropped.append("not yet")  # the writes that set the scene run first
    user = get_user_model().objects.create_user("reconnect", password="x")
    MemorySummary.objects.create(user=user, text="Alice edits with Neovim.", stale=False)
    dropped.clear()
    # async_to_sync: the provider's thread-sensitive read runs in this thread, on this connection.
    assert async_to_sync(DjangoMemoryProvider().summary_for)(user.pk) == "Alice edits with Neovim."
    assert len(dropped) == 1


def test_the_tool_switches_read_again_instead_of_failing_open(dropped: list[str]) -> None:
    """A switch an admin turned off stays off: the dropped connection is not read as "no switches"."""
    from tools_app.models import ToolConfig
    from tools_app.selectors import invalidate_tool_configs, is_enabled_globally

    dropped.append("not yet")
    ToolConfig.objects.create(name="terminal", enabled_globally=False)
    invalidate_tool_configs()
    dropped.clear()
    assert not is_enabled_globally("terminal")
    assert len(dropped) == 1
