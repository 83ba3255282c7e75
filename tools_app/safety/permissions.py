"""Per-action permission checks that tools make themselves.

The registry enforces per-tool permission for ``dangerous`` tools; tools whose
actions differ in risk (filesystem: read vs. write) check the action here.
"""
from __future__ import annotations

from agent.ctx import current_user_role
from tools_app.base import ToolError


def is_staff() -> bool:
    """True when the run belongs to a staff user."""
    return current_user_role.get() == "staff"


def require_staff(action: str) -> None:
    """Raise ToolError unless the current user is staff."""
    if not is_staff():
        raise ToolError(
            f"{action} is only available to staff users; an admin can allow it for this profile."
        )
