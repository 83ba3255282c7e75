"""Where per-session tool state lives: ``SESSION_FILES_DIR/<session_id>/.navi/``."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.conf import settings

from agent.ctx import current_profile, current_session_id
from tools_app.base import ToolError

_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


def state_dir(session_id: str) -> Path:
    """The hidden state directory of a session. Raises ToolError for an id that is not a plain name."""
    if not _SESSION_ID_RE.match(session_id):
        raise ToolError(f"invalid session id {session_id!r}")
    return Path(settings.SESSION_FILES_DIR) / session_id / ".navi"


def require_session() -> str:
    """The current session id, or a ToolError the model can read."""
    session_id = current_session_id.get()
    if not session_id:
        raise ToolError("this tool needs an active session, and there is none")
    return session_id


def profile_attr(name: str, default: Any) -> Any:
    return getattr(current_profile.get(), name, default)
