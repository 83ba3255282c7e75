"""Where the running embedded server listens, for the command-line tools of the same installation.

In embedded mode the channel layer and the broker live inside the server process, so a
management command that runs a turn itself (``manage.py fire_recall``) would stream to nobody:
it hands the work to the server instead. ``manage.py start`` writes ``DATA_DIR/server.json``
(pid and address) while it serves and removes it when it stops; a file left by a killed server
names a dead pid and is ignored.

Requests to the server are signed with the installation's SECRET_KEY (whoever holds it can
already sign in as anyone), time-limited to a minute.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core import signing

SALT = "navi.local-command"
MAX_AGE_S = 60


@dataclass(frozen=True, slots=True)
class RunningServer:
    pid: int
    host: str
    port: int

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "[::1]" if self.host == "::" else self.host
        return f"http://{host}:{self.port}"


def _path() -> Path:
    return Path(settings.DATA_DIR) / "server.json"


def write(*, host: str, port: int) -> None:
    _path().write_text(json.dumps({"pid": os.getpid(), "host": host, "port": port}))


def remove() -> None:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return
    if data.get("pid") == os.getpid():
        _path().unlink(missing_ok=True)


def running() -> RunningServer | None:
    """The embedded server of this data directory, if one is running."""
    try:
        data = json.loads(_path().read_text())
        server = RunningServer(pid=int(data["pid"]), host=str(data["host"]), port=int(data["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(server.pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass  # exists, owned by another user
    return server


def sign(value: str) -> str:
    return signing.TimestampSigner(salt=SALT).sign(value)


def verify(value: str, signature: str) -> bool:
    try:
        return signing.TimestampSigner(salt=SALT).unsign(signature, max_age=MAX_AGE_S) == value
    except signing.BadSignature:
        return False
