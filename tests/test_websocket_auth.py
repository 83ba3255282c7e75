"""WebSocket authentication: cookie or token, origin check, 4401/4004/4403."""
from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from navi_site.asgi import application
from sessions_app import services
from sessions_app.models import ApiToken
from tests.support.users import PASSWORD, make_user, token_for

pytestmark = pytest.mark.django_db(transaction=True)

HOST = [(b"host", b"testserver")]


async def _connect(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> tuple[WebsocketCommunicator, int | None]:
    comm = WebsocketCommunicator(application, path, headers=headers or HOST)
    connected, _ = await comm.connect()
    assert connected
    if await comm.receive_nothing(timeout=0.3):
        return comm, None
    out = await comm.receive_output(timeout=3)
    if out["type"] == "websocket.close":
        return comm, out.get("code")
    return comm, None


async def _next_event(comm: WebsocketCommunicator, timeout: float) -> dict:
    """The next event, skipping the session_sync a client gets on connect when no turn runs."""
    while True:
        event = await comm.receive_json_from(timeout=timeout)
        if event.get("type") != "session_sync":
            return event


@sync_to_async
def _setup() -> tuple[str, str, str]:
    alice = make_user("alice")
    mallory = make_user("mallory")
    sid = str(services.session_create(owner=alice).id)
    return sid, token_for(alice), token_for(mallory)


async def test_token_connects_and_receives_group_events() -> None:
    sid, token, _ = await _setup()
    comm = WebsocketCommunicator(application, f"/ws/sessions/{sid}?token={token}", headers=HOST)
    connected, _ = await comm.connect()
    assert connected
    from sessions_app.bus import apublish

    await apublish(sid, {"type": "heartbeat"})
    assert await _next_event(comm, 3) == {"type": "heartbeat"}
    await comm.disconnect()


async def test_invalid_and_revoked_tokens_close_4401() -> None:
    sid, token, _ = await _setup()
    _, code = await _connect(f"/ws/sessions/{sid}?token=navi_bogus")
    assert code == 4401
    await sync_to_async(ApiToken.objects.update)(revoked_at=timezone.now())
    _, code = await _connect(f"/ws/sessions/{sid}?token={token}")
    assert code == 4401


async def test_no_auth_closes_4401() -> None:
    sid, _, _ = await _setup()
    _, code = await _connect(f"/ws/sessions/{sid}", headers=[*HOST, (b"origin", b"http://testserver")])
    assert code == 4401


async def test_unknown_and_foreign_session_close_4004_alike() -> None:
    sid, _, mallory_token = await _setup()
    _, unknown = await _connect(f"/ws/sessions/{uuid.uuid4()}?token={mallory_token}")
    _, foreign = await _connect(f"/ws/sessions/{sid}?token={mallory_token}")
    _, garbage = await _connect(f"/ws/sessions/not-a-uuid?token={mallory_token}")
    assert unknown == foreign == garbage == 4004


async def test_cross_site_origin_is_refused_4403() -> None:
    sid, token, _ = await _setup()
    _, code = await _connect(f"/ws/sessions/{sid}?token={token}", headers=[*HOST, (b"origin", b"https://evil.example")])
    assert code == 4403


async def test_cookie_auth_needs_same_origin() -> None:
    sid, _, _ = await _setup()
    from django.test import Client

    client = Client()
    await sync_to_async(client.login)(username="alice", password=PASSWORD)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    _, code = await _connect(f"/ws/sessions/{sid}", headers=[*HOST, (b"cookie", cookie)])
    assert code == 4403  # no Origin: could be any site riding on the cookie
    comm, code = await _connect(
        f"/ws/sessions/{sid}", headers=[*HOST, (b"cookie", cookie), (b"origin", b"http://testserver")]
    )
    assert code is None
    await comm.disconnect()
