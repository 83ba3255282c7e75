"""A local stand-in for Telegram's Bot API (the HTTPS interface bots use), started by the tests.

It speaks the real protocol — ``/bot<token>/<method>`` with form, multipart or JSON parameters,
``{"ok": true, "result": ...}`` answers, ``getUpdates`` long polling with offsets, file downloads
under ``/file/bot<token>/<path>`` — and keeps what a user would see: every chat's messages as
they read after all edits. Tests play the user (``say``, ``send_photo``, ``press``) and can make
a method answer 429 with ``retry_after`` or refuse an over-long text like Telegram does.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_ID = 700000001
TOKEN = "700000001:AAtestTOKENfor-the-fake-bot-api_xyz"
MAX_TEXT = 4096


@dataclass
class BotMessage:
    chat_id: int
    message_id: int
    text: str
    reply_markup: Any = None
    history: list[tuple[float, str]] = field(default_factory=list)  # (time, text) of the send and each edit


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float
    status: int


class FakeBotApi:
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.messages: list[BotMessage] = []
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, bytes)
        self.failures: dict[str, list[dict[str, Any]]] = {}  # method -> scripted error answers
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._changed: asyncio.Condition | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        threading.Thread(target=self._run, name="fake-bot-api", daemon=True).start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake Bot API did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the user's side -------------------------------------------------------------------------

    def _user_message(self, chat_id: int, **content: Any) -> dict[str, Any]:
        person = {"id": chat_id, "is_bot": False, "first_name": f"User{chat_id}"}
        chat = {"id": chat_id, "type": content.pop("chat_type", "private"), "first_name": f"User{chat_id}"}
        if chat["type"] != "private":
            chat["title"] = "A group"
        return {"message_id": next(self._message_ids), "date": int(time.time()), "chat": chat, "from": person,
                **content}

    def say(self, chat_id: int, text: str, *, chat_type: str = "private") -> None:
        """The user sends ``text`` (a /command gets its bot_command entity, as Telegram adds it)."""
        extra: dict[str, Any] = {"text": text, "chat_type": chat_type}
        if text.startswith("/"):
            extra["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
        self._push({"message": self._user_message(chat_id, **extra)})

    def forward(self, chat_id: int, text: str, *, author: str) -> None:
        """The user forwards ``author``'s message (Bot API ``forward_origin`` of type "user")."""
        origin = {"type": "user", "date": int(time.time()) - 60,
                  "sender_user": {"id": 555000 + len(author), "is_bot": False, "first_name": author}}
        self._push({"message": self._user_message(chat_id, text=text, forward_origin=origin)})

    def buttons(self, message: BotMessage) -> dict[str, str]:
        """The inline buttons a message shows now: {label: callback_data}."""
        rows = (message.reply_markup or {}).get("inline_keyboard") or []
        return {b["text"]: b["callback_data"] for row in rows for b in row}

    def answers(self) -> list[dict[str, Any]]:
        """What each button press was answered (answerCallbackQuery), in order."""
        return [c.params for c in self.calls_of("answerCallbackQuery")]

    def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        file_id = self._file(f"photos/file_{len(self.files)}.jpg", data)
        size = {"file_id": file_id, "file_unique_id": "u" + file_id, "width": 1, "height": 1, "file_size": len(data)}
        self._push({"message": self._user_message(chat_id, photo=[size], **({"caption": caption} if caption else {}))})

    def send_document(self, chat_id: int, name: str, data: bytes, caption: str = "", mime: str = "text/plain",
                      declared_size: int | None = None) -> None:
        file_id = self._file(f"documents/file_{len(self.files)}_{name}", data)
        doc = {"file_id": file_id, "file_unique_id": "u" + file_id, "file_name": name, "mime_type": mime,
               "file_size": declared_size if declared_size is not None else len(data)}
        self._push({"message": self._user_message(chat_id, document=doc, **({"caption": caption} if caption else {}))})

    def send_sticker(self, chat_id: int) -> None:
        sticker = {"file_id": "stk", "file_unique_id": "ustk", "type": "regular", "width": 1, "height": 1,
                   "is_animated": False, "is_video": False}
        self._push({"message": self._user_message(chat_id, sticker=sticker)})

    def press(self, chat_id: int, message: BotMessage, data: str) -> None:
        person = {"id": chat_id, "is_bot": False, "first_name": f"User{chat_id}"}
        self._push({"callback_query": {"id": f"cq{next(self._update_ids)}", "from": person, "chat_instance": "ci",
                                       "data": data, "message": self._message_json(message)}})

    def fail(self, method: str, *, error_code: int = 429, retry_after: int | None = 1, times: int = 1,
             description: str = "") -> None:
        """The next ``times`` calls of ``method`` get an error (429 with retry_after by default)."""
        answer: dict[str, Any] = {"ok": False, "error_code": error_code,
                                  "description": description or f"Too Many Requests: retry after {retry_after}"}
        if retry_after is not None and error_code == 429:
            answer["parameters"] = {"retry_after": retry_after}
        self.failures.setdefault(method, []).extend([answer] * times)

    # -- what the user sees ------------------------------------------------------------------------

    def chat(self, chat_id: int) -> list[str]:
        return [m.text for m in self.messages if m.chat_id == chat_id]

    def wait_for(self, predicate: Callable[[], Any], *, timeout: float = 20.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what or predicate}; chats: "
                             f"{[(m.chat_id, m.text[:200]) for m in self.messages[-8:]]}")

    def wait_reply(self, chat_id: int, contains: str, *, timeout: float = 20.0) -> BotMessage:
        return self.wait_for(lambda: next((m for m in reversed(self.messages)
                                           if m.chat_id == chat_id and contains in m.text), None),
                             timeout=timeout, what=f"a reply in {chat_id} containing {contains!r}")

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def close(self) -> None:
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    # -- the server --------------------------------------------------------------------------------

    def _file(self, path: str, data: bytes) -> str:
        file_id = f"F{len(self.files) + 1}"
        self.files[file_id] = (path, data)
        return file_id

    def _push(self, update: dict[str, Any]) -> None:
        async def add() -> None:
            assert self._changed is not None
            async with self._changed:
                self._updates.append({"update_id": next(self._update_ids), **update})
                self._changed.notify_all()

        asyncio.run_coroutine_threadsafe(add(), self._loop).result(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._changed = asyncio.Condition()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._method)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            form = await request.post()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
        for key in ("chat_id", "message_id", "offset", "timeout", "limit"):
            if isinstance(params.get(key), str) and params[key].lstrip("-").isdigit():
                params[key] = int(params[key])
        for key in ("reply_markup", "allowed_updates", "commands", "link_preview_options"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        return params

    async def _method(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        if request.match_info["token"] != self.token:
            return self._answer(method, params, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        scripted = self.failures.get(method)
        if scripted:
            return self._answer(method, params, scripted.pop(0))
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return self._answer(method, params, {"ok": False, "error_code": 404, "description": "Not Found"})
        answer = await handler(params)
        return self._answer(method, params, answer if "ok" in answer else {"ok": True, "result": answer["result"]})

    def _answer(self, method: str, params: dict[str, Any], answer: dict[str, Any]) -> web.Response:
        status = 200 if answer.get("ok") else int(answer.get("error_code") or 400)
        self.calls.append(Call(method=method, params=params, at=time.monotonic(), status=status))
        return web.json_response(answer, status=status)

    async def _download(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        for file_path, data in self.files.values():
            if file_path == path and request.match_info["token"] == self.token:
                return web.Response(body=data)
        return web.Response(status=404)

    def _message_json(self, message: BotMessage) -> dict[str, Any]:
        out: dict[str, Any] = {"message_id": message.message_id, "date": int(time.time()),
                               "chat": {"id": message.chat_id, "type": "private"},
                               "from": {"id": BOT_ID, "is_bot": True, "first_name": "Navi",
                                        "username": "navi_test_bot"},
                               "text": message.text}
        if message.reply_markup:
            out["reply_markup"] = message.reply_markup
        return out

    @staticmethod
    def _bad(description: str) -> dict[str, Any]:
        return {"ok": False, "error_code": 400, "description": f"Bad Request: {description}"}

    async def _m_getMe(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802 - Bot API names
        return {"result": {"id": BOT_ID, "is_bot": True, "first_name": "Navi", "username": "navi_test_bot",
                           "can_join_groups": True, "can_read_all_group_messages": False,
                           "supports_inline_queries": False}}

    async def _m_getUpdates(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        assert self._changed is not None
        async with self._changed:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]  # offset confirms the rest
            if not self._updates and timeout:
                try:
                    await asyncio.wait_for(self._changed.wait_for(lambda: bool(self._updates)), timeout)
                except TimeoutError:
                    pass
            return {"result": list(self._updates[: int(params.get("limit") or 100)])}

    async def _m_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        text = str(params.get("text") or "")
        if not text.strip():
            return self._bad("message text is empty")
        if len(text) > MAX_TEXT:
            return self._bad("message is too long")
        message = BotMessage(chat_id=int(params["chat_id"]), message_id=next(self._message_ids), text=text,
                             reply_markup=params.get("reply_markup"), history=[(time.monotonic(), text)])
        self.messages.append(message)
        return {"result": self._message_json(message)}

    async def _m_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        text = str(params.get("text") or "")
        message = next((m for m in self.messages if m.chat_id == params.get("chat_id")
                        and m.message_id == params.get("message_id")), None)
        if message is None:
            return self._bad("message to edit not found")
        if len(text) > MAX_TEXT:
            return self._bad("MESSAGE_TOO_LONG")
        if text == message.text and params.get("reply_markup") == message.reply_markup:
            return self._bad("message is not modified: specified new message content and reply markup are "
                             "exactly the same as a current content and reply markup of the message")
        message.text = text
        message.reply_markup = params.get("reply_markup")
        message.history.append((time.monotonic(), text))
        return {"result": self._message_json(message)}

    async def _m_getFile(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            return self._bad("invalid file_id")
        path, data = self.files[file_id]
        return {"result": {"file_id": file_id, "file_unique_id": "u" + file_id, "file_size": len(data),
                           "file_path": path}}

    async def _ok(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"result": True}

    _m_deleteWebhook = _ok  # noqa: N815
    _m_setMyCommands = _ok  # noqa: N815
    _m_sendChatAction = _ok  # noqa: N815
    _m_answerCallbackQuery = _ok  # noqa: N815
    _m_deleteMessage = _ok  # noqa: N815
