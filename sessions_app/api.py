"""REST: /sessions (spec 002 "REST API")."""
from __future__ import annotations

from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Status

from navi_site.auth import api_auth
from navi_site.errors import BadRequest, Conflict, NaviError
from sessions_app import files as session_files
from sessions_app import selectors, services
from sessions_app.models import Session
from sessions_app.schemas import (
    BranchOut,
    EditIn,
    ErrorOut,
    FileOut,
    MessageIn,
    MessageOut,
    OkOut,
    PinIn,
    SessionCreatedOut,
    SessionCreateIn,
    SessionDetailOut,
    SessionOut,
    SessionPage,
    SessionPatchIn,
    SteerIn,
    SteerOut,
    StopOut,
)

router = Router(tags=["sessions"])


LIST_FIELDS = ("id", "profile_id", "title", "pinned", "created_at", "last_active", "context_token_count")


def session_out(session: Session, **extra: Any) -> dict[str, Any]:
    return {
        "id": str(session.id),
        "profile_id": session.profile_id,
        "profile_name": session.profile.name,
        "title": session.title,
        "pinned": session.pinned,
        "created_at": session.created_at,
        "last_active": session.last_active,
        "context_token_count": session.context_token_count,
        **selectors.session_model(session),
        **extra,
    }


@router.post("", response={201: SessionCreatedOut}, summary="Create a session")
def create_session(request: HttpRequest, payload: SessionCreateIn) -> Status:
    session = services.session_create(owner=request.user, profile_id=payload.profile_id, title=payload.title)
    from sessions_app.hooks import run_session_created_hooks

    run_session_created_hooks(session)
    return Status(201, {"session_id": str(session.id), "profile_id": session.profile_id, "created_at": session.created_at})


@router.get("", response=SessionPage, summary="List sessions (pinned first, then last active)")
def list_sessions(
    request: HttpRequest,
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0, le=1_000_000_000),
    q: str = Query("", max_length=200, description="Search in titles"),
    has_pending_recall: bool | None = None,
) -> HttpResponse:
    from sessions_app.hooks import filter_sessions, session_flags

    qs = filter_sessions(selectors.session_list(user=request.user, q=q.replace("\x00", "")), has_pending_recall=has_pending_recall)
    total = qs.count()
    # Rows, not model instances: the list is polled (every open tab), and building 2 × 50 models
    # (session + profile, with their init signals) was most of its time.
    page = list(qs.values(*LIST_FIELDS, profile_name=F("profile__name"))[offset : offset + limit])
    flags = session_flags([row["id"] for row in page])
    # Rendered here, in SessionPage's shape: ninja's validation of 50 rows through its Django
    # attribute getter, then json, took a third of the request's CPU.
    items = [{"id": str(row["id"]), "profile_id": row["profile_id"], "profile_name": row["profile_name"],
              "title": row["title"], "pinned": row["pinned"], "created_at": _when(row["created_at"]),
              "last_active": _when(row["last_active"]), "context_token_count": row["context_token_count"],
              "has_pending_recall": bool(flag.get("has_pending_recall")), "busy": bool(flag.get("busy"))}
             for row in page for flag in [flags.get(row["id"], {})]]
    body = {"items": items, "total": total, "limit": limit, "offset": offset}
    return HttpResponse(orjson.dumps(body), content_type="application/json; charset=utf-8")


_when = DjangoJSONEncoder().default  # a datetime as every other response of the API renders it


