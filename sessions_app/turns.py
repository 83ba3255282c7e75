"""Durable turns: the database side (DESIGN.md §3 "a crash mid-turn loses nothing already produced").

A turn that runs has a ``RunningTurn`` row, created with its user message and deleted when it
ends. Its partial answer (the text streamed since the last saved message) is written there at
most once a second by ``sessions_app.runs.drafts``; every message the agent saves is a row of
its own anyway. When a turn cannot end normally — its process was killed, the model failed —
the row is *closed*:

* each tool call without a result gets one saying the tool did not finish (it is never run
  again: the model decides what to do next);
* the partial answer becomes an assistant message (``interrupted`` for a crash; for a model
  error it carries the error in ``metadata["error"]``), so the history never shows two user
  messages in a row and nothing the user saw is lost;
* the turn's user message is marked ``interrupted`` (crash).

``turns_recover`` closes the rows of dead processes: at start-up (a row of this host whose
process is gone) and from beat (any row whose lease ran out); ``sessions_app.runs.recovery``
calls it and then frees the dead runs' locks and tells open clients (``session_sync``).
"""
from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from navi_site.db_connections import reconnecting
from sessions_app.models import Message, RunningTurn
from sessions_app.services import message_append

log = structlog.get_logger(__name__)

LEASE_S = 60.0  # a running turn's row is renewed every LEASE_REFRESH_S; unrenewed this long = dead
LEASE_REFRESH_S = 10.0
TOOL_INTERRUPTED = ("(no result: Navi stopped before this tool finished. It was not run again; "
                    "call it again if it is still needed.)")

_TOKEN = secrets.token_hex(4)


def process_owner() -> str:
    """``host:pid:token`` of this process (the token tells a reused pid from the old process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_TOKEN}"


def lease_end(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=LEASE_S)


@dataclass(frozen=True, slots=True, kw_only=True)
class Partial:
    run_id: str
    text: str
    thinking: str


def running_turn_open(*, session_id: str, run_id: str) -> None:
    """Create the turn's row (call inside the transaction that saves its user message)."""
    RunningTurn.objects.create(session_id=session_id, run_id=run_id, owner=process_owner(),
                               alive_until=lease_end())


def running_turn_clear_partial(*, run_id: str) -> None:
    """The streamed text became a saved message (call inside the transaction that saves it)."""
    RunningTurn.objects.filter(run_id=run_id).exclude(partial_text="", partial_thinking="").update(
        partial_text="", partial_thinking="", partial_at=timezone.now())


@reconnecting
def running_turns_save(*, partials: list[Partial], renew: list[str]) -> None:
    """Write partial answers and renew leases, in one transaction (``drafts``' flusher)."""
    now = timezone.now()
    with transaction.atomic():
        for p in partials:
            RunningTurn.objects.filter(run_id=p.run_id).update(
                partial_text=p.text, partial_thinking=p.thinking, partial_at=now)
        if renew:
            RunningTurn.objects.filter(run_id__in=renew).update(alive_until=lease_end(now))


@reconnecting
def running_turn_finish(*, run_id: str, error: str | None = None, partial: Partial | None = None) -> bool:
    """End a turn: normally (``error`` None: the row goes), or after a model error (the partial
    answer and the error are kept in the history). Returns whether the turn's row existed."""
    if error is None:
        return bool(RunningTurn.objects.filter(run_id=run_id).delete()[0])
    with transaction.atomic():
        row = RunningTurn.objects.select_for_update().filter(run_id=run_id).first()
        if row is None:
            return False
        text = partial.text if partial is not None else row.partial_text
        thinking = partial.thinking if partial is not None else row.partial_thinking
        _close(row, text=text, thinking=thinking, error=error, interrupted=False)
        row.delete()
    return True


@dataclass(frozen=True, slots=True)
class Recovered:
    session_id: str
    run_id: str
    started_at: datetime


def turns_recover(*, now: datetime | None = None, live_run_ids: set[str] | None = None) -> list[Recovered]:
    """Close the turns whose process died: lease ran out, or (this host) the process is gone.

    ``live_run_ids``: the turns running in this process (never touched). Returns the turns closed
    (``sessions_app.runs.recovery`` then frees their run locks and tells their clients)."""
    now = now or timezone.now()
    host = socket.gethostname()
    mine = process_owner()
    live = live_run_ids or set()
    candidates = RunningTurn.objects.filter(Q(alive_until__lt=now) | Q(owner__startswith=f"{host}:"))
    closed: list[Recovered] = []
    for row in candidates.order_by("started_at"):
        if row.run_id in live or (row.alive_until >= now and _owner_alive(row.owner, mine)):
            continue
        with transaction.atomic():
            locked = RunningTurn.objects.select_for_update().filter(pk=row.pk).first()
            if locked is None:
                continue
            _close(locked, text=locked.partial_text, thinking=locked.partial_thinking, error=None, interrupted=True)
            locked.delete()
        closed.append(Recovered(session_id=str(row.session_id), run_id=row.run_id, started_at=row.started_at))
        log.warning("turn_recovered_as_interrupted", session_id=str(row.session_id), run_id=row.run_id,
                    owner=row.owner, partial_chars=len(row.partial_text))
    return closed


def _owner_alive(owner: str, mine: str) -> bool:
    """Whether the process named ``owner`` may still be running (False only when sure it is not)."""
    if owner == mine:
        return True
    host, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another machine: only its lease can tell
    pid = int(pid_text)
    if pid == os.getpid():
        return False  # our pid, but not our token: the process before a restart
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but not ours to signal
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _close(row: RunningTurn, *, text: str, thinking: str, error: str | None, interrupted: bool) -> None:
    """Write the end of a turn that did not finish (see the module docstring). In a transaction."""
    rows = list(Message.objects.filter(session_id=row.session_id, run_id=row.run_id).order_by("seq")
                .only("role", "tool_calls", "tool_call_id"))
    answered = {r.tool_call_id for r in rows if r.role == Message.Role.TOOL and r.tool_call_id}
    for r in rows:
        if r.role != Message.Role.ASSISTANT:
            continue
        for call in r.tool_calls or ():
            call_id = str(call.get("id") or "")
            if call_id and call_id not in answered:
                answered.add(call_id)
                message_append(session_id=row.session_id, role=Message.Role.TOOL, content=TOOL_INTERRUPTED,
                               run_id=row.run_id, tool_call_id=call_id, name=str(call.get("name") or ""),
                               metadata={"interrupted": True, "success": False})
    metadata: dict[str, Any] = {}
    if interrupted:
        metadata["interrupted"] = True
    if error is not None:
        metadata["error"] = error
    text = text.strip()
    # A partial answer goes into the context too ("Continue" picks up from it); an empty one is only
    # the marker the history shows.
    message_append(session_id=row.session_id, role=Message.Role.ASSISTANT, content=text,
                   buffer=Message.Buffer.BOTH if text else Message.Buffer.MESSAGES, run_id=row.run_id,
                   thinking=thinking.strip() or None, interrupted=interrupted, metadata=metadata)
    if interrupted:
        Message.objects.filter(session_id=row.session_id, run_id=row.run_id, role=Message.Role.USER).update(
            interrupted=True)
