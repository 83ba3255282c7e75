"""GET /health: is Navi usable, and if not, which part is wrong and why.

- ``ok`` (HTTP 200): the database, broker and channel layer answer, and the model server and model
  of every active profile are there.
- ``degraded`` (HTTP 200; 503 with ``?strict=1``, for monitors): Navi serves, but a model server is
  unreachable or a profile's model is missing, so chats with those profiles fail.
- ``error`` (HTTP 503): the database, the broker or the channel layer is down.

``problems`` names each part that is not ok and why. Every probe has its own short timeout
(navi_site/probes.py) and they run concurrently, so the answer comes within about two seconds
whatever is down.
"""
from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from ninja import Router

from navi_site import probes

router = Router(tags=["health"])


async def _database() -> dict[str, Any]:
    try:
        return await asyncio.wait_for(sync_to_async(probes.check_database_sync)(), timeout=probes.DB_TIMEOUT)
    except TimeoutError:
        return {"ok": False, "error": f"the database did not answer within {probes.DB_TIMEOUT:g} s. "
                                      "Check DATABASE_URL and that the database server is running."}


async def _model_uses() -> list[probes.ModelUse] | None:
    try:
        return await asyncio.wait_for(sync_to_async(probes.active_model_uses)(), timeout=probes.DB_TIMEOUT)
    except Exception:  # noqa: BLE001 - the database check reports it
        return None


async def _llm() -> dict[str, Any]:
    uses = await _model_uses()
    if uses is None:  # no database: at least say whether the default model server answers
        servers, models = await probes.probe_models([], extra_backends=("ollama",))
    else:
        servers, models = await probes.probe_models(uses)
    return {"ok": all(s.ok for s in servers) and all(m.ok for m in models),
            "servers": [s.to_dict() for s in servers], "models": [m.to_dict() for m in models]}


async def report() -> tuple[str, dict[str, Any]]:
    """The health status and the whole answer."""
    if settings.NAVI_MODE == "scale-out":
        database, broker, layer, llm = await asyncio.gather(
            _database(), probes.check_redis(settings.REDIS_URL, what="broker"),
            probes.check_redis(probes.layer_redis_url(), what="channel layer"), _llm())
    else:
        database, llm = await asyncio.gather(_database(), _llm())
        broker, layer = {"ok": True, "backend": "memory"}, {"ok": True, "backend": "in-memory"}
    problems: list[dict[str, str]] = []
    for part, check in (("database", database), ("broker", broker), ("channel_layer", layer)):
        if not check["ok"]:
            problems.append({"part": part, "severity": "error", "reason": check.get("error", "not ok")})
    for server in llm["servers"]:
        if not server["ok"]:
            problems.append({"part": f"model server ({server['backend']})", "severity": "degraded",
                             "reason": server["error"]})
    for model in llm["models"]:
        if not model["ok"] and "model server is down" not in model.get("error", ""):
            problems.append({"part": f"model {model['model']}", "severity": "degraded", "reason": model["error"]})
    status = ("error" if any(p["severity"] == "error" for p in problems)
              else "degraded" if problems else "ok")
    return status, {"status": status, "mode": settings.NAVI_MODE, "problems": problems, "database": database,
                    "broker": broker, "channel_layer": layer, "llm": llm}


@router.get("/health", auth=None, summary="Health check",
            description="ok / degraded (a model server or model missing; HTTP 200, 503 with ?strict=1) / "
                        "error (database, broker or channel layer down; HTTP 503). `problems` says which part "
                        "and why.")
async def health(request: HttpRequest, strict: bool = False) -> JsonResponse:
    status, body = await report()
    code = 503 if status == "error" or (strict and status == "degraded") else 200
    return JsonResponse(body, status=code)
