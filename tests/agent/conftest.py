from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def bundled(agent_env, settings):
    """The bundled tools of the source tree (get_current_datetime, user_notes) in the agent's registry."""
    from tools_app.registry import reset_registry

    settings.BUNDLED_TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"
    reset_registry()
    return agent_env
