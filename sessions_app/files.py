"""Session file uploads: a size-limited streaming upload handler, the SessionFile services, expiry.

Uploads are written chunk by chunk straight into ``SESSION_FILES_DIR/<session>/uploads/``
(never held in memory); the handler aborts as soon as SESSION_FILES_MAX_SIZE_MB is
exceeded and the view answers 413.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import unicodedata
import uuid
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import structlog
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.utils import timezone

from navi_site.errors import BadRequest, InsufficientStorage, NotFound, PayloadTooLarge
from sessions_app.models import Session, SessionFile
from sessions_app.services import session_files_dir

log = structlog.get_logger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def max_upload_bytes() -> int:
    return int(settings.SESSION_FILES_MAX_SIZE_MB) * 1024 * 1024


def uploads_dir(session_id: str | uuid.UUID) -> Path:
    return session_files_dir(session_id) / "uploads"


def sanitize_name(name: str) -> str:
    """A safe file-name stem: no directories, no control or shell characters, bounded length."""
    name = unicodedata.normalize("NFKC", os.path.basename(name.replace("\\", "/"))).strip()
    name = _UNSAFE.sub("_", name).strip("._") or "file"
    stem, dot, ext = name.rpartition(".")
    if dot and stem:
        return f"{stem[:80]}.{ext[:16]}"
    return name[:96]


class _StoredUpload(UploadedFile):
    def __init__(self, file: IO[bytes], *, path: Path, name: str, content_type: str, size: int, charset: str | None):
        super().__init__(file, name, content_type, size, charset)
        self.stored_path = path

    def temporary_file_path(self) -> str:
        return str(self.stored_path)


class LimitedUploadHandler(FileUploadHandler):
    """Streams each file to the session's uploads directory; stops past ``limit`` bytes."""

    def __init__(self, request: Any = None, *, directory: Path, limit: int) -> None:
        super().__init__(request)
        self.directory = directory
        self.limit = limit
        self.exceeded = False
        self.no_space = False
        self.written: list[Path] = []
        self._fh: IO[bytes] | None = None
        self._path: Path | None = None
        self._size = 0

    def new_file(self, field_name: str, file_name: str, content_type: str, content_length: int | None,
                 charset: str | None = None, content_type_extra: dict[str, Any] | None = None) -> None:
        super().new_file(field_name, file_name, content_type, content_length, charset, content_type_extra)
        if content_length is not None and content_length > self.limit:
            self._abort()
        self._path = self.directory / f"{uuid.uuid4().hex[:12]}_{sanitize_name(file_name)}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fh = self._path.open("xb")
        except OSError as exc:
            self._disk_full(exc)
        self.written.append(self._path)
        self._size = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self._size += len(raw_data)
        if self._size > self.limit:
            self._abort()
        assert self._fh is not None
        try:
            self._fh.write(raw_data)
        except OSError as exc:
            self._disk_full(exc)
        return None

    def file_complete(self, file_size: int) -> UploadedFile | None:
        assert self._fh is not None and self._path is not None
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())  # a full disk shows here at the latest, not after the 201
        except OSError as exc:
            self._disk_full(exc)
        self._fh.seek(0)
        return _StoredUpload(self._fh, path=self._path, name=self.file_name or "file",
                             content_type=self.content_type or "", size=file_size, charset=self.charset)

    def upload_interrupted(self) -> None:
        self.cleanup()

    def _abort(self) -> None:
        self.exceeded = True
        self.cleanup()
        # connection_reset=False: Django reads and discards the rest, so the client gets the 413.
        raise StopUpload(connection_reset=False)

    def _disk_full(self, exc: OSError) -> None:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise exc
        self.no_space = True
        self.cleanup()
        raise StopUpload(connection_reset=False)

    def cleanup(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):  # closing flushes; on a full disk that fails too
                self._fh.close()
            self._fh = None
        for path in self.written:
            path.unlink(missing_ok=True)
        self.written = []


def incoming_dir() -> Path:
    """Where uploads land before the session is checked (same filesystem: moving is a rename)."""
    return Path(settings.SESSION_FILES_DIR) / ".incoming"


def install_upload_handler(request: Any) -> LimitedUploadHandler | None:
    """Replace the request's upload handlers before anything reads request.POST / FILES
    (the CSRF check of cookie auth does)."""
    handler = LimitedUploadHandler(request, directory=incoming_dir(), limit=max_upload_bytes())
    try:
        request.upload_handlers = [handler]
    except AttributeError:  # the body was already parsed
        return None
    request._navi_upload_handler = handler
    return handler


