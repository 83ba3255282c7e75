"""Recalls end to end on a live Navi (issue 7 "Tests"), in both tiers.

Embedded: one `manage.py start` process; its embedded Celery worker thread fires the recall.
Scale-out: the recall runs in a separate `celery worker` process and the WebSocket client,
connected to the ASGI process, sees it live through Redis.

Recalls are scheduled the way the agent does it: the (fake) model calls ``schedule_recall`` in a
user turn, so the ETA task is sent by the server that ran the tool. The server runs with a 1 s
sweep, a 1 s busy deferral and a 3 s claim lease, so every test takes a few seconds.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import PYTHON, LiveNavi, _spawn, _wait_healthy, free_port, start_live_navi
from tests.transport.wsclient import Client, types

SCALEOUT = os.environ.get("NAVI_TEST_TIER", "embedded") == "scaleout"
INSTRUCTION = "Read /tmp/build.log with filesystem; if it has errors, report the last 50 lines."
ANSWER = "Recall work done: the build is green."
SETTINGS = {
    "RECALL_SWEEP_SECONDS": "1",
    "RECALL_SWEEP_GRACE_SECONDS": "0.5",
    "RECALL_DEFER_SECONDS": "1",
    "RECALL_CLAIM_LEASE_SECONDS": "3",
    "RECALL_MIN_INTERVAL_SECONDS": "1",
}


# -- the live server ------------------------------------------------------------------------------


def _worker_cmd(live: LiveNavi, name: str) -> list[str]:
    return [PYTHON, "-m", "celery", "-A", "navi_site", "worker", "-P", "threads", "-c", "4", "-l", "WARNING",
            "--without-heartbeat", "--without-mingle", "--without-gossip", "-n", f"{name}-{live.port}@%h"]


class Live:
    """The module's live Navi, restartable on the same data directory / database."""

    def __init__(self, tmp: Path, fake_url: str) -> None:
        self.tmp = tmp
        self.navi = start_live_navi(tmp, {"OLLAMA_HOST": fake_url, "OPENAI_BASE_URL": fake_url + "/v1", **SETTINGS})
        self.extra_workers: list[Any] = []

    def worker_procs(self) -> dict[str, Any]:
        """Scale-out: worker name prefix -> process (``live`` is start_live_navi's worker)."""
        procs = {"live": self.navi.procs[1]} if SCALEOUT else {}
        procs.update({f"extra{n}": p for n, p in enumerate(self.extra_workers)})
        return procs

    def add_worker(self) -> None:
        n = len(self.extra_workers)
        _spawn(self.navi, self.tmp, f"worker-extra{n}", _worker_cmd(self.navi, f"extra{n}"))
        self.extra_workers.append(self.navi.procs[-1])

    def kill(self) -> None:
        for proc in self.navi.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)

    def start_again(self) -> None:
        """Start every process again (new port, same data and database)."""
        old = self.navi
        port = free_port()
        env = {**old.env, "NAVI_PORT": str(port)}
        self.navi = LiveNavi(url=f"http://127.0.0.1:{port}", port=port, env=env, token=old.token)
        self.extra_workers = []
        _spawn(self.navi, self.tmp, f"server-{port}", [PYTHON, "manage.py", "start", "--no-migrate"])
        if SCALEOUT:
            _spawn(self.navi, self.tmp, f"worker-{port}", _worker_cmd(self.navi, "live"))
            _spawn(self.navi, self.tmp, f"beat-{port}", [PYTHON, "-m", "celery", "-A", "navi_site", "beat", "-l",
                                                         "WARNING", "-s", str(self.tmp / "beat-schedule")])
        _wait_healthy(self.navi)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, fake_llm_server: Any) -> Iterator[Live]:
    server = Live(tmp_path_factory.mktemp("recall_live"), fake_llm_server.url)
    yield server
    server.navi.stop()


@pytest.fixture(autouse=True)
def _nothing_left_pending(live: Live) -> Iterator[None]:
    """A recall a failed test leaves behind would fire into the next test's scripted replies."""
    yield
    status, out = live.navi.request("GET", "/sessions?has_pending_recall=true&limit=200")
    for item in out.get("items", []) if status == 200 else []:
        live.navi.request("DELETE", f"/sessions/{item['id']}/recall")


# -- helpers ------------------------------------------------------------------------------------


