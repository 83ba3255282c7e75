"""manage.py backup / restore: a whole round trip (both tiers, in child processes on a database of
their own), and every bad archive refused with nothing in place touched; no partial archive on a
full disk; the daily backup keeps NAVI_BACKUP_KEEP."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from navi_site.backup import BackupError, backup_create, backup_prune, backup_restore
from tests.support.users import make_user

ROOT = Path(__file__).resolve().parents[1]
TIER = os.environ.get("NAVI_TEST_TIER", "embedded")
pytestmark = pytest.mark.django_db(transaction=True)


# --- bad archives: refused, nothing in place touched ---------------------------------------------------

@pytest.fixture
def made(settings: Any, tmp_path: Path) -> Path:
    """A real backup of the test database with one session file, one user tool and one skill."""
    make_user("keeper")
    (Path(settings.SESSION_FILES_DIR) / "s1").mkdir(parents=True)
    (Path(settings.SESSION_FILES_DIR) / "s1" / "notes.txt").write_text("precious")
    Path(settings.TOOLS_DIR).mkdir(parents=True, exist_ok=True)
    (Path(settings.TOOLS_DIR) / "mine.py").write_text("# my tool\n")
    (Path(settings.SKILLS_DIR) / "greet").mkdir(parents=True)
    (Path(settings.SKILLS_DIR) / "greet" / "SKILL.md").write_text("---\nname: greet\n---\nSay hi.\n")
    return backup_create(out=tmp_path / "good.tar.gz")


def _members(archive: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(archive, "r:gz") as tar:
        return [(m, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]


def _write(archive: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _refused(settings: Any, archive: Path) -> str:
    before = (Path(settings.SESSION_FILES_DIR) / "s1" / "notes.txt").read_text()
    with pytest.raises(BackupError) as caught:
        backup_restore(archive=archive)
    from django.contrib.auth import get_user_model

    assert get_user_model().objects.filter(username="keeper").exists()  # the database is the same one
    assert (Path(settings.SESSION_FILES_DIR) / "s1" / "notes.txt").read_text() == before
    leftovers = [p for root in (Path(settings.DATA_DIR), Path(settings.SESSION_FILES_DIR).parent)
                 for p in root.iterdir() if "restore" in p.name]
    assert leftovers == []  # no staging left behind
    return str(caught.value)


def test_the_archive_holds_what_it_should(made: Path) -> None:
    names = [m.name for m, _ in _members(made)]
    assert names[0] == "navi-backup.json" and names[-1] == "manifest.json"
    assert {"files/session_files/s1/notes.txt", "files/tools/mine.py", "files/skills/greet/SKILL.md",
            "keys/secret_key"} <= set(names)
    assert any(n.startswith("database/") for n in names)
    manifest = json.loads(_members(made)[-1][1])
    assert set(manifest["files"]) == set(names[1:-1])
    assert all(len(v["sha256"]) == 64 for v in manifest["files"].values())


def test_truncated_archive_is_refused(settings, made: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(made.read_bytes()[: made.stat().st_size * 2 // 3])
    message = _refused(settings, cut)
    assert "truncated" in message and "nothing was restored" in message.lower()


def test_tampered_archive_is_refused(settings, made: Path, tmp_path: Path) -> None:
    members = _members(made)
    bad = [(m, b"not so precious" if m.name.endswith("notes.txt") else d) for m, d in members]
    tampered = tmp_path / "tampered.tar.gz"
    _write(tampered, bad)
    message = _refused(settings, tampered)
    assert "files/session_files/s1/notes.txt does not match its checksum" in message
    extra = tmp_path / "extra.tar.gz"
    info = tarfile.TarInfo("files/tools/evil.py")
    _write(extra, members[:-1] + [(info, b"import os\n"), members[-1]])
    assert "files/tools/evil.py, which its manifest does not list" in _refused(settings, extra)


def test_foreign_archives_are_refused(settings, made: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.tar.gz"
    _write(other, [(tarfile.TarInfo("photos/cat.jpg"), b"\xff\xd8 a cat")])
    assert "is not a Navi backup" in _refused(settings, other)
    text = tmp_path / "notes.tar.gz"
    text.write_text("just some text")
    assert "is not a Navi backup" in _refused(settings, text)
    escaping = tmp_path / "escape.tar.gz"
    members = _members(made)
    _write(escaping, members[:1] + [(tarfile.TarInfo("../../outside.txt"), b"x")] + members[1:])
    assert "'../../outside.txt', which is not a plain file inside the archive" in _refused(settings, escaping)
    assert "does not exist" in _refused(settings, tmp_path / "missing.tar.gz")


def test_backup_refuses_to_overwrite(made: Path) -> None:
    with pytest.raises(BackupError, match="already exists"):
        backup_create(out=made)


# --- no space left ------------------------------------------------------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KB tmpfs (root and mount(8) needed; else the test is skipped)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_backup_on_a_full_disk_leaves_nothing(settings, tiny_disk: Path) -> None:
    (Path(settings.SESSION_FILES_DIR) / "big").mkdir(parents=True)
    (Path(settings.SESSION_FILES_DIR) / "big" / "noise.bin").write_bytes(os.urandom(1024 * 1024))
    with pytest.raises(BackupError) as caught:
        backup_create(out=tiny_disk / "full.tar.gz")
    assert "No space left" in str(caught.value) and "nothing partial is left" in str(caught.value)
    assert list(tiny_disk.iterdir()) == []


# --- the daily backup ---------------------------------------------------------------------------------

def test_daily_backup_keeps_the_newest(settings, tmp_path: Path) -> None:
    from navi_site.celery import app
    from navi_site.tasks import daily_backup

    assert app.conf.beat_schedule["daily-backup"]["task"] == "navi.backup"
    settings.NAVI_BACKUP_DIR, settings.NAVI_BACKUP_KEEP = str(tmp_path / "daily"), 2
    written = [Path(daily_backup()) for _ in range(3)]
    assert sorted((tmp_path / "daily").iterdir()) == written[1:]
    assert backup_prune(folder=tmp_path / "daily", keep=1) == written[1:2]
    settings.NAVI_BACKUP_KEEP = 0
    assert daily_backup() == "off"


# --- the round trip, in child processes on a database of their own ----------------------------------------

def _child_env(tmp_path: Path, **extra: str) -> tuple[dict[str, str], str | None]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({"NAVI_DATA_DIR": str(tmp_path / "data"), "SESSION_FILES_DIR": str(tmp_path / "files"),
                "LOG_LEVEL": "WARNING"})
    pg_name = None
    if TIER == "scaleout":
        import psycopg

        pg_name = f"navi_bk_{uuid.uuid4().hex[:8]}"
        base = os.environ.get("NAVI_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{pg_name}"')
        env["DATABASE_URL"] = base.rsplit("/", 1)[0] + "/" + pg_name
    env.update(extra)
    return env, pg_name


def _drop_databases(prefix: str) -> None:
    import psycopg

    base = os.environ.get("NAVI_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
    with psycopg.connect(base, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",))]
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


USERS = "from django.contrib.auth.models import User; print(sorted(User.objects.values_list('username', flat=True)))"


@pytest.mark.parametrize("dump", ["native", "django"])
def test_round_trip(tmp_path: Path, dump: str) -> None:
    if dump == "django" and TIER != "scaleout":
        pytest.skip("the Django-level dump is PostgreSQL's fallback when pg_dump is missing")
    extra = {"PATH": str(tmp_path / "nobin")} if dump == "django" else {}  # no pg_dump on the PATH
    env, pg_name = _child_env(tmp_path, **extra)
    try:
        assert _manage(env, "migrate", "-v", "0").returncode == 0
        create = "from django.contrib.auth.models import User; User.objects.create_user('{}', password='x' * 12)"
        assert _manage(env, "shell", "-c", create.format("before")).returncode == 0
        files = tmp_path / "files" / "s1"
        files.mkdir(parents=True)
        (files / "notes.txt").write_text("first")
        out = _manage(env, "backup", "--out", str(tmp_path / "b.tar.gz"))
        assert out.returncode == 0 and "Backup written" in out.stdout, out.stderr
        kind = json.loads(_members(tmp_path / "b.tar.gz")[0][1])["database"]["kind"]
        assert kind == {"embedded": "sqlite", "scaleout": "pg_dump" if dump == "native" else "django-json"}[
            TIER if dump == "native" else "scaleout"]
        assert _manage(env, "shell", "-c", create.format("after")).returncode == 0
        (files / "notes.txt").write_text("second")
        out = _manage(env, "restore", str(tmp_path / "b.tar.gz"))
        assert out.returncode == 0 and "Restored" in out.stdout, out.stderr
        assert (files / "notes.txt").read_text() == "first"
        users = _manage(env, "shell", "-c", USERS)
        assert users.stdout.strip().splitlines()[-1] == "['before']", users.stderr
        assert "kept the previous" in out.stdout
    finally:
        if pg_name:
            _drop_databases(pg_name)
