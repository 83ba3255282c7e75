"""Search across conversations over 100 000 messages (issue 22): p50/p95 per query (target p95 < 50 ms).

    .venv/bin/python bench/search.py                       # embedded: SQLite FTS5 (a fresh data dir)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/navi_bench .venv/bin/python bench/search.py   # scale-out

Seeds one user with ``--sessions`` × ``--per-session`` messages (default 500 × 200 = 100 000) of
Zipf-distributed words (a 20 000-word vocabulary, 8–60 words a message, every 5th a 150-word tool
result), plus a second user with 10 000 messages the search must skip, all through bulk inserts
that the database indexes itself (triggers / the generated column). Then times ``search()`` (the
selector GET /search calls: ranking, loading the hits, snippets) for queries of every kind — a
rare word, a medium one, a common one (thousands of matches), two and three words, a three-letter
prefix, no hit — and GET /search through Django's test client. Prints p50/p95/p99 per kind and
over all, in ms of wall time and of this process's CPU time (on a shared machine the wall time
also counts waiting for a core; in scale-out PostgreSQL's own CPU is not in the second figure).
Words in nearly every message (like "the") are timed apart: every message must be ranked.
``--reuse`` keeps the messages of an earlier run (point NAVI_DATA_DIR at its data directory).
"""
from __future__ import annotations

import argparse
import itertools
import random
import time

from common import percentile, setup_django

