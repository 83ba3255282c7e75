"""image_view: files under the path policy, URLs under the network policy, magic-byte checks."""
from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from tools_app.base import ToolError
from tools_app.builtins.image_view import MAX_IMAGE_BYTES, ImageViewTool, dimensions, sniff_mime
from tools_app.safety.network import NetworkPolicyError
from tools_app.safety.paths import PathPolicyError

from .conftest import make_png

tool = ImageViewTool()


async def test_png_file(tool_ctx) -> None:
    tool_ctx.session_dir.mkdir(parents=True, exist_ok=True)
    png = make_png(3, 2)
    (tool_ctx.session_dir / "pic.png").write_bytes(png)
    result = await tool.execute({"path": "pic.png"})
    assert result.success
    assert result.metadata["is_image"] is True and result.metadata["mime"] == "image/png"
    assert base64.b64decode(result.metadata["base64"]) == png
    assert "image/png, 3x2 pixels" in result.output


async def test_png_url(tool_ctx, settings, http_server) -> None:
    settings.HTTP_ALLOWED_PRIVATE_HOSTS = ["127.0.0.1"]
    result = await tool.execute({"url": http_server.url("/image.png")})
    assert result.metadata["is_image"] is True and result.metadata["mime"] == "image/png"


async def test_url_policy_applies(tool_ctx, http_server) -> None:
    with pytest.raises(NetworkPolicyError, match="loopback"):
        await tool.execute({"url": http_server.url("/image.png")})


async def test_not_really_an_image(tool_ctx, settings, http_server) -> None:
    settings.HTTP_ALLOWED_PRIVATE_HOSTS = ["127.0.0.1"]
    with pytest.raises(ToolError, match="not a PNG, JPEG, GIF or WEBP image"):
        await tool.execute({"url": http_server.url("/fake.png")})
    tool_ctx.session_dir.mkdir(parents=True, exist_ok=True)
    (tool_ctx.session_dir / "fake.jpg").write_text("just text")
    with pytest.raises(ToolError, match="not a PNG, JPEG, GIF or WEBP image"):
        await tool.execute({"path": "fake.jpg"})


def _write_huge(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.write(make_png())
        fh.truncate(MAX_IMAGE_BYTES + 10)


async def test_too_large(tool_ctx) -> None:
    tool_ctx.session_dir.mkdir(parents=True, exist_ok=True)
    _write_huge(tool_ctx.session_dir / "huge.png")
    with pytest.raises(ToolError, match="images up to"):
        await tool.execute({"path": "huge.png"})


async def test_path_policy_applies(tool_ctx) -> None:
    outside = tool_ctx.root / "outside.png"
    outside.write_bytes(make_png())
    with pytest.raises(PathPolicyError, match="outside the allowed directories"):
        await tool.execute({"path": str(outside)})
    tool_ctx.session_dir.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, tool_ctx.session_dir / "link.png")
    with pytest.raises(PathPolicyError):
        await tool.execute({"path": "link.png"})


async def test_exactly_one_source(tool_ctx) -> None:
    with pytest.raises(ToolError, match="exactly one"):
        await tool.execute({})
    with pytest.raises(ToolError, match="exactly one"):
        await tool.execute({"path": "a.png", "url": "http://example.com/a.png"})


def test_magic_bytes_and_dimensions() -> None:
    assert sniff_mime(b"GIF89a\x05\x00\x07\x00") == "image/gif"
    assert dimensions("image/gif", b"GIF89a\x05\x00\x07\x00") == (5, 7)
    assert sniff_mime(b"RIFF\x00\x00\x00\x00WEBPVP8X") == "image/webp"
    jpeg = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x00\x20\x00\x40" + b"\x00" * 20
    assert sniff_mime(jpeg) == "image/jpeg" and dimensions("image/jpeg", jpeg) == (64, 32)
    assert sniff_mime(b"%PDF-1.4") is None
