"""Backups: one archive with a consistent snapshot of the database, the session files, the user's
tools and skills, the secret key and the Web Push key; and a restore that never half-restores.

The archive is a gzip'd tar::

    navi-backup.json      first member: says what this is ({"format": "navi-backup", "version": 1, ...})
    database/...          navi.sqlite3 (SQLite online backup API), navi.pgdump (pg_dump -Fc), or
                          navi.json (Django's dumpdata, when PostgreSQL has no pg_dump at hand)
    files/<part>/...      session_files, tools, skills
    keys/secret_key, keys/vapid_private.pem
    manifest.json         last member: every other member's size and sha256, the migrations applied

Backup writes ``<out>.partial`` next to the final file and renames it when complete, so a failed
backup (no space left, ...) leaves no archive that looks whole; the partial file is removed.

Restore reads the whole archive into a staging directory beside the data (checking the format,
every checksum and that nothing is missing or extra), builds the new database in a staging place
(a new SQLite file; a new PostgreSQL database), and only then swaps: the current database and
folders are kept as ``*.before-restore-<time>``. A truncated, tampered or foreign archive is
refused before anything in place is touched.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings

FORMAT = "navi-backup"
VERSION = 1
MARKER = "navi-backup.json"
MANIFEST = "manifest.json"
SUFFIX = ".tar.gz"


class BackupError(Exception):
    """A backup or restore could not be done; the message says why and what to do."""


# --- what is backed up -------------------------------------------------------------------------------

def _folders() -> dict[str, Path]:
    return {"session_files": Path(settings.SESSION_FILES_DIR), "tools": Path(settings.TOOLS_DIR),
            "skills": Path(settings.SKILLS_DIR)}


def _key_files() -> dict[str, Path]:
    data = Path(settings.DATA_DIR)
    return {"secret_key": data / "secret_key", "vapid_private.pem": data / "vapid_private.pem"}


def _db() -> dict[str, Any]:
    from django.db import connection

    return dict(connection.settings_dict)


def _vendor() -> str:
    from django.db import connection

    return str(connection.vendor)


def _applied_migrations() -> list[str]:
    from django.db import connection
    from django.db.migrations.recorder import MigrationRecorder

    return sorted(f"{app}.{name}" for app, name in MigrationRecorder(connection).applied_migrations())


def _pg_url(db: dict[str, Any], name: str | None = None) -> str:
    from urllib.parse import quote

    user = quote(str(db.get("USER") or ""))
    password = f":{quote(str(db['PASSWORD']))}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgresql://{auth}{host}{port}/{name or db['NAME']}"


# --- writing ------------------------------------------------------------------------------------------

class _Hashing(io.RawIOBase):
    """Reads ``size`` bytes of a file and hashes what it hands out (the tar member and its checksum
    come from the same read, so a file that changes meanwhile cannot get a wrong checksum)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        chunk = self.fh.read(n)
        self.sha.update(chunk)
        return chunk


