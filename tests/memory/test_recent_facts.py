"""A fact the user asked Navi to remember is known in the next session at once (issue 24): the
facts stored since the summary was built follow it in the prompt, within a bound, so nothing waits
on the model's background rebuild of the summary."""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from agent.context import FACTS_HEADER, LEFT_OUT_HEADER, RECENT_HEADER
from memory_app.models import MemoryFact, MemorySummary
from memory_app.provider import RECENT_FACTS_CHARS, DjangoMemoryProvider

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_fact_saved_in_one_session_is_in_the_next_sessions_prompt_before_any_rebuild(
        agent_env: Any, enqueued: list[Any]) -> None:
    from sessions_app.services import session_create

    await agent_env.set_profile(enabled_tools=["memory_save"])
    agent_env.fake.script(tool_calls=[{"name": "memory_save", "arguments": {
        "category": "environment", "key": "server_name", "value": "boreas"}}])
    agent_env.fake.script(text="I'll remember that your server is called boreas.")
    await agent_env.run("Please keep in mind that my server's name is boreas.")
    assert ("memory.rebuild_summary", (agent_env.user.pk,)) in enqueued  # queued, and never run here
    assert not await MemorySummary.objects.filter(user=agent_env.user).exclude(text="").aexists()

    later = await sync_to_async(session_create)(owner=agent_env.user, profile_id="tester")
    agent_env.session_id = str(later.id)
    agent_env.fake.script(text="Your server is called boreas.")
    events = await agent_env.run("What is my server called?")
    memory = agent_env.requests()[-1]["messages"][1]
    assert memory["role"] == "system"
    assert memory["content"] == f"## What I remember about the user\n\n{FACTS_HEADER}\n- server name: boreas"
    assert events[-1]["content"] == "Your server is called boreas."


async def test_a_fresh_summary_stands_alone_and_a_stale_one_gets_the_newer_facts(user: Any, thread_db: Any) -> None:
    provider = DjangoMemoryProvider()
    built = timezone.now() - timedelta(minutes=5)
    await MemoryFact.objects.acreate(user=user, key="editor", value="Neovim", updated_at=built - timedelta(minutes=1))
    await MemorySummary.objects.acreate(user=user, text="Alice edits with Neovim.", updated_at=built, stale=False)
    assert await provider.summary_for(user.pk) == "Alice edits with Neovim."

    await MemoryFact.objects.acreate(user=user, key="server_name", value="cygnus", updated_at=built + timedelta(minutes=1))
    await MemoryFact.objects.acreate(user=user, key="shell", value="fish", updated_at=built + timedelta(minutes=2))
    await MemorySummary.objects.filter(user=user).aupdate(stale=True)
    # Newest first; the fact the summary already reflects is not repeated.
    assert await provider.summary_for(user.pk) == (
        f"Alice edits with Neovim.\n\n{RECENT_HEADER}\n- shell: fish\n- server name: cygnus")


async def test_a_value_changed_since_the_summary_names_the_value_the_summary_still_states(
        user: Any, thread_db: Any) -> None:
    from memory_app.services import fact_upsert

    provider = DjangoMemoryProvider()
    await sync_to_async(fact_upsert)(user_id=user.pk, category="personal", key="server_name", value="atlas")
    built = timezone.now()
    await MemorySummary.objects.filter(user=user).aupdate(text="Alice's server is called atlas.", updated_at=built,
                                                          stale=False)
    await asyncio.sleep(0.01)
    await sync_to_async(fact_upsert)(user_id=user.pk, category="personal", key="server_name", value="boreas")
    await sync_to_async(fact_upsert)(user_id=user.pk, category="personal", key="server_name", value="cygnus")
    await sync_to_async(fact_upsert)(user_id=user.pk, category="personal", key="shell", value="fish")
    # The summary is made to say the new value (the 1.5B answered "atlas" with "boreas" listed after it).
    assert await provider.summary_for(user.pk) == (
        f"Alice's server is called cygnus.\n\n{RECENT_HEADER}\n- shell: fish\n- server name: cygnus")
    # A fact first saved after the summary, then changed, was never in it: nothing to restate.
    await sync_to_async(fact_upsert)(user_id=user.pk, category="personal", key="shell", value="zsh")
    assert (await provider.summary_for(user.pk)).endswith(f"{RECENT_HEADER}\n- shell: zsh\n- server name: cygnus")
    # Where the summary words the old value otherwise, the line names it, so the two are not read as two facts.
    await MemorySummary.objects.filter(user=user).aupdate(text="Alice's server has a Greek name.")
    assert (await provider.summary_for(user.pk)).endswith("- server name: cygnus (changed from atlas)")