@router.get("/{session_id}", response=SessionDetailOut, summary="A session with its display history")
def get_session(
    request: HttpRequest,
    session_id: str,
    limit: int = Query(200, ge=1, le=1000, description="How many of the latest messages"),
    before: int | None = Query(None, ge=1, le=2**62, description="Only messages with seq below this (older pages)"),
) -> dict[str, Any]:
    from sessions_app.hooks import session_flags

    session = services.session_access(user=request.user, session_id=session_id)
    qs = selectors.display_messages(session=session)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    rows = list(qs.order_by("-seq")[: limit + 1])
    has_more = len(rows) > limit
    rows = rows[:limit][::-1]
    branches = selectors.branches_of(session_id=session.id, messages=rows)
    messages = [selectors.message_to_dict(m) for m in rows]
    for m in messages:
        if m["seq"] in branches:
            m["branch"] = branches[m["seq"]]
    from sessions_app.runs import get_run_registry

    pending = [i.public() for i in get_run_registry().pending_steers(str(session.id))]
    return session_out(
        session,
        messages=messages,
        pending_steers=pending,
        has_more=has_more,
        max_context_tokens=settings.OLLAMA_NUM_CTX,
        **session_flags([session.id]).get(session.id, {}),
    )


@router.get("/{session_id}/context", summary="The LLM context (may differ from the display history)")
def get_context(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = services.session_access(user=request.user, session_id=session_id)
    rows = selectors.context_messages(session_id=session.id)
    return {
        "session_id": str(session.id),
        "context_token_count": session.context_token_count,
        "max_context_tokens": settings.OLLAMA_NUM_CTX,
        "messages": [selectors.message_to_dict(m) for m in rows],
    }


@router.get("/{session_id}/todo", summary="The session's todo list (filled by the plan, the todo tool and the loop)")
def get_todo(request: HttpRequest, session_id: str) -> dict[str, Any]:
    from agent import ports

    session = services.session_access(user=request.user, session_id=session_id)
    steps = ports.todo().read(str(session.id))
    return {"steps": [{"title": str(s.get("title", "")), "status": str(s.get("status") or "pending")} for s in steps]}


@router.patch("/{session_id}/pin", response=SessionOut, summary="Pin or unpin")
def pin_session(request: HttpRequest, session_id: str, payload: PinIn) -> dict[str, Any]:
    session = services.session_access(user=request.user, session_id=session_id)
    return session_out(services.session_update(session=session, pinned=payload.pinned))


@router.patch("/{session_id}", response=SessionOut, summary="Rename or pin")
def patch_session(request: HttpRequest, session_id: str, payload: SessionPatchIn) -> dict[str, Any]:
    session = services.session_access(user=request.user, session_id=session_id)
    return session_out(services.session_update(session=session, title=payload.title, pinned=payload.pinned))


@router.delete("/{session_id}", response=OkOut, summary="Delete a session and its uploaded files")
async def delete_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    from sessions_app.runs import get_run_registry

    session = await _aaccess(request, session_id)
    registry = get_run_registry()
    if await registry.arequest_stop(str(session.id)):  # stop first: the turn must not write into a deleted session
        await registry.wait_idle(str(session.id), within=15)
    await sync_to_async(services.session_delete)(session=session)
    return {"ok": True}


# -- transport: files, non-streaming messages, stop ---------------------------------------------


async def _aaccess(request: HttpRequest, session_id: str) -> Session:
    return await sync_to_async(services.session_access)(user=request.auth, session_id=session_id)  # type: ignore[attr-defined]


class _UploadLimit:
    """First in the auth chain of the upload: installs the size-limited upload handler before
    anything (the CSRF check of cookie auth) parses the multipart body. Authenticates nobody."""

    def __call__(self, request: HttpRequest) -> None:
        session_files.install_upload_handler(request)
        return None


_MULTIPART = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": {
            "type": "object", "required": ["file"],
            "properties": {"file": {"type": "string", "format": "binary"}},
        }}},
    }
}


@router.post("/{session_id}/files", response={201: FileOut, 404: ErrorOut, 413: ErrorOut}, auth=[_UploadLimit(), *api_auth],
             summary="Upload a file into the session (multipart, field 'file')", openapi_extra=_MULTIPART)
def upload_file(request: HttpRequest, session_id: str) -> Status:
    handler = getattr(request, "_navi_upload_handler", None)
    try:
        session = services.session_access(user=request.auth, session_id=session_id)  # type: ignore[attr-defined]
        row = session_files.file_store(session=session, request=request)
    finally:
        if handler is not None:
            handler.cleanup()  # whatever was not moved into the session (errors, extra fields)
    return Status(201, session_files.file_out(row))


