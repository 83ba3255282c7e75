"""Export of a long session (issue 22): time and peak memory, 500 vs 5 000 messages (target: a
5 000-message session in < 2 s, memory flat).

    .venv/bin/python bench/export.py                      # embedded (SQLite)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/navi_bench .venv/bin/python bench/export.py

Seeds two sessions (``--small`` and ``--large`` messages: user and assistant text of 100–600
characters, every 5th message a 2 000-character tool result with a tool call before it), then
streams each format through GET /sessions/{id}/export on Django's ASGI handler (AsyncClient: the
same async iterator daphne consumes), reading the body chunk by chunk and dropping it. Printed per
size and format: seconds of wall and of CPU time (best of ``--rounds``; the process's CPU, threads included:
on a shared machine the wall time also counts waiting for a core), bytes, and the tracemalloc peak of the export; the
process's peak RSS growth over the whole run. Flat memory = the peak does not grow with the session.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import resource
import time
import tracemalloc

from common import setup_django


def seed(owner: object, n: int, rng: random.Random) -> object:
    from django.db import transaction

    from sessions_app.models import Message, Session

    words = "the backup ran at night and the report says all disks are healthy except one".split()

    def text(chars: int) -> str:
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < chars:
            out.append(rng.choice(words))
        return " ".join(out)

    with transaction.atomic():
        session = Session.objects.create(owner=owner, profile_id="secretary", title=f"Bench {n}", next_seq=n + 1)
        rows = []
        for seq in range(1, n + 1):
            if seq % 5 == 4:
                rows.append(Message(session=session, seq=seq, role="assistant", content=None,
                                    tool_calls=[{"id": f"c{seq}", "name": "web_view", "arguments": {"url": "https://x"}}]))
            elif seq % 5 == 0:
                rows.append(Message(session=session, seq=seq, role="tool", name="web_view", tool_call_id=f"c{seq - 1}",
                                    content=text(2000)))
            else:
                rows.append(Message(session=session, seq=seq, role="user" if seq % 2 else "assistant",
                                    content=text(rng.randint(100, 600))))
        Message.objects.bulk_create(rows, batch_size=500)
    return session


async def export_once(client: object, session_id: str, fmt: str, *, trace: bool) -> tuple[float, int, int, float]:
    if trace:  # tracemalloc slows Python down severalfold: memory and time are measured in separate runs
        tracemalloc.start()
    start, cpu = time.perf_counter(), time.process_time()
    resp = await client.get(f"/sessions/{session_id}/export", {"format": fmt})  # type: ignore[attr-defined]
    assert resp.status_code == 200, resp.status_code
    size = 0
    async for chunk in resp.streaming_content:
        size += len(chunk)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = 0
    if trace:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return elapsed, size, peak, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup_django()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import AsyncClient

    from profiles_app.default_profiles import install
    from profiles_app.models import AgentProfile

    if not AgentProfile.objects.exists():
        install(AgentProfile)
    users = get_user_model().objects
    users.filter(username="bench-export").delete()
    user = users.create_user(username="bench-export", password="x")
    rng = random.Random(22)
    sessions = {n: seed(user, n, rng) for n in (args.small, args.large)}
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = AsyncClient()
    client.force_login(user)
    for _ in range(2):  # warm up: first imports, the ORM's and the renderers' caches
        asyncio.run(export_once(client, str(sessions[args.small].id), "json", trace=False))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{connection.vendor}: export through the ASGI handler (best of {args.rounds})\n")
    print(f"{'messages':>8} {'format':<6} {'seconds':>8} {'CPU s':>8} {'MB out':>8} {'peak MB (tracemalloc)':>22}")
    peaks: dict[tuple[int, str], int] = {}
    for n, session in sessions.items():
        for fmt in ("json", "md", "html"):
            runs = [asyncio.run(export_once(client, str(session.id), fmt, trace=False)) for _ in range(args.rounds)]
            best, cpu = min(r[0] for r in runs), min(r[3] for r in runs)
            peaks[(n, fmt)] = asyncio.run(export_once(client, str(session.id), fmt, trace=True))[2]
            print(f"{n:>8} {fmt:<6} {best:8.3f} {cpu:8.3f} {runs[0][1] / 1e6:8.2f} {peaks[(n, fmt)] / 1e6:22.2f}")
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\npeak RSS grew by {(rss1 - rss0) / 1024:.1f} MB over all exports")
    for fmt in ("json", "md", "html"):
        ratio = peaks[(args.large, fmt)] / max(1, peaks[(args.small, fmt)])
        print(f"{fmt}: peak memory at {args.large} / at {args.small} messages = {ratio:.2f}")


if __name__ == "__main__":
    main()