async def test_a_fact_the_summary_left_out_is_listed_after_it(user: Any, thread_db: Any) -> None:
    """The 1.5B summed up "server name: boreas" as "operating system: Linux, name: Navi"."""

    built = timezone.now()
    await MemoryFact.objects.acreate(user=user, key="server_name", value="boreas", updated_at=built)
    await MemoryFact.objects.acreate(user=user, key="editor", value="Neovim", updated_at=built)
    await MemorySummary.objects.acreate(user=user, text="- operating system: Linux\n- editor: neovim",
                                        updated_at=built + timedelta(seconds=1), stale=False)
    assert await DjangoMemoryProvider().summary_for(user.pk) == (
        f"- operating system: Linux\n- editor: neovim\n\n{LEFT_OUT_HEADER}\n- server name: boreas")
    # One that holds none of them is none: a template of placeholders, as the 1.5B also wrote.
    await MemorySummary.objects.filter(user=user).aupdate(text="- server location: [specific location]\n"
                                                                "- operating system: [OS name]")
    assert await DjangoMemoryProvider().summary_for(user.pk) == (
        f"{FACTS_HEADER}\n- editor: Neovim\n- server name: boreas")
    # One that words most of them its own way is kept, with them after it (a summary sums up, in ~200 words).
    await MemoryFact.objects.acreate(user=user, key="shell", value="fish", updated_at=built)
    await MemorySummary.objects.filter(user=user).aupdate(text="Alice's server has a Greek wind's name; her shell "
                                                                "is a sea creature; she edits with Neovim.")
    assert (await DjangoMemoryProvider().summary_for(user.pk)).endswith(
        f"she edits with Neovim.\n\n{LEFT_OUT_HEADER}\n- shell: fish\n- server name: boreas")


async def test_an_expired_fact_is_not_listed_and_no_facts_means_no_memory(user: Any, thread_db: Any) -> None:
    provider = DjangoMemoryProvider()
    assert await provider.summary_for(user.pk) is None
    await MemoryFact.objects.acreate(user=user, key="trip", value="Rome", expires_at=timezone.now() - timedelta(days=1))
    await MemorySummary.objects.acreate(user=user, text="", stale=True)
    assert await provider.summary_for(user.pk) is None


async def test_many_or_long_facts_stay_within_the_bound_newest_first(user: Any, thread_db: Any) -> None:
    now = timezone.now()
    for i in range(60):
        await MemoryFact.objects.acreate(user=user, key=f"fact_{i:02d}", value="x" * 90,
                                         updated_at=now + timedelta(seconds=i))
    text = await DjangoMemoryProvider().summary_for(user.pk)
    assert text is not None
    lines = text.splitlines()[1:]
    assert len("\n".join(lines)) <= RECENT_FACTS_CHARS
    assert lines[0].startswith("- fact 59:") and lines[1].startswith("- fact 58:")
    await MemoryFact.objects.filter(user=user).adelete()
    await MemoryFact.objects.acreate(user=user, key="essay", value="y" * 5000)
    text = await DjangoMemoryProvider().summary_for(user.pk)
    assert text is not None and text.endswith("…") and len(text) <= len(FACTS_HEADER) + 1 + RECENT_FACTS_CHARS


async def test_a_rebuild_marks_the_summary_with_the_time_its_facts_were_read(
        user: Any, thread_db: Any, llm: Any, enqueued: list[Any]) -> None:
    """A fact saved while the model was writing the summary is listed after it."""
    from memory_app import services
    from memory_app.summary import summary_rebuild

    await MemoryFact.objects.acreate(user=user, key="editor", value="Neovim")
    llm.script(text="Alice edits with Neovim.", hang_before_first_chunk=0.5)

    async def save_meanwhile() -> None:
        for _ in range(500):  # until the model server has the summary request
            if llm.chat_requests:
                break
            await asyncio.sleep(0.02)
        await sync_to_async(services.fact_upsert)(user_id=user.pk, category="environment",
                                                  key="server_name", value="draco")

    rebuilt, _ = await asyncio.gather(sync_to_async(summary_rebuild, thread_sensitive=False)(user_id=user.pk),
                                      save_meanwhile())
    assert rebuilt is not None and rebuilt.stale
    assert await DjangoMemoryProvider().summary_for(user.pk) == (
        f"Alice edits with Neovim.\n\n{RECENT_HEADER}\n- server name: draco")
