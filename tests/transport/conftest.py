"""The transport tier's live server: the real `manage.py start` (plus worker/beat in scale-out),
its model the fake Ollama server, a short heartbeat and ping and a 1 MB upload limit for the tests."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.live import LiveNavi, start_live_navi


@pytest.fixture(scope="package")
def navi(tmp_path_factory: pytest.TempPathFactory, fake_llm_server: Any) -> Iterator[LiveNavi]:
    live = start_live_navi(
        tmp_path_factory.mktemp("transport"),
        {
            "OLLAMA_HOST": fake_llm_server.url,
            "OPENAI_BASE_URL": fake_llm_server.url + "/v1",
            "WS_HEARTBEAT_SECONDS": "1.5",
            "WS_PING_SECONDS": "2",
            "SESSION_FILES_MAX_SIZE_MB": "1",
        },
    )
    yield live
    live.stop()
