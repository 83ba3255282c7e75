"""A local SMTP server (aiosmtpd, real SMTP on loopback) that records what it receives and can be
told to defer (4xx) or refuse (5xx) the next recipients, or to go away (port closed)."""
from __future__ import annotations

import email
import email.policy
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from tests.support.live import free_port


@dataclass
class Received:
    sender: str
    recipients: list[str]
    message: EmailMessage
    at: float = field(default_factory=time.time)  # wall clock of the arrival

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    @property
    def text(self) -> str:
        part = self.message.get_body(preferencelist=("plain",))
        return part.get_content() if part is not None else ""


@dataclass
class SmtpServer:
    host: str
    port: int
    received: list[Received] = field(default_factory=list)
    # Replies to RCPT TO for the next recipients, e.g. ["451 4.3.0 try again later"]; then 250.
    rcpt_replies: list[str] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    controller: Any = None

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        if self.rcpt_replies:
            return self.rcpt_replies.pop(0)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.received.append(Received(sender=envelope.mail_from, recipients=list(envelope.rcpt_tos),
                                      message=message))  # type: ignore[arg-type]
        self.arrived.set()
        return "250 Message accepted for delivery"

    def wait(self, count: int = 1, timeout: float = 20.0) -> list[Received]:
        """Block until ``count`` messages have arrived (the live tests' Celery sends them)."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{len(self.received)} of {count} e-mails arrived within {timeout} s")
            self.arrived.wait(min(left, 0.5))
            self.arrived.clear()
        return self.received

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


def start_smtp_server() -> SmtpServer:
    server = SmtpServer(host="127.0.0.1", port=free_port())
    server.controller = Controller(server, hostname=server.host, port=server.port, ready_timeout=10)
    server.controller.start()
    return server


@pytest.fixture
def smtp_server(settings: Any) -> Iterator[SmtpServer]:
    """A local SMTP server, and Navi's e-mail settings pointing at it."""
    server = start_smtp_server()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = server.host, server.port
    settings.EMAIL_TIMEOUT = 5
    try:
        yield server
    finally:
        server.stop()
