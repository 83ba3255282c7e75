"""REST: /skills (the skill store) and /skill-proposals (the learning loop's cards).

Reading skills is for every signed-in user; installing, enabling, rolling back and removing are
for staff. A proposal is its owner's: only they see, accept (if they may write skills) or discard it.
"""
from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import InMemoryUploadedFile, UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema, Status
from pydantic import Field

from navi_site.auth import api_auth
from navi_site.errors import BadRequest, Conflict, NotFound, PayloadTooLarge
from skills_app import selectors, services
from skills_app.format import SkillFormatError
from skills_app.store import SkillNotFound, get_store
from skills_app.tree import read_archive

router = Router(tags=["skills"])
proposals_router = Router(tags=["skills"])


class ProposalAcceptIn(Schema):
    content: str | None = Field(default=None, max_length=1_100_000,
                                description="The edited SKILL.md; omit to accept the proposal as it is.")


class RollbackIn(Schema):
    version: int = Field(ge=1)


class EnableIn(Schema):
    enabled: bool


def _not_found(exc: SkillNotFound) -> NotFound:
    text = str(exc)
    return NotFound(text[:1].upper() + text[1:] + ".")


# ---------------------------------------------------------------------------- the store


@router.get("", summary="List the skills (valid and broken), and which profiles list each one")
def list_skills(request: HttpRequest) -> dict[str, Any]:
    return selectors.skill_overview(user=request.auth)  # type: ignore[attr-defined]


def _upload_limit() -> int:
    return int(float(settings.SKILLS_UPLOAD_MAX_MB) * 1024 * 1024)


class _CappedUpload(FileUploadHandler):
    """Keeps an upload in memory up to the limit, counted over all the files of the request (the body
    is parsed before authentication, by the CSRF check); past it, stops (the view answers 413)."""

    def __init__(self, request: Any = None, *, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.exceeded = False
        self._buffer = io.BytesIO()
        self._received = 0

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        if self.content_length is not None and self.content_length > self.limit:
            self._stop()
        self._buffer = io.BytesIO()

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self._received += len(raw_data)
        if self._received > self.limit:
            self._stop()
        self._buffer.write(raw_data)
        return None

    def file_complete(self, file_size: int) -> UploadedFile | None:
        self._buffer.seek(0)
        return InMemoryUploadedFile(self._buffer, self.field_name, self.file_name or "skill.zip",
                                    self.content_type, file_size, self.charset)

    def _stop(self) -> None:
        self.exceeded = True
        raise StopUpload(connection_reset=False)  # Django drains the body, the client gets the 413


class _UploadLimit:
    """First in the auth chain: installs the capped handler before the CSRF check parses the body."""

    def __call__(self, request: HttpRequest) -> None:
        handler = _CappedUpload(request, limit=_upload_limit())
        try:
            request.upload_handlers = [handler]
            request._skill_upload = handler  # type: ignore[attr-defined]
        except AttributeError:
            pass
        return None


_MULTIPART = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"],
    "properties": {"file": {"type": "string", "format": "binary"},
                   "replace": {"type": "boolean", "description": "Install as a new version of an existing skill."},
                   "enable_for": {"type": "string", "description": "Comma-separated profile ids to enable it for."}},
}}}}}


@router.post("", response={201: dict[str, Any]}, auth=[_UploadLimit(), *api_auth], openapi_extra=_MULTIPART,
             summary="Install a skill from a .zip or .skill archive (multipart, field 'file'; staff only)")
def install_skill(request: HttpRequest) -> Status:
    services.require_staff(request.auth, "install skills")  # type: ignore[attr-defined]
    try:
        upload = request.FILES.get("file")
    except Exception as exc:  # noqa: BLE001 - a malformed multipart body
        raise BadRequest(f"Could not read the upload ({exc}): send multipart/form-data with a 'file' field.") from None
    handler = getattr(request, "_skill_upload", None)
    if handler is not None and handler.exceeded:
        raise PayloadTooLarge(f"The archive is larger than {settings.SKILLS_UPLOAD_MAX_MB} MB (SKILLS_UPLOAD_MAX_MB); "
                              "a skill is instructions and a few small files.")
    if upload is None:
        raise BadRequest("No file in the request: send the .zip or .skill archive in a field named 'file'.")
    try:
        files, folder = read_archive(upload.read(), what=f"the archive {upload.name!r}")
    except SkillFormatError as exc:
        raise BadRequest(f"The skill was not installed: {exc}") from None
    replace = str(request.POST.get("replace", "")).lower() in ("1", "true", "yes", "on")
    enable_for = [p.strip() for p in str(request.POST.get("enable_for", "")).split(",") if p.strip()]
    name, version = services.skill_install(user=request.auth, files=files, folder=folder,  # type: ignore[attr-defined]
                                           replace=replace, enable_for=enable_for)
    return Status(201, {"name": name, "version": version.number})


