"""The model chosen for a session in the chat's model picker (``Session.model`` / ``model_backend``).

The loop uses it for that session's turns (``agent.loop._session_model``); empty means the profile's
model. A choice is checked against the server's own list, so a session never points at a model its
server does not have.
"""
from __future__ import annotations

from typing import Any

import structlog
from asgiref.sync import sync_to_async

from local_models.servers import BACKENDS, ModelNameError, clean_model_name, server_models
from navi_site.errors import BadRequest, NaviError
from sessions_app.models import Session

log = structlog.get_logger(__name__)


class ServerUnavailable(NaviError):
    status = 502


async def session_model_set(*, session: Session, model: str, backend: str) -> Session:
    """Choose ``model`` of ``backend`` for ``session`` ("" = back to the profile's model).

    Raises BadRequest for an unknown backend, a malformed name or a model the server does not have,
    ServerUnavailable when the server cannot be asked."""
    backend = (backend or "ollama").strip().lower()
    if backend not in BACKENDS:
        raise BadRequest(f"Unknown model server {backend!r}: use 'ollama' or 'openai'.")
    if not (model or "").strip():
        return await _save(session, "", "")
    try:
        name = clean_model_name(model)
    except ModelNameError as exc:
        raise BadRequest(str(exc)) from None
    listing = await server_models(backend)
    if not listing.reachable:
        raise ServerUnavailable(f"Cannot check the model: {listing.error}")
    match = listing.find(name)
    if match is None:
        server = "Ollama server" if backend == "ollama" else "OpenAI-compatible server"
        hint = " or pull it first (staff: 'Pull a model' in the model menu)" if backend == "ollama" else ""
        raise BadRequest(f"The {server} at {listing.url} has no model '{name}'. Choose one it lists{hint}.")
    return await _save(session, match, backend)


async def _save(session: Session, model: str, backend: str) -> Session:
    def write() -> Session:
        Session.objects.filter(pk=session.pk).update(model=model, model_backend=backend)
        session.model, session.model_backend = model, backend
        return session

    saved = await sync_to_async(write)()
    log.info("session_model_set", session_id=str(session.pk), model=model or "(profile)", backend=backend)
    return saved


def model_out(session: Session) -> dict[str, Any]:
    from sessions_app.selectors import session_model

    return {"session_id": str(session.pk), **session_model(session)}
