"""Pulling a model onto the Ollama server, relayed as progress events.

Ollama's ``POST /api/pull`` (``{"model": name, "stream": true}``) answers NDJSON lines:
``{"status": "pulling manifest"}``, then per layer ``{"status": "pulling <digest>", "digest": "sha256:…",
"total": N, "completed": M}``, then ``verifying sha256 digest``, ``writing manifest``, ``success``. A
failure after the stream started is a line ``{"error": "…"}`` (HTTP 200): an unknown model is
"pull model manifest: file does not exist", a full disk "… no space left on device".

``pull_events`` turns that into Navi's own events, one JSON object per line to the browser:
``start``, ``status``, ``progress`` (bytes over all layers and a percent; at most every
PROGRESS_INTERVAL seconds), then exactly one of ``done`` or ``error`` (a message a person can act on).
The pull belongs to the request: when the client goes away (the Cancel button aborts the request),
Django cancels the response, the generator is closed (navi_site.streaming: even between two lines)
and closes the connection to Ollama, and Ollama stops the download (what it already fetched is kept
and a later pull resumes it).
"""
from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
import structlog

from agent.llm.base import LLMError
from agent.llm.http_common import (
    check_network_guard,
    llm_client,
    read_error_body,
    response_lines,
    timeout,
    transport_error,
)
from local_models.servers import reset_cache, server_url

log = structlog.get_logger(__name__)

# Ollama can be silent for minutes while it verifies a large download's sha256.
PULL_TIMEOUT = timeout(5.0, 900.0)
PROGRESS_INTERVAL = 0.1
MAX_LINE = 64 * 1024


def explain(name: str, error: str, status: int = 200) -> str:
    """The server's error about pulling ``name`` as a sentence that says what to do."""
    text = " ".join(str(error).split())[:400]
    low = text.lower()
    if status == 404 or "file does not exist" in low or "not found" in low or "manifest unknown" in low:
        return (f"Ollama has no model called '{name}'. Check the name and its tag on ollama.com/library "
                f"(for example 'qwen3:4b'). The server said: {text}")
    if "no space left" in low or "disk full" in low or "not enough space" in low or "insufficient" in low:
        return (f"The Ollama server ran out of disk space while pulling '{name}'. Free space on the server "
                f"(remove models you do not use with 'ollama rm NAME') and pull again; what was downloaded is "
                f"kept. The server said: {text}")
    if any(k in low for k in ("dial tcp", "i/o timeout", "connection refused", "no such host", "tls", "max retries")):
        return (f"The Ollama server could not download '{name}' from its registry: check the server's internet "
                f"connection and try again. The server said: {text}")
    return f"The Ollama server could not pull '{name}': {text}"


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


class _Totals:
    """Bytes over all layers: Ollama reports each layer's total and completed separately."""

    def __init__(self) -> None:
        self.layers: dict[str, tuple[int, int]] = {}

    def update(self, data: dict[str, Any]) -> bool:
        digest, total = data.get("digest"), data.get("total")
        if not digest or not isinstance(total, int | float) or total <= 0:
            return False
        done = data.get("completed")
        self.layers[str(digest)] = (int(done) if isinstance(done, int | float) else 0, int(total))
        return True

    def event(self, status: str) -> dict[str, Any]:
        completed = sum(min(d, t) for d, t in self.layers.values())
        total = sum(t for _, t in self.layers.values())
        percent = round(100.0 * completed / total, 1) if total else 0.0
        return {"type": "progress", "status": status, "completed": completed, "total": total, "percent": percent}


async def pull_events(name: str) -> AsyncGenerator[dict[str, Any], None]:
    """Pull ``name`` (already validated) onto the Ollama server; yields Navi's pull events (see above)."""
    base = server_url("ollama")
    url = f"{base}/api/pull"
    yield {"type": "start", "model": name, "server": base}
    totals = _Totals()
    last_sent = 0.0
    started = time.monotonic()
    try:
        check_network_guard(url, setting="OLLAMA_HOST")
        async with llm_client(PULL_TIMEOUT) as client:
            async with client.stream("POST", url, json={"model": name, "stream": True}) as response:
                if response.status_code != 200:
                    yield {"type": "error", "message": explain(name, await read_error_body(response),
                                                                response.status_code)}
                    return
                async for raw in response_lines(response):
                    if not raw.strip():
                        continue
                    if len(raw) > MAX_LINE:
                        yield {"type": "error", "message": f"The Ollama server sent a line of {len(raw)} bytes "
                                                           "during the pull; that is not a pull status. Is OLLAMA_HOST right?"}
                        return
                    try:
                        data = json.loads(raw)
                    except ValueError:
                        yield {"type": "error", "message": "The Ollama server sent something that is not JSON during "
                                                           f"the pull ({raw[:80]!r}). Is OLLAMA_HOST an Ollama server?"}
                        return
                    if not isinstance(data, dict):
                        continue
                    if data.get("error"):
                        log.info("model_pull_failed", model=name, error=str(data["error"])[:300])
                        yield {"type": "error", "message": explain(name, str(data["error"]))}
                        return
                    status = str(data.get("status") or "")
                    if status == "success":
                        reset_cache()
                        log.info("model_pulled", model=name, seconds=round(time.monotonic() - started, 1))
                        if totals.layers:
                            yield totals.event("success")
                        yield {"type": "done", "model": name}
                        return
                    if totals.update(data):
                        now = time.monotonic()
                        finished_layer = data.get("completed") == data.get("total")
                        if now - last_sent >= PROGRESS_INTERVAL or finished_layer:
                            last_sent = now
                            yield totals.event(status)
                    elif status:
                        yield {"type": "status", "status": status}
        yield {"type": "error", "message": f"The Ollama server ended the pull of '{name}' without saying it "
                                           "succeeded (it may have restarted). Pull again: it resumes where it stopped."}
    except httpx.HTTPError as exc:
        err = transport_error(exc, url=url, server="Ollama server", setting="OLLAMA_HOST")
        yield {"type": "error", "message": f"Pulling '{name}' failed: {err}"}
    except LLMError as exc:  # the test network guard
        yield {"type": "error", "message": f"Pulling '{name}' failed: {exc}"}


async def pull_lines(name: str) -> AsyncIterator[bytes]:
    """``pull_events`` as NDJSON bytes (the HTTP body); a cancelled pull is logged."""
    finished = False
    try:
        async with aclosing(pull_events(name)) as events:  # closed with this one: the connection goes
            async for event in events:
                finished = event["type"] in ("done", "error")
                yield _line(event)
    finally:
        if not finished:
            log.info("model_pull_cancelled", model=name)
