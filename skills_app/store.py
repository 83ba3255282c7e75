"""The skill store: bundled skills (read-only, in the source tree) and the user's (``SKILLS_DIR``).

Layout of ``SKILLS_DIR`` (inside the data directory by default, so backups take it along)::

    <name>/SKILL.md, <name>/references/..., <name>/scripts/...   the current version of each skill
    .navi/versions/<name>/0003/...  + 0003.json                  every version ever saved (never pruned)
    .navi/generation                                             changes whenever a skill changes
    .navi/lock                                                   flock: one writer at a time, across processes

A skill in ``SKILLS_DIR`` with the name of a bundled one replaces it. A folder that is not a valid
skill is listed with the reason and skipped; one bad skill never hides the others. Writes build
the new folder aside and swap it in under the lock, and keep what was there as a version first
(also when it was edited by hand), so nothing saved is ever lost: rollback writes an old version
again as a new one.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import structlog
from django.conf import settings

from navi_site.errors import NaviError
from skills_app.format import SKILL_FILE, SkillDoc, SkillFormatError, decode_text, name_problem
from skills_app.tree import (
    MAX_FILE_BYTES,
    Files,
    check_tree,
    clean_path,
    digest,
    is_text_path,
    printable,
    read_folder,
    write_folder,
)

log = structlog.get_logger(__name__)

Source = Literal["bundled", "user"]
META = ".navi"


class SkillNotFound(LookupError):
    """No skill (or version, or file of a skill) by that name."""


class SkillStoreError(NaviError):
    """The skills directory cannot be written (permissions, disk full, not a directory)."""

    status = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    name: str
    source: Source
    path: Path
    doc: SkillDoc
    files: tuple[str, ...] = ()  # relative paths besides SKILL.md
    replaces_bundled: bool = False

    @property
    def description(self) -> str:
        return self.doc.description


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokenSkill:
    folder: str
    source: Source
    path: Path
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Version:
    number: int
    created_at: str
    source: str  # proposal, install, rollback, disk
    by: str = ""
    note: str = ""
    sha: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scan:
    skills: dict[str, Skill] = field(default_factory=dict)  # by name, sorted
    broken: tuple[BrokenSkill, ...] = ()


def bundled_dir() -> Path:
    return Path(getattr(settings, "SKILLS_BUNDLED_DIR", Path(settings.BASE_DIR) / "skills"))


def user_dir() -> Path:
    return Path(settings.SKILLS_DIR)


class SkillStore:
    def __init__(self, root: Path | None = None, bundled: Path | None = None) -> None:
        self._root = root
        self._bundled = bundled

    @property
    def root(self) -> Path:
        return self._root or user_dir()

    @property
    def bundled(self) -> Path:
        return self._bundled or bundled_dir()

    @property
    def meta(self) -> Path:
        return self.root / META

    # ------------------------------------------------------------------ reading
    def scan(self) -> Scan:
        """Every skill (user skills replacing bundled ones of the same name) and every broken folder."""
        found: dict[str, Skill] = {}
        broken: list[BrokenSkill] = []
        for source, base in (("bundled", self.bundled), ("user", self.root)):
            for folder in _folders(base):
                shown = printable(folder.name)
                if shown != folder.name:
                    broken.append(BrokenSkill(folder=shown, source=source, path=folder.with_name(shown),  # type: ignore[arg-type]
                                              error=f"the folder name {shown!r} is not UTF-8 text; rename it like the skill"))
                    continue
                try:
                    skill = _load(folder, source)  # type: ignore[arg-type]
                except SkillFormatError as exc:
                    broken.append(BrokenSkill(folder=folder.name, source=source, path=folder, error=str(exc)))  # type: ignore[arg-type]
                    continue
                if source == "user" and skill.name in found:
                    skill = _replace(skill, replaces_bundled=True)
                found[skill.name] = skill
        return Scan(skills=dict(sorted(found.items())), broken=tuple(broken))

    def signature(self) -> tuple[object, ...]:
        """Changes whenever a skill is added, removed or edited (cheap: one stat per skill)."""
        parts: list[object] = []
        for base in (self.bundled, self.root):
            parts.append(str(base))
            try:
                entries = sorted(os.scandir(base), key=lambda e: e.name)
            except OSError:
                parts.append(None)
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    st = os.stat(Path(entry.path) / SKILL_FILE, follow_symlinks=False)
                    parts.append((entry.name, st.st_mtime_ns, st.st_size))
                except OSError:
                    parts.append((entry.name, None))
        try:
            parts.append(os.stat(self.meta / "generation").st_mtime_ns)
        except OSError:
            parts.append(None)
        return tuple(parts)

    def get(self, name: str) -> Skill:
        skill = self.scan().skills.get(name)
        if skill is None:
            raise SkillNotFound(f"there is no skill named {name!r}")
        return skill

    def read_file(self, name: str, rel: str, *, skill: Skill | None = None) -> str:
        """The text of one file of a skill (SKILL.md or a reference/script file); ``skill`` saves a scan."""
        skill = skill if skill is not None and skill.name == name else self.get(name)
        path = clean_path(rel)
        if path != SKILL_FILE and path not in skill.files:
            listing = ", ".join(skill.files) or "none"
            raise SkillNotFound(f"the skill {name!r} has no file {rel!r}; its files: {listing}")
        data = _read_inside(skill.path, path)
        if is_text_path(path):
            return decode_text(data, what=path)
        try:  # a suffix Navi has no entry for (a Ruby script, a Jinja template): text if it is UTF-8
            return decode_text(data, what=path)
        except SkillFormatError:
            raise SkillFormatError(f"{path} is not a text file; only text files can be read") from None

    def files(self, name: str) -> Files:
        """All files of the current version of a skill."""
        return read_folder(self.get(name).path)

    # ------------------------------------------------------------------ versions
    def versions(self, name: str) -> list[Version]:
        if name_problem(name):
            return []
        folder = self.meta / "versions" / name
        out = []
        for meta in sorted(folder.glob("[0-9][0-9][0-9][0-9].json")) if folder.is_dir() else []:
            try:
                data = json.loads(meta.read_text(encoding="utf-8"))
                out.append(Version(**{k: data[k] for k in ("number", "created_at", "source", "by", "note", "sha")
                                      if k in data}))
            except (OSError, ValueError, TypeError, KeyError):
                log.warning("skill_version_meta_unreadable", path=str(meta))
        return out

    def current_version(self, name: str) -> int | None:
        """The number of the version the current files are, or None (never saved, or edited by hand)."""
        try:
            skill = self.get(name)
        except SkillNotFound:
            return None
        if skill.source != "user":
            return None
        try:
            sha = digest(read_folder(skill.path))
        except SkillFormatError:
            return None
        for version in reversed(self.versions(name)):
            if version.sha == sha:
                return version.number
        return None

    def removed(self, scan: Scan | None = None) -> list[tuple[str, list[Version]]]:
        """Skills removed from SKILLS_DIR whose versions are kept (a rollback brings one back), by name;
        not the ones a bundled skill of the same name stands in for (they show as that skill)."""
        scan = scan if scan is not None else self.scan()
        try:
            entries = sorted(os.scandir(self.meta / "versions"), key=lambda e: e.name)
        except OSError:
            return []
        out = []
        for entry in entries:
            name = entry.name
            if (not entry.is_dir(follow_symlinks=False) or name_problem(name) or name in scan.skills
                    or os.path.lexists(self.root / name)):
                continue
            versions = self.versions(name)
            if versions:
                out.append((name, versions))
        return out

    def version_files(self, name: str, number: int) -> Files:
        folder = self.meta / "versions" / name / f"{number:04d}"
        if name_problem(name) or not 0 < number < 10_000 or not folder.is_dir():
            raise SkillNotFound(f"the skill {name!r} has no version {number}")
        return read_folder(folder)

    # ------------------------------------------------------------------ writing
    def save(self, name: str, files: Files, *, source: str, by: str = "", note: str = "") -> Version:
        """Make ``files`` the current version of skill ``name``; returns the version saved.

        Saving the same content again is a no-op (returns the current version).
        Raises SkillFormatError when the files are not a valid skill named ``name``.
        """
        problem = name_problem(name)
        if problem:
            raise SkillFormatError(problem)
        check_tree(files, folder=name)
        with self._locked():
            current_folder = self.root / name
            current = _read_if_valid(current_folder)
            versions = self.versions(name)
            if current is not None and (not versions or versions[-1].sha != digest(current)):
                versions.append(self._record(name, current, versions, source="disk",
                                             note="the files found before this change"))
            if current is not None and digest(current) == digest(files) and versions:
                return versions[-1]
            version = self._record(name, files, versions, source=source, by=by, note=note)
            self._swap_in(name, files)
            self._bump()
        log.info("skill_saved", skill=name, version=version.number, source=source)
        return version

    def rollback(self, name: str, number: int, *, by: str = "") -> Version:
        """Make version ``number`` current again (saved as a new version, so nothing is lost)."""
        files = self.version_files(name, number)
        return self.save(name, files, source="rollback", by=by, note=f"rolled back to version {number}")

    def remove(self, name: str, *, by: str = "") -> None:
        """Delete the user's skill ``name`` (its versions stay; a bundled skill of that name shows again)."""
        folder = self.root / name
        if name_problem(name) or not folder.is_dir():
            raise SkillNotFound(f"there is no skill named {name!r} in {self.root}")
        with self._locked():
            current = _read_if_valid(folder)
            versions = self.versions(name)
            if current is not None and (not versions or versions[-1].sha != digest(current)):
                self._record(name, current, versions, source="disk", by=by, note="the files found before removal")
            trash = self._tmp("removed")
            folder.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
            self._bump()
        log.info("skill_removed", skill=name)

    # ------------------------------------------------------------------ internals
    def _record(self, name: str, files: Files, versions: list[Version], *, source: str, by: str = "",
                note: str = "") -> Version:
        number = (versions[-1].number if versions else 0) + 1
        base = self.meta / "versions" / name
        with self._aside("version", files) as tmp:
            base.mkdir(parents=True, exist_ok=True)
            tmp.rename(base / f"{number:04d}")
        version = Version(number=number, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
                          source=source, by=by, note=note, sha=digest(files))
        _write_json(base / f"{number:04d}.json", version.to_dict())
        versions.append(version)
        return version

    def _swap_in(self, name: str, files: Files) -> None:
        target = self.root / name
        old = None
        with self._aside("new", files) as new:
            if target.exists() or target.is_symlink():
                old = self._tmp("old")
                target.rename(old)
            try:
                new.rename(target)
            except OSError:
                if old is not None:
                    old.rename(target)  # the current version stays where it was
                raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() and not old.is_symlink() else old.unlink()

    @contextmanager
    def _aside(self, kind: str, files: Files) -> Iterator[Path]:
        """``files`` written into a new folder beside the store, for the caller to move in place; removed
        again if writing or the move fails (a full disk leaves no half-written folder behind)."""
        tmp = self._tmp(kind)
        try:
            write_folder(tmp, files)
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _tmp(self, kind: str) -> Path:
        base = self.meta / "tmp"
        base.mkdir(parents=True, exist_ok=True)
        return base / f"{kind}-{uuid.uuid4().hex}"

    def _bump(self) -> None:
        global local_changes
        _write_json(self.meta / "generation", {"changed_at": time.time(), "id": uuid.uuid4().hex})
        local_changes += 1

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time; a failing file system becomes a SkillStoreError that says where."""
        try:
            self.meta.mkdir(parents=True, exist_ok=True)
            with _thread_lock, open(self.meta / "lock", "a+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except OSError as exc:
            log.exception("skills_dir_write_failed", root=str(self.root))
            raise SkillStoreError(
                f"Navi could not write to the skills directory {self.root} ({exc.strerror or exc}); check that it is "
                "a directory Navi may write to (SKILLS_DIR). The current version of the skill was not changed.") from None


# One writer per process at a time; flock orders the processes.
_thread_lock = threading.RLock()
# Changes made by this process (the catalog re-reads at once; other processes' within a second).
local_changes = 0


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _folders(base: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return []
    return [Path(e.path) for e in entries if not e.name.startswith(".") and (e.is_dir() or e.is_symlink())]


def _load(folder: Path, source: Source) -> Skill:
    if folder.is_symlink():
        raise SkillFormatError(f"{folder.name} is a symbolic link; skills must be real folders")
    files = read_folder(folder)
    doc = check_tree(files, folder=folder.name)
    return Skill(name=doc.name, source=source, path=folder, doc=doc,
                 files=tuple(sorted(p for p in files if p != SKILL_FILE)))


def _replace(skill: Skill, **changes: object) -> Skill:
    from dataclasses import replace

    return replace(skill, **changes)  # type: ignore[arg-type]


def _read_if_valid(folder: Path) -> Files | None:
    if not folder.exists():
        return None
    try:
        return read_folder(folder)
    except SkillFormatError as exc:
        log.warning("skill_folder_unreadable", path=str(folder), error=str(exc))
        return None


def _read_inside(folder: Path, rel: str) -> bytes:
    """Read ``folder/rel`` without following a symlink anywhere on the way."""
    current = folder
    for part in rel.split("/"):
        current = current / part
        mode = os.lstat(current).st_mode
        if stat.S_ISLNK(mode):
            raise SkillFormatError(f"{rel} is a symbolic link; it is not read")
    if os.lstat(current).st_size > MAX_FILE_BYTES:
        raise SkillFormatError(f"{rel} is larger than the limit for a skill file")
    return current.read_bytes()


_default: SkillStore | None = None


def get_store() -> SkillStore:
    """The process-wide store on ``SKILLS_DIR`` and the bundled skills (paths read at call time)."""
    global _default
    if _default is None:
        _default = SkillStore()
    return _default
