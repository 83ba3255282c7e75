"""Server-side overhead of one agent turn, excluding model time (issue: agent core).

    .venv/bin/python bench/agent_turn.py [--turns 300] [--tokens 20000]

A scripted in-process backend answers instantly, so what is measured is Navi's
own work per turn: loading the session, building the context, saving the user
and assistant messages, token bookkeeping, events. Two sessions are measured,
with 10 and with 1 000 messages of history. Then one long streamed answer
measures the loop's overhead per streamed token.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from common import setup_django, summary


class InstantBackend:
    """A model that answers at once: the text in ``tokens`` pieces (a test double for the LLM only)."""

    name = "bench"

    def __init__(self) -> None:
        self.tokens = ["Sure", "."]

    async def stream_complete(self, messages: Sequence[Any], **kw: Any) -> AsyncIterator[Any]:
        from agent.llm.base import StreamChunk

        for t in self.tokens:
            yield StreamChunk(kind="text", text=t)
        yield StreamChunk(kind="done", done_reason="stop", prompt_eval_count=100, eval_count=len(self.tokens))

    async def complete(self, messages: Sequence[Any], **kw: Any) -> Any:
        from agent.llm.base import Completion

        return Completion(text="".join(self.tokens))

    async def capabilities(self, model: str) -> Any:
        from agent.llm.base import ModelCapabilities

        return ModelCapabilities()


def prepare(history: int) -> str:
    from django.contrib.auth import get_user_model

    from profiles_app.models import AgentProfile
    from sessions_app.models import Message, Session

    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True})
    AgentProfile.objects.update_or_create(
        id="bench", defaults={"name": "Bench", "llm_backend": "bench", "planning_enabled": False,
                              "enabled_tools": ["todo", "scratchpad"], "system_prompt": "Be brief."})
    session = Session.objects.create(owner=user, profile_id="bench", next_seq=history + 1)
    Message.objects.bulk_create(
        Message(session=session, seq=i + 1, role="user" if i % 2 == 0 else "assistant", content=f"message {i} " * 8)
        for i in range(history)
    )
    return str(session.id)


async def one_turn(agent: Any, session_id: str) -> float:
    started = time.perf_counter()
    async for _ in agent.run_stream(session_id, "hello again"):
        pass
    return time.perf_counter() - started


async def measure(turns: int, tokens: int) -> None:
    from asgiref.sync import sync_to_async

    from agent.llm.registry import register_backend
    from agent.loop import get_agent

    backend = InstantBackend()
    register_backend("bench", lambda: backend)
    agent = get_agent()
    results = {}
    for history in (10, 1000):
        sid = await sync_to_async(prepare)(history)
        for _ in range(20):  # warm-up: imports, caches, connections
            await one_turn(agent, sid)
        samples = [await one_turn(agent, sid) * 1000 for _ in range(turns)]
        results[history] = summary(samples)
        s = results[history]
        print(f"history {history:>5} msgs: turn overhead p50 {s['p50']:.2f} ms  p90 {s['p90']:.2f} ms  "
              f"p99 {s['p99']:.2f} ms  (n={s['n']})")
    ratio = results[1000]["p50"] / results[10]["p50"]
    print(f"ratio 1000/10 (p50): {ratio:.2f}x   target: p50 < 10 ms, ratio <= 1.5x")

    sid = await sync_to_async(prepare)(10)
    backend.tokens = ["Sure", "."]
    base = min([await one_turn(agent, sid) for _ in range(10)])
    backend.tokens = [f"tok{i} " for i in range(tokens)]
    long = min([await one_turn(agent, sid) for _ in range(3)])
    per_token_us = (long - base) / tokens * 1e6
    print(f"streamed answer of {tokens} tokens: {long * 1000:.1f} ms; loop overhead per token {per_token_us:.2f} µs "
          "(target < 20 µs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=20000)
    args = parser.parse_args()
    setup_django()
    asyncio.run(measure(args.turns, args.tokens))


if __name__ == "__main__":
    main()
