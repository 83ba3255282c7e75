"""Absolute links to Navi for messages that leave the browser (e-mail, Telegram, push)."""
from __future__ import annotations

from django.conf import settings


def public_base() -> str:
    """NAVI_PUBLIC_URL, or the embedded server's own address."""
    base = getattr(settings, "NAVI_PUBLIC_URL", "")
    return base or f"http://{settings.NAVI_HOST}:{settings.NAVI_PORT}"


def absolute_url(path: str) -> str:
    return public_base().rstrip("/") + "/" + path.lstrip("/")
