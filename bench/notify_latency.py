"""Notification latency benchmark (issue 25): how long after a recall finishes does its notification
reach the user?

    .venv/bin/python bench/notify_latency.py [--tier embedded|scaleout] [--recalls 60] [--parallel 3]

The real `manage.py start` (embedded: server, Celery worker and beat in one process), a fake Ollama
that answers by what it is asked (the planner "DIRECT"; "BENCH-NOTIFY i" an immediate
``schedule_recall``; the recall's turn a two-line report), and the three outside services as local
stand-ins: a Web Push service that checks VAPID and decrypts the payload (tests/notify/pushserver.py),
an SMTP server (aiosmtpd) and a fake Telegram Bot API with a linked chat. Each of ``--recalls``
sessions schedules one immediate recall through the model, ``--parallel`` at a time.

Latency = arrival at the stand-in (its wall clock) - ``RecallRun.finished_at`` (the server's wall
clock when it recorded the run's end; same machine). Target: Web Push p95 < 2 s (embedded).
E-mail and Telegram are printed beside it.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import percentile  # noqa: E402
from tests.fakes.fake_llm import FakeLLMServer  # noqa: E402
from tests.fakes.wire import Reply  # noqa: E402

PLANNER_MARK = "exactly the single word: DIRECT"
ASK = re.compile(r"BENCH-NOTIFY (\d+)")
RECALL = re.compile(r"BENCH-RECALL (\d+)")


class BenchModel(FakeLLMServer):
    def _reply(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        if PLANNER_MARK in json.dumps(messages):
            return Reply(text="DIRECT")
        turn = [m for m in messages if m.get("role") != "system"]
        last = turn[-1] if turn else {}
        if last.get("role") == "tool":
            return Reply(text="Scheduled.")
        content = str(last.get("content") or "")
        if m := RECALL.search(content):
            return Reply(text=f"Report {m.group(1)}: all good.\nNothing else to do.")
        if m := ASK.search(content):
            args = {"call_type": "immediate",
                    "additional_context_message": f"BENCH-RECALL {m.group(1)}: read /tmp/bench.log with filesystem."}
            return Reply(tool_calls=({"name": "schedule_recall", "arguments": args},))
        return Reply(text="Hello from the benchmark model.")

    async def _chat(self, ollama: bool, body: dict[str, Any], reader: Any, writer: Any, generation: int) -> None:
        self.replies.appendleft(self._reply(body if isinstance(body, dict) else {}))
        await super()._chat(ollama, body, reader, writer, generation)


def _fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (f"n={len(values)} p50={percentile(values, 50):.3f} s p95={percentile(values, 95):.3f} s "
            f"p99={percentile(values, 99):.3f} s max={max(values):.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=["embedded", "scaleout"], default="embedded")
    parser.add_argument("--recalls", type=int, default=60)
    parser.add_argument("--parallel", type=int, default=3, help="recalls in flight at once (RECALL_MAX_CONCURRENT)")
    args = parser.parse_args()

    from tests.notify.pushserver import PushService
    from tests.notify.smtp import start_smtp_server
    from tests.support.live import PYTHON, _spawn, start_live_navi
    from tests.telegram.fake_bot_api import FakeBotApi

    model = BenchModel().start()
    push, smtp, telegram = PushService(), start_smtp_server(), FakeBotApi()
    tmp = Path(tempfile.mkdtemp(prefix="navi-bench-notify-"))
    live = start_live_navi(tmp, {
        "OLLAMA_HOST": model.url, "LOG_LEVEL": "ERROR", "WEBPUSH_ALLOW_PRIVATE_ENDPOINTS": "true",
        "EMAIL_HOST": smtp.host, "EMAIL_PORT": str(smtp.port), "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.url, "TELEGRAM_POLL_TIMEOUT": "1",
    }, tier=args.tier)
    if args.tier == "scaleout":
        _spawn(live, tmp, "telegram", [PYTHON, "manage.py", "telegram_bot"])
    try:
        status, key = live.request("GET", "/notifications/push/key")
        push.vapid_public_key = key["public_key"]
        assert live.request("POST", "/notifications/push/subscriptions", push.subscription("bench"))[0] == 201
        assert live.request("PUT", "/notifications/settings", {
            "email": "bench@example.org", "choices": {"recall_finished": {"email": True}}})[0] == 200
        status, code = live.request("POST", "/telegram/link-code")
        telegram.wait_for(lambda: telegram.calls_of("getUpdates"), what="the bot to poll")
        telegram.say(4242, f"/link {code['code']}")
        telegram.wait_reply(4242, "Linked")

        def one(i: int) -> str:
            status, out = live.request("POST", "/sessions", {"title": f"notify bench {i}"})
            sid = str(out["session_id"])
            status, out = live.request("POST", f"/sessions/{sid}/messages", {"content": f"BENCH-NOTIFY {i}"})
            assert status == 200, out
            return sid

        t0 = time.time()
        with ThreadPoolExecutor(args.parallel) as pool:
            sids = list(pool.map(one, range(args.recalls)))
        push.wait(args.recalls, timeout=120)
        smtp.wait(args.recalls, timeout=120)
        telegram.wait_for(lambda: sum("🔔 Recall finished" in m.text for m in telegram.messages) >= args.recalls,
                          timeout=120, what="every Telegram notification")
        elapsed = time.time() - t0
        finished: dict[str, float] = {}
        for sid in sids:
            status, out = live.request("GET", f"/sessions/{sid}/recalls")
            runs = [r for rec in out["recalls"] for r in rec["runs"] if r["finished_at"]]
            finished[sid] = datetime.fromisoformat(runs[0]["finished_at"]).timestamp()
        push_lat = [p.at - finished[p.payload["session_id"]] for p in push.received]
        mail_lat = []
        for mail in smtp.received:
            sid = re.search(r"#([0-9a-f-]{36})", mail.text).group(1)  # type: ignore[union-attr]
            mail_lat.append(mail.at - finished[sid])
        tg_lat = []
        for message in telegram.messages:
            if "🔔 Recall finished" in message.text:
                sid = re.search(r"#([0-9a-f-]{36})", message.text).group(1)  # type: ignore[union-attr]
                sent_mono = message.history[0][0]
                tg_lat.append(time.time() - (time.monotonic() - sent_mono) - finished[sid])
        print(f"tier={args.tier} recalls={args.recalls} parallel={args.parallel} in {elapsed:.1f} s", flush=True)
        print(f"  Web Push  {_fmt(push_lat)}")
        print(f"  E-mail    {_fmt(mail_lat)}")
        print(f"  Telegram  {_fmt(tg_lat)}")
        print(f"  target: Web Push p95 < 2 s -> {'met' if percentile(push_lat, 95) < 2 else 'NOT met'}")
    finally:
        live.stop()
        model.stop()
        push.close()
        smtp.stop()
        telegram.close()


if __name__ == "__main__":
    main()
