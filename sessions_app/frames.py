"""Inbound WebSocket frames: parsing, validation and rate limiting (pure; no I/O).

Every rejection is a ``FrameError`` whose message tells the person what to change.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError, field_validator

MAX_CONTENT_CHARS = 100_000
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 10 * 1024 * 1024
MAX_FILES = 20

_DATA_URI = re.compile(r"^data:image/[A-Za-z0-9.+-]+;base64,", re.IGNORECASE)
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)


class FrameError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def image_kind(data: bytes) -> str | None:
    """The image format by magic bytes, or None."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def clean_image(raw: str, index: int) -> str:
    """Strip a data-URI prefix, check base64 and magic bytes; returns the bare base64."""
    value = _DATA_URI.sub("", raw.strip(), count=1)
    value = "".join(value.split())
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise FrameError(f"images[{index}] is not valid base64: send the image bytes base64-encoded "
                         "(a data:image/...;base64, prefix is fine).") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise FrameError(f"images[{index}] is {len(data) / 1e6:.1f} MB: the limit is "
                         f"{MAX_IMAGE_BYTES // (1024 * 1024)} MB per image. Resize it or upload it as a file.")
    if image_kind(data) is None:
        raise FrameError(f"images[{index}] is not an image (PNG, JPEG, GIF, WebP, BMP or TIFF expected).")
    return value


class FileRef(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str | None = Field(default=None, max_length=64)
    name: str | None = Field(default=None, max_length=255)
    path: str | None = Field(default=None, max_length=1024)


class MessageFrame(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["message"]
    content: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)]
    images: list[str] = Field(default_factory=list, max_length=MAX_IMAGES)
    files: list[Annotated[str, StringConstraints(max_length=64)] | FileRef] = Field(
        default_factory=list, max_length=MAX_FILES
    )
    # The client's own reference, echoed in steer_queued when the message waits for a running turn.
    ref: Annotated[str, StringConstraints(max_length=100)] | None = None

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = value.replace("\x00", "")  # meaningless in text, and PostgreSQL cannot store it
        if not value.strip():
            raise ValueError("the message is empty: type something")
        return value

    @field_validator("images")
    @classmethod
    def _images(cls, value: list[str]) -> list[str]:
        try:
            return [clean_image(item, i) for i, item in enumerate(value)]
        except FrameError as exc:
            raise ValueError(exc.message) from None

    def file_refs(self) -> list[Any]:
        return [f if isinstance(f, str) else f.model_dump(exclude_none=True) for f in self.files]


class SteerWithdrawFrame(BaseModel):
    """Take back a message queued for the running turn (``steer_queued``'s id) before it is read."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["steer_withdraw"]
    id: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class StopFrame(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["stop"]


class VisibilityFrame(BaseModel):
    """The page was hidden or shown (``document.visibilityState``): notifications use it."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["visibility"]
    visible: bool


class OtherFrame(BaseModel):
    """A frame of a type another app handles (``sessions_app.hooks.on_frame``): it validates the payload."""

    type: str
    payload: dict[str, Any]


Frame = MessageFrame | StopFrame | VisibilityFrame | SteerWithdrawFrame
_FRAME = TypeAdapter(Annotated[Frame, Field(discriminator="type")])
KNOWN_TYPES = ("message", "stop", "visibility", "steer_withdraw")


def parse_frame(text: str | None, data: bytes | None, *, max_bytes: int,
                other_types: tuple[str, ...] = ()) -> Frame | OtherFrame:
    """Parse one inbound frame. Raises FrameError with a message a person can act on.

    ``other_types``: frame types handled elsewhere; their payload comes back as an OtherFrame."""
    if data is not None and text is None:
        raise FrameError("Binary frames are not supported: send JSON text frames such as "
                         '{"type": "message", "content": "..."}.')
    text = text or ""
    size = len(text.encode("utf-8")) if len(text) * 4 > max_bytes else len(text)
    if size > max_bytes:
        raise FrameError(f"The frame is too large ({size / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.1f} MB). "
                         "Send big files with POST /sessions/{id}/files and reference them in 'files'.")
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise FrameError(f"The frame is not valid JSON ({exc.msg} at position {exc.pos}).") from None
    if not isinstance(payload, dict):
        raise FrameError('The frame must be a JSON object such as {"type": "message", "content": "..."}.')
    kind = payload.get("type")
    if isinstance(kind, str) and kind in other_types:
        return OtherFrame(type=kind, payload=payload)
    if kind not in KNOWN_TYPES:
        known = ", ".join(f'"{k}"' for k in (*KNOWN_TYPES, *other_types))
        raise FrameError(f"Unknown frame type {str(kind)[:40]!r}: use one of {known}.")
    try:
        return _FRAME.validate_python(payload)
    except ValidationError as exc:
        raise FrameError("Invalid message: " + "; ".join(_describe(e) for e in exc.errors()[:5])) from None


def _describe(err: Any) -> str:
    where = ".".join(str(p) for p in err.get("loc", ()) if p not in KNOWN_TYPES) or "frame"
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if err.get("type") == "missing":
        msg = "is required"
    return f"{where}: {msg}"


class TokenBucket:
    """Per-connection rate limit: ``rate`` frames/s with bursts of ``burst``."""

    def __init__(self, *, rate: float = 20.0, burst: float = 40.0) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.stamp = time.monotonic()
        self.limited = False  # an error was sent for the current flood

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            if self.tokens >= self.burst / 2:
                self.limited = False
            return True
        return False
