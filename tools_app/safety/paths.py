"""Path policy: resolve a user-supplied path inside the allowed roots.

Roots are the session's own directory (``SESSION_FILES_DIR/<session_id>/``,
created on demand) plus ``FS_ALLOWED_PATHS`` (``["*"]`` = anywhere). Relative
paths resolve against the session directory.

What is refused, and why:
- NUL bytes (the OS would truncate the name).
- Anything whose *real* path (symlinks resolved, ``..`` applied after them) is not
  inside a root, compared component by component, so ``/data/allowed_evil`` is not
  inside ``/data/allowed``. That covers ``../../etc/passwd``, absolute paths outside,
  and symlinks leading out.
- Regular files with more than one hard link while the roots are limited: the
  other link may live outside the roots, and a write through one name changes
  both. (Hard links cannot be told apart from the original.)
- Nothing is URL-decoded: ``%2e%2e`` is a literal (and normally non-existent) name.

Final opens use ``O_NOFOLLOW`` (see ``open_nofollow``) so a symlink swapped in
after the check is not followed.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from agent.ctx import current_session_id
from tools_app.base import ToolError

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class PathPolicyError(ToolError):
    """A path is outside the allowed roots or otherwise refused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Roots:
    session_dir: Path
    extra: tuple[Path, ...]
    unlimited: bool

    @property
    def all(self) -> tuple[Path, ...]:
        return (self.session_dir, *self.extra)

    def describe(self) -> str:
        if self.unlimited:
            return "anywhere (FS_ALLOWED_PATHS=*)"
        return ", ".join(str(p) for p in self.all)


def session_dir(*, create: bool = True) -> Path:
    """The current session's working directory (real path), created on demand."""
    sid = current_session_id.get()
    if not sid:
        raise ToolError("No session is active, so there is no working directory for files.")
    if not SESSION_ID.match(sid) or sid in {".", ".."}:
        raise ToolError(f"Session id {sid!r} cannot be used as a directory name.")
    path = Path(settings.SESSION_FILES_DIR) / sid
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Path(os.path.realpath(path))


def allowed_roots() -> Roots:
    """Session dir + FS_ALLOWED_PATHS, as real paths (read at call time)."""
    configured = [str(p) for p in getattr(settings, "FS_ALLOWED_PATHS", [])]
    unlimited = "*" in configured
    extra = tuple(Path(os.path.realpath(os.path.expanduser(p))) for p in configured if p != "*")
    return Roots(session_dir=session_dir(), extra=extra, unlimited=unlimited)


def _inside(path: Path, roots: Roots) -> bool:
    return roots.unlimited or any(path == root or path.is_relative_to(root) for root in roots.all)


def _check_raw(raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise PathPolicyError("A path is required.")
    if "\x00" in raw:
        raise PathPolicyError("The path contains a NUL byte, which no file name may contain.")
    return raw


def _absolute(raw: str, roots: Roots) -> Path:
    expanded = os.path.expanduser(raw) if raw.startswith("~") else raw
    candidate = Path(expanded)
    return candidate if candidate.is_absolute() else roots.session_dir / candidate


def resolve_path(raw: object, *, follow_final: bool = True) -> Path:
    """The real path for ``raw`` if it lies inside the allowed roots; PathPolicyError otherwise.

    ``follow_final=False`` keeps a final symlink itself (delete/move act on the
    link, like ``rm``); the directories leading to it are still resolved.
    """
    text = _check_raw(raw)
    roots = allowed_roots()
    candidate = _absolute(text, roots)
    if follow_final or candidate.name in {"", ".", ".."}:
        resolved = Path(os.path.realpath(candidate))
    else:
        resolved = Path(os.path.realpath(candidate.parent)) / candidate.name
    if not _inside(resolved, roots):
        raise PathPolicyError(
            f"'{text}' resolves to {resolved}, which is outside the allowed directories "
            f"({roots.describe()}). Use a path inside one of them; relative paths are "
            "relative to the session directory."
        )
    return resolved


def is_root(path: Path) -> bool:
    """True for the session directory or a configured root (never deleted or moved)."""
    roots = allowed_roots()
    return path in roots.all or path == Path("/")


def check_links(path: Path, st: os.stat_result, *, writing: bool) -> None:
    """Refuse a regular file with several hard links while the roots are limited."""
    if not stat.S_ISREG(st.st_mode) or st.st_nlink <= 1:
        return
    if allowed_roots().unlimited:
        return
    verb = "write to" if writing else "read"
    raise PathPolicyError(
        f"Refusing to {verb} {path}: it has {st.st_nlink} hard links, and another link may lie "
        "outside the allowed directories. Copy the content into a new file instead."
    )


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open with O_NOFOLLOW|O_CLOEXEC: a symlink swapped in after resolve_path is refused."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final component became a symlink
            raise PathPolicyError(f"{path} is a symbolic link; refusing to follow it.") from None
        raise
