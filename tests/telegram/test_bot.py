"""Chatting with Navi from Telegram, end to end: a live Navi, its bot polling a local fake Bot API,
the fake model behind it. The tests play the Telegram user and assert what the chat shows."""
from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from tests.support.live import LiveNavi
from tests.telegram.fake_bot_api import FakeBotApi

pytestmark = pytest.mark.slow
_chats = itertools.count(81000)
PNG_1PX = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478"
                        "da63f8cfc0f01f0005000201a2a1a8f40000000049454e44ae426082")


def _link(navi: LiveNavi, api: FakeBotApi) -> int:
    chat = next(_chats)
    status, out = navi.request("POST", "/telegram/link-code")
    assert status == 201 and out["bot"] == "@navi_test_bot", out
    api.say(chat, f"/link {out['code'].lower()}")  # typed by hand: case and the dash do not matter
    api.wait_reply(chat, "Linked: this chat now talks to livetester's Navi")
    return chat


def _turn(fake: Any, text: str, **reply: Any) -> None:
    fake.script(text="DIRECT")  # the planner: no plan
    fake.script(text=text, **reply)


def _last_user(fake: Any) -> dict[str, Any]:
    """The user's message in the model's last request (system notes may follow it)."""
    return next(m for m in reversed(fake.last_chat["json"]["messages"]) if m["role"] == "user")


def _final(api: FakeBotApi, chat: int, text: str, timeout: float = 20.0) -> Any:
    return api.wait_for(lambda: next((m for m in api.messages if m.chat_id == chat and m.text == text), None),
                        timeout=timeout, what=f"the reply {text[:60]!r}")


def test_an_unlinked_chat_gets_a_clear_reply_and_no_access(telegram_navi, bot_api, fake_ollama):
    chat = next(_chats)
    bot_api.say(chat, "What is on my calendar?")
    reply = bot_api.wait_reply(chat, "not linked to a Navi account")
    assert "send /link CODE here" in reply.text
    bot_api.say(chat, "/new")
    bot_api.wait_for(lambda: len(bot_api.chat(chat)) == 2, what="the second refusal")
    assert all("not linked" in text for text in bot_api.chat(chat))
    assert fake_ollama.chat_requests == []


def test_a_wrong_code_is_refused_without_a_hint(telegram_navi, bot_api):
    chat = next(_chats)
    status, out = telegram_navi.request("POST", "/telegram/link-code")
    assert status == 201
    good = out["code"]
    wrong = good[:-1] + ("A" if good[-1] != "A" else "B")
    bot_api.say(chat, f"/link {wrong}")
    reply = bot_api.wait_reply(chat, "That link code is not valid (wrong, used or expired)")
    assert good not in reply.text and good.replace("-", "") not in reply.text
    for _ in range(4):  # five wrong codes in all
        bot_api.say(chat, "/link ZZZZ-ZZZZ")
    bot_api.wait_for(lambda: len(bot_api.chat(chat)) == 5, what="five refusals")
    bot_api.say(chat, f"/link {good}")  # now even the right code has to wait
    bot_api.wait_reply(chat, "Too many wrong link codes from this chat")
    group = next(_chats)
    bot_api.say(group, f"/link {good}", chat_type="group")
    bot_api.wait_reply(group, "Navi only talks in private chats")


def test_a_message_is_a_turn_streamed_by_edits(telegram_navi, bot_api, fake_ollama):
    chat = _link(telegram_navi, bot_api)
    answer = "Your build is green. " * 12
    _turn(fake_ollama, answer.strip(), token_size=6, delay_between_chunks=0.03)
    bot_api.say(chat, "How is my build?")
    message = _final(bot_api, chat, answer.strip())
    texts = [t for _, t in message.history]
    assert len(texts) >= 3, texts  # it grew in place: sent once, then edited
    assert any(answer.startswith(t) and t != answer.strip() for t in texts[1:]), texts
    gaps = [b - a for (a, _), (b, _) in zip(message.history, message.history[1:], strict=False)]
    assert all(gap >= 0.35 for gap in gaps[:-1]), gaps  # paced (the last edit is the final one)
    assert "How is my build?" in _last_user(fake_ollama)["content"]
    status, out = telegram_navi.request("GET", "/sessions")
    assert any(s["title"] == "Telegram" for s in out["items"])


def test_new_starts_another_session_and_stop_stops_the_turn(telegram_navi, bot_api, fake_ollama):
    chat = _link(telegram_navi, bot_api)
    _turn(fake_ollama, "First conversation.")
    bot_api.say(chat, "hello")
    _final(bot_api, chat, "First conversation.")
    bot_api.say(chat, "/new")
    bot_api.wait_reply(chat, "New conversation started")
    _turn(fake_ollama, "word " * 400, token_size=5, delay_between_chunks=0.05)
    bot_api.say(chat, "Write me a long story")
    bot_api.wait_for(lambda: any(m.text.startswith("word word") for m in bot_api.messages if m.chat_id == chat),
                     what="the story to start")
    bot_api.say(chat, "/stop")
    bot_api.wait_reply(chat, "⏹ Stopped.")
    assert any(t == "Stopping…" for t in bot_api.chat(chat))
    status, out = telegram_navi.request("GET", "/sessions?limit=200")
    assert sum(s["title"] == "Telegram" for s in out["items"]) >= 2
    bot_api.say(chat, "/stop")
    bot_api.wait_reply(chat, "Nothing is running.")


