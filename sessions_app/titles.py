"""Session titles generated from the first turn (Celery task ``sessions.generate_title``)."""
from __future__ import annotations

import re

import structlog
from asgiref.sync import async_to_sync
from django.conf import settings

from sessions_app.models import Message, Session

log = structlog.get_logger(__name__)

MAX_TITLE = 60
PROMPT = (
    "Write a short title (at most 6 words) for this conversation. Answer with the title only: "
    "no quotes, no punctuation at the end, no preamble."
)


def clean_title(raw: str) -> str:
    line = next((ln for ln in raw.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^(title\s*:\s*)", "", line.strip(), flags=re.IGNORECASE)
    line = line.strip().strip("\"'`*#").strip().rstrip(".")
    if len(line) > MAX_TITLE:
        line = line[: MAX_TITLE - 1].rsplit(" ", 1)[0].rstrip(",;:-") + "…"
    return line[:MAX_TITLE]


def title_generate(*, session_id: str) -> str | None:
    """Give an untitled session a title from its first exchange. Idempotent: a session that
    has a title (set by the user or an earlier run of this task) is left alone."""
    from agent.llm.base import ChatMessage
    from agent.llm.registry import get_backend

    session = Session.objects.select_related("profile").filter(pk=session_id).first()
    if session is None or session.title:
        return None
    rows = list(
        Message.objects.filter(session=session, role__in=[Message.Role.USER, Message.Role.ASSISTANT])
        .exclude(content__isnull=True).exclude(content="").order_by("seq")[:4]
    )
    if not rows:
        return None
    exchange = "\n\n".join(f"{m.role}: {(m.content or '')[:1500]}" for m in rows)
    profile = session.profile
    backend = get_backend(profile.llm_backend)
    model = profile.model or settings.OLLAMA_DEFAULT_MODEL
    completion = async_to_sync(backend.complete)(
        [ChatMessage(role="system", content=PROMPT), ChatMessage(role="user", content=exchange)],
        model=model, think=False, temperature=0.3,
    )
    title = clean_title(completion.text)
    if not title:
        return None
    updated = Session.objects.filter(pk=session.pk, title="").update(title=title)
    log.info("session_title_generated", session_id=str(session.pk), saved=bool(updated))
    return title if updated else None
