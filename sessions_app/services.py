"""Writes to sessions and messages. Every load of a session goes through ``session_access``."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import structlog
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from navi_site.errors import BadRequest, Conflict, NotFound
from profiles_app.models import AgentProfile
from sessions_app.models import Message, Session

log = structlog.get_logger(__name__)

DEFAULT_PROFILE_ID = "secretary"


def session_access(*, user: Any, session_id: str | uuid.UUID) -> Session:
    """The user's session. Raises NotFound for a malformed id, an unknown id or another user's
    session alike, so that nobody learns whether somebody else's session exists."""
    try:
        sid = session_id if isinstance(session_id, uuid.UUID) else uuid.UUID(str(session_id))
    except ValueError:
        raise NotFound(f"Session {session_id!s:.60} not found.") from None
    session = Session.objects.select_related("profile").filter(pk=sid, owner_id=user.pk).first()
    if session is None:
        raise NotFound(f"Session {sid} not found.")
    return session


def profile_get(*, profile_id: str) -> AgentProfile:
    """An active profile. Raises BadRequest naming the available profiles."""
    profile = AgentProfile.objects.filter(pk=profile_id, is_active=True).first()
    if profile is None:
        available = ", ".join(AgentProfile.objects.filter(is_active=True).values_list("id", flat=True))
        raise BadRequest(f"Unknown profile {profile_id!r}. Available profiles: {available or 'none'}.")
    return profile


def session_create(*, owner: Any, profile_id: str | None = None, title: str = "") -> Session:
    profile: AgentProfile | None
    if profile_id:
        profile = profile_get(profile_id=profile_id)
    else:
        profile = (
            AgentProfile.objects.filter(pk=DEFAULT_PROFILE_ID, is_active=True).first()
            or AgentProfile.objects.filter(is_active=True).order_by("id").first()
        )
        if profile is None:
            raise BadRequest("No active profile exists: create one in the admin (/admin/agent/agentprofile/).")
    session = Session.objects.create(owner=owner, profile=profile, title=title.strip()[:200])
    log.info("session_created", session_id=str(session.id), profile_id=profile.id)
    return session


def session_update(*, session: Session, title: str | None = None, pinned: bool | None = None) -> Session:
    fields: list[str] = []
    if title is not None:
        title = title.strip()
        if len(title) > 200:
            raise BadRequest("The title is too long: use at most 200 characters.")
        session.title = title
        fields.append("title")
    if pinned is not None:
        session.pinned = pinned
        fields.append("pinned")
    if fields:
        session.save(update_fields=fields)
    return session


def session_files_dir(session_id: str | uuid.UUID) -> Path:
    """The session's own directory (uploads, tool working files)."""
    return Path(settings.SESSION_FILES_DIR) / str(session_id)


def session_delete(*, session: Session) -> None:
    """Delete the session, its messages and its files."""
    sid = session.id
    session.delete()
    directory = session_files_dir(sid)
    if directory.exists():
        shutil.rmtree(directory, ignore_errors=True)
    log.info("session_deleted", session_id=str(sid))


def message_append(
    *,
    session_id: str | uuid.UUID,
    role: str,
    content: str | None = None,
    buffer: str = Message.Buffer.BOTH,
    **fields: Any,
) -> Message:
    """Append one message: O(1) whatever the session's length; earlier rows are not touched.

    The seq comes from a per-session counter bumped in the same transaction, so two
    writers never get the same number.
    """
    now = timezone.now()
    with transaction.atomic():
        updated = Session.objects.filter(pk=session_id).update(next_seq=F("next_seq") + 1, last_active=now)
        if not updated:
            raise NotFound(f"Session {session_id} not found (it may have been deleted).")
        seq = Session.objects.filter(pk=session_id).values_list("next_seq", flat=True).get() - 1
        return Message.objects.create(
            session_id=session_id, seq=seq, role=role, content=content, buffer=buffer, created_at=now, **fields
        )