def test_flood_control_is_respected(telegram_navi, bot_api, fake_ollama):
    chat = _link(telegram_navi, bot_api)
    answer = "Counting slowly: " + " ".join(str(n) for n in range(60))
    _turn(fake_ollama, answer, token_size=4, delay_between_chunks=0.05)
    bot_api.fail("editMessageText", retry_after=2, times=1)
    bot_api.say(chat, "count")
    _final(bot_api, chat, answer)
    edits = bot_api.calls_of("editMessageText")
    refused = next(c for c in edits if c.status == 429)
    after = [c for c in edits if c.at > refused.at and c.params["chat_id"] == chat]
    assert after and after[0].at - refused.at >= 1.9, [round(c.at - refused.at, 2) for c in after]


def test_a_long_reply_is_split_into_messages(telegram_navi, bot_api, fake_ollama):
    chat = _link(telegram_navi, bot_api)
    answer = "\n".join(f"Line {n}: " + "x" * 70 for n in range(80))  # ~6 400 characters
    _turn(fake_ollama, answer, token_size=400)
    bot_api.say(chat, "long please")
    bot_api.wait_for(lambda: any(m.chat_id == chat and m.text.endswith("Line 79: " + "x" * 70)
                                 for m in bot_api.messages), what="the end of the long reply")
    pages = [m.text for m in bot_api.messages if m.chat_id == chat and "Line " in m.text]
    assert len(pages) == 2 and all(len(p) <= 4096 for p in pages)
    assert "\n".join(pages) == answer


def test_photos_and_files_become_uploads(telegram_navi, bot_api, fake_ollama):
    chat = _link(telegram_navi, bot_api)
    _turn(fake_ollama, "A tiny image.")
    bot_api.send_photo(chat, PNG_1PX, caption="What is this?")
    _final(bot_api, chat, "A tiny image.")
    last = _last_user(fake_ollama)
    assert last["content"].startswith("What is this?") and last["images"], last
    _turn(fake_ollama, "Read it.")
    bot_api.send_document(chat, "notes.txt", b"remember the milk\n")
    _final(bot_api, chat, "Read it.")
    content = _last_user(fake_ollama)["content"]
    assert "I sent you a file: notes.txt" in content and "notes.txt" in content
    bot_api.send_document(chat, "huge.bin", b"x", declared_size=50 * 1024 * 1024)
    bot_api.wait_reply(chat, "That file is 52.4 MB: the limit here is")
    bot_api.send_sticker(chat)
    bot_api.wait_reply(chat, "Navi reads text, photos and files")


def test_a_recall_result_and_notifications_arrive_in_the_chat(telegram_navi, bot_api, fake_ollama):
    chat = _link(telegram_navi, bot_api)
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(tool_calls=[{"name": "schedule_recall", "arguments": {
        "call_type": "immediate", "additional_context_message": "Read /tmp/build.log with filesystem and report."}}])
    fake_ollama.script(text="I will check it right away.")
    fake_ollama.script(text="DIRECT")
    fake_ollama.script(text="The build log is clean.\nNo errors in 1 200 lines.")
    bot_api.say(chat, "Check the build log in the background")
    # The tool line shows when a poll saw it: the immediate recall may replace the turn's log at once.
    bot_api.wait_for(lambda: any(m.chat_id == chat and m.text.endswith("I will check it right away.")
                                 for m in bot_api.messages), what="the turn's answer")
    try:
        note = bot_api.wait_reply(chat, "🔔 Recall finished · Telegram", timeout=30)  # to every linked chat
    except AssertionError as exc:  # say what the server did (a CI run once saw no notification at all)
        raise AssertionError(f"{exc}\n--- server log ---\n{telegram_navi.output()}") from None
    assert "The build log is clean.\nNo errors in 1 200 lines." in note.text
    assert "Open in Navi: https://navi.example/#" in note.text
    status, out = telegram_navi.request("POST", "/notifications/test")
    assert status == 202 and "telegram" in out["channels"]
    bot_api.wait_reply(chat, "🔔 Test notification from Navi")


def test_an_unlinked_chat_loses_access(telegram_navi, bot_api, fake_ollama):
    chat = _link(telegram_navi, bot_api)
    status, settings = telegram_navi.request("GET", "/notifications/settings")
    link = next(x for x in settings["telegram"]["links"] if x["chat_title"] == f"User{chat}")
    assert telegram_navi.request("DELETE", f"/telegram/links/{link['id']}")[0] == 200
    assert telegram_navi.request("DELETE", f"/telegram/links/{link['id']}")[0] == 404
    bot_api.say(chat, "still there?")
    bot_api.wait_reply(chat, "not linked to a Navi account")
    time.sleep(0.3)
    assert fake_ollama.chat_requests == []


def test_the_first_run_made_the_web_push_key_in_the_data_directory(telegram_navi):
    from pathlib import Path

    from cryptography.hazmat.primitives import serialization
    from py_vapid import Vapid

    from tests.notify.pushserver import b64url

    pem = Path(telegram_navi.env["NAVI_DATA_DIR"]) / "vapid_private.pem"
    assert pem.is_file()
    key = Vapid.from_file(str(pem)).public_key.public_bytes(serialization.Encoding.X962,
                                                            serialization.PublicFormat.UncompressedPoint)
    assert telegram_navi.request("GET", "/notifications/push/key")[1] == {"public_key": b64url(key)}
