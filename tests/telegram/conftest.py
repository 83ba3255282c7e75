"""The Telegram tests' stand-ins: a fake Bot API server, and a live Navi whose bot talks to it
(embedded: the bot polls inside `manage.py start`; scale-out: `manage.py telegram_bot` runs as
its own process beside the ASGI server, the Celery worker and beat)."""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.live import PYTHON, LiveNavi, _spawn, start_live_navi
from tests.telegram.fake_bot_api import FakeBotApi

SCALEOUT = os.environ.get("NAVI_TEST_TIER", "embedded") == "scaleout"


@pytest.fixture(scope="package")
def bot_api() -> Iterator[FakeBotApi]:
    api = FakeBotApi()
    yield api
    api.close()


@pytest.fixture(scope="package")
def telegram_navi(tmp_path_factory: pytest.TempPathFactory, bot_api: FakeBotApi,
                  fake_llm_server: Any) -> Iterator[LiveNavi]:
    tmp = tmp_path_factory.mktemp("telegram-live")
    live = start_live_navi(tmp, {
        "OLLAMA_HOST": fake_llm_server.url, "OPENAI_BASE_URL": fake_llm_server.url + "/v1",
        "TELEGRAM_BOT_TOKEN": bot_api.token, "TELEGRAM_API_URL": bot_api.url, "TELEGRAM_POLL_TIMEOUT": "1",
        "TELEGRAM_EDIT_INTERVAL_SECONDS": "0.4", "NAVI_PUBLIC_URL": "https://navi.example",
        "RECALL_SWEEP_SECONDS": "1", "RECALL_SWEEP_GRACE_SECONDS": "0.5",
    })
    if SCALEOUT:
        _spawn(live, tmp, "telegram", [PYTHON, "manage.py", "telegram_bot"])
    # A process of its own in scale-out: Django and the bot library load first (slow on a busy machine).
    bot_api.wait_for(lambda: bot_api.calls_of("getUpdates"), timeout=90, what="the bot to poll")
    yield live
    live.stop()
