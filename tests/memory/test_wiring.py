"""The provider, the session-created hook, the beat sweep, the admin and the management commands."""
from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from memory_app.models import MemoryFact, MemorySummary, SessionMemoryState
from memory_app.provider import DjangoMemoryProvider
from tests.memory.conftest import FACTS_EDITOR, make_session, reply_json


@pytest.mark.django_db(transaction=True)
async def test_provider_returns_the_summary_or_none(user: Any, other_user: Any, thread_db: Any) -> None:
    from agent import ports

    assert isinstance(ports.memory(), DjangoMemoryProvider)
    provider = DjangoMemoryProvider()
    assert await provider.summary_for(user.pk) is None
    await MemorySummary.objects.acreate(user=user, text="  ")
    assert await provider.summary_for(user.pk) is None
    await MemorySummary.objects.filter(user=user).aupdate(text="Alice likes Neovim.\n")
    assert await provider.summary_for(user.pk) == "Alice likes Neovim."
    assert await provider.summary_for(other_user.pk) is None


@pytest.mark.django_db
def test_session_creation_enqueues_the_sweep_for_its_owner(
    api: Any, user: Any, enqueued: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post("/sessions", {}).status_code == 201
    assert enqueued == [("memory.process_stale_sessions", (user.pk,))]


@pytest.mark.django_db
def test_sweep_enqueues_idle_unprocessed_sessions(
    llm: Any, user: Any, other_user: Any, enqueued: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    from memory_app.tasks import process_stale_sessions

    idle = make_session(user, [("user", "hi")])
    make_session(user, [("user", "busy")], idle_minutes=1)
    make_session(user, [], idle_minutes=300)
    done = make_session(user, [("user", "old")])
    SessionMemoryState.objects.create(session=done, extracted_up_to_seq=1)
    theirs = make_session(other_user, [("user", "hi")])

    with django_capture_on_commit_callbacks(execute=True):
        assert process_stale_sessions.run(user.pk) == 1
    assert enqueued == [("memory.extract_session", (str(idle.id),))]
    enqueued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert process_stale_sessions.run() == 2
    assert {args[0] for _, args in enqueued} == {str(idle.id), str(theirs.id)}


def test_beat_schedule_runs_the_sweep_every_5_minutes() -> None:
    from navi_site.celery import app

    entry = app.conf.beat_schedule["memory-process-stale"]
    assert entry == {"task": "memory.process_stale_sessions", "schedule": 300.0}


@pytest.mark.django_db
def test_extract_memory_command(llm: Any, user: Any) -> None:
    session = make_session(user, [("user", "I use Neovim.")], idle_minutes=1)
    reply_json(llm, FACTS_EDITOR)
    llm.script(text="Alice uses Neovim.")
    out = StringIO()
    call_command("extract_memory", "--user", "alice", stdout=out)
    assert "No idle session" in out.getvalue()
    call_command("extract_memory", "--session", str(session.id), stdout=out)
    assert f"{session.id}: extracted — 2 new, 0 updated, 0 forgotten, up to message #1" in out.getvalue()
    assert MemorySummary.objects.get(user=user).text == "Alice uses Neovim."


@pytest.mark.django_db
def test_rebuild_memory_summary_command(llm: Any, user: Any) -> None:
    MemoryFact.objects.create(user=user, category="preferences", key="editor", value="Neovim")
    llm.script(text="Alice uses Neovim.")
    out = StringIO()
    call_command("rebuild_memory_summary", "--user", str(user.pk), stdout=out)
    assert "alice: 18 characters" in out.getvalue()
    assert MemorySummary.objects.get(user=user).text == "Alice uses Neovim."


@pytest.mark.django_db
def test_admin_shows_staff_only_their_own_facts(user: Any, other_user: Any) -> None:
    from django.apps import apps
    from django.contrib.auth.management import create_permissions
    from django.contrib.auth.models import Permission

    from tests.support.users import make_user

    create_permissions(apps.get_app_config("memory_app"), verbosity=0)  # the suite's flushes make none

    MemoryFact.objects.create(user=user, category="preferences", key="alices_editor", value="Neovim")
    theirs = MemoryFact.objects.create(user=other_user, category="preferences", key="mallorys_editor", value="Emacs")
    staff = make_user("sam")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_memoryfact", "change_memoryfact"]))
    MemoryFact.objects.create(user=staff, category="work", key="sams_job", value="nurse")

    admin_client = Client()
    admin_client.force_login(user)  # a superuser sees everyone's
    page = admin_client.get("/admin/memory_app/memoryfact/").content.decode()
    assert "alices_editor" in page and "mallorys_editor" in page and "sams_job" in page

    staff_client = Client()
    staff_client.force_login(staff)
    page = staff_client.get("/admin/memory_app/memoryfact/").content.decode()
    assert "sams_job" in page and "alices_editor" not in page and "mallorys_editor" not in page
    assert staff_client.get(f"/admin/memory_app/memoryfact/{theirs.pk}/change/").status_code in (302, 404)


@pytest.mark.django_db
def test_rebuild_is_skipped_when_facts_did_not_change(llm: Any, user: Any) -> None:
    from memory_app.summary import summary_rebuild

    MemoryFact.objects.create(user=user, category="preferences", key="editor", value="Neovim")
    llm.script(text="Alice uses Neovim.")
    summary_rebuild(user_id=user.pk)
    summary_rebuild(user_id=user.pk)
    assert len(llm.chat_requests) == 1
    llm.script(http_status=500, error="boom")
    assert summary_rebuild(user_id=user.pk, force=True) is None  # the old text stays
    assert MemorySummary.objects.get(user=user).text == "Alice uses Neovim."
