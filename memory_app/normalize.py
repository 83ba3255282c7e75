"""How category and key names are normalised (shared by extraction, tools, REST and admin)."""
from __future__ import annotations

import re

from memory_app.models import CATEGORIES

MAX_KEY = 100
MAX_VALUE = 500
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_ALIASES = {
    "preference": "preferences", "pref": "preferences", "likes": "preferences",
    "project": "projects", "env": "environment", "setup": "environment", "tech": "environment",
    "person": "people", "contacts": "people", "family": "people", "job": "work", "career": "work",
    "personal_info": "personal", "misc": "other", "general": "other",
}


def snake(text: str) -> str:
    """Lowercase snake case; letters of any script are kept, everything else becomes ``_``."""
    return _NON_WORD.sub("_", text.strip().lower()).strip("_")


def normalize_key(raw: str) -> str:
    """The stored form of a key ("" when nothing usable remains)."""
    return snake(raw)


def normalize_category(raw: str | None) -> str:
    """A known category; unknown ones become "other"."""
    name = snake(raw or "")
    name = _ALIASES.get(name, name)
    return name if name in CATEGORIES else "other"