@router.get("/{name}", summary="One skill: its front matter, instructions, files, versions and profiles")
def get_skill(request: HttpRequest, name: str) -> dict[str, Any]:
    try:
        return selectors.skill_detail(name=name)
    except SkillNotFound as exc:
        raise _not_found(exc) from None


@router.get("/{name}/file", summary="The text of one file of a skill (?path=references/x.md)")
def get_skill_file(request: HttpRequest, name: str, path: str) -> dict[str, Any]:
    try:
        return {"name": name, "path": path, "text": get_store().read_file(name, path)}
    except SkillNotFound as exc:
        raise _not_found(exc) from None
    except SkillFormatError as exc:
        raise BadRequest(str(exc)) from None


@router.get("/{name}/versions/{number}", summary="The SKILL.md of one saved version")
def get_version(request: HttpRequest, name: str, number: int) -> dict[str, Any]:
    try:
        return selectors.version_detail(name=name, number=number)
    except SkillNotFound as exc:
        raise _not_found(exc) from None


@router.post("/{name}/rollback", summary="Make an earlier version current again (staff only)")
def rollback(request: HttpRequest, name: str, payload: RollbackIn) -> dict[str, Any]:
    version = services.skill_rollback(user=request.auth, name=name, version=payload.version)  # type: ignore[attr-defined]
    return {"name": name, "version": version.number}


@router.put("/{name}/profiles/{profile_id}", summary="List the skill in a profile's prompt, or not (staff only)")
def set_enabled(request: HttpRequest, name: str, profile_id: str, payload: EnableIn) -> dict[str, Any]:
    names = services.skill_set_enabled(user=request.auth, name=name, profile_id=profile_id,  # type: ignore[attr-defined]
                                       enabled=payload.enabled)
    return {"profile_id": profile_id, "enabled_skills": names}


@router.get("/{name}/export", summary="Download the skill as a zip (one folder named like the skill)")
def export_skill(request: HttpRequest, name: str) -> HttpResponse:
    try:
        data = selectors.skill_export(name=name)
    except SkillNotFound as exc:
        raise _not_found(exc) from None
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}.zip"'
    return response


@router.delete("/{name}", summary="Remove the user's skill (its versions are kept; staff only)")
def remove_skill(request: HttpRequest, name: str) -> dict[str, Any]:
    services.require_staff(request.auth, "remove skills")  # type: ignore[attr-defined]
    store = get_store()
    skill = store.scan().skills.get(name)
    if skill is None:
        raise NotFound(f"There is no skill named {name!r}.")
    if skill.source == "bundled":
        raise Conflict(f"{name!r} is a bundled skill: it cannot be removed. Disable it for the profiles that list it, "
                       "or install your own version of it (replace).")
    try:
        store.remove(name, by=request.auth.get_username())  # type: ignore[attr-defined]
    except SkillNotFound as exc:
        raise _not_found(exc) from None
    return {"ok": True}


# ---------------------------------------------------------------------------- proposals


@proposals_router.get("", summary="Your skill proposals in a session (shown, accepted or discarded)")
def list_proposals(request: HttpRequest, session_id: str) -> list[dict[str, Any]]:
    return selectors.proposals_for_session(user=request.auth, session_id=session_id)  # type: ignore[attr-defined]


@proposals_router.get("/{proposal_id}", summary="One of your skill proposals")
def get_proposal(request: HttpRequest, proposal_id: int) -> dict[str, Any]:
    return services.proposal_to_dict(services.proposal_access(user=request.auth, proposal_id=proposal_id))  # type: ignore[attr-defined]


@proposals_router.post("/{proposal_id}/accept", summary="Save the proposed (or edited) skill as a new version")
def accept_proposal(request: HttpRequest, proposal_id: int, payload: ProposalAcceptIn) -> dict[str, Any]:
    proposal = services.proposal_accept(user=request.auth, proposal_id=proposal_id,  # type: ignore[attr-defined]
                                        content=payload.content)
    return services.proposal_to_dict(proposal)


@proposals_router.post("/{proposal_id}/discard", summary="Discard a skill proposal")
def discard_proposal(request: HttpRequest, proposal_id: int) -> dict[str, Any]:
    return services.proposal_to_dict(services.proposal_discard(user=request.auth, proposal_id=proposal_id))  # type: ignore[attr-defined]


ROUTERS = (("/skills", router), ("/skill-proposals", proposals_router))
