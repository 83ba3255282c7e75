from __future__ import annotations

from typing import Any

import pytest

from sessions_app.runs import RunRegistry, set_run_registry


@pytest.fixture
def registry(settings: Any) -> Any:
    """A run registry of the test's own (LocalStore embedded, RedisStore in scale-out)."""
    settings.WS_DELTA_COALESCE_MS = 0
    reg = RunRegistry()
    set_run_registry(reg)
    yield reg
    set_run_registry(None)
