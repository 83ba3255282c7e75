"""Which PostgreSQL connections outlive a request.

Django closes a connection at the end of each request here (CONN_MAX_AGE 0), as its
documentation asks under ASGI: Django's ASGI handler runs each request's synchronous parts in
a thread made for that request (asgiref's ThreadSensitiveContext, which also marks everything
started from the request, such as a turn started by ``POST /messages``), and a connection kept
there would be stranded when the thread ends. Two kinds of thread that close their connection
at request boundaries live as long as the server: the HTTP workers (``http_loop.SyncRequests``)
and asgiref's one sync thread (``database_sync_to_async`` outside a request: a WebSocket's access
check, the hooks at the end of a turn started over a WebSocket). Their connections are now kept:
closed at the first request boundary ``settings.DB_CONNECTION_KEEP_S`` after they were opened,
and health-checked before reuse (CONN_HEALTH_CHECKS), so a request no longer pays a connect (a
TCP handshake, authentication and a backend process forked by PostgreSQL: with 100 sessions
streaming, ~6 % of the server's samples, and GET /sessions p50 ~18 -> ~14 ms). That is at most
``SyncRequests.workers`` + 1 connections more a process, each idle until its thread's next
request. (Executor threads, ``sync_to_async(thread_sensitive=False)``, never reach a request
boundary: they kept their connections before this, unchecked, and still do.)
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import structlog
from asgiref.sync import SyncToAsync
from django.db.backends.signals import connection_created

log = structlog.get_logger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


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


def reconnecting(fn: Callable[P, R]) -> Callable[P, R]:
    """Database work in executor threads, which never reach a request boundary where Django would
    replace a broken connection: when the server dropped the connection (PostgreSQL restarted,
    pg_terminate_backend, a network cut), close it and run ``fn`` once more on a new one. Only for
    work that is one transaction of its own (the dropped connection rolled it back); inside an
    outer transaction the error is raised as before."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from django.db import InterfaceError, OperationalError, connection

        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if connection.in_atomic_block or not (_dropped(exc) or not connection.is_usable()):
                raise
            log.warning("db_connection_dropped_retrying", fn=fn.__qualname__)
            connection.close()
            return fn(*args, **kwargs)

    return wrapper


# SQLSTATEs of a connection the server ended: class 08 (connection exception), admin_shutdown,
# crash_shutdown, cannot_connect_now. psycopg may still call such a connection usable for a moment.
_DROPPED_STATES = ("57P01", "57P02", "57P03")


def _dropped(exc: Exception) -> bool:
    from django.db import InterfaceError

    state = str(getattr(exc.__cause__, "sqlstate", "") or "")
    return isinstance(exc, InterfaceError) or state.startswith("08") or state in _DROPPED_STATES
