"""GET /health: mode and reachability of the database, broker, channel layer and LLM backend.

The LLM check is bounded to about one second so a dead model server never slows the answer.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from ninja import Router

router = Router(tags=["health"])


def _check_database() -> dict[str, Any]:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {"ok": False, "vendor": connection.vendor, "error": str(exc)[:200]}


async def _check_redis(url: str) -> dict[str, Any]:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        await asyncio.wait_for(client.ping(), timeout=1.0)
        return {"ok": True}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": f"Redis at {url} is not reachable: {exc}"[:200]}
    finally:
        await client.aclose()


async def _check_llm() -> dict[str, Any]:
    host = settings.OLLAMA_HOST
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(0.9, connect=0.9)) as client:
            resp = await asyncio.wait_for(client.get(f"{host}/api/version"), timeout=1.0)
        ok = resp.status_code == 200
        result: dict[str, Any] = {"ok": ok, "backend": "ollama", "url": host}
        if ok:
            result["version"] = resp.json().get("version")
        else:
            result["error"] = f"HTTP {resp.status_code}"
    except Exception as exc:  # noqa: BLE001
        result = {
            "ok": False,
            "backend": "ollama",
            "url": host,
            "error": f"not reachable ({type(exc).__name__}); is Ollama running? Check OLLAMA_HOST.",
        }
    result["ms"] = round((time.monotonic() - started) * 1000)
    return result


@router.get("/health", auth=None, summary="Health check")
async def health(request: Any) -> dict[str, Any]:
    database = await sync_to_async(_check_database)()
    if settings.NAVI_MODE == "scale-out":
        redis_check = _check_redis(settings.REDIS_URL)
        broker, llm = await asyncio.gather(redis_check, _check_llm())
        layer = {"ok": broker["ok"], "backend": "redis"}
        broker = {**broker, "backend": "redis"}
    else:
        llm = await _check_llm()
        broker = {"ok": True, "backend": "memory"}
        layer = {"ok": True, "backend": "in-memory"}
    status = "ok" if database["ok"] and broker["ok"] and layer["ok"] else "degraded"
    return {
        "status": status,
        "mode": settings.NAVI_MODE,
        "database": database,
        "broker": broker,
        "channel_layer": layer,
        "llm": llm,
    }
