"""WebSocket authentication and origin checking.

A browser authenticates with its session cookie; a script with ``?token=<api token>``.
With cookie authentication the Origin header must be this site (no cross-site
WebSocket hijacking); a token client may omit Origin. Unauthenticated connections
are accepted and closed with 4401 so the client sees why; a foreign Origin gets 4403.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.conf import settings


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


def origin_allowed(scope: dict[str, Any]) -> bool | None:
    """True/False for a present Origin; None when there is none."""
    origin = _header(scope, b"origin")
    if origin is None:
        return None
    parsed = urlparse(origin)
    if not parsed.scheme or not parsed.netloc:
        return False
    if origin.rstrip("/") in settings.CSRF_TRUSTED_ORIGINS:
        return True
    host = _header(scope, b"host")
    if host and parsed.netloc == host:  # same origin as the page that opened the socket
        return True
    hostname = parsed.hostname or ""
    return any(h == hostname or (h.startswith(".") and hostname.endswith(h)) for h in settings.ALLOWED_HOSTS if h != "*")


@database_sync_to_async
def _token_user(raw: str) -> Any:
    from navi_site.auth import user_for_token

    return user_for_token(raw)


class TokenOrCookieAuth:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        scope = dict(scope)
        token = parse_qs(scope.get("query_string", b"").decode("latin1")).get("token", [""])[0]
        origin_ok = origin_allowed(scope)
        scope["navi_auth_error"] = None
        if origin_ok is False:
            scope["navi_auth_error"] = 4403
        elif token:
            user = await _token_user(token)
            if user is None:
                scope["navi_auth_error"] = 4401
            else:
                scope["user"] = user
                scope["navi_auth_method"] = "token"
        else:
            scope["navi_auth_method"] = "cookie"
            if origin_ok is None:
                # A cookie alone is what a cross-site page would also send: require Origin.
                scope["navi_auth_error"] = 4403
        return await self.inner(scope, receive, send)


class ServerSend:
    """Puts the server's own ``send`` in the scope (``navi.server_send``).

    Channels' session middleware wraps ``send`` to save the session before an HTTP response
    starts; for a WebSocket frame the wrapper only reads the session's state and passes the
    message on. The session consumer sends its streamed events (thousands a second with many
    sessions streaming) straight to the server; everything else still goes through the stack."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        return await self.inner({**scope, "navi.server_send": send, "navi.server_send_now": _send_now(send)},
                                receive, send)


def _send_now(send: Any) -> Any:
    """A plain function doing what daphne's ``send`` does, or None under another server.

    Daphne's ``send`` is ``partial(server.handle_reply, protocol)``: a coroutine that never
    suspends (it checks the connection and hands the message to Twisted). The in-memory
    channel layer delivers a session's live events through this without a task switch
    (``NaviInMemoryChannelLayer.attach``)."""
    func = getattr(send, "func", None)
    server = getattr(func, "__self__", None)
    args = getattr(send, "args", ())
    if getattr(func, "__name__", "") != "handle_reply" or len(args) != 1 or not hasattr(server, "connections"):
        return None
    protocol = args[0]

    def send_now(message: dict[str, Any]) -> None:
        connection = server.connections.get(protocol)
        if connection is not None and not connection.get("disconnected"):
            protocol.handle_reply(message)

    return send_now


def WebSocketAuthStack(inner: Any) -> Any:  # noqa: N802 - mirrors channels' AuthMiddlewareStack
    return ServerSend(AuthMiddlewareStack(TokenOrCookieAuth(inner)))
