"""A skill as a set of files (relative path → bytes), and the checks every way in goes through.

Proposals, uploads (.zip/.skill), folders and rollbacks all end up as such a mapping, checked by
``check_tree`` before anything is written: safe relative paths, size limits, UTF-8 text, a valid
SKILL.md. Reading a folder or an archive here never follows a symlink and never reads more bytes
than the limits allow, whatever an archive's headers claim.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import zipfile
from pathlib import Path, PurePosixPath

from skills_app.format import SKILL_FILE, SkillDoc, SkillFormatError, decode_text, parse_skill

MAX_FILE_BYTES = 1024 * 1024          # one file of a skill
MAX_SKILL_BYTES = 5 * 1024 * 1024     # all files of a skill, unpacked
MAX_FILES = 200                       # files in a skill
MAX_ARCHIVE_ENTRIES = 1000            # entries (files and folders) in an uploaded archive
MAX_NAME_BYTES = 255                  # one file or folder name (what file systems take)
MAX_DEPTH = 12                        # folders inside a skill (references/topic/…/file.md)
TEXT_SUFFIXES = frozenset({
    ".md", ".markdown", ".txt", ".py", ".sh", ".bash", ".js", ".mjs", ".ts", ".json", ".yaml", ".yml", ".toml",
    ".ini", ".cfg", ".conf", ".csv", ".tsv", ".html", ".htm", ".xml", ".sql", ".rst", ".css", "",
})
# Archive entries other tools add that are not part of a skill.
_JUNK = ("__MACOSX/", ".DS_Store")

Files = dict[str, bytes]


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def _sizes(n: int, limit: int) -> tuple[str, str]:
    """``n`` and ``limit`` for a message: in MB, or in bytes when both would read the same in MB."""
    if _mb(n) == _mb(limit):
        return f"{n:,} bytes", f"{limit:,} bytes"
    return _mb(n), _mb(limit)


def printable(text: str) -> str:
    """``text`` with the bytes of a file name that were not UTF-8 (Python keeps them as lone
    surrogates) shown as U+FFFD, so that a message naming the file can be printed and sent."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_path(raw: str) -> str:
    """A safe relative POSIX path inside a skill, or SkillFormatError naming the bad path."""
    if not raw or "\x00" in raw:
        raise SkillFormatError(f"the path {printable(raw)!r} is empty or contains a NUL byte")
    if printable(raw) != raw:
        parts = raw.split("/")
        bad = next(i for i, p in enumerate(parts) if printable(p) != p)
        what = "file" if bad == len(parts) - 1 else "folder"
        raise SkillFormatError(f"the {what} name {printable(parts[bad])!r} is not UTF-8 text; rename it "
                               f"(a skill's file names are UTF-8)")
    if "\\" in raw:
        raise SkillFormatError(f"the path {raw!r} uses backslashes; paths inside a skill use '/'")
    path = PurePosixPath(raw)
    if path.is_absolute() or raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise SkillFormatError(f"the path {raw!r} is absolute; paths inside a skill must be relative")
    parts = [p for p in path.parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise SkillFormatError(f"the path {raw!r} contains '..'; paths must stay inside the skill's folder")
    if not parts:
        raise SkillFormatError(f"the path {raw!r} names no file")
    shown = raw if len(raw) <= 80 else raw[:60] + "…"
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise SkillFormatError(f"the path {shown!r} contains a control character (a line break, a tab, …); rename the file")
    if any(len(p.encode("utf-8")) > MAX_NAME_BYTES for p in parts):
        raise SkillFormatError(f"the path {shown!r} is too long: one name in a path may have at most "
                               f"{MAX_NAME_BYTES} bytes")
    if len(parts) > MAX_DEPTH + 1:
        raise SkillFormatError(f"the path {shown!r} is nested too deeply: at most {MAX_DEPTH} folders inside a skill")
    return "/".join(parts)


def is_text_path(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in TEXT_SUFFIXES


def check_tree(files: Files, *, folder: str | None = None) -> SkillDoc:
    """Validate a skill's files; returns its parsed SKILL.md. Raises SkillFormatError."""
    if SKILL_FILE not in files:
        raise SkillFormatError(f"there is no {SKILL_FILE} at the top of the skill; every skill needs one")
    if len(files) > MAX_FILES:
        raise SkillFormatError(f"the skill has {len(files)} files; at most {MAX_FILES} are allowed")
    total = 0
    folders = {path.rsplit("/", i)[0] for path in files for i in range(1, path.count("/") + 1)}
    for path, data in files.items():
        if clean_path(path) != path:
            raise SkillFormatError(f"the path {path!r} is not in normal form")
        if path in folders:
            raise SkillFormatError(f"the skill has both a file and a folder named {path!r}; rename one of them")
        if len(data) > MAX_FILE_BYTES:
            size, limit = _sizes(len(data), MAX_FILE_BYTES)
            raise SkillFormatError(f"{path} is {size}; one file may be at most {limit}")
        total += len(data)
        if path != SKILL_FILE and is_text_path(path):
            decode_text(data, what=path)
    if total > MAX_SKILL_BYTES:
        size, limit = _sizes(total, MAX_SKILL_BYTES)
        raise SkillFormatError(f"the skill's files add up to {size}; at most {limit} are allowed")
    return parse_skill(decode_text(files[SKILL_FILE], what=SKILL_FILE), folder=folder)


def digest(files: Files) -> str:
    """A content hash of a skill (paths and bytes), to tell versions apart."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return h.hexdigest()


# --------------------------------------------------------------------------- folders


def read_folder(folder: Path) -> Files:
    """The files of a skill folder. Symlinks, special files and oversized trees are refused."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        raise SkillFormatError(f"{folder} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise SkillFormatError(f"{folder} is a symbolic link; give the real folder")
    if not stat.S_ISDIR(st.st_mode):
        raise SkillFormatError(f"{folder} is not a folder")
    files: Files = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for entry in [*dirnames, *filenames]:
            full = Path(dirpath) / entry
            rel = printable(full.relative_to(folder).as_posix())
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                raise SkillFormatError(f"{rel} is a symbolic link; skills may not contain links")
            if entry in filenames and not stat.S_ISREG(mode):
                raise SkillFormatError(f"{rel} is not a regular file")
        for entry in sorted(filenames):
            full = Path(dirpath) / entry
            rel = clean_path(full.relative_to(folder).as_posix())
            if len(files) >= MAX_FILES:
                raise SkillFormatError(f"the folder has more than {MAX_FILES} files; at most {MAX_FILES} are allowed")
            size = os.lstat(full).st_size
            if size > MAX_FILE_BYTES:
                shown, limit = _sizes(size, MAX_FILE_BYTES)
                raise SkillFormatError(f"{rel} is {shown}; one file may be at most {limit}")
            total += size
            if total > MAX_SKILL_BYTES:
                raise SkillFormatError(f"the folder holds more than {_mb(MAX_SKILL_BYTES)}; that is the limit for a skill")
            files[rel] = _read_capped(full)
    return files


def _read_capped(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise SkillFormatError(f"{path.name} grew past {_mb(MAX_FILE_BYTES)} while being read")
    return data


def write_folder(folder: Path, files: Files) -> None:
    """Write ``files`` into the new, empty folder ``folder`` (paths already checked)."""
    folder.mkdir(parents=True)
    for rel, data in sorted(files.items()):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as handle:
            handle.write(data)


# --------------------------------------------------------------------------- archives


def read_archive(data: bytes, *, what: str = "the archive") -> tuple[Files, str | None]:
    """The files of a .zip/.skill archive and the name of its top folder (None if SKILL.md is at the top).

    Refuses absolute and '..' paths, symlinks, encrypted entries, and anything that would unpack
    past the limits (a zip bomb) — checked on the bytes really read, not only on the headers.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except UnicodeDecodeError:  # the entry is flagged as UTF-8 but its name is not
        raise SkillFormatError(f"{what} names a file in a way that is not UTF-8 although it says it is; "
                               "pack it again with another tool") from None
    except (zipfile.BadZipFile, OSError, ValueError):
        raise SkillFormatError(f"{what} is not a zip archive; export a skill as .zip or .skill and upload that") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ARCHIVE_ENTRIES:
            raise SkillFormatError(f"{what} has {len(infos)} entries; at most {MAX_ARCHIVE_ENTRIES} are allowed")
        declared = sum(i.file_size for i in infos)
        if declared > MAX_SKILL_BYTES:
            size, limit = _sizes(declared, MAX_SKILL_BYTES)
            raise SkillFormatError(f"{what} would unpack to {size}; a skill may be at most "
                                   f"{limit} (this looks like a zip bomb or not a skill)")
        raw: Files = {}
        total = 0
        for info in infos:
            name = info.filename
            if any(name.startswith(j) or name.endswith("/" + j) or name == j for j in _JUNK):
                continue
            path = clean_path(name.rstrip("/")) if name.strip("/") else ""
            if (info.external_attr >> 16) & 0o170000 == stat.S_IFLNK:
                raise SkillFormatError(f"{what} contains a symbolic link ({name}); skills may not contain links")
            if info.flag_bits & 0x1:
                raise SkillFormatError(f"{what} has an encrypted entry ({name}); upload an unencrypted archive")
            if info.is_dir() or not path:
                continue
            if path in raw:
                raise SkillFormatError(f"{what} contains {path} twice")
            if info.file_size > MAX_FILE_BYTES:
                size, limit = _sizes(info.file_size, MAX_FILE_BYTES)
                raise SkillFormatError(f"{path} is {size}; one file may be at most {limit}")
            content = _read_entry(archive, info, what)
            total += len(content)
            if total > MAX_SKILL_BYTES:
                raise SkillFormatError(f"{what} unpacks to more than {_mb(MAX_SKILL_BYTES)} (a zip bomb?)")
            raw[path] = content
    return _strip_top(raw, what)


def _read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, what: str) -> bytes:
    try:
        with archive.open(info) as handle:
            content = handle.read(MAX_FILE_BYTES + 1)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
        raise SkillFormatError(f"{info.filename} in {what} cannot be read ({exc}): the archive is damaged, "
                               "or its headers do not tell the real sizes") from None
    if len(content) > MAX_FILE_BYTES:
        raise SkillFormatError(f"{info.filename} in {what} unpacks to more than {_mb(MAX_FILE_BYTES)} "
                               "although its header says less (a zip bomb?)")
    return content


def _strip_top(raw: Files, what: str) -> tuple[Files, str | None]:
    if SKILL_FILE in raw:
        return raw, None
    tops = {path.split("/", 1)[0] for path in raw}
    skills = sorted(top for top in tops if f"{top}/{SKILL_FILE}" in raw)
    if len(skills) > 1:
        raise SkillFormatError(f"{what} holds {len(skills)} skills ({', '.join(skills)}); upload one skill per archive")
    if len(tops) == 1:
        top = tops.pop()
        inner = {path.split("/", 1)[1]: data for path, data in raw.items() if "/" in path}
        if SKILL_FILE in inner and len(inner) == len(raw):
            return inner, top
    raise SkillFormatError(f"{what} has no {SKILL_FILE} at its top or inside one top folder; "
                           "a skill archive holds one skill folder (my-skill/SKILL.md, ...)")


def write_archive(name: str, files: Files) -> bytes:
    """A zip of the skill as one folder ``name/`` (the layout other agents install)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rel in sorted(files):
            info = zipfile.ZipInfo(f"{name}/{rel}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, files[rel])
    return buffer.getvalue()
