"""Meta tools: write_tool, todo, scratchpad, reflect, test_tool, list_tools, tool_manual, reload_tools."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.tools.registry_support import (  # noqa: F401
    good_tool,
    meta_registry,
    run_context,
    tools_env,
    write_tool_file,
)
from tools_app.builtins_meta import read_todo, set_todo


@pytest.fixture
def registry(tools_env):  # noqa: F811
    return meta_registry()


# --- write_tool -------------------------------------------------------------------

async def test_write_tool_installs_a_callable_tool(registry, tools_env):  # noqa: F811
    with run_context(role="staff"):
        result = await registry.execute("write_tool", {"name": "greet", "code": good_tool("greet")})
    assert result.success, result.error
    assert (tools_env.tools / "greet.py").is_file()
    assert json.loads((tools_env.tools / "enabled.json").read_text()) == ["greet"]
    assert registry.get("greet").source == "user"
    called = await registry.execute("greet", {"who": "Ann"})
    assert called.success and called.output == "hello Ann"


async def test_write_tool_is_staff_only(registry):
    with run_context(role="user"):
        result = await registry.execute("write_tool", {"name": "greet", "code": good_tool("greet")})
    assert not result.success and "only staff users" in result.error


@pytest.mark.parametrize(
    ("name", "code", "expected"),
    [
        ("runs_os", "import os\nos.system('touch /tmp/pwned')\n" + good_tool("runs_os"), "would run when the tool is imported"),
        ("prints", good_tool("prints") + "\nprint('hi')\n", "print('hi')"),
        ("assign_call", "import os\nX = os.system('id')\n" + good_tool("assign_call"), "os.system('id')"),
        ("decorated", "import functools\n" + good_tool("decorated").replace("async def", "@functools.cache\nasync def"),
         "decorators"),
        ("filesystem", good_tool("filesystem"), "'filesystem' is a built-in tool"),
        ("../x", good_tool("x"), "a tool name is not a path"),
        ("/abs", good_tool("abs"), "a tool name is not a path"),
        ("a/b", good_tool("b"), "a tool name is not a path"),
        ("mismatch", good_tool("other"), 'name = "mismatch"'),
        ("broken", "def execute(:\n", "syntax error on line 1"),
        ("no_execute", 'name = "no_execute"\ndescription = "d"\nparameters = {"type": "object"}\n', "async def execute"),
        ("nomod", "import not_installed_module_xyz\n" + good_tool("nomod"), "not installed"),
    ],
)
async def test_write_tool_refuses(registry, tools_env, name, code, expected):  # noqa: F811
    with run_context(role="staff"):
        result = await registry.execute("write_tool", {"name": name, "code": code})
    assert not result.success
    assert expected in result.error
    assert list(tools_env.tools.glob("*.py")) == []
    assert not (tools_env.tools.parent / "x.py").exists()


async def test_write_tool_refuses_imports_from_writable_dirs(registry, tools_env):  # noqa: F811
    (tools_env.sessions / "evil_mod.py").write_text("import os\n")
    import sys

    sys.path.insert(0, str(tools_env.sessions))
    try:
        with run_context(role="staff"):
            result = await registry.execute("write_tool", {"name": "sneaky", "code": "import evil_mod\n" + good_tool("sneaky")})
    finally:
        sys.path.remove(str(tools_env.sessions))
    assert not result.success and "directory the agent can write to" in result.error


async def test_write_tool_overwrite_and_load_error_reported(registry, tools_env):  # noqa: F811
    with run_context(role="staff"):
        assert (await registry.execute("write_tool", {"name": "greet", "code": good_tool("greet")})).success
        again = await registry.execute("write_tool", {"name": "greet", "code": good_tool("greet")})
        assert not again.success and "overwrite=true" in again.error
        bad = good_tool("greet") + "\nX = 1 / 0\n"
        result = await registry.execute("write_tool", {"name": "greet", "code": bad, "overwrite": True})
    assert not result.success and "failed to load: ZeroDivisionError" in result.error


# --- todo --------------------------------------------------------------------------

async def test_todo_set_update_read(registry, tools_env):  # noqa: F811
    with run_context(session_id="sess-1"):
        out = await registry.execute("todo", {"action": "set", "steps": ["Find logs", "Fix bug", "Deploy"]})
        assert out.output.splitlines()[0] == "Todo list (0/3 done):"
        await registry.execute("todo", {"action": "update", "step": 1, "status": "done", "validation": "saw log"})
        await registry.execute("todo", {"action": "update", "step": 2, "status": "in_progress"})
        await registry.execute("todo", {"action": "update", "step": 3, "status": "failed", "note": "no access"})
        read = await registry.execute("todo", {"action": "read"})
        bad = await registry.execute("todo", {"action": "update", "step": 9, "status": "done"})
    assert read.output == (
        "Todo list (1/3 done):\n1. [✓] Find logs — evidence: saw log\n2. […] Fix bug (in progress)\n"
        "3. [✗] Deploy — note: no access"
    )
    assert not bad.success and "steps 1 to 3" in bad.error
    assert (tools_env.sessions / "sess-1" / ".navi" / "todo.json").is_file()
    steps = read_todo("sess-1")
    assert [s["status"] for s in steps] == ["done", "in_progress", "failed"]
    assert read_todo("other-session") == []


async def test_todo_step_validation(registry):
    profile = SimpleNamespace(step_validation_enabled=True)
    with run_context(session_id="sess-2", profile=profile):
        await registry.execute("todo", {"action": "set", "steps": ["Check disk"]})
        refused = await registry.execute("todo", {"action": "update", "step": 1, "status": "done"})
        ok = await registry.execute("todo", {"action": "update", "step": 1, "status": "done", "validation": "df: 40%"})
    assert not refused.success and "pass 'validation' with the evidence" in refused.error
    assert ok.success and "[✓] Check disk" in ok.output


async def test_todo_needs_a_session(registry):
    with run_context(session_id=None):
        result = await registry.execute("todo", {"action": "read"})
    assert not result.success and "active session" in result.error


def test_set_todo_for_the_planner(tools_env):  # noqa: F811
    set_todo("sess-3", ["a", "b"])
    assert [s["title"] for s in read_todo("sess-3")] == ["a", "b"]


# --- scratchpad ----------------------------------------------------------------------

async def test_scratchpad_profile_sections(registry):
    profile = SimpleNamespace(scratchpad_sections=["findings", "sources"])
    with run_context(session_id="sess-4", profile=profile):
        await registry.execute("scratchpad", {"action": "write", "section": "findings", "content": "A"})
        await registry.execute("scratchpad", {"action": "append", "section": "findings", "content": "B"})
        await registry.execute("scratchpad", {"action": "write", "section": "sources", "content": "http://x"})
        one = await registry.execute("scratchpad", {"action": "read", "section": "findings"})
        unknown = await registry.execute("scratchpad", {"action": "write", "section": "drafts", "content": "C"})
        await registry.execute("scratchpad", {"action": "clear", "section": "sources"})
        everything = await registry.execute("scratchpad", {"action": "read"})
    assert one.output == "## findings\nA\nB"
    assert not unknown.success and unknown.error == "unknown section 'drafts'; sections for this profile: findings, sources"
    assert everything.output == "## findings\nA\nB"


async def test_scratchpad_free_sections_without_profile(registry):
    with run_context(session_id="sess-5"):
        assert (await registry.execute("scratchpad", {"action": "write", "section": "my-notes", "content": "x"})).success
        bad = await registry.execute("scratchpad", {"action": "write", "section": "Bad Name!", "content": "x"})
        missing = await registry.execute("scratchpad", {"action": "append", "section": "my-notes"})
    assert not bad.success and "lowercase" in bad.error
    assert not missing.success and "needs 'content'" in missing.error


# --- reflect ---------------------------------------------------------------------------

async def test_reflect_uses_the_todo_state(registry):
    with run_context(session_id="sess-6"):
        await registry.execute("todo", {"action": "set", "steps": ["Read config", "Restart service"]})
        await registry.execute("todo", {"action": "update", "step": 1, "status": "done"})
        result = await registry.execute("reflect", {"progress": "read the config", "goal": "service running"})
    text = result.output
    assert result.success and text.startswith("## Reflection\nGoal: service running")
    assert "Todo list (1/2 done)" in text
    assert "   - 2. Restart service" in text  # left
    assert "Evidence gaps" in text and "   - 1. Read config" in text  # done without evidence
    assert "6. Is the goal already met?" in text


async def test_reflect_without_todo(registry):
    with run_context(session_id="sess-7"):
        result = await registry.execute("reflect", {"progress": "nothing yet"})
    assert "No todo list yet" in result.output and "not given" in result.output


# --- test_tool, list_tools, tool_manual, reload_tools -----------------------------------

async def test_test_tool_reports_success_and_failure(registry, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "greet", good_tool("greet"))
    write_tool_file(tools_env.tools, "broken", "raise ValueError('bad')\n")
    registry.reload_user_tools()
    ok = await registry.execute("test_tool", {"name": "greet", "arguments": {"who": "Al"}})
    assert ok.success and "succeeded in" in ok.output and "hello Al" in ok.output
    failed = await registry.execute("test_tool", {"name": "greet", "arguments": {}})
    assert not failed.success and "FAILED" in failed.output and "missing required field 'who'" in failed.output
    not_user = await registry.execute("test_tool", {"name": "todo"})
    assert not not_user.success and "not a user tool" in not_user.error
    broken = await registry.execute("test_tool", {"name": "broken"})
    assert not broken.success and "did not load: broken.py: ValueError: bad" in broken.error


async def test_list_tools_shows_sources_and_load_errors(registry, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "greet", good_tool("greet"))
    write_tool_file(tools_env.tools, "broken", "def x(:\n")
    registry.reload_user_tools()
    result = await registry.execute("list_tools", {})
    lines = result.output.splitlines()
    assert any(line.startswith("- todo [builtin] ok — ") for line in lines)
    assert any(line.startswith("- write_tool [builtin] ok (staff only)") for line in lines)
    assert any(line.startswith("- greet [user] ok") for line in lines)
    assert any(line.startswith("- broken [user] ERROR: broken.py: SyntaxError") for line in lines)
    users = await registry.execute("list_tools", {"source": "user"})
    assert "todo" not in users.output


async def test_tool_manual_file_and_generated(registry, tools_env):  # noqa: F811
    tools_env.manuals.mkdir()
    (tools_env.manuals / "todo.md").write_text("# todo manual\n")
    assert (await registry.execute("tool_manual", {"name": "todo"})).output == "# todo manual\n"
    generated = (await registry.execute("tool_manual", {"name": "scratchpad"})).output
    assert generated.startswith("# scratchpad\n\nSource: builtin.")
    assert "- `action` (string, required)" in generated and "One of: write, append, read, clear." in generated
    unknown = await registry.execute("tool_manual", {"name": "../etc/passwd"})
    assert not unknown.success and "unknown tool" in unknown.error


def test_repo_manuals_exist(settings):
    manuals = settings.BASE_DIR / "manuals"
    for name in ("filesystem", "terminal", "ssh_exec", "code_exec", "http_request", "spawn_agent", "schedule_recall"):
        assert (manuals / f"{name}.md").read_text().startswith(f"# {name}")


async def test_reload_tools_reports(registry, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "greet", good_tool("greet"))
    write_tool_file(tools_env.tools, "broken", "import nope_not_here\n")
    result = await registry.execute("reload_tools", {})
    assert result.success
    assert "User tools loaded (1): greet" in result.output
    assert "ERROR broken.py: ModuleNotFoundError" in result.output
    assert registry.get("greet") is not None and registry.get("todo") is not None


# --- user tools live in the data directory (issue 21) ---------------------------------

async def test_write_tool_writes_to_the_data_directory_and_never_the_source_tree(registry, tools_env, settings, tmp_path):  # noqa: F811
    import shutil

    bundled = tmp_path / "bundled"
    shutil.copytree(settings.BASE_DIR / "tools", bundled, ignore=shutil.ignore_patterns("__pycache__"))
    before = {p.name: p.read_bytes() for p in bundled.iterdir()}
    settings.BUNDLED_TOOLS_DIR = bundled
    registry.reload_user_tools()
    assert {"get_current_datetime", "user_notes"} <= set(registry.enabled_user_tools)  # bundled ones load
    with run_context(role="staff"):
        written = await registry.execute("write_tool", {"name": "greet", "code": good_tool("greet")})
        refused = await registry.execute("write_tool", {"name": "user_notes", "code": good_tool("user_notes")})
        replaced = await registry.execute("write_tool", {"name": "user_notes", "code": good_tool("user_notes"),
                                                         "overwrite": True})
    assert written.success and "user tools directory" in written.output
    assert not refused.success and "bundled with Navi" in refused.error and "overwrite=true" in refused.error
    assert replaced.success, replaced.error
    assert {p.name: p.read_bytes() for p in bundled.iterdir()} == before  # the source tree is untouched
    assert sorted(p.name for p in tools_env.tools.iterdir()) == ["enabled.json", "greet.py", "user_notes.py"]
    called = await registry.execute("user_notes", {"who": "Ann"})  # the user's version wins
    assert called.success and called.output == "hello Ann"
    assert (await registry.execute("get_current_datetime", {})).success


def test_the_default_tools_dir_is_in_the_data_directory(tmp_path):
    import os
    import subprocess
    import sys

    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if k not in {"TOOLS_DIR", "DJANGO_SETTINGS_MODULE"}}
    env["NAVI_DATA_DIR"] = str(tmp_path / "data")
    out = subprocess.run(
        [sys.executable, "-c", "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'navi_site.settings'; "
         "django.setup(); from django.conf import settings as s; print(s.TOOLS_DIR); print(s.BUNDLED_TOOLS_DIR)"],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=60, check=True)
    tools_dir, bundled = out.stdout.split()
    assert tools_dir == str(tmp_path / "data" / "tools")
    assert bundled == str(settings.BASE_DIR / "tools")
