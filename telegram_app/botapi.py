"""One Bot API call over plain httpx, for sync code (the notification channel in a Celery worker,
approval cards edited from whichever thread ended the approval). The bot itself uses
python-telegram-bot's async ``Bot``."""
from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings

TIMEOUT = httpx.Timeout(15.0, connect=5.0)


def api_call(method: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST one Bot API method; the decoded answer (``ok`` true or false). Raises httpx errors."""
    url = f"{settings.TELEGRAM_API_URL.rstrip('/')}/bot{settings.TELEGRAM_BOT_TOKEN}/{method}"
    with httpx.Client(timeout=TIMEOUT) as client:
        resp = client.post(url, json=payload)
    try:
        data = resp.json()
    except ValueError:
        data = {"ok": False, "error_code": resp.status_code, "description": resp.text[:200]}
    return data if isinstance(data, dict) else {"ok": False, "error_code": resp.status_code}