SYLLABLES = ["ka", "lo", "mi", "ter", "van", "os", "pri", "du", "sel", "ra", "no", "bek", "ul", "zi", "fa", "gor"]


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """Words in order of frequency (the first is the most frequent). Shuffled: in a language, how
    often a word occurs has nothing to do with where it sorts, so the most frequent words do not
    share a prefix (sorted, every frequent word began with "bekbek" and a prefix query of it hit
    nearly every message)."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered


def seed(*, sessions: int, per_session: int, rng: random.Random, reuse: bool) -> tuple[object, list[str]]:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from profiles_app.default_profiles import install
    from profiles_app.models import AgentProfile
    from sessions_app.models import Message, Session

    if not AgentProfile.objects.exists():
        install(AgentProfile)
    users = get_user_model().objects
    vocab = vocabulary(rng, 20_000)
    me = users.filter(username="bench-search").first()
    if reuse and me is not None and Message.objects.filter(session__owner=me).count() == sessions * per_session:
        return me, vocab  # --reuse: the data of an earlier run (same seed)
    users.filter(username__in=["bench-search", "bench-other"]).delete()
    me = users.create_user(username="bench-search", password="x")
    other = users.create_user(username="bench-other", password="x")
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(vocab))))  # Zipf

    def text(n: int) -> str:
        return " ".join(rng.choices(vocab, cum_weights=cumulative, k=n)).capitalize() + "."

    t0 = time.perf_counter()
    for owner, count in ((me, sessions), (other, max(1, sessions // 10))):
        for s in range(count):
            with transaction.atomic():
                session = Session.objects.create(owner=owner, profile_id="secretary", title=text(rng.randint(2, 5)),
                                                 next_seq=per_session + 1)
                rows = []
                for seq in range(1, per_session + 1):
                    role = "tool" if seq % 5 == 0 else ("user" if seq % 2 else "assistant")
                    rows.append(Message(session=session, seq=seq, role=role, name="web_view" if role == "tool" else "",
                                        content=text(150 if role == "tool" else rng.randint(8, 60))))
                Message.objects.bulk_create(rows, batch_size=500)
            if s % 100 == 99:
                print(f"  seeded {s + 1} sessions of {owner} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return me, vocab


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--per-session", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40, help="queries of each kind")
    parser.add_argument("--reuse", action="store_true", help="keep the messages of an earlier run (same sizes)")
    args = parser.parse_args()
    setup_django()
    from django.db import connection
    from django.test import Client

    from sessions_app.search import search

    rng = random.Random(22)
    t0 = time.perf_counter()
    me, vocab = seed(sessions=args.sessions, per_session=args.per_session, rng=rng, reuse=args.reuse)
    total = args.sessions * args.per_session
    print(f"{connection.vendor}: seeded {total} messages (+{total // 10} of another user) in "
          f"{time.perf_counter() - t0:.0f} s")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE sessions_app_message; ANALYZE sessions_app_session")

    def pick(lo: int, hi: int) -> str:
        return vocab[rng.randint(lo, hi)]

    kinds = {
        "rare word": lambda: pick(5_000, 19_999),
        "medium word": lambda: pick(200, 1_000),
        "common word": lambda: pick(20, 100),
        "two words": lambda: f"{pick(0, 200)} {pick(200, 2_000)}",
        "three words": lambda: f"{pick(0, 50)} {pick(50, 500)} {pick(500, 5_000)}",
        "3-letter prefix": lambda: pick(0, 3_000)[:3],
        "no hit": lambda: "zzqx" + pick(0, 100),
    }
    for _ in range(5):  # warm the caches
        search(user_id=me.pk, q=kinds["medium word"](), limit=20)
    everything: list[float] = []
    print(f"\n{'query kind':<18} {'p50':>8} {'p95':>8} {'p99':>8}   {'p50':>8} {'p95':>8} {'p99':>8}   hits")
    cpu_all: list[float] = []
    print(f"{'':<18} {'wall ms':^26}   {'CPU ms of this process':^26}")
    for kind, make in kinds.items():
        times, cpus, hits = [], [], []
        for _ in range(args.rounds):
            q = make()
            start, cpu = time.perf_counter(), time.process_time()
            result = search(user_id=me.pk, q=q, limit=20)
            times.append((time.perf_counter() - start) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
            hits.append(len(result.messages))
        everything += times
        cpu_all += cpus
        print(f"{kind:<18} {percentile(times, 50):8.1f} {percentile(times, 95):8.1f} {percentile(times, 99):8.1f}"
              f"   {percentile(cpus, 50):8.1f} {percentile(cpus, 95):8.1f} {percentile(cpus, 99):8.1f}"
              f"   {sorted(hits)[len(hits) // 2]}")
    # A word in nearly every message (like "the"): every message must be ranked. Reported apart.
    stop = [vocab[0], vocab[1], vocab[2]]
    for q in stop[: max(1, min(3, args.rounds))]:
        start, cpu = time.perf_counter(), time.process_time()
        search(user_id=me.pk, q=q, limit=20)
        print(f"stop word {q!r}: wall {(time.perf_counter() - start) * 1000:.0f} ms, "
              f"CPU {(time.process_time() - cpu) * 1000:.0f} ms")
    print(f"{'all (selector)':<18} {percentile(everything, 50):8.1f} {percentile(everything, 95):8.1f} "
          f"{percentile(everything, 99):8.1f}   {percentile(cpu_all, 50):8.1f} {percentile(cpu_all, 95):8.1f} "
          f"{percentile(cpu_all, 99):8.1f}")

    client = Client(HTTP_HOST="localhost")
    client.force_login(me)
    rest: list[float] = []
    makers = list(kinds.values())
    for i in range(args.rounds * 3):
        q = makers[i % len(makers)]()
        start = time.perf_counter()
        resp = client.get("/search", {"q": q})
        rest.append((time.perf_counter() - start) * 1000)
        assert resp.status_code == 200, resp.content
    print(f"{'GET /search':<18} {percentile(rest, 50):8.1f} {percentile(rest, 95):8.1f} {percentile(rest, 99):8.1f}")
    p95 = percentile(everything + rest, 95)
    print(f"\ntarget p95 < 50 ms: {'met' if p95 < 50 else 'NOT met'} (p95 over all {len(everything) + len(rest)} "
          f"queries: {p95:.1f} ms)")


if __name__ == "__main__":
    main()
