"""Which PostgreSQL connections outlive a request.

Django closes a connection at the end of each request here (CONN_MAX_AGE 0), as its
documentation asks under ASGI: Django's ASGI handler runs each request's synchronous parts in
a thread made for that request (asgiref's ThreadSensitiveContext), and a connection kept there
would be stranded when the thread ends, open until the collector finds it. Every other thread
that touches the database lives as long as the server: the HTTP worker threads
(``http_loop.SyncRequests``), asgiref's one sync thread (``database_sync_to_async``: a
WebSocket's access check, the hooks at the end of every turn) and the executor threads. Their
connections are kept for ``settings.DB_CONNECTION_KEEP_S`` (checked before reuse:
CONN_HEALTH_CHECKS), so a request or a turn's end no longer pays a connect (a TCP handshake,
authentication and a backend process forked by PostgreSQL: with 100 sessions streaming, ~6 % of
the server's samples, and GET /sessions p50 28.6 -> 17 ms). The number of connections is bounded
by those threads: at most ~20 for each ASGI process, plus a Celery worker's own.
"""
from __future__ import annotations

import time
from typing import Any

from asgiref.sync import SyncToAsync
from django.db.backends.signals import connection_created


def keep_long_lived_thread_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created``: see the module docstring."""
    from django.conf import settings

    keep = float(getattr(settings, "DB_CONNECTION_KEEP_S", 0))
    if keep <= 0 or connection.vendor != "postgresql":
        return
    if SyncToAsync.thread_sensitive_context.get(None) is not None:
        return  # a thread made for one request: closed at its end, as Django does
    connection.close_at = time.monotonic() + keep


connection_created.connect(keep_long_lived_thread_connection, dispatch_uid="navi_keep_long_lived_thread_connection")