@router.get("/{session_id}/files", response=list[FileOut], summary="The session's uploads that have not expired")
def list_files(request: HttpRequest, session_id: str) -> list[dict[str, Any]]:
    session = services.session_access(user=request.user, session_id=session_id)
    return [session_files.file_out(f) for f in session_files.file_list(session=session)]


@router.post("/{session_id}/messages", response={200: MessageOut, 404: ErrorOut, 409: ErrorOut, 502: ErrorOut},
             summary="Send a message and wait for the whole answer (WebSocket clients see it live)")
async def post_message(request: HttpRequest, session_id: str, payload: MessageIn) -> Any:
    from sessions_app.frames import FrameError, clean_image
    from sessions_app.runs import SessionBusy, TurnRequest, get_run_registry

    session = await _aaccess(request, session_id)
    if not payload.content.strip():
        raise BadRequest("The message is empty: send some text in 'content'.")
    try:
        images = tuple(clean_image(img, i) for i, img in enumerate(payload.images))
    except FrameError as exc:
        raise BadRequest(exc.message) from None
    refs = [f if isinstance(f, str) else f.dict(exclude_none=True) for f in payload.files]
    files = await sync_to_async(session_files.files_resolve)(session_id=str(session.id), refs=refs) if refs else []
    user = request.auth  # type: ignore[attr-defined]
    # The spec's non-streaming run(): the whole turn, without the planning phase.
    request_ = TurnRequest(session_id=str(session.id), text=payload.content, user_id=user.pk,
                           user_role="staff" if user.is_staff else "user", images=images, files=tuple(files),
                           planning=False)
    try:
        result = await get_run_registry().run_turn(request_)
    except SessionBusy as exc:
        raise Conflict(exc.message) from None
    if result.error is not None:
        raise NaviError(result.error, status=502)
    return {"content": result.content, "stopped": result.stopped}


@router.post("/{session_id}/regenerate", response={202: OkOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut},
             summary="Answer the last message again (the old answer stays as a branch you can view)")
async def regenerate(request: HttpRequest, session_id: str) -> Status:
    """Starts the turn and returns at once; WebSocket clients see it stream like any other turn."""
    session = await _aaccess(request, session_id)
    await _refuse_busy(session)
    target = await sync_to_async(services.session_regenerate_target)(session=session)
    await _new_version(request, session, target, target.content or "")
    return Status(202, {"ok": True})


@router.post("/{session_id}/messages/{seq}/edit", response={202: OkOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut},
             summary="Edit your last message and answer it again (the old version stays as a branch you can view)")
async def edit_message(request: HttpRequest, session_id: str, seq: int, payload: EditIn) -> Status:
    """Only the last user message can be edited, and not while a turn runs (409); nothing changes
    when the request is refused. Returns at once; the new answer streams like any other turn."""
    session = await _aaccess(request, session_id)
    await _refuse_busy(session)
    target, text = await sync_to_async(services.session_edit_target)(session=session, seq=seq, content=payload.content)
    await _new_version(request, session, target, text)
    return Status(202, {"ok": True})


@router.get("/{session_id}/branches/{group}", response={200: BranchOut, 404: ErrorOut},
            summary="One version of an edited or regenerated exchange (index 1 = the oldest)")
def get_branch(request: HttpRequest, session_id: str, group: int, index: int = Query(..., ge=1, le=10_000)) -> Any:
    session = services.session_access(user=request.user, session_id=session_id)
    return selectors.branch_version(session=session, group=group, index=index)


async def _refuse_busy(session: Session) -> None:
    from sessions_app.runs import SessionBusy, get_run_registry

    if await get_run_registry().ais_busy(str(session.id)):
        raise Conflict(SessionBusy().message)