def _session(navi: LiveNavi, title: str) -> str:
    status, out = navi.request("POST", "/sessions", {"title": title})
    assert status == 201, out
    return str(out["session_id"])


async def _idle(navi: LiveNavi, sid: str) -> Client:
    ws = await Client.open(navi.ws_url(sid))
    assert await ws.recv() == {"type": "session_sync"}
    return ws


def _script_schedule(fake: Any, final: dict[str, Any] | None = None, **args: Any) -> None:
    """The next user turn: no plan, a schedule_recall call, then a short answer (``final``)."""
    fake.script(text="DIRECT")
    fake.script(tool_calls=[{"name": "schedule_recall", "arguments": {"additional_context_message": INSTRUCTION,
                                                                       **args}}])
    fake.script(**(final or {"text": "Scheduled."}))


def _script_recall_run(fake: Any, **reply: Any) -> None:
    """The recall's own turn: no plan, then ``reply``."""
    fake.script(text="DIRECT")
    fake.script(**({"text": ANSWER} | reply))


async def _schedule(ws: Client, fake: Any, *, final: dict[str, Any] | None = None,
                    runs: Sequence[dict[str, Any]] = (), **args: Any) -> list[dict[str, Any]]:
    """A user turn in which the model schedules a recall with ``args``; ``runs``: the replies of the
    recall's turns that follow (scripted now: the fake model answers in FIFO order)."""
    _script_schedule(fake, final, **args)
    for reply in runs:
        _script_recall_run(fake, **reply)
    await ws.send({"type": "message", "content": "Check the build for me later."})
    events = await ws.until("session_sync", timeout=20)
    assert types(events)[0] == "stream_start" and "stream_end" in types(events), events
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["tool"] == "schedule_recall" and call["success"] is True, call
    return events


