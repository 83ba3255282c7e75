"""A local Web Push endpoint: what a browser vendor's push service does, on loopback.

It checks the VAPID ``Authorization`` header (the JWT's signature, audience and expiry, and
that the key is the server's), decrypts the aes128gcm body with the subscribing browser's
private key and auth secret (``http_ece``, the library pywebpush encrypts with), and records
the JSON payload. Replies can be scripted per subscription (201 by default; 410 for a dead one).
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def b64url_decode(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


@dataclass
class Browser:
    """A subscribing browser: its key pair and auth secret, as PushManager.subscribe() makes them."""

    name: str
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def p256dh(self) -> str:
        return b64url(self.key.public_key().public_bytes(serialization.Encoding.X962,
                                                         serialization.PublicFormat.UncompressedPoint))


@dataclass
class Received:
    browser: str
    payload: dict[str, Any]
    headers: dict[str, str]
    at: float  # time.time() when the push arrived


class PushService:
    def __init__(self) -> None:
        self.browsers: dict[str, Browser] = {}
        self.replies: dict[str, list[int]] = {}
        self.received: list[Received] = []
        self.rejected: list[str] = []
        self.vapid_public_key: str | None = None  # when set, the VAPID key must be this one
        self.arrived = threading.Condition()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def browser(self, name: str) -> Browser:
        self.browsers[name] = Browser(name)
        return self.browsers[name]

    def subscription(self, name: str) -> dict[str, Any]:
        """PushSubscription.toJSON() of a new browser ``name``."""
        browser = self.browser(name)
        return {"endpoint": f"{self.url}/push/{name}", "keys": {"p256dh": browser.p256dh, "auth": b64url(browser.auth)}}

    def wait(self, count: int = 1, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.received)} of {count} pushes arrived within {timeout} s "
                                         f"(rejected: {self.rejected})")
                self.arrived.wait(left)
        return self.received

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _accept(self, name: str, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        browser = self.browsers.get(name)
        if browser is None:
            return 404, "no such subscription"
        auth = headers.get("authorization", "")
        try:
            assert Vapid02.verify(auth), "bad VAPID signature"
            token = auth.split("t=", 1)[1].split(",", 1)[0]
            claims = json.loads(b64url_decode(token.split(".")[1]))
            assert claims["aud"] == self.url, f"aud {claims['aud']!r} is not {self.url!r}"
            assert claims["exp"] > time.time(), "expired JWT"
            assert claims["sub"].startswith(("mailto:", "https://")), "bad sub"
            key = auth.split("k=", 1)[1].split(",", 1)[0].strip()
            assert self.vapid_public_key is None or key == self.vapid_public_key, "not the server's VAPID key"
        except (AssertionError, IndexError, KeyError, ValueError, InvalidSignature) as exc:
            return 401, f"VAPID: {exc}"
        if headers.get("content-encoding") != "aes128gcm" or "ttl" not in headers:
            return 400, "expected Content-Encoding: aes128gcm and a TTL"
        plain = http_ece.decrypt(body, private_key=browser.key, auth_secret=browser.auth, version="aes128gcm")
        scripted = self.replies.get(name) or []
        status = scripted.pop(0) if scripted else 201
        if status == 201:
            with self.arrived:
                self.received.append(Received(browser=name, payload=json.loads(plain), headers=headers,
                                              at=time.time()))
                self.arrived.notify_all()
        return status, ""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                name = self.path.rsplit("/", 1)[-1]
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    status, why = service._accept(name, headers, body)
                except Exception as exc:  # noqa: BLE001 - undecryptable: say so, like a push service
                    status, why = 400, f"{type(exc).__name__}: {exc}"
                if why:
                    service.rejected.append(f"{status} {why}")
                self.send_response(status)
                self.send_header("Content-Length", str(len(why)))
                self.end_headers()
                self.wfile.write(why.encode())

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def push_service(settings: Any) -> Iterator[PushService]:
    settings.WEBPUSH_ALLOW_PRIVATE_ENDPOINTS = True
    service = PushService()
    try:
        yield service
    finally:
        service.close()
