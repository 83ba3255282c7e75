"""Typed errors raised deep in services and rendered once at the edge (REST, WebSocket)."""
from __future__ import annotations


class NaviError(Exception):
    """An error with a message a person can act on. ``status`` is the HTTP status at the edge."""

    status: int = 400

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class BadRequest(NaviError):
    status = 400


class NotFound(NaviError):
    status = 404


class Conflict(NaviError):
    status = 409


class PayloadTooLarge(NaviError):
    status = 413


class InsufficientStorage(NaviError):
    """The server's disk is full: nothing was saved."""

    status = 507
