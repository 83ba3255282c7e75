"""Helpers for the skills tests: skill folders and archives built on the fly."""
from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path
from typing import Any

import pytest

from skills_app.format import render_skill


def skill_md(name: str, description: str = "Does a thing. Use when asked to do the thing.",
             body: str = "# Steps\n\n1. Do the thing.", **extra: Any) -> str:
    return render_skill(name=name, description=description, body=body, extra=extra or None)


def make_skill(root: Path, name: str, description: str = "Does a thing. Use when asked to do the thing.",
               body: str = "# Steps\n\n1. Do the thing.", files: dict[str, str | bytes] | None = None,
               folder: str | None = None) -> Path:
    path = root / (folder or name)
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(skill_md(name, description, body), encoding="utf-8")
    for rel, data in (files or {}).items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def make_zip(entries: dict[str, str | bytes], *, symlinks: dict[str, str] | None = None,
             compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data.encode() if isinstance(data, str) else data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


@pytest.fixture
def skills_root(settings: Any, tmp_path: Path) -> Path:
    """An empty SKILLS_DIR and a bundled directory of the test's own (the real bundled skills stay out)."""
    from skills_app.catalog import get_catalog

    settings.SKILLS_DIR = tmp_path / "user-skills"
    settings.SKILLS_BUNDLED_DIR = tmp_path / "bundled-skills"
    settings.SKILLS_DIR.mkdir()
    settings.SKILLS_BUNDLED_DIR.mkdir()
    get_catalog().invalidate()
    yield settings.SKILLS_DIR
    get_catalog().invalidate()
