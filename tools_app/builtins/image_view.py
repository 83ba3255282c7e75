"""The ``image_view`` tool: load an image (file or URL) for the multimodal model.

On success the result carries ``metadata={"is_image": True, "base64": ..., "mime": ...}``;
the agent injects the image into the context as a synthetic user message (spec 002
"Image tool → multimodal injection"). Files go through the path policy, URLs
through the network policy. The bytes must really be PNG, JPEG, GIF or WEBP
(checked by magic bytes, not by name or Content-Type).
"""
from __future__ import annotations

import asyncio
import base64
import os
import stat
import struct
from pathlib import Path
from typing import Any

import structlog

from tools_app.base import Tool, ToolError, ToolResult
from tools_app.safety.network import fetch
from tools_app.safety.paths import check_links, open_nofollow, resolve_path

log = structlog.get_logger(__name__)

MAX_IMAGE_BYTES = 10 * 1024 * 1024
FETCH_TIMEOUT = 30.0


def sniff_mime(data: bytes) -> str | None:
    """The image MIME type from magic bytes, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}:
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None


def dimensions(mime: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) when the header says so; None when it cannot be read."""
    try:
        if mime == "image/png" and len(data) >= 24:
            return struct.unpack(">II", data[16:24])
        if mime == "image/gif" and len(data) >= 10:
            return struct.unpack("<HH", data[6:10])
        if mime == "image/jpeg":
            return _jpeg_size(data)
        if mime == "image/webp" and data[12:16] == b"VP8X" and len(data) >= 30:
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    except struct.error:
        return None
    return None


def _read_file(raw: str) -> tuple[bytes, str]:
    path = resolve_path(raw)
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist.") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory, not an image file.") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{path} is not a regular file.")
        check_links(path, st, writing=False)
        if st.st_size > MAX_IMAGE_BYTES:
            raise ToolError(f"{path} is {st.st_size} bytes; images up to {MAX_IMAGE_BYTES} bytes can be loaded.")
        return fh.read(MAX_IMAGE_BYTES + 1), str(path)


async def _read_url(url: str) -> tuple[bytes, str]:
    fetched = await fetch("GET", url, headers={"accept": "image/*"}, max_bytes=MAX_IMAGE_BYTES,
                          total_timeout=FETCH_TIMEOUT)
    if fetched.status >= 400:
        raise ToolError(f"Fetching {fetched.url} failed with HTTP {fetched.status} {fetched.reason}.")
    if fetched.truncated:
        raise ToolError(f"The image at {fetched.url} is larger than {MAX_IMAGE_BYTES} bytes; it was not loaded.")
    if fetched.timed_out or fetched.broken:
        raise ToolError(f"The image at {fetched.url} could not be downloaded completely. {fetched.cut_note()}")
    return fetched.body, fetched.url


class ImageViewTool(Tool):
    name = "image_view"
    description = (
        "Look at an image: give 'path' (a file in the session directory or an allowed directory) OR 'url' "
        "(a public http/https address). PNG, JPEG, GIF and WEBP up to 10 MB. The image is attached so you "
        "can see it in your next step; the text result only says what was loaded."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Image file path (relative = session directory)."},
            "url": {"type": "string", "description": "http:// or https:// URL of an image."},
        },
        "additionalProperties": False,
    }
    timeout = FETCH_TIMEOUT + 15
    dangerous = False
    untrusted_output = False

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        path, url = params.get("path"), params.get("url")
        if bool(path) == bool(url):
            raise ToolError("Give exactly one of 'path' or 'url'.")
        data, source = await (_read_url(str(url)) if url else asyncio.to_thread(_read_file, str(path)))
        mime = sniff_mime(data)
        if mime is None:
            raise ToolError(f"{source} is not a PNG, JPEG, GIF or WEBP image (its first bytes say otherwise).")
        size = dimensions(mime, data)
        shape = f", {size[0]}x{size[1]} pixels" if size else ""
        name = Path(source).name if path else source
        log.info("image_view.loaded", mime=mime, bytes=len(data))
        return ToolResult(
            success=True,
            output=f"Loaded image {name} ({mime}{shape}, {len(data)} bytes). It is attached for you to look at.",
            metadata={"is_image": True, "base64": base64.b64encode(data).decode("ascii"), "mime": mime,
                      "source": source},
        )
