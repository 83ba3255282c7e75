"""What the policy point costs a turn whose tool call is auto-allowed (issue 20).

    .venv/bin/python bench/approvals.py [--turns 400]

A scripted in-process backend answers instantly: first a call of an allowed tool (``todo``
with action ``read``; then, in a second series, ``http_request`` GET to a host the turn did not
fetch, which the guard must look at), then a short answer. Each turn runs once with the
approvals port plugged in (``approvals_app.desk.PolicyDesk``: classification, the admin's rules
from their 5-second cache) and once without it (every call runs unasked, as before issue 20),
alternating so that drift of the machine hits both alike. Printed: p50/p90 of each and the
difference of the medians, against the target "< 2 ms p50". The http_request call goes to a
loopback address, which the network policy refuses at once: nothing leaves the machine, and the
tool's own cost is the same in both series. Last, ``pass_gate`` alone (no turn around it), per call.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from common import setup_django, summary


class ToolThenAnswer:
    """A model that calls one tool, then answers (a test double for the LLM only)."""

    name = "bench"

    def __init__(self) -> None:
        self.call: tuple[str, dict[str, Any]] = ("todo", {"action": "read"})

    async def stream_complete(self, messages: Sequence[Any], **kw: Any) -> AsyncIterator[Any]:
        from agent.llm.base import StreamChunk, ToolCallRequest

        if messages and getattr(messages[-1], "role", "") == "user":
            name, args = self.call
            yield StreamChunk(kind="tool_calls", tool_calls=(ToolCallRequest(id="c1", name=name, arguments=args),))
            yield StreamChunk(kind="done", done_reason="tool_calls", prompt_eval_count=100, eval_count=5)
            return
        yield StreamChunk(kind="text", text="Done.")
        yield StreamChunk(kind="done", done_reason="stop", prompt_eval_count=120, eval_count=2)

    async def complete(self, messages: Sequence[Any], **kw: Any) -> Any:
        from agent.llm.base import Completion

        return Completion(text="Done.")

    async def capabilities(self, model: str) -> Any:
        from agent.llm.base import ModelCapabilities

        return ModelCapabilities()


def prepare() -> str:
    from django.contrib.auth import get_user_model

    from profiles_app.models import AgentProfile
    from sessions_app.models import Session

    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True})
    AgentProfile.objects.update_or_create(
        id="bench", defaults={"name": "Bench", "llm_backend": "bench", "planning_enabled": False,
                              "enabled_tools": ["todo", "http_request"], "system_prompt": "Be brief.",
                              "local_model_aids_enabled": False})
    return str(Session.objects.create(owner=user, profile_id="bench").id)


async def one_turn(agent: Any, session_id: str) -> float:
    started = time.perf_counter()
    async for _ in agent.run_stream(session_id, "read my todo list"):
        pass
    return time.perf_counter() - started


async def series(agent: Any, sid: str, turns: int, desk: Any) -> tuple[dict[str, float], dict[str, float], float]:
    """Turns with and without the port, in pairs (order alternating); also the median of the
    pairs' differences, which drift of a busy machine disturbs less than a difference of medians."""
    import statistics

    from agent import ports

    on: list[float] = []
    off: list[float] = []
    for i in range(turns):
        for plugged in ((True, False) if i % 2 == 0 else (False, True)):
            ports.provide(approvals=desk if plugged else None)
            (on if plugged else off).append(await one_turn(agent, sid) * 1000)
    ports.provide(approvals=desk)
    paired = statistics.median(a - b for a, b in zip(on, off, strict=True))
    return summary(on), summary(off), paired


async def measure(turns: int) -> None:
    from agent import ports
    from agent.llm.registry import register_backend
    from agent.loop import get_agent

    backend = ToolThenAnswer()
    register_backend("bench", lambda: backend)
    agent = get_agent()
    desk = ports.approvals()
    assert desk is not None, "approvals_app must be installed"
    sid = await asyncio.to_thread(prepare)
    for _ in range(20):  # warm-up: imports, caches, connections
        await one_turn(agent, sid)
    cases = [("todo read (allowed)", ("todo", {"action": "read"})),
             ("http_request HEAD, untainted (allowed; guard looked)", ("http_request", {
                 "url": "http://127.0.0.1:9/never", "method": "HEAD"}))]
    for label, call in cases:
        backend.call = call
        on, off, paired = await series(agent, sid, turns, desk)
        delta = on["p50"] - off["p50"]
        print(f"{label}: with policy p50 {on['p50']:.2f} ms p90 {on['p90']:.2f} ms | without p50 {off['p50']:.2f} ms "
              f"p90 {off['p90']:.2f} ms | added: p50 difference {delta:+.3f} ms, median of paired differences "
              f"{paired:+.3f} ms (n={on['n']})  target < 2 ms")


async def gate_alone(calls: int) -> None:
    """The policy point by itself: ``pass_gate`` for an allowed call, µs per call."""
    from agent import gate

    guard = gate.TurnGuard(run_id="bench")
    stop = asyncio.Event()
    for label, tool, args, taint in (("todo read", "todo", {"action": "read"}, ()),
                                     ("web_view to a fetched host, tainted turn", "web_view",
                                      {"url": "https://example.com/b"}, ("https://example.com/a",))):
        guard.taint = gate.Taint(taint)
        check = gate.check_for(guard, tool=tool, args=args, session_id="s", profile_id="bench", is_subagent=False)
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            async for _step in gate.pass_gate(guard, check, stop_event=stop):
                pass
            samples.append((time.perf_counter() - started) * 1e6)
        s = summary(samples)
        print(f"pass_gate alone, {label}: p50 {s['p50']:.1f} µs  p90 {s['p90']:.1f} µs  (n={s['n']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()
    setup_django()
    asyncio.run(measure(args.turns))
    asyncio.run(gate_alone(5000))


if __name__ == "__main__":
    main()
