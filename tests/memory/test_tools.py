"""memory_search, memory_forget, memory_save: acting for agent.ctx.current_user_id only."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.ctx import current_session_id, current_user_id
from memory_app.models import MemoryFact, MemoryFactChange
from memory_app.tools import MemoryForgetTool, MemorySaveTool, MemorySearchTool
from tools_app.base import ToolError

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def as_user(user: Any, thread_db: Any) -> Iterator[Any]:
    token = current_user_id.set(user.pk)
    yield user
    current_user_id.reset(token)


@pytest.fixture
def theirs(other_user: Any) -> MemoryFact:
    return MemoryFact.objects.create(user=other_user, category="preferences", key="favourite_editor", value="Emacs")


async def test_save_then_search_then_forget(as_user: Any, theirs: MemoryFact, enqueued: list[Any]) -> None:
    from sessions_app.services import message_append, session_create

    session = await sync_to_async(session_create)(owner=as_user)
    stated = await sync_to_async(message_append)(session_id=session.id, role="user",
                                                 content="Remember that I edit with Neovim.")
    await sync_to_async(message_append)(session_id=session.id, role="assistant", content="Saving it.")
    sid = current_session_id.set(str(session.id))
    try:
        saved = await MemorySaveTool().execute(
            {"category": "preferences", "key": "Favourite Editor", "value": "Neovim"})
    finally:
        current_session_id.reset(sid)
    assert saved.success and saved.output.startswith("Saved: [preferences] favourite_editor: Neovim")
    fact = await MemoryFact.objects.aget(user=as_user)
    assert (fact.confidence, fact.source_session_id) == (1.0, session.id)
    assert fact.source_message_id == stated.pk  # the user's message of the turn, not Navi's answer
    assert enqueued == [("memory.rebuild_summary", (as_user.pk,))]

    again = await MemorySaveTool().execute({"category": "preferences", "key": "favourite_editor", "value": "Helix"})
    assert again.output.startswith("Updated:")
    change = await MemoryFactChange.objects.aget(fact=fact)
    assert (change.old_value, change.new_value, change.reason) == ("Neovim", "Helix", "user request")

    found = await MemorySearchTool().execute({"query": "editor"})
    assert found.success
    assert found.output.startswith(f"#{fact.pk} [preferences] favourite_editor: Helix (learned ")
    assert "Emacs" not in found.output

    gone = await MemoryForgetTool().execute({"id": fact.pk})
    assert gone.output == "Forgot [preferences] favourite_editor: Helix"
    assert not await MemoryFact.objects.filter(user=as_user).aexists()
    assert await MemoryFact.objects.filter(pk=theirs.pk).aexists()


async def test_forget_by_category_and_key(as_user: Any, enqueued: list[Any]) -> None:
    await MemoryFact.objects.acreate(user=as_user, category="environment", key="shell", value="fish")
    result = await MemoryForgetTool().execute({"category": "environment", "key": "Shell"})
    assert result.output == "Forgot [environment] shell: fish"


async def test_another_users_fact_cannot_be_forgotten(as_user: Any, theirs: MemoryFact, enqueued: list[Any]) -> None:
    with pytest.raises(ToolError, match="No such fact"):
        await MemoryForgetTool().execute({"id": theirs.pk})
    with pytest.raises(ToolError, match="No such fact"):
        await MemoryForgetTool().execute({"category": "preferences", "key": "favourite_editor"})
    assert await MemoryFact.objects.filter(pk=theirs.pk).aexists()


async def test_search_with_no_match_category_only_and_bad_args(as_user: Any) -> None:
    await MemoryFact.objects.acreate(user=as_user, category="people", key="daughter_name", value="Mia")
    assert (await MemorySearchTool().execute({"query": "pizza"})).output == "No remembered facts match 'pizza'."
    listed = await MemorySearchTool().execute({"query": "", "category": "people"})
    assert "daughter_name: Mia" in listed.output
    with pytest.raises(ToolError):
        await MemorySearchTool().execute({"query": " "})
    with pytest.raises(ToolError):
        await MemorySearchTool().execute({"query": "x", "limit": "many"})


async def test_save_rejects_unusable_input(as_user: Any) -> None:
    with pytest.raises(ToolError, match="key is empty"):
        await MemorySaveTool().execute({"category": "preferences", "key": "!!", "value": "x"})
    with pytest.raises(ToolError, match="too long"):
        await MemorySaveTool().execute({"category": "preferences", "key": "k", "value": "x" * 501})


@pytest.mark.parametrize("tool", [MemorySearchTool, MemoryForgetTool, MemorySaveTool])
async def test_tools_refuse_without_a_user(tool: Any, db: Any, thread_db: Any) -> None:
    with pytest.raises(ToolError, match="no user is signed in"):
        await tool().execute({"query": "x", "id": 1, "category": "other", "key": "k", "value": "v"})


def test_descriptions_carry_the_usage_rules() -> None:
    assert "Do not call at session start reflexively" in MemorySearchTool.description
    assert "Call memory_forget only when explicitly asked" in MemoryForgetTool.description
    assert "only when the user asks you to remember" in MemorySaveTool.description


def test_tools_are_registered_builtins(db: Any) -> None:
    from tools_app.registry import build_registry

    registry = build_registry()
    assert {"memory_search", "memory_forget", "memory_save"} <= set(registry.builtin_names())


async def test_saving_a_key_under_another_category_replaces_the_old_fact(as_user: Any, theirs: MemoryFact,
                                                                          enqueued: list[Any]) -> None:
    """A model files the same fact under different categories from one statement to the next: the user
    then has one server name, the newer, not two that contradict each other."""
    first = await MemorySaveTool().execute({"category": "personal", "key": "server_name", "value": "atlas"})
    second = await MemorySaveTool().execute({"category": "preferences", "key": "server_name", "value": "boreas"})
    assert first.output.startswith("Saved: [personal] server_name: atlas")
    assert second.output.startswith("Updated: [preferences] server_name: boreas")
    facts = [(f.category, f.key, f.value) async for f in MemoryFact.objects.filter(user=as_user)]
    assert facts == [("preferences", "server_name", "boreas")]
    change = await MemoryFactChange.objects.aget(fact__user=as_user)
    assert (change.old_value, change.new_value) == ("atlas", "boreas")
    # Another user's fact with the same key is not theirs to move.
    await MemorySaveTool().execute({"category": "work", "key": "favourite_editor", "value": "Vim"})
    assert (await MemoryFact.objects.aget(pk=theirs.pk)).category == "preferences"
    assert await MemoryFact.objects.filter(user=as_user, key="favourite_editor").acount() == 1


async def test_facts_about_other_people_and_ambiguous_keys_are_not_merged(as_user: Any, enqueued: list[Any]) -> None:
    await MemorySaveTool().execute({"category": "people", "key": "birthday", "value": "Mia: 3 May"})
    await MemorySaveTool().execute({"category": "personal", "key": "birthday", "value": "12 June"})
    # Two facts hold the key already (stored before keys named one fact): which is meant is unknown.
    await MemoryFact.objects.acreate(user=as_user, category="work", key="laptop", value="ThinkPad")
    await MemoryFact.objects.acreate(user=as_user, category="preferences", key="laptop", value="a light one")
    await MemorySaveTool().execute({"category": "environment", "key": "laptop", "value": "Debian"})
    facts = sorted([(f.category, f.key, f.value) async for f in MemoryFact.objects.filter(user=as_user)])
    assert facts == [("environment", "laptop", "Debian"), ("people", "birthday", "Mia: 3 May"),
                     ("personal", "birthday", "12 June"), ("preferences", "laptop", "a light one"),
                     ("work", "laptop", "ThinkPad")]


async def test_a_move_that_meets_a_concurrent_writer_gives_way_without_an_error(as_user: Any,
                                                                                enqueued: list[Any]) -> None:
    """Between reading the old fact and saving it under its new category, (user, category, key) is
    created: the move gives way and the value is saved, with no error for the model. (The row is
    created inside the same transaction here, so it is rolled back with the move.)"""
    from django.db.models.signals import pre_save

    await MemorySaveTool().execute({"category": "personal", "key": "server_name", "value": "atlas"})

    def concurrent_writer(sender: Any, instance: MemoryFact, **kwargs: Any) -> None:
        if instance.pk and instance.category == "preferences":
            pre_save.disconnect(concurrent_writer, sender=MemoryFact)
            MemoryFact.objects.create(user_id=instance.user_id, category="preferences", key="server_name",
                                      value="vega")

    pre_save.connect(concurrent_writer, sender=MemoryFact)
    try:
        saved = await MemorySaveTool().execute({"category": "preferences", "key": "server_name", "value": "boreas"})
    finally:
        pre_save.disconnect(concurrent_writer, sender=MemoryFact)
    assert saved.success and " [preferences] server_name: boreas" in saved.output
    assert (await MemoryFact.objects.aget(user=as_user, category="preferences")).value == "boreas"
    assert await MemoryFactChange.objects.filter(fact__user=as_user, old_value="atlas").acount() == 0


async def test_the_same_value_under_another_category_moves_the_fact_without_a_change(as_user: Any,
                                                                                     enqueued: list[Any]) -> None:
    await MemorySaveTool().execute({"category": "personal", "key": "server_name", "value": "atlas"})
    again = await MemorySaveTool().execute({"category": "environment", "key": "server_name", "value": "atlas"})
    assert again.output.startswith("Already remembered: [environment] server_name: atlas")
    assert [(f.category, f.value) async for f in MemoryFact.objects.filter(user=as_user)] == [("environment", "atlas")]
    assert not await MemoryFactChange.objects.filter(fact__user=as_user).aexists()
