"""Small file helpers shared by the meta tools: atomic writes and per-path locks."""
from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def read_json(path: Path, default: Any) -> Any:
    """The JSON in ``path``, or ``default`` when the file does not exist. Raises ValueError if invalid."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return default
    return json.loads(text)


_guard = threading.Lock()
_path_locks: dict[str, threading.Lock] = {}


def path_lock(path: Path) -> threading.Lock:
    """One lock per file, for read-modify-write cycles run in worker threads."""
    key = str(path)
    with _guard:
        return _path_locks.setdefault(key, threading.Lock())


async def locked_update(path: Path, update: Any) -> Any:
    """Run ``update(path)`` in a thread while holding the file's lock; returns its result.

    A threading lock (not an asyncio one) because runs may live on different event loops
    (ASGI server, Celery worker) in the same process.
    """

    def run() -> Any:
        with path_lock(path):
            return update(path)

    return await asyncio.to_thread(run)
