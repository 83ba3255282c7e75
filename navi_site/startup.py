"""Start-up checks with messages a person can act on."""
from __future__ import annotations

import errno
import socket

from django.conf import settings
from django.db import connection


class StartupError(Exception):
    pass


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StartupError(
                    f"Port {port} on {host} is already in use — is Navi (or another server) already "
                    f"running? Stop it, or start Navi on another port with NAVI_PORT={port + 1}."
                ) from None
            raise StartupError(f"Cannot listen on {host}:{port}: {exc.strerror}. Check NAVI_HOST/NAVI_PORT.") from None


def check_database() -> None:
    try:
        connection.ensure_connection()
    except Exception as exc:  # noqa: BLE001
        where = settings.DATABASES["default"].get("HOST") or settings.DATABASES["default"].get("NAME")
        raise StartupError(
            f"Cannot connect to the database ({connection.vendor} at {where}): {str(exc).strip()[:300]}. "
            "Check DATABASE_URL and that the server is running."
        ) from None


def check_redis() -> None:
    if not settings.REDIS_URL:
        return
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        raise StartupError(
            f"Cannot connect to Redis at {settings.REDIS_URL}: {exc}. Check REDIS_URL and that Redis is running."
        ) from None
    finally:
        client.close()


def check_scaleout_config() -> None:
    if settings.REDIS_URL and settings.DATABASE_VENDOR != "postgresql":
        raise StartupError(
            "Scale-out mode (REDIS_URL set) needs PostgreSQL: set DATABASE_URL=postgres://user@host:5432/navi. "
            "Unset REDIS_URL for embedded mode."
        )
