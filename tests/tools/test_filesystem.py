"""filesystem tool and the path policy: real files in tmp_path, both roles, escape attempts."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.ctx import current_session_id, current_user_role
from tools_app.base import ToolError
from tools_app.builtins.filesystem import FilesystemTool
from tools_app.safety.paths import PathPolicyError, resolve_path

fs = FilesystemTool()


async def run(**params: object) -> str:
    result = await fs.execute(dict(params))
    assert result.success, result.error
    return result.output


async def test_write_read_append_roundtrip(tool_ctx) -> None:
    assert "Wrote" in await run(action="write", path="notes/a.txt", content="one\ntwo\n")
    await run(action="append", path="notes/a.txt", content="three\n")
    out = await run(action="read", path="notes/a.txt")
    assert "one\ntwo\nthree" in out
    assert (tool_ctx.session_dir / "notes" / "a.txt").read_text() == "one\ntwo\nthree\n"
    assert not [p for p in (tool_ctx.session_dir / "notes").iterdir() if p.name.startswith(".navi-tmp")]


async def test_read_offset_limit_and_byte_cap(tool_ctx) -> None:
    await run(action="write", path="lines.txt", content="".join(f"line {i}\n" for i in range(1, 101)))
    out = await run(action="read", path="lines.txt", offset=10, limit=3)
    assert "lines 11-13" in out and "line 11\nline 12\nline 13\n" in out and "offset=13" in out
    out = await run(action="read", path="lines.txt", max_bytes=20)
    assert "line 1\nline 2\n" in out and "line 4" not in out and "more follows" in out


async def test_binary_file_refused_with_hint(tool_ctx) -> None:
    tool_ctx.session_dir.mkdir(parents=True, exist_ok=True)
    (tool_ctx.session_dir / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    with pytest.raises(ToolError, match="PNG image.*image_view"):
        await fs.execute({"action": "read", "path": "pic.png"})


async def test_list_stat_exists_search_mkdir_move_delete(tool_ctx) -> None:
    await run(action="mkdir", path="d/sub")
    await run(action="write", path="d/x.py", content="print(1)")
    await run(action="write", path="d/sub/y.py", content="print(2)")
    listing = await run(action="list", path="d")
    assert "dir   sub/" in listing and "file  x.py" in listing
    assert "exists: file" in await run(action="stat", path="d/x.py")
    assert "does not exist" in await run(action="exists", path="d/nope")
    found = await run(action="search", path="d", pattern="*.py")
    assert "x.py" in found and "sub/y.py" in found
    await run(action="move", path="d/x.py", destination="d/sub")
    assert (tool_ctx.session_dir / "d/sub/x.py").exists()
    with pytest.raises(ToolError, match="not empty"):
        await fs.execute({"action": "delete", "path": "d/sub"})
    await run(action="delete", path="d/sub/x.py")
    await run(action="delete", path="d/sub/y.py")
    await run(action="delete", path="d/sub")
    assert not (tool_ctx.session_dir / "d/sub").exists()


async def test_session_dir_cannot_be_deleted(tool_ctx) -> None:
    with pytest.raises(ToolError, match="root directory"):
        await fs.execute({"action": "delete", "path": "."})


@pytest.mark.parametrize("action", ["write", "append", "mkdir", "delete", "move"])
async def test_write_actions_are_staff_only(tool_ctx, action: str) -> None:
    current_user_role.set("user")
    params = {"action": action, "path": "f.txt", "content": "x", "destination": "g.txt"}
    with pytest.raises(ToolError, match="only available to staff users; an admin can allow it"):
        await fs.execute(params)
    assert not (tool_ctx.session_dir / "f.txt").exists()


async def test_plain_users_can_read_and_list(tool_ctx) -> None:
    await run(action="write", path="r.txt", content="readable")
    current_user_role.set("user")
    assert "readable" in await run(action="read", path="r.txt")
    assert "r.txt" in await run(action="list")


# --- escapes -------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["../../etc/passwd", "/etc/passwd", "notes/../../../etc/passwd", "../other-session/x"])
async def test_traversal_refused(tool_ctx, raw: str) -> None:
    with pytest.raises(PathPolicyError, match="outside the allowed directories") as err:
        await fs.execute({"action": "read", "path": raw})
    assert str(tool_ctx.session_dir.resolve()) in str(err.value)  # names the allowed roots


async def test_percent_encoded_dots_stay_literal(tool_ctx) -> None:
    with pytest.raises(ToolError, match="does not exist") as err:
        await fs.execute({"action": "read", "path": "%2e%2e/%2e%2e/etc/passwd"})
    assert str(tool_ctx.session_dir.resolve()) in str(err.value)
    await run(action="write", path="%2e%2e/x.txt", content="literal")
    assert (tool_ctx.session_dir / "%2e%2e" / "x.txt").read_text() == "literal"


async def test_nul_byte_refused(tool_ctx) -> None:
    with pytest.raises(PathPolicyError, match="NUL byte"):
        await fs.execute({"action": "read", "path": "a\x00b"})


async def test_symlink_out_refused(tool_ctx) -> None:
    outside = tool_ctx.root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    tool_ctx.session_dir.mkdir(parents=True, exist_ok=True)
    (tool_ctx.session_dir / "link").symlink_to(outside)
    (tool_ctx.session_dir / "filelink").symlink_to(outside / "secret.txt")
    for raw in ("link/secret.txt", "filelink"):
        with pytest.raises(PathPolicyError, match="outside the allowed directories"):
            await fs.execute({"action": "read", "path": raw})
    with pytest.raises(PathPolicyError):
        await fs.execute({"action": "write", "path": "link/new.txt", "content": "x"})
    assert not (outside / "new.txt").exists()
    # Deleting the link itself is fine and leaves the target alone.
    await run(action="delete", path="filelink")
    assert (outside / "secret.txt").read_text() == "secret"


async def test_hard_link_out_refused(tool_ctx) -> None:
    outside = tool_ctx.root / "outside.txt"
    outside.write_text("original")
    tool_ctx.session_dir.mkdir(parents=True, exist_ok=True)
    os.link(outside, tool_ctx.session_dir / "hard.txt")
    for params in ({"action": "read"}, {"action": "write", "content": "evil"}, {"action": "append", "content": "evil"}):
        with pytest.raises(PathPolicyError, match="hard links"):
            await fs.execute({"path": "hard.txt", **params})
    assert outside.read_text() == "original"


async def test_prefix_confusion_refused(tool_ctx, settings) -> None:
    allowed = tool_ctx.root / "allowed"
    evil = tool_ctx.root / "allowed_evil"
    allowed.mkdir()
    evil.mkdir()
    (evil / "x.txt").write_text("evil")
    (allowed / "ok.txt").write_text("fine")
    settings.FS_ALLOWED_PATHS = [str(allowed)]
    assert "fine" in await run(action="read", path=str(allowed / "ok.txt"))
    with pytest.raises(PathPolicyError, match=f"outside the allowed directories.*{allowed}"):
        await fs.execute({"action": "read", "path": str(evil / "x.txt")})


async def test_star_allows_anywhere(tool_ctx, settings) -> None:
    target = tool_ctx.root / "anywhere.txt"
    target.write_text("free")
    settings.FS_ALLOWED_PATHS = ["*"]
    assert "free" in await run(action="read", path=str(target))


async def test_no_session_no_files(tool_ctx) -> None:
    current_session_id.set(None)
    with pytest.raises(ToolError, match="No session"):
        resolve_path("x.txt")


def test_schema_is_strict() -> None:
    schema = FilesystemTool.parameters
    assert schema["additionalProperties"] is False
    assert "read" in schema["properties"]["action"]["enum"]
    assert FilesystemTool.untrusted_output is True
    assert Path(__file__).exists()


async def test_a_missing_file_names_the_files_that_come_close(tool_ctx) -> None:
    await run(action="write", path="facts.txt", content="The magic number is 4242.\n")
    await run(action="write", path="notes.md", content="x\n")
    # Qwen 0.5B asked for "read_file_facts.txt" when the user said "read the file facts.txt".
    with pytest.raises(ToolError) as err:
        await fs.execute({"action": "read", "path": "read_file_facts.txt"})
    assert "read_file_facts.txt does not exist. Did you mean 'facts.txt'?" in str(err.value)
    with pytest.raises(ToolError) as err:
        await fs.execute({"action": "read", "path": "plan.pdf"})
    assert "plan.pdf does not exist. The folder has: facts.txt, notes.md." in str(err.value)


async def test_a_read_of_a_missing_file_says_how_to_create_it(tool_ctx) -> None:
    """The 0.5B began "Create a file named shopping.txt …" by reading it, twice: the error says what to do."""
    with pytest.raises(ToolError) as err:
        await fs.execute({"action": "read", "path": "shopping.txt"})
    assert str(err.value).endswith(
        "shopping.txt does not exist. If the user asked to create it, use action 'write' with path and content.")
    await run(action="write", path="shopping-list.txt", content="milk\n")
    with pytest.raises(ToolError) as err:  # a name that comes close: that is what to say, nothing else
        await fs.execute({"action": "read", "path": "shoping-list.txt"})
    assert "Did you mean 'shopping-list.txt'" in str(err.value) and "create" not in str(err.value)
    with pytest.raises(ToolError) as err:  # a folder that is not there either: nothing to create it in
        await fs.execute({"action": "read", "path": "nowhere/shopping.txt"})
    assert "To create it" not in str(err.value)