def file_store(*, session: Session, request: Any) -> SessionFile:
    """Record the uploaded ``file`` field of ``request``. Raises PayloadTooLarge / BadRequest."""
    handler: LimitedUploadHandler | None = getattr(request, "_navi_upload_handler", None)
    try:
        upload = request.FILES.get("file")
    except Exception as exc:  # a malformed multipart body
        raise BadRequest(f"Could not read the upload ({exc}): send multipart/form-data with a 'file' field.") from None
    if handler is not None and handler.no_space:
        raise InsufficientStorage(
            "The server's disk is full: the file was not saved (nothing else was lost). Free space on the "
            "server (`manage.py doctor` shows how much is left) and upload it again.")
    if handler is not None and handler.exceeded:
        raise PayloadTooLarge(
            f"The file is larger than the upload limit of {settings.SESSION_FILES_MAX_SIZE_MB} MB "
            "(SESSION_FILES_MAX_SIZE_MB): split it or compress it."
        )
    if upload is None:
        raise BadRequest("No file in the request: send multipart/form-data with the file in a field named 'file'.")
    directory = uploads_dir(session.id)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise InsufficientStorage("The server's disk is full: the file was not saved. Free space on the server "
                                  "and upload it again.") from None
    staged = getattr(upload, "stored_path", None)
    path = directory / (staged.name if staged else f"{uuid.uuid4().hex[:12]}_{sanitize_name(upload.name or 'file')}")
    if staged is not None:
        upload.close()
        os.replace(staged, path)
        if handler is not None:
            handler.written = [p for p in handler.written if p != staged]
    else:  # not written by our handler (should not happen): store it ourselves
        with path.open("xb") as fh:
            for chunk in upload.chunks():
                fh.write(chunk)
        upload.close()
    now = timezone.now()
    row = SessionFile.objects.create(
        session=session, original_name=(upload.name or "file")[:255], stored_path=str(Path(path).resolve()),
        size=upload.size or 0, content_type=(upload.content_type or "")[:200], created_at=now,
        expires_at=now + timedelta(hours=int(settings.SESSION_FILES_TTL_HOURS)),
    )
    log.info("session_file_stored", session_id=str(session.id), file_id=str(row.id), size=row.size)
    return row


def file_store_bytes(*, session: Session, name: str, data: bytes, content_type: str = "") -> SessionFile:
    """Record an upload that arrived as bytes (a file sent to the Telegram bot). Raises PayloadTooLarge."""
    if len(data) > max_upload_bytes():
        raise PayloadTooLarge(
            f"The file is larger than the upload limit of {settings.SESSION_FILES_MAX_SIZE_MB} MB "
            "(SESSION_FILES_MAX_SIZE_MB): split it or compress it."
        )
    directory = uploads_dir(session.id)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex[:12]}_{sanitize_name(name or 'file')}"
    with path.open("xb") as fh:
        fh.write(data)
    now = timezone.now()
    row = SessionFile.objects.create(
        session=session, original_name=(name or "file")[:255], stored_path=str(path.resolve()), size=len(data),
        content_type=content_type[:200], created_at=now,
        expires_at=now + timedelta(hours=int(settings.SESSION_FILES_TTL_HOURS)),
    )
    log.info("session_file_stored", session_id=str(session.id), file_id=str(row.id), size=row.size)
    return row


def file_list(*, session: Session) -> list[SessionFile]:
    return list(SessionFile.objects.filter(session=session, expires_at__gt=timezone.now()))


def file_out(f: SessionFile) -> dict[str, Any]:
    return {"id": str(f.id), "name": f.original_name, "path": f.stored_path, "size": f.size,
            "content_type": f.content_type, "created_at": f.created_at, "expires_at": f.expires_at}


def files_resolve(*, session_id: str, refs: list[Any]) -> list[dict[str, Any]]:
    """The session's live uploads named by ``refs`` (ids, {"id"}, or {"name", "path"}) as
    ``{"name", "path"}`` dicts for the agent. Raises NotFound naming the first bad reference."""
    rows = {str(f.id): f for f in SessionFile.objects.filter(session_id=session_id, expires_at__gt=timezone.now())}
    by_path = {f.stored_path: f for f in rows.values()}
    out: list[dict[str, Any]] = []
    for ref in refs:
        row = None
        if isinstance(ref, str):
            row = rows.get(ref)
        elif isinstance(ref, dict):
            row = rows.get(str(ref.get("id") or "")) or by_path.get(str(ref.get("path") or ""))
        label = ref if isinstance(ref, str) else (ref.get("name") or ref.get("id") or ref.get("path"))
        if row is None or not Path(row.stored_path).is_file():
            raise NotFound(
                f"File {str(label)[:80]!r} is not an upload of this session (or it expired): "
                "upload it again with POST /sessions/{id}/files."
            )
        out.append({"name": row.original_name, "path": row.stored_path})
    return out


def files_purge(*, now: Any = None) -> int:
    """Delete expired uploads (rows and files). Idempotent; returns how many were removed."""
    now = now or timezone.now()
    expired = list(SessionFile.objects.filter(expires_at__lte=now))
    for f in expired:
        try:
            Path(f.stored_path).unlink(missing_ok=True)
        except OSError:
            log.warning("session_file_unlink_failed", file_id=str(f.id), exc_info=True)
    count = SessionFile.objects.filter(pk__in=[f.pk for f in expired]).delete()[0]
    if count:
        log.info("session_files_purged", count=count)
    return count
