"""The skills block of the system prompt: the enabled skills' names and descriptions, nothing more.

It is the skills app's side of ``agent.ports.SkillCatalog``. The block is part of the cached
system prompt, so it must be byte-identical from one model call to the next while nothing
changed (a model server re-reads the whole prompt when its prefix changes): skills are listed in
name order and the text depends only on the enabled skills. It is bounded by
``SKILLS_PROMPT_MAX_TOKENS``: when the full descriptions do not fit, each is cut to its first
sentence, and if that is still too long the remaining skills are listed by name only.

The index behind it is re-read at most once a second and only when a skill folder changed, so
asking for the block on every model call costs a dictionary lookup.
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
from django.conf import settings

from skills_app import store as store_module
from skills_app.store import Scan, SkillStore, get_store

if TYPE_CHECKING:
    from agent.profiles import ProfileSpec

log = structlog.get_logger(__name__)

CHECK_SECONDS = 1.0
HEADER = (
    "## Skills\n"
    "Skills are saved know-how for kinds of tasks. When a request matches a skill's "
    "description, first read the skill with skill_view (name) and follow its instructions; "
    "skill_view with a 'file' reads one of the skill's reference files or scripts. A skill's scripts "
    "never run by themselves: run them only with your normal tools."
)
LEARN = (
    "After a task that took several tool calls and worked, you may propose a new skill, or an improved "
    "version of a skill you used, with skill_write; the user decides whether to keep it."
)
_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: UTF-8 bytes / 4 (English prose is ~4 characters a token)."""
    return (len(text.encode("utf-8")) + 3) // 4


def _first_sentence(text: str, limit: int = 160) -> str:
    match = _SENTENCE.match(text)
    short = (match.group(1) if match else text).strip()
    return short if len(short) <= limit else short[: limit - 1].rstrip() + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def build_block(skills: Sequence[tuple[str, str]], *, learn: bool, max_tokens: int) -> str:
    """The prompt block for (name, description) pairs, within ``max_tokens`` (estimated)."""
    if not skills and not learn:
        return ""
    head = HEADER if skills else ""
    tail = LEARN if learn else ""
    items = sorted((name, _one_line(desc)) for name, desc in skills)
    for shorten in (False, True):
        lines = [f"- {name}: {_first_sentence(desc) if shorten else desc}" for name, desc in items]
        text = _assemble(head, lines, tail)
        if estimate_tokens(text) <= max_tokens:
            return text
    # Still too long: as many first sentences as fit, then the other skills by name only.
    best = ""
    for count in range(len(items) + 1):
        rest = [name for name, _ in items[count:]]
        lines = [f"- {name}: {_first_sentence(desc)}" for name, desc in items[:count]]
        if rest:
            lines.append(f"- more skills (read with skill_view): {', '.join(rest)}")
        text = _assemble(head, lines, tail)
        if estimate_tokens(text) > max_tokens:
            break
        best = text
    if best:
        return best
    # Not even every name fits: as many names as do (a tiny budget; the others stay reachable by name).
    names = [name for name, _ in items]
    while names:
        names.pop()
        text = _assemble(head, [f"- skills (read with skill_view): {', '.join(names)} and {len(items) - len(names)} more"],
                         tail)
        if estimate_tokens(text) <= max_tokens:
            return text
    return _assemble(head, [], tail)[: max_tokens * 4]


def _assemble(head: str, lines: list[str], tail: str) -> str:
    return "\n".join(part for part in (head, "\n".join(lines), tail) if part)


def enabled_names(profile: ProfileSpec, available: Sequence[str]) -> list[str]:
    wanted = tuple(getattr(profile, "enabled_skills", ()) or ())
    if "*" in wanted:
        return sorted(available)
    return sorted(n for n in set(wanted) if n in set(available))


@dataclass(slots=True)
class _Index:
    signature: tuple[object, ...]
    scan: Scan
    checked_at: float
    local_changes: int


class StoreSkillCatalog:
    """``agent.ports.SkillCatalog`` over the skill store."""

    def __init__(self, store: SkillStore | None = None) -> None:
        self._store = store
        self._index: _Index | None = None
        self._lock = threading.Lock()
        self._blocks: dict[tuple[object, ...], str] = {}

    @property
    def store(self) -> SkillStore:
        return self._store or get_store()

    def scan(self) -> Scan:
        """The store's skills, re-read only when a skill folder changed (checked at most once a second)."""
        now = time.monotonic()
        index = self._index
        if self._fresh(index, now):
            return index.scan  # type: ignore[union-attr]
        with self._lock:
            index = self._index
            if self._fresh(index, now):
                return index.scan  # type: ignore[union-attr]
            signature = self.store.signature()
            if index is None or index.signature != signature or index.local_changes != store_module.local_changes:
                scan = self.store.scan()
                for broken in scan.broken:
                    log.warning("skill_invalid", folder=broken.folder, source=broken.source, error=broken.error)
                self._blocks.clear()
                index = _Index(signature=signature, scan=scan, checked_at=now,
                               local_changes=store_module.local_changes)
            else:
                index.checked_at, index.local_changes = now, store_module.local_changes
            self._index = index
            return index.scan

    @staticmethod
    def _fresh(index: _Index | None, now: float) -> bool:
        return (index is not None and now - index.checked_at < CHECK_SECONDS
                and index.local_changes == store_module.local_changes)

    def invalidate(self) -> None:
        with self._lock:
            self._index = None
            self._blocks.clear()

    def prompt_block(self, profile: ProfileSpec, tools: Sequence[str]) -> str:
        has_view = "skill_view" in tools and _may_use("skill_view")
        learn = "skill_write" in tools and _may_use("skill_write")
        if not has_view and not learn:
            return ""
        scan = self.scan()
        names = enabled_names(profile, list(scan.skills)) if has_view else []
        max_tokens = int(getattr(settings, "SKILLS_PROMPT_MAX_TOKENS", 1500))
        key = (tuple(names), learn, max_tokens, id(scan))
        block = self._blocks.get(key)
        if block is None:
            block = build_block([(n, scan.skills[n].description) for n in names], learn=learn, max_tokens=max_tokens)
            self._blocks[key] = block
        return block


def _may_use(tool: str) -> bool:
    """Whether the run's user may use the tool (skill_write is staff-only unless opened): the prompt
    never names a tool the turn will not offer."""
    from tools_app.registry import get_registry

    return get_registry().can_use(tool)


_catalog: StoreSkillCatalog | None = None


def get_catalog() -> StoreSkillCatalog:
    global _catalog
    if _catalog is None:
        _catalog = StoreSkillCatalog()
    return _catalog
