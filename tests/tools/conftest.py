"""Fixtures for the built-in tool tests: tool context vars and a local HTTP server (real sockets)."""
from __future__ import annotations

import json
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from agent.ctx import current_session_id, current_user_role

SESSION_ID = "test-session"


def make_png(width: int = 3, height: int = 2) -> bytes:
    """A small valid PNG (RGB, all black)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@dataclass
class ToolCtx:
    session_dir: Path
    root: Path


@pytest.fixture
def tool_ctx(settings, tmp_path: Path) -> Iterator[ToolCtx]:
    """Staff user in session 'test-session'; session files under tmp_path; no extra roots."""
    settings.SESSION_FILES_DIR = tmp_path / "sessions"
    settings.FS_ALLOWED_PATHS = []
    settings.HTTP_ALLOWED_PRIVATE_HOSTS = []
    sid = current_session_id.set(SESSION_ID)
    role = current_user_role.set("staff")
    yield ToolCtx(session_dir=(tmp_path / "sessions" / SESSION_ID), root=tmp_path)
    current_session_id.reset(sid)
    current_user_role.reset(role)


HTML_PAGE = b"""<!doctype html><html><head><title>Test Page</title><style>body{color:red}</style>
<script>alert('evil script')</script></head><body>
<nav><a href="/home">Navigation link</a></nav>
<main><h1>Main Heading</h1><p>Some <b>bold</b> text with <a href="/docs?x=1">a link</a>.</p>
<ul><li>first item</li><li>second item</li></ul>
<a href="javascript:alert(1)">js link</a><img src="x.png" alt="a cat"></main>
<footer>Footer text</footer></body></html>"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: C901 - a small router
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        route = url.path
        if route == "/hello":
            self._send(200, b"hello world")
        elif route == "/html":
            self._send(200, HTML_PAGE, "text/html; charset=utf-8")
        elif route == "/json":
            self._send(200, b'{"ok": true}', "application/json")
        elif route == "/redirect":
            self._send(302, b"", Location=query["to"])
        elif route == "/loop":
            self._send(302, b"", Location="/loop")
        elif route == "/echo":
            self._echo()
        elif route == "/big":
            self._big()
        elif route == "/drip":
            self._drip()
        elif route == "/image.png":
            self._send(200, make_png(), "image/png")
        elif route == "/fake.png":
            self._send(200, b"<html>not an image</html>", "image/png")
        elif route == "/binary":
            self._send(200, b"\x00\x01\x02" * 100, "application/octet-stream")
        else:
            self._send(404, b"not found")

    do_HEAD = do_GET

    def do_POST(self) -> None:
        self._echo()

    do_PUT = do_POST

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        data = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                "body": body.decode()}
        self._send(200, json.dumps(data).encode(), "application/json")

    def _big(self) -> None:
        """1 GB announced and produced lazily; stops when the client goes away."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(1024**3))
        self.end_headers()
        block = b"x" * 65536
        try:
            for _ in range(1024**3 // len(block)):
                self.wfile.write(block)
        except OSError:
            return

    def _drip(self) -> None:
        """Headers at once, then one byte every 0.2 s (for at most 15 s)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(75):
                self.wfile.write(b"d")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            return


class _Server(ThreadingHTTPServer):
    daemon_threads = True


@dataclass
class LocalServer:
    port: int

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture(scope="session")
def http_server() -> Iterator[LocalServer]:
    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield LocalServer(port=server.server_address[1])
    server.shutdown()
    server.server_close()