async def _collect(ws: Client, done: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> list[dict[str, Any]]:
    """Events up to and including the first one for which ``done`` holds."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out; got {types(out)}")
        out.append(await ws.recv(left))
        if done(out[-1]):
            return out


def _update(action: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == "recall_update" and e["action"] == action


def _updates(events: list[dict[str, Any]]) -> list[str]:
    return [e["action"] for e in events if e["type"] == "recall_update"]


def _recalls(navi: LiveNavi, sid: str) -> list[dict[str, Any]]:
    status, out = navi.request("GET", f"/sessions/{sid}/recalls")
    assert status == 200, out
    return list(out["recalls"])


def _wait(predicate: Callable[[], Any], within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


# -- (a) once -----------------------------------------------------------------------------------


async def test_once_recall_fires_once_and_streams_to_the_client(live: Live, fake_ollama: Any) -> None:
    navi = live.navi
    sid = _session(navi, "Once recall")
    ws = await _idle(navi, sid)
    turn = await _schedule(ws, fake_ollama, call_type="once", when="2s", runs=[{"delay_between_chunks": 0.01}])
    assert _updates(turn) == ["scheduled"]
    scheduled = next(e for e in turn if e["type"] == "recall_update")
    assert scheduled["call_type"] == "once" and scheduled["status"] == "pending"

    run = await _collect(ws, lambda e: e["type"] == "session_sync")
    kinds = [k for k in types(run) if k not in ("stream_delta", "thinking_delta")]
    # spec 004: the recall is marked fired (recall_update) before the run's closing session_sync
    assert kinds == ["stream_start", "stream_end", "recall_update", "session_sync"], types(run)
    assert "".join(e["delta"] for e in run if e["type"] == "stream_delta") == ANSWER
    fired_update = next(e for e in run if e["type"] == "recall_update")
    assert fired_update["status"] == "fired" and fired_update["recall_id"] == scheduled["recall_id"]
    assert [e["seq"] for e in run if "seq" in e] == sorted(e["seq"] for e in run if "seq" in e)

    status, detail = navi.request("GET", f"/sessions/{sid}")
    recall_msgs = [m for m in detail["messages"] if m["is_recall"]]
    assert [m["role"] for m in recall_msgs] == ["user"]
    assert INSTRUCTION in recall_msgs[0]["content"]
    assert detail["messages"][-1]["role"] == "assistant" and detail["messages"][-1]["content"] == ANSWER
    assert navi.request("GET", f"/sessions/{sid}/recall")[1] == {"recall": None}

    assert await ws.quiet(1.5) == []  # nothing fires twice
    [recall] = _recalls(navi, sid)
    assert recall["status"] == "fired" and recall["fire_count"] == 1
    [fired] = recall["runs"]
    assert fired["outcome"] == "success" and fired["message_count"] == 2
    assert fired["due_at"] == scheduled["trigger_at"]
    assert 0 <= (_ts(fired["started_at"]) - _ts(fired["due_at"])).total_seconds() < 3.0
    await ws.close()


# -- (b) recurring and skip -----------------------------------------------------------------------


async def test_recurring_reschedules_and_skip_never_runs_the_skipped_occurrence(live: Live, fake_ollama: Any) -> None:
    navi = live.navi
    every = 4
    sid = _session(navi, "Recurring recall")
    ws = await _idle(navi, sid)
    turn = await _schedule(ws, fake_ollama, call_type="recurring", when="2s", interval_seconds=every, runs=[{}, {}])
    first_due = _ts(next(e for e in turn if e["type"] == "recall_update")["trigger_at"])

    first = await _collect(ws, lambda e: e["type"] == "session_sync")
    assert types(first)[0] == "stream_start" and types(first)[-2:] == ["recall_update", "session_sync"]
    rescheduled = first[-2]
    assert rescheduled["action"] == "rescheduled"
    nxt = _ts(rescheduled["trigger_at"])  # first_due + interval (later ones if the run overran them)
    assert rescheduled["status"] == "pending" and nxt > first_due
    assert (nxt - first_due).total_seconds() % every == 0

    status, out = await asyncio.to_thread(navi.request, "POST", f"/sessions/{sid}/recall/skip")
    assert (status, out) == (200, {"ok": True})
    skipped = await _collect(ws, _update("rescheduled"), timeout=5)
    assert [e["type"] for e in skipped] == ["recall_update"]
    after_skip = _ts(skipped[-1]["trigger_at"])  # max(next, now) + interval: never in the past
    assert (after_skip - nxt).total_seconds() >= every

    second = await _collect(ws, _update("rescheduled"), timeout=15)
    assert types(second)[0] == "stream_start"
    assert _ts(second[-1]["trigger_at"]) > after_skip

    status, _ = await asyncio.to_thread(navi.request, "DELETE", f"/sessions/{sid}/recall")
    assert status == 200
    assert _updates(await _collect(ws, _update("cancelled"), timeout=5)) == ["cancelled"]
    [recall] = _recalls(navi, sid)
    assert recall["status"] == "cancelled" and recall["fire_count"] == 2
    assert sorted(_ts(r["due_at"]) for r in recall["runs"]) == [first_due, after_skip]  # not `nxt`: skipped
    assert {r["outcome"] for r in recall["runs"]} == {"success"}
    await ws.close()


# -- (c) busy ------------------------------------------------------------------------------------


async def test_a_busy_session_defers_the_recall_until_the_turn_ends(live: Live, fake_ollama: Any) -> None:
    navi = live.navi
    sid = _session(navi, "Busy recall")
    ws = await _idle(navi, sid)
    slow = {"text": "Working on it. " * 8, "token_size": 4, "delay_between_chunks": 0.08}  # ~2.4 s of streaming
    turn = await _schedule(ws, fake_ollama, final=slow, runs=[{}], call_type="immediate")
    actions = _updates(turn)
    assert actions[0] == "scheduled" and "rescheduled" in actions and "fired" not in actions, actions
    turn_ended = time.time()

    run = await _collect(ws, _update("fired"))
    # The recall may be deferred more than once (the runs below allow it): a further "rescheduled"
    # can come after the turn's session_sync, before the recall's own turn starts.
    while run and run[0]["type"] == "recall_update" and run[0]["action"] == "rescheduled":
        run.pop(0)
    assert types(run)[0] == "stream_start" and _updates(run) == ["fired"], types(run)
    [recall] = _recalls(navi, sid)
    runs = sorted(recall["runs"], key=lambda r: r["started_at"])
    outcomes = [r["outcome"] for r in runs]
    assert outcomes[-1] == "success" and set(outcomes[:-1]) == {"deferred"}, outcomes
    assert {r["error"] for r in runs[:-1]} == {"session busy"}
    assert _ts(runs[-1]["started_at"]).timestamp() >= turn_ended - 0.5
    assert recall["status"] == "fired" and recall["fire_count"] == 1
    await ws.close()


# -- (d) deleted session --------------------------------------------------------------------------


async def test_a_deleted_sessions_recall_never_fires(live: Live, fake_ollama: Any) -> None:
    navi = live.navi
    sid = _session(navi, "Deleted before due")
    ws = await _idle(navi, sid)
    turn = await _schedule(ws, fake_ollama, call_type="once", when="2s", runs=[{}])
    recall_id = next(e for e in turn if e["type"] == "recall_update")["recall_id"]
    await ws.close()
    assert (await asyncio.to_thread(navi.request, "DELETE", f"/sessions/{sid}"))[0] == 200
    asked = len(fake_ollama.chat_requests)
    await asyncio.sleep(3.5)  # past due, and past a sweep
    assert len(fake_ollama.chat_requests) == asked  # nothing ran
    assert navi.request("GET", f"/sessions/{sid}/recall")[0] == 404
    assert recall_id not in await asyncio.to_thread(navi.manage, "list_recalls")
    assert "Traceback" not in navi.output()


async def test_a_session_deleted_during_its_recall_run(live: Live, fake_ollama: Any) -> None:
    navi = live.navi
    sid = _session(navi, "Deleted while running")
    ws = await _idle(navi, sid)
    await _schedule(ws, fake_ollama, call_type="once", when="2s", runs=[{"hang_before_first_chunk": 20}])
    await _collect(ws, lambda e: e["type"] == "stream_start")
    assert await fake_ollama.wait_for(lambda f: f.open_streams == 1, within=5)
    status, out = await asyncio.to_thread(navi.request, "DELETE", f"/sessions/{sid}")
    assert (status, out) == (200, {"ok": True})
    assert await fake_ollama.wait_for(lambda f: f.open_streams == 0, within=5)  # the run was stopped
    await ws.close()
    # the worker is free again: the next recall of another session fires
    other = _session(navi, "After the deletion")
    ws = await _idle(navi, other)
    await _schedule(ws, fake_ollama, call_type="once", when="1s", runs=[{}])
    await _collect(ws, _update("fired"))
    await ws.close()


# -- manage.py fire_recall ----------------------------------------------------------------------


async def test_fire_recall_from_the_command_line_streams_to_open_tabs(live: Live, fake_ollama: Any) -> None:
    """Embedded: the command hands the run to the server, where the tab listens (it used to run in the
    command's own process, and the tab saw nothing until a reload). Scale-out: it runs in the command,
    and the events reach the tab through Redis."""
    navi = live.navi
    sid = _session(navi, "Fired by hand")
    ws = await _idle(navi, sid)
    turn = await _schedule(ws, fake_ollama, call_type="once", when="2h", runs=[{}])
    recall_id = next(e for e in turn if e["type"] == "recall_update")["recall_id"]
    out = await asyncio.to_thread(navi.manage, "fire_recall", recall_id)
    assert out.startswith(f"success: recall {recall_id} is now fired"), out
    run = await _collect(ws, lambda e: e["type"] == "session_sync", timeout=10)
    assert [k for k in types(run) if k not in ("stream_delta", "thinking_delta")] == [
        "stream_start", "stream_end", "recall_update", "session_sync"]
    assert "".join(e["delta"] for e in run if e["type"] == "stream_delta") == ANSWER
    await ws.close()


# -- (f) two workers ------------------------------------------------------------------------------


def _ping_workers(navi: LiveNavi, count: int) -> None:
    from celery import Celery

    app = Celery(broker=navi.env["REDIS_URL"])
    try:
        _wait(lambda: len(app.control.ping(timeout=0.5) or []) >= count, 30, f"{count} Celery workers")
    finally:
        app.close()


@pytest.mark.scaleout
async def test_two_workers_and_duplicate_tasks_fire_one_recall_once(live: Live, fake_ollama: Any) -> None:
    """Two `celery worker` processes; besides its own ETA task the occurrence is sent six more times
    (as a redelivery or a sweep would): exactly one firing."""
    from celery import Celery

    if not live.extra_workers:
        live.add_worker()
    await asyncio.to_thread(_ping_workers, live.navi, 2)
    navi = live.navi
    sid = _session(navi, "Two workers")
    ws = await _idle(navi, sid)
    turn = await _schedule(ws, fake_ollama, call_type="once", when="2s", runs=[{}, {}, {}])
    update = next(e for e in turn if e["type"] == "recall_update")
    due = _ts(update["trigger_at"])
    sender = Celery(broker=navi.env["REDIS_URL"])
    try:
        for _ in range(6):
            sender.send_task("recall.fire", args=[update["recall_id"], due.isoformat()], eta=due)
    finally:
        sender.close()
    run = await _collect(ws, lambda e: e["type"] == "session_sync")
    assert types(run).count("stream_start") == 1 and _updates(run) == ["fired"]
    assert await ws.quiet(2.0) == []
    [recall] = _recalls(navi, sid)
    assert recall["fire_count"] == 1 and len(recall["runs"]) == 1 and recall["runs"][0]["outcome"] == "success"
    await ws.close()


# -- (e) restart ----------------------------------------------------------------------------------

# The worker and beat boot again after the restart before the sweep can fire anything: 20 s was once too short in CI,
# with both tiers' suites sharing two cores (round 27; alone, the whole test takes 17 s, under two busy loops 25 s).
RESTART_FIRE_SECONDS = 60


async def test_a_recall_due_while_navi_is_down_fires_once_after_the_restart(live: Live, fake_ollama: Any) -> None:
    sid = _session(live.navi, "Restart")
    ws = await _idle(live.navi, sid)
    turn = await _schedule(ws, fake_ollama, call_type="once", when="3s", runs=[{}, {}])
    due = _ts(next(e for e in turn if e["type"] == "recall_update")["trigger_at"])
    await ws.close()
    await asyncio.to_thread(live.navi.stop)
    await asyncio.sleep(max(0.0, due.timestamp() + 1 - time.time()))  # it comes due while Navi is down
    down_until = time.time()
    await asyncio.to_thread(live.start_again)

    navi = live.navi
    recall = await asyncio.to_thread(_wait, lambda: next(iter(
        r for r in _recalls(navi, sid) if r["status"] == "fired"), None), RESTART_FIRE_SECONDS, "the recall to fire")
    await asyncio.sleep(1.5)  # a second firing (redelivered ETA task + sweep) would show up by now
    [recall] = _recalls(navi, sid)
    assert recall["status"] == "fired" and recall["fire_count"] == 1
    [fired] = recall["runs"]
    assert fired["outcome"] == "success" and _ts(fired["started_at"]).timestamp() >= down_until
    status, detail = navi.request("GET", f"/sessions/{sid}")
    assert [m["role"] for m in detail["messages"] if m["is_recall"]] == ["user"]


# -- (g) killed mid-run ---------------------------------------------------------------------------


async def test_a_run_killed_mid_way_ends_recorded_as_interrupted(live: Live, fake_ollama: Any) -> None:
    """Scale-out: SIGKILL the worker process running the recall while the model hangs; the other worker's
    sweep ends the occurrence once its lease ran out. Embedded: SIGKILL the whole server; after the restart
    the sweep does the same."""
    navi = live.navi
    if SCALEOUT and not live.extra_workers:
        live.add_worker()
        await asyncio.to_thread(_ping_workers, navi, 2)
    sid = _session(navi, "Killed")
    ws = await _idle(navi, sid)
    await _schedule(ws, fake_ollama, call_type="once", when="2s", runs=[{"hang_before_first_chunk": 30}])
    await _collect(ws, lambda e: e["type"] == "stream_start")
    assert await fake_ollama.wait_for(lambda f: f.open_streams == 1, within=5)
    [recall] = _recalls(navi, sid)
    assert recall["status"] == "pending" and recall["firing"] is True
    if SCALEOUT:
        worker = recall["runs"][0]["worker"]
        name, proc = next((n, p) for n, p in live.worker_procs().items() if worker.startswith(f"{n}-"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # the ASGI client hears how it ended
        ended = await _collect(ws, lambda e: e["type"] == "session_sync", timeout=20)
        assert _updates(ended) == ["cancelled"]
        await ws.close()
    else:
        await ws.close()
        await asyncio.to_thread(live.kill)
        await asyncio.to_thread(live.start_again)
        navi = live.navi
    recall = await asyncio.to_thread(_wait, lambda: next(iter(
        r for r in _recalls(navi, sid) if r["status"] == "cancelled"), None), 20, "the recall to end")
    [run] = recall["runs"]
    assert run["outcome"] == "interrupted" and "stopped (killed or restarted)" in run["error"]
    assert run["finished_at"] is not None and recall["fire_count"] == 1
    status, detail = navi.request("GET", f"/sessions/{sid}")
    assert [m["role"] for m in detail["messages"] if m["is_recall"]] == ["user"]
