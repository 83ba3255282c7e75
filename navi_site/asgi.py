"""ASGI entry point: HTTP (Django, static files served in-process) and WebSocket (Channels)."""
from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from navi_site import db_connections  # noqa: E402,F401 - which PostgreSQL connections are kept
from navi_site.http_loop import HttpLoop, SyncRequests  # noqa: E402
from navi_site.ws_auth import WebSocketAuthStack  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # No separate web server is needed in embedded mode: static files come from here.
        # HTTP on its own event loop: REST stays quick while the server's loop streams (http_loop.py).
        "http": HttpLoop(ASGIStaticFilesHandler(django_asgi_app), SyncRequests()),
        "websocket": WebSocketAuthStack(URLRouter(websocket_urlpatterns)),
    }
)
