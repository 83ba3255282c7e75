"""The server's VAPID key pair (RFC 8292), generated on first use into the data directory.

``data/vapid_private.pem`` is created once (atomically: several processes starting together
agree on one key) and kept: browsers' subscriptions are bound to its public key, so a new key
would silently orphan every subscription. In scale-out every process must see the same data
directory (as for ``secret_key``).
"""
from __future__ import annotations

import base64
import os
import threading
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from django.conf import settings
from py_vapid import Vapid

_lock = threading.Lock()
_cached: tuple[Path, Vapid] | None = None


def key_path() -> Path:
    return Path(settings.DATA_DIR) / "vapid_private.pem"


def _create(path: Path) -> None:
    """Write a new key to ``path`` unless one exists (O_EXCL on a temp file, then link)."""
    fresh = Vapid()
    fresh.generate_keys()
    pem = fresh.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, pem)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process made one first: theirs wins
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def vapid() -> Vapid:
    """The key pair (created on first call)."""
    global _cached
    path = key_path()
    with _lock:
        if _cached is None or _cached[0] != path:
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                _create(path)
            _cached = (path, Vapid.from_file(str(path)))
        return _cached[1]


def public_key() -> str:
    """The application server key a browser subscribes with (URL-safe base64, no padding)."""
    raw = vapid().public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