@dataclass
class _Writer:
    tar: tarfile.TarFile
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add_bytes(self, name: str, data: bytes, *, record: bool = True) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), int(dt.datetime.now().timestamp()), 0o600
        self.tar.addfile(info, io.BytesIO(data))
        if record:
            self.files[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    def add_file(self, name: str, path: Path) -> None:
        with path.open("rb") as fh:
            info = self.tar.gettarinfo(fileobj=fh, arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            hashing = _Hashing(fh)
            self.tar.addfile(info, hashing)  # type: ignore[arg-type]
        self.files[name] = {"size": info.size, "sha256": hashing.sha.hexdigest()}

    def add_tree(self, prefix: str, root: Path) -> None:
        if not root.is_dir():
            return
        for path in sorted(root.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue  # a link could point anywhere; the folders hold plain files
            self.add_file(f"{prefix}/{path.relative_to(root).as_posix()}", path)


def _dump_database(staging: Path) -> tuple[str, Path]:
    """The database as one file in ``staging``: (kind, path)."""
    vendor = _vendor()
    if vendor == "sqlite":
        target = staging / "navi.sqlite3"
        source = sqlite3.connect(str(_db()["NAME"]), timeout=30)
        dest = sqlite3.connect(str(target))
        try:
            source.backup(dest)  # the online backup API: a consistent snapshot while Navi runs
        except sqlite3.OperationalError as exc:
            if "full" in str(exc):
                raise OSError(errno.ENOSPC, "No space left on device", str(target)) from None
            raise BackupError(f"The SQLite database could not be copied: {exc}.") from None
        finally:
            dest.close()
            source.close()
        return "sqlite", target
    if shutil.which("pg_dump"):
        target = staging / "navi.pgdump"
        out = subprocess.run(["pg_dump", "--format=custom", "--no-owner", "--no-acl", "--file", str(target),
                              "--dbname", _pg_url(_db())], capture_output=True, text=True, timeout=3600)
        if out.returncode == 0:
            return "pg_dump", target
        if "No space left" in out.stderr:
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        sys.stderr.write(f"pg_dump failed ({out.stderr.strip()[:300]}); using a Django-level dump instead.\n")
    target = staging / "navi.json"
    from django.core.management import call_command

    with target.open("w", encoding="utf-8") as fh:
        # One REPEATABLE READ transaction: every table from the same moment.
        from django.db import connection, transaction

        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            call_command("dumpdata", natural_foreign=True, natural_primary=True, stdout=fh,
                         exclude=["contenttypes", "auth.permission", "sessions"])
    return "django-json", target


def default_dir() -> Path:
    configured = getattr(settings, "NAVI_BACKUP_DIR", "")
    return Path(configured).expanduser() if configured else Path(settings.DATA_DIR) / "backups"


def default_name(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.UTC)
    return f"navi-backup-{now.strftime('%Y%m%d-%H%M%S-%f')}{SUFFIX}"


def backup_create(*, out: Path | None = None) -> Path:
    """Write a backup archive; returns its path. Raises BackupError (no space, unwritable place, ...)."""
    out = (out or default_dir() / default_name()).expanduser().resolve()
    if out.exists():
        raise BackupError(f"{out} already exists: choose another --out file (a backup never overwrites one).")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupError(f"Cannot create the folder {out.parent}: {exc.strerror or exc}.") from None
    partial = out.with_name(out.name + ".partial")
    staging = out.parent / f".navi-backup-{uuid.uuid4().hex[:8]}"
    try:
        staging.mkdir()
        kind, dump = _dump_database(staging)
        with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
            writer = _Writer(tar)
            marker = {"format": FORMAT, "version": VERSION, "created_at": dt.datetime.now(dt.UTC).isoformat(),
                      "database": {"vendor": _vendor(), "kind": kind}}
            writer.add_bytes(MARKER, json.dumps(marker).encode(), record=False)
            writer.add_file(f"database/{dump.name}", dump)
            for part, root in _folders().items():
                writer.add_tree(f"files/{part}", root)
            for name, path in _key_files().items():
                if path.is_file():
                    writer.add_file(f"keys/{name}", path)
            if not _key_files()["secret_key"].is_file():  # SECRET_KEY came from the environment
                writer.add_bytes("keys/secret_key", settings.SECRET_KEY.encode())
            manifest = {**marker, "migrations": _applied_migrations(), "files": writer.files}
            writer.add_bytes(MANIFEST, json.dumps(manifest, indent=1).encode(), record=False)
        with partial.open("rb") as fh:
            os.fsync(fh.fileno())
        os.replace(partial, out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            free = shutil.disk_usage(out.parent).free
            raise BackupError(f"No space left on the device of {out.parent} ({free // 1024} KB free): the backup "
                              "was not written and nothing partial is left. Free some space or give --out on "
                              "another disk.") from None
        raise BackupError(f"The backup could not be written to {out}: {exc.strerror or exc}.") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def backup_prune(*, folder: Path | None = None, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` archives named like ours in ``folder``; returns the deleted."""
    folder = folder or default_dir()
    archives = sorted(folder.glob(f"navi-backup-*{SUFFIX}"))
    doomed = archives[:-keep] if keep > 0 else []
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


# --- reading and verifying -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class Unpacked:
    root: Path
    manifest: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.manifest["database"]["kind"])

    def database_file(self) -> Path:
        [name] = [n for n in self.manifest["files"] if n.startswith("database/")]
        return self.root / name


def _safe_name(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts


def unpack(archive: Path, into: Path) -> Unpacked:
    """Extract and verify ``archive`` into the empty folder ``into``. Raises BackupError naming the problem."""
    if not archive.is_file():
        raise BackupError(f"{archive} does not exist or is not a file.")
    foreign = (f"{archive} is not a Navi backup (made by `manage.py backup`, a .tar.gz with a manifest): "
               "nothing was restored.")
    try:
        tar = tarfile.open(archive, "r:gz")
    except (tarfile.TarError, OSError, EOFError):
        raise BackupError(foreign) from None
    hashes: dict[str, dict[str, Any]] = {}
    marker: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    try:
        with tar:
            first = True
            for member in tar:
                if first and member.name != MARKER:
                    raise BackupError(foreign)
                first = False
                if not member.isfile() or not _safe_name(member.name):
                    raise BackupError(f"{archive} holds {member.name!r}, which is not a plain file inside the "
                                      "archive: refused, nothing was restored.")
                fh = tar.extractfile(member)
                assert fh is not None
                if member.name in (MARKER, MANIFEST):
                    try:
                        data = json.loads(fh.read(1024 * 1024 * 64))
                    except ValueError:
                        raise BackupError(f"{archive}: {member.name} is not valid JSON — the archive is damaged "
                                          "or not a Navi backup; nothing was restored.") from None
                    if member.name == MARKER:
                        marker = data
                        if not isinstance(data, dict) or data.get("format") != FORMAT:
                            raise BackupError(foreign)
                        if data.get("version") != VERSION:
                            raise BackupError(f"{archive} is a Navi backup of format version {data.get('version')}; "
                                              f"this Navi reads version {VERSION}. Use a matching Navi.")
                    else:
                        manifest = data
                    continue
                target = into / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                sha, size = hashlib.sha256(), 0
                with target.open("wb") as out:
                    while chunk := fh.read(1024 * 1024):
                        sha.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
                hashes[member.name] = {"size": size, "sha256": sha.hexdigest()}
    except BackupError:
        raise
    except (tarfile.TarError, EOFError, zlib_error(), OSError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise BackupError(f"No space left to unpack {archive} beside the data: free some space; "
                              "nothing was restored.") from None
        raise BackupError(f"{archive} is truncated or corrupt ({type(exc).__name__}: {exc}): nothing was "
                          "restored. Use another copy of the backup.") from None
    if marker is None:
        raise BackupError(foreign)
    if manifest is None:
        raise BackupError(f"{archive} has no manifest at its end: it is truncated (an interrupted copy?). "
                          "Nothing was restored; use another copy of the backup.")
    listed = manifest.get("files") if isinstance(manifest.get("files"), dict) else None
    if listed is None:
        raise BackupError(f"{archive}: the manifest lists no files; nothing was restored.")
    for name, expected in listed.items():
        got = hashes.get(name)
        if got is None:
            raise BackupError(f"{archive} is missing {name}, which its manifest lists: nothing was restored.")
        if got != {"size": expected.get("size"), "sha256": expected.get("sha256")}:
            raise BackupError(f"{archive}: {name} does not match its checksum in the manifest — the archive "
                              "was changed or damaged after it was made. Nothing was restored.")
    extra = sorted(set(hashes) - set(listed))
    if extra:
        raise BackupError(f"{archive} holds {extra[0]}, which its manifest does not list — the archive was "
                          "changed after it was made. Nothing was restored.")
    if sum(1 for n in listed if n.startswith("database/")) != 1:
        raise BackupError(f"{archive} does not hold exactly one database dump: nothing was restored.")
    return Unpacked(root=into, manifest=manifest)


def zlib_error() -> type[Exception]:
    import zlib

    return zlib.error


# --- restoring ---------------------------------------------------------------------------------------------

def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")


def _check_compatible(unpacked: Unpacked) -> None:
    from django.db.migrations.loader import MigrationLoader

    vendor, kind = _vendor(), unpacked.kind
    if kind == "sqlite" and vendor != "sqlite" or kind == "pg_dump" and vendor != "postgresql":
        source = "SQLite" if kind == "sqlite" else "PostgreSQL"
        raise BackupError(f"This backup holds a {source} database but this Navi uses {vendor}: point DATABASE_URL "
                          f"at a {source} database to restore it (then move the data with dumpdata/loaddata).")
    if kind == "pg_dump" and not shutil.which("pg_restore"):
        raise BackupError("This backup holds a pg_dump archive; install pg_restore (postgresql-client) to restore it.")
    known = {f"{app}.{name}" for app, name in MigrationLoader(None, ignore_no_migrations=True).disk_migrations}
    unknown = sorted(set(unpacked.manifest.get("migrations", [])) - known)
    if unknown:
        raise BackupError(f"This backup was made by a newer Navi (it has migration {unknown[0]}, unknown here): "
                          "update Navi first, then restore. Nothing was restored.")


def _verify_sqlite(path: Path) -> None:
    try:
        conn = sqlite3.connect(str(path))
        try:
            ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
            conn.execute("SELECT count(*) FROM django_migrations").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BackupError(f"The database in the backup cannot be read ({exc}): nothing was restored.") from None
    if ok != "ok":
        raise BackupError(f"The database in the backup is damaged ({ok}): nothing was restored.")


def _manage(env: dict[str, str], *args: str) -> None:
    out = subprocess.run([sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args],
                         env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise BackupError(f"manage.py {args[0]} on the staging database failed: {out.stderr.strip()[-500:]}")


def _child_env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["DATABASE_URL"] = database_url
    env["NAVI_DATA_DIR"] = str(settings.DATA_DIR)
    return env


def _staged_sqlite(unpacked: Unpacked, staging: Path) -> Path:
    target = staging / "navi.db"
    if unpacked.kind == "sqlite":
        shutil.copyfile(unpacked.database_file(), target)
    else:  # a Django-level dump: a fresh database at the same migrations, then the rows
        env = _child_env(f"sqlite:///{target}")
        _manage(env, "migrate", "--noinput", "-v", "0")
        _manage(env, "flush", "--noinput", "-v", "0")
        _manage(env, "loaddata", "-v", "0", str(unpacked.database_file()))
    _verify_sqlite(target)
    return target


def _pg(db: dict[str, Any], sql: str) -> None:
    import psycopg

    with psycopg.connect(_pg_url(db, "postgres"), autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def _staged_postgres(unpacked: Unpacked) -> str:
    db = _db()
    name = f"{db['NAME']}_restore_{uuid.uuid4().hex[:6]}"
    _pg(db, f'CREATE DATABASE "{name}"')
    try:
        if unpacked.kind == "pg_dump":
            out = subprocess.run(["pg_restore", "--no-owner", "--no-acl", "--exit-on-error", "--dbname",
                                  _pg_url(db, name), str(unpacked.database_file())],
                                 capture_output=True, text=True, timeout=3600)
            if out.returncode != 0:
                raise BackupError(f"pg_restore into a staging database failed: {out.stderr.strip()[-500:]}. "
                                  "Nothing was restored.")
        else:
            env = _child_env(_pg_url(db, name))
            _manage(env, "migrate", "--noinput", "-v", "0")
            _manage(env, "flush", "--noinput", "-v", "0")
            _manage(env, "loaddata", "-v", "0", str(unpacked.database_file()))
    except BaseException:
        _drop_quietly(db, name)
        raise
    return name


def _drop_quietly(db: dict[str, Any], name: str) -> None:
    with contextlib.suppress(Exception):
        _pg(db, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored:
    kept: list[Path | str]  # what was in place before, kept aside


def _staging_beside(target: Path, tag: str) -> Path:
    return target.parent / f".{target.name}.restore-{tag}"


def backup_restore(*, archive: Path) -> Restored:
    """Replace the database and files by the archive's. Raises BackupError; then nothing in place changed.

    Call with Navi stopped (the embedded server refuses while it runs)."""
    from django.db import connections

    from navi_site import serverfile

    running = serverfile.running()
    if running is not None:
        raise BackupError(f"Navi is running (pid {running.pid}): stop it first, then restore.")
    archive = archive.expanduser().resolve()
    data = Path(settings.DATA_DIR)
    tag = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix=".navi-restore-", dir=data))
    staged_db_name: str | None = None
    staged_dirs: dict[Path, Path] = {}
    try:
        unpacked = unpack(archive, work / "unpacked")
        _check_compatible(unpacked)
        # 1. Everything staged beside its final place (same file system: the swap is a rename).
        if _vendor() == "sqlite":
            staged_sqlite = _staged_sqlite(unpacked, work)
        else:
            staged_db_name = _staged_postgres(unpacked)
        for part, target in _folders().items():
            source = unpacked.root / "files" / part
            staged = _staging_beside(target, tag)
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, staged)
            else:
                staged.mkdir()
            staged_dirs[target] = staged
        keys = {name: unpacked.root / "keys" / name for name in _key_files()}
    except BaseException:
        for staged in staged_dirs.values():
            shutil.rmtree(staged, ignore_errors=True)
        if staged_db_name:
            _drop_quietly(_db(), staged_db_name)
        shutil.rmtree(work, ignore_errors=True)
        raise
    # 2. The swap: renames only; what was there is kept aside.
    stamp = _stamp()
    kept: list[Path | str] = []
    connections.close_all()
    db = _db()
    if staged_db_name is None:
        live = Path(str(db["NAME"]))
        if live.exists():
            aside = live.with_name(f"{live.name}.before-restore-{stamp}")
            os.replace(live, aside)
            kept.append(aside)
        for suffix in ("-wal", "-shm"):
            Path(f"{live}{suffix}").unlink(missing_ok=True)
        os.replace(staged_sqlite, live)
    else:
        aside_name = f"{db['NAME']}_before_restore_{stamp.replace('-', '_')}"
        _pg(db, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db['NAME']}' "
                "AND pid <> pg_backend_pid()")
        _pg(db, f'ALTER DATABASE "{db["NAME"]}" RENAME TO "{aside_name}"')
        _pg(db, f'ALTER DATABASE "{staged_db_name}" RENAME TO "{db["NAME"]}"')
        kept.append(f"database {aside_name}")
    for target, staged in staged_dirs.items():
        if target.exists():
            aside = target.with_name(f"{target.name}.before-restore-{stamp}")
            os.replace(target, aside)
            kept.append(aside)
        os.replace(staged, target)
    for name, source in keys.items():
        target = _key_files()[name]
        if source.is_file():
            if target.exists() and target.read_bytes() == source.read_bytes():
                continue
            if target.exists():
                aside = target.with_name(f"{target.name}.before-restore-{stamp}")
                os.replace(target, aside)
                kept.append(aside)
            shutil.copyfile(source, target)
            target.chmod(0o600)
    shutil.rmtree(work, ignore_errors=True)
    return Restored(kept=kept)


def archives(folder: Path | None = None) -> Iterator[Path]:
    yield from sorted((folder or default_dir()).glob(f"navi-backup-*{SUFFIX}"))
