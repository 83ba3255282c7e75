"""Reads of sessions and messages (indexed queries only)."""
from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from sessions_app.models import Message, Session

DISPLAY = (Message.Buffer.BOTH, Message.Buffer.MESSAGES)
CONTEXT = (Message.Buffer.BOTH, Message.Buffer.CONTEXT)


def session_list(*, user: Any, q: str = "") -> QuerySet[Session]:
    """The user's sessions, pinned first, then by last activity (index session_owner_list)."""
    qs = Session.objects.filter(owner_id=user.pk).select_related("profile")
    if q:
        qs = qs.filter(title__icontains=q)
    return qs.order_by("-pinned", "-last_active")


def session_model(session: Session) -> dict[str, str]:
    """The model the session's turns use: the one chosen for it (the chat's model picker), else its
    profile's, else OLLAMA_DEFAULT_MODEL. ``model_source`` says which ("session", "profile", "default")."""
    from django.conf import settings

    if session.model:
        return {"model": session.model, "model_backend": session.model_backend or session.profile.llm_backend,
                "model_source": "session"}
    profile = session.profile
    if profile.model:
        return {"model": profile.model, "model_backend": profile.llm_backend or "ollama", "model_source": "profile"}
    return {"model": str(settings.OLLAMA_DEFAULT_MODEL), "model_backend": profile.llm_backend or "ollama",
            "model_source": "default"}


def display_messages(*, session: Session) -> QuerySet[Message]:
    """The display history, oldest first (index message_session_seq)."""
    return Message.objects.filter(session=session, buffer__in=DISPLAY).order_by("seq")


def context_messages(*, session_id: Any) -> QuerySet[Message]:
    """What the model sees: the compression summary (if any) first, then the rest in order."""
    return Message.objects.filter(session_id=session_id, buffer__in=CONTEXT).order_by("-is_summary", "seq")


def _versions(session_id: Any, groups: set[int]) -> dict[int, list[int]]:
    """The seqs of the user messages that begin each version of these exchange groups, oldest first."""
    if not groups:
        return {}
    rows = (Message.objects.filter(session_id=session_id, role=Message.Role.USER)
            .filter(Q(seq__in=groups) | Q(metadata__branch_group__in=list(groups)))
            .order_by("seq").values_list("seq", "metadata"))
    out: dict[int, list[int]] = {}
    for seq, meta in rows:
        group = (meta or {}).get("branch_group")
        out.setdefault(int(group) if isinstance(group, int) else int(seq), []).append(int(seq))
    return out


def branches_of(*, session_id: Any, messages: list[Message]) -> dict[int, dict[str, int]]:
    """``{seq: {"group", "index", "count"}}`` for the shown user messages that have other versions
    (an edited or regenerated exchange): what the "< 1/2 >" switcher needs. Index is 1-based."""
    archived = set(Message.objects.filter(session_id=session_id, role=Message.Role.USER,
                                          buffer=Message.Buffer.ARCHIVED).values_list("seq", flat=True)[:10_000])
    if not archived:
        return {}
    users = {m.seq: (m.metadata or {}).get("branch_group", m.seq) for m in messages if m.role == Message.Role.USER}
    versions = _versions(session_id, {int(g) for g in users.values() if isinstance(g, int)})
    out: dict[int, dict[str, int]] = {}
    for seq, group in users.items():
        seqs = versions.get(int(group), [])
        if len(seqs) > 1 and seq in seqs:
            out[seq] = {"group": int(group), "index": seqs.index(seq) + 1, "count": len(seqs)}
    return out


def branch_version(*, session: Session, group: int, index: int) -> dict[str, Any]:
    """Version ``index`` (1-based) of an exchange group: its display messages, from its user
    message to the end of that branch. Raises NotFound."""
    from navi_site.errors import NotFound

    seqs = _versions(session.pk, {group}).get(group, [])
    if len(seqs) < 2 or group not in seqs:
        raise NotFound(f"Message #{group} has no other versions in this conversation.")
    if not 1 <= index <= len(seqs):
        raise NotFound(f"Message #{group} has {len(seqs)} versions: ask for 1 to {len(seqs)}.")
    start = seqs[index - 1]
    qs = Message.objects.filter(session=session, seq__gte=start)
    if index < len(seqs):
        rows = [m for m in qs.filter(seq__lt=seqs[index], buffer=Message.Buffer.ARCHIVED).order_by("seq")
                if (m.metadata or {}).get("archived_buffer") in DISPLAY]
    else:
        rows = list(qs.filter(buffer__in=DISPLAY).order_by("seq"))
    messages = [message_to_dict(m) for m in rows]
    for m in messages:
        m["metadata"] = {k: v for k, v in m["metadata"].items() if k != "archived_buffer"}
    if messages:
        messages[0]["branch"] = {"group": group, "index": index, "count": len(seqs)}
    return {"group": group, "index": index, "count": len(seqs), "current": index == len(seqs), "messages": messages}


def message_to_dict(m: Message) -> dict[str, Any]:
    return {
        "id": m.pk,
        "seq": m.seq,
        "role": m.role,
        "content": m.content,
        "images": m.images,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id or None,
        "name": m.name or None,
        "thinking": m.thinking,
        "is_plan": m.is_plan,
        "is_summary": m.is_summary,
        "is_recall": m.is_recall,
        "is_compression": m.is_compression,
        "interrupted": m.interrupted,
        "metadata": m.metadata,
        "created_at": m.created_at.isoformat(),
    }