async def _new_version(request: HttpRequest, session: Session, target: Any, text: str) -> None:
    """Archive the exchange from ``target`` on (under the turn's lock) and answer ``text`` as its next version."""
    from sessions_app.runs import SessionBusy, TurnRequest, get_run_registry

    user = request.auth  # type: ignore[attr-defined]

    async def archive() -> None:
        await sync_to_async(services.session_regenerate)(session_id=session.id, from_seq=target.seq)

    turn = TurnRequest(session_id=str(session.id), text=text, user_id=user.pk,
                       user_role="staff" if user.is_staff else "user", images=tuple(target.images or ()),
                       is_recall=target.is_recall, before=archive,
                       user_metadata={"branch_group": services.branch_group(target)})
    try:
        await get_run_registry().start_turn(turn)
    except SessionBusy as exc:
        raise Conflict(exc.message) from None


@router.post("/{session_id}/steer", response={202: SteerOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut},
             summary="Add a message to the running turn: it is read at the turn's next step")
async def steer(request: HttpRequest, session_id: str, payload: SteerIn) -> Status:
    """Queues the message for the running turn (wherever it runs) and returns at once: clients see
    ``steer_queued``, then ``steer_accepted`` when the turn reads it. No running turn: 409 (send it
    with POST /messages instead; a steering call that silently started a turn would answer a
    correction as if it were a new request)."""
    from agent.events import SteerQueued
    from sessions_app.bus import apublish
    from sessions_app.runs import SteerRefused, get_run_registry

    session = await _aaccess(request, session_id)
    content = _steer_text(payload.content)
    user = request.auth  # type: ignore[attr-defined]
    try:
        item = await get_run_registry().steer(str(session.id), content=content, user_id=user.pk, ref=payload.ref)
    except SteerRefused as exc:
        raise Conflict(exc.message) from None
    if item is None:
        raise Conflict(f"No turn is running in this session, so there is nothing to steer: send the message with "
                       f"POST /sessions/{session.id}/messages (or over the WebSocket) to start one.")
    await apublish(str(session.id), SteerQueued(id=item.id, content=item.content, ref=item.ref).to_dict())
    return Status(202, {"id": item.id, "content": item.content, "status": "queued"})


@router.get("/{session_id}/steer", response=list[SteerOut], summary="The messages waiting for the running turn")
def list_steer(request: HttpRequest, session_id: str) -> list[dict[str, Any]]:
    from sessions_app.runs import get_run_registry

    session = services.session_access(user=request.user, session_id=session_id)
    return [{**i.public(), "status": "queued"} for i in get_run_registry().pending_steers(str(session.id))]


@router.delete("/{session_id}/steer/{steer_id}", response={200: SteerOut, 404: ErrorOut},
               summary="Withdraw a message before the running turn reads it")
async def withdraw_steer(request: HttpRequest, session_id: str, steer_id: str) -> dict[str, Any]:
    from agent.events import SteerWithdrawn
    from navi_site.errors import NotFound
    from sessions_app.bus import apublish
    from sessions_app.runs import get_run_registry
    from sessions_app.runs.steering import STEER_GONE

    session = await _aaccess(request, session_id)
    item = await get_run_registry().withdraw_steer(str(session.id), steer_id[:64])
    if item is None:
        raise NotFound(STEER_GONE)
    await apublish(str(session.id), SteerWithdrawn(id=item.id).to_dict())
    return {**item.public(), "status": "withdrawn"}


def _steer_text(raw: str) -> str:
    from sessions_app.runs.steering import MAX_STEER_CHARS

    text = (raw or "").replace("\x00", "")
    if not text.strip():
        raise BadRequest("The message is empty: type something in 'content'.")
    if len(text) > MAX_STEER_CHARS:
        raise BadRequest(f"The message has {len(text)} characters: the limit is {MAX_STEER_CHARS}.")
    return text


@router.post("/{session_id}/stop", response=StopOut, summary="Ask the running turn to stop (cooperative)")
async def stop_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    from sessions_app.runs import arequest_stop

    session = await _aaccess(request, session_id)
    return {"ok": True, "stopped": await arequest_stop(str(session.id))}