def session_regenerate_target(*, session: Session) -> Message:
    """The user message whose answer "Regenerate" replaces: the last one shown. Raises BadRequest."""
    message = (Message.objects.filter(session=session, role=Message.Role.USER,
                                      buffer__in=(Message.Buffer.BOTH, Message.Buffer.MESSAGES))
               .order_by("-seq").first())
    if message is None:
        raise BadRequest("There is no message to answer again: send one first.")
    return message


MAX_EDIT_CHARS = 100_000


def session_edit_target(*, session: Session, seq: int, content: str) -> tuple[Message, str]:
    """The user message at ``seq`` and its new text, checked before anything changes.

    Raises NotFound (no message of the user at that seq), Conflict (not the last message the user
    sent: only that one can be edited, as a later answer depends on every earlier message),
    BadRequest (empty or too long text)."""
    text = (content or "").replace("\x00", "")
    if not text.strip():
        raise BadRequest("The edited message is empty: type the new text in 'content'.")
    if len(text) > MAX_EDIT_CHARS:
        raise BadRequest(f"The edited message has {len(text)} characters: the limit is {MAX_EDIT_CHARS}.")
    message = (Message.objects.filter(session=session, seq=seq, role=Message.Role.USER,
                                      buffer__in=(Message.Buffer.BOTH, Message.Buffer.MESSAGES)).first())
    if message is None:
        raise NotFound(f"Message #{seq} is not one of your messages in this conversation.")
    last = session_regenerate_target(session=session)
    if last.seq != message.seq:
        raise Conflict(f"Only your last message (#{last.seq}) can be edited; message #{seq} has answers after it "
                       "that depend on it. Edit the last one, or start a new conversation.")
    return message, text


def branch_group(message: Message) -> int:
    """The exchange group a user message belongs to: the seq of the first version's user message."""
    group = (message.metadata or {}).get("branch_group")
    return int(group) if isinstance(group, int) else int(message.seq)


def session_regenerate(*, session_id: str | uuid.UUID, from_seq: int) -> int:
    """Archive the last exchange (the user message at ``from_seq`` and everything after it) so that
    it can be answered again (regenerate) or sent with new text (edit); returns how many rows were
    archived.

    The archived rows are the old branch: ``Message.Buffer.ARCHIVED`` (neither shown nor sent to the
    model, never deleted), each keeping its former buffer in ``metadata["archived_buffer"]`` so that
    the branch can be shown again (``selectors.branch_version``). The new version's user message
    carries ``metadata["branch_group"]`` (``branch_group`` of this one): the versions of one exchange
    are the user messages of a group, in seq order. A compression summary written after the message
    is kept: it stands for older turns. Call it while the session's turn lock is held (the run
    registry's ``before``), so no turn writes meanwhile. Raises Conflict when the message is no
    longer the last user message.
    """
    with transaction.atomic():
        newer = Message.objects.filter(session_id=session_id, role=Message.Role.USER, seq__gt=from_seq,
                                       buffer__in=(Message.Buffer.BOTH, Message.Buffer.MESSAGES))
        if newer.exists():
            raise Conflict("The conversation changed meanwhile: reload it and try again.")
        rows = list(Message.objects.select_for_update().filter(session_id=session_id, seq__gte=from_seq,
                                                               is_summary=False)
                    .exclude(buffer=Message.Buffer.ARCHIVED))
        for row in rows:
            row.metadata = {**(row.metadata or {}), "archived_buffer": row.buffer}
            row.buffer = Message.Buffer.ARCHIVED
        Message.objects.bulk_update(rows, ["metadata", "buffer"])
        # The agent's context cache is keyed on next_seq: moving it on makes the next turn re-read.
        Session.objects.filter(pk=session_id).update(next_seq=F("next_seq") + 1)
    log.info("session_regenerate", session_id=str(session_id), from_seq=from_seq, archived=len(rows))
    return len(rows)
