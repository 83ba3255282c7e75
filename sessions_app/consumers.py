"""WebSocket ws/sessions/{id}: a thin consumer.

It authenticates, checks the session belongs to the user, joins the session's
group and forwards events. Turns run in the run registry, never in this consumer.
"""
from __future__ import annotations

from typing import Any

import structlog
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from navi_site.errors import NotFound
from sessions_app.bus import group_name

log = structlog.get_logger(__name__)

CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_ORIGIN = 4403
CLOSE_NOT_FOUND = 4004


@database_sync_to_async
def _access(user: Any, session_id: str) -> Any:
    from sessions_app.services import session_access

    if user is None or not user.is_authenticated or not user.is_active:
        return None
    try:
        return session_access(user=user, session_id=session_id)
    except NotFound:
        return False


class SessionConsumer(AsyncJsonWebsocketConsumer):
    session_id: str = ""
    group: str = ""

    async def connect(self) -> None:
        # Close codes can only be sent on an accepted socket: accept, then close.
        error = self.scope.get("navi_auth_error")
        if not error:
            session = await _access(self.scope.get("user"), self.scope["url_route"]["kwargs"]["session_id"])
            error = CLOSE_UNAUTHORIZED if session is None else CLOSE_NOT_FOUND if session is False else None
        if error:
            await self.accept()
            await self.close(code=error)
            return
        self.session_id = str(session.id)
        self.group = group_name(session.id)
        # Join before accepting, so no event published after the handshake is missed.
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.on_joined()

    async def on_joined(self) -> None:
        """Hook for the transport: replay, session_sync."""

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def session_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])
