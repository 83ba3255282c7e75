"""REST: the models of the configured servers, pulling one (staff), and a session's model.

- ``GET /models``: every server's models with size and capabilities (``local_models.servers``).
- ``POST /models/pull`` (staff): NDJSON progress events while Ollama pulls (``local_models.pull``);
  closing the request cancels the pull.
- ``GET``/``PUT /sessions/{id}/model``: the model this session's turns use; ``{"model": ""}`` goes back
  to the profile's.
"""
from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Field, Router, Schema

from local_models import choice
from local_models.pull import pull_lines
from local_models.servers import ModelNameError, all_models, clean_model_name
from navi_site.errors import BadRequest, NaviError
from navi_site.streaming import ClosingStreamingResponse
from sessions_app.services import session_access

router = Router(tags=["models"])
ROUTERS = (("", router),)

PULL_FORBIDDEN = ("Only staff users can pull models: a pull downloads gigabytes onto the model server's disk. "
                  "Ask an administrator to pull it, or choose one of the models already there.")


class Forbidden(NaviError):
    status = 403


class PullIn(Schema):
    model: str = Field(max_length=1000, description="The model to pull, as Ollama names it (e.g. 'qwen3:4b')")


class SessionModelIn(Schema):
    model: str = Field(max_length=1000, description="A model the server lists; '' = the profile's model")
    backend: str = Field(default="ollama", max_length=20, description="'ollama' or 'openai'")


class SessionModelOut(Schema):
    session_id: str
    model: str
    model_backend: str
    model_source: str


@router.get("/models", summary="The models of the configured Ollama and OpenAI-compatible servers")
async def list_models(request: HttpRequest) -> dict[str, Any]:
    servers = await all_models()
    user = request.auth  # type: ignore[attr-defined]
    return {"servers": [s.to_dict() for s in servers], "can_pull": bool(user.is_staff)}


@router.post("/models/pull", summary="Pull a model onto the Ollama server (staff; NDJSON progress, cancel by closing)")
async def pull_model(request: HttpRequest, payload: PullIn) -> StreamingHttpResponse:
    user = request.auth  # type: ignore[attr-defined]
    if not user.is_staff:
        raise Forbidden(PULL_FORBIDDEN)
    try:
        name = clean_model_name(payload.model)
    except ModelNameError as exc:
        raise BadRequest(str(exc)) from None
    response = ClosingStreamingResponse(pull_lines(name), content_type="application/x-ndjson")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy must pass each line on at once
    return response


async def _session(request: HttpRequest, session_id: str) -> Any:
    return await sync_to_async(session_access)(user=request.auth, session_id=session_id)  # type: ignore[attr-defined]


@router.get("/sessions/{session_id}/model", response=SessionModelOut, summary="The model this session uses")
async def get_session_model(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = await _session(request, session_id)
    return await sync_to_async(choice.model_out)(session)


@router.put("/sessions/{session_id}/model", response=SessionModelOut,
            summary="Choose the model for this session ('' = the profile's)")
async def put_session_model(request: HttpRequest, session_id: str, payload: SessionModelIn) -> dict[str, Any]:
    session = await _session(request, session_id)
    session = await choice.session_model_set(session=session, model=payload.model, backend=payload.backend)
    return await sync_to_async(choice.model_out)(session)
