"""Short, bounded probes of the parts Navi depends on: database, Redis (broker and channel layer),
and the model server and model of every active profile.

`/health` (navi_site/health.py) and `manage.py doctor` (navi_site/doctor.py) both use them. Every
probe has its own timeout and never raises: it returns what it found, with the reason in words a
person can act on.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings

DB_TIMEOUT = 2.0
REDIS_TIMEOUT = 1.0
MODEL_TIMEOUT = 1.5


def check_database_sync() -> dict[str, Any]:
    """SELECT 1 on the default connection (call from a thread that may use the ORM)."""
    from django.db import connection

    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {"ok": False, "vendor": connection.vendor,
                "error": f"{connection.vendor} is not reachable: {str(exc).strip()[:200]}. "
                         "Check DATABASE_URL and that the database server is running."}


async def check_redis(url: str, *, what: str, timeout: float = REDIS_TIMEOUT) -> dict[str, Any]:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        await asyncio.wait_for(client.ping(), timeout=timeout)
        return {"ok": True, "backend": "redis"}
    except Exception as exc:  # noqa: BLE001
        reason = str(exc) or type(exc).__name__
        return {"ok": False, "backend": "redis",
                "error": f"the {what} (Redis at {url}) is not reachable: {reason[:150]}. "
                         "Check REDIS_URL and that Redis is running."}
    finally:
        try:
            await client.aclose()
        except Exception:  # noqa: BLE001 - a client that never connected may fail to close
            pass


def layer_redis_url() -> str:
    layer: dict[str, Any] = dict(settings.CHANNEL_LAYERS["default"])
    config: dict[str, Any] = layer.get("CONFIG") or {}
    hosts = config.get("hosts") or [{}]
    first = hosts[0]
    return str(first.get("address") if isinstance(first, dict) else first) or str(settings.REDIS_URL)


# --- model servers and models ---------------------------------------------------------------------

SERVER_SETTING = {"ollama": "OLLAMA_HOST", "openai": "OPENAI_BASE_URL"}


def server_url(backend: str) -> str:
    return str(settings.OPENAI_BASE_URL if backend == "openai" else settings.OLLAMA_HOST).rstrip("/")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelUse:
    backend: str
    model: str
    profiles: tuple[str, ...]
    uses_tools: bool


def active_model_uses() -> list[ModelUse]:
    """Which (backend, model) the active profiles use (ORM; call from a sync context)."""
    from profiles_app.models import AgentProfile

    grouped: dict[tuple[str, str], list[Any]] = {}
    for profile in AgentProfile.objects.filter(is_active=True).order_by("id"):
        backend = (profile.llm_backend or "ollama").lower()
        model = profile.model or settings.OLLAMA_DEFAULT_MODEL
        grouped.setdefault((backend, model), []).append(profile)
    return [ModelUse(backend=b, model=m, profiles=tuple(p.id for p in ps),
                     uses_tools=any(p.enabled_tools for p in ps))
            for (b, m), ps in grouped.items()]


@dataclass(slots=True, kw_only=True)
class ServerReport:
    backend: str
    url: str
    ok: bool = False
    error: str = ""
    ms: int = 0
    models: list[str] | None = None  # OpenAI-compatible: the ids /models lists

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.backend, "url": self.url, "ok": self.ok, "ms": self.ms}
        if self.error:
            out["error"] = self.error
        return out


@dataclass(slots=True, kw_only=True)
class ModelReport:
    use: ModelUse
    ok: bool = False
    error: str = ""
    capabilities: list[str] | None = None  # None: the server does not say (OpenAI-compatible)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.use.backend, "model": self.use.model,
                               "profiles": list(self.use.profiles), "ok": self.ok}
        if self.capabilities is not None:
            out["capabilities"] = self.capabilities
        if self.error:
            out["error"] = self.error
        return out


def _unreachable(backend: str, url: str, exc: BaseException) -> str:
    kind = "Ollama" if backend == "ollama" else "the OpenAI-compatible server"
    return (f"{kind} at {url} is not reachable ({type(exc).__name__}): is it running? "
            f"Check {SERVER_SETTING.get(backend, 'OLLAMA_HOST')}.")


async def probe_server(client: httpx.AsyncClient, backend: str, *, timeout: float = MODEL_TIMEOUT) -> ServerReport:
    url = server_url(backend)
    report = ServerReport(backend=backend, url=url)
    started = time.monotonic()
    target = f"{url}/api/version" if backend == "ollama" else f"{url}/models"
    try:
        resp = await asyncio.wait_for(client.get(target, timeout=timeout), timeout=timeout)
        if resp.status_code == 200:
            report.ok = True
            if backend == "openai":
                data = resp.json().get("data")
                if isinstance(data, list):
                    report.models = [str(m.get("id")) for m in data if isinstance(m, dict)]
        else:
            report.error = (f"{target} answered HTTP {resp.status_code}: is {url} really "
                            f"{'an Ollama server' if backend == 'ollama' else 'an OpenAI-compatible API'}? "
                            f"Check {SERVER_SETTING.get(backend)}.")
    except Exception as exc:  # noqa: BLE001
        report.error = _unreachable(backend, url, exc)
    report.ms = round((time.monotonic() - started) * 1000)
    return report


async def probe_model(client: httpx.AsyncClient, use: ModelUse, server: ServerReport,
                      *, timeout: float = MODEL_TIMEOUT) -> ModelReport:
    report = ModelReport(use=use)
    if not server.ok:
        report.error = f"its model server is down ({server.url})"
        return report
    who = f"profile{'s' if len(use.profiles) > 1 else ''} {', '.join(use.profiles)}"
    if use.backend == "openai":
        if server.models is None or not server.models or use.model in server.models:
            report.ok = True
        else:
            report.error = (f"model {use.model!r} ({who}) is not served by {server.url} (it serves "
                            f"{', '.join(server.models[:5])}): start the server with that model or change the "
                            "profile's model.")
        return report
    try:
        resp = await asyncio.wait_for(
            client.post(f"{server.url}/api/show", json={"model": use.model}, timeout=timeout), timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        report.error = _unreachable(use.backend, server.url, exc)
        return report
    if resp.status_code == 404:
        report.error = (f"model {use.model!r} ({who}) is not on the Ollama server at {server.url}: "
                        f"run `ollama pull {use.model}`, or pick another model for the profile.")
    elif resp.status_code != 200:
        report.error = f"{server.url}/api/show for {use.model!r} answered HTTP {resp.status_code}."
    else:
        report.ok = True
        try:
            caps = resp.json().get("capabilities")
        except ValueError:
            caps = None
        report.capabilities = [str(c) for c in caps] if isinstance(caps, list) else None
    return report


async def probe_models(uses: list[ModelUse], *, extra_backends: tuple[str, ...] = (),
                       timeout: float = MODEL_TIMEOUT) -> tuple[list[ServerReport], list[ModelReport]]:
    """Every model server the uses need (plus ``extra_backends``), then each model, concurrently."""
    from agent.llm.http_common import check_network_guard

    backends = list(dict.fromkeys([u.backend for u in uses] + list(extra_backends)))
    headers = {"Authorization": f"Bearer {settings.OPENAI_API_KEY}"} if settings.OPENAI_API_KEY else {}
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout), headers=headers) as client:
        servers: dict[str, ServerReport] = {}
        for backend in backends:
            try:
                check_network_guard(server_url(backend), setting=SERVER_SETTING.get(backend, "OLLAMA_HOST"))
            except Exception as exc:  # noqa: BLE001 - the test network guard refuses it
                servers[backend] = ServerReport(backend=backend, url=server_url(backend), error=str(exc))
        todo = [b for b in backends if b not in servers]
        for report in await asyncio.gather(*(probe_server(client, b, timeout=timeout) for b in todo)):
            servers[report.backend] = report
        models = await asyncio.gather(*(probe_model(client, u, servers[u.backend], timeout=timeout) for u in uses))
    return [servers[b] for b in backends], list(models)
