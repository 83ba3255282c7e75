"""User tool loader: good files, broken files (reported, never fatal), enabled.json, hot reload."""
from __future__ import annotations

import os
import sys

import pytest

from tests.tools.registry_support import good_tool, tools_env, write_tool_file  # noqa: F401
from tools_app.loader import UserToolLoader

RESERVED = {"filesystem", "todo"}


@pytest.fixture
def loader():
    return UserToolLoader()


def _errors(result):
    return {e.file: e.error for e in result.errors}


async def test_good_tool_is_loaded_and_runs(loader, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "greet", good_tool("greet"))
    result = loader.load(tools_env.tools, reserved=RESERVED)
    assert list(result.tools) == ["greet"] and result.errors == []
    tool = result.tools["greet"]
    assert tool.source == "user" and type(tool).__module__ == "navi_user_tools.greet"
    assert "navi_user_tools.greet" in sys.modules
    assert (await tool.execute({"who": "Ann"})).output == "hello Ann"


async def test_sync_execute_and_non_string_results(loader, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "sync_tool", '''
        name = "sync_tool"
        description = "Sync."
        parameters = {"type": "object", "properties": {}}
        def execute(params):
            return {"ok": True}
    ''')
    tool = loader.load(tools_env.tools, reserved=RESERVED).tools["sync_tool"]
    assert (await tool.execute({})).output == '{"ok": true}'


def test_a_tools_optional_doubt_is_advisory(loader, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "weather", '''
        name = "weather"
        description = "The weather."
        parameters = {"type": "object", "properties": {}}
        async def execute(params): return "sunny"
        def doubt(params, request):
            return None if "weather" in request else "The user did not ask about the weather."
    ''')
    write_tool_file(tools_env.tools, "plain", good_tool("plain"))
    tools = loader.load(tools_env.tools, reserved=RESERVED).tools
    found = tools["weather"].doubt({}, "Hello!")
    assert found is not None and found.reason == "The user did not ask about the weather."
    assert found.answer and found.repeated_runs and found.fix is None  # told once; made again, the call runs
    assert tools["weather"].doubt({}, "How is the weather?") is None
    assert tools["plain"].doubt({}, "Hello!") is None  # a tool without one is never doubted


def test_a_doubt_the_module_returns_as_a_doubt_is_held_as_it_says(loader, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "diary", '''
        from agent.ports import Doubt
        name = "diary"
        description = "A diary."
        parameters = {"type": "object", "properties": {"text": {"type": "string"}}}
        async def execute(params): return "kept"
        def doubt(params, request):
            return Doubt(reason="That is the user's question.", answer=True) if params.get("text") == request else None
    ''')
    tool = loader.load(tools_env.tools, reserved=RESERVED).tools["diary"]
    found = tool.doubt({"text": "Why?"}, "Why?")
    assert found is not None and found.reason == "That is the user's question." and not found.repeated_runs
    assert tool.doubt({"text": "Rain today."}, "Write: rain today.") is None


def test_a_tool_that_only_keeps_words_says_so(loader, tools_env, settings):  # noqa: F811
    """A notes tool's call that names a file has not read it (``records``); a tool that does not say may have."""
    write_tool_file(tools_env.tools, "diary", good_tool("diary") + "\nrecords = True\n")
    write_tool_file(tools_env.tools, "plain", good_tool("plain"))
    write_tool_file(tools_env.tools, "vague", good_tool("vague") + "\nrecords = 'yes'\n")
    result = loader.load(tools_env.tools, reserved=RESERVED)
    assert result.tools["diary"].records({"who": "report.txt"}) and not result.tools["plain"].records({})
    assert _errors(result)["vague.py"] == (
        "'records' (optional) must be True or False: True when every call only keeps or finds words")
    shipped = loader.load(settings.BASE_DIR / "tools", reserved=RESERVED).tools
    assert shipped["user_notes"].records({"action": "add", "text": "check report.txt"})
    assert not shipped["get_current_datetime"].records({})


def test_broken_files_are_reported_and_skipped(loader, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "good", good_tool("good"))
    write_tool_file(tools_env.tools, "syntax", "name = 'syntax'\ndef execute(:\n")
    write_tool_file(tools_env.tools, "importer", "import module_that_does_not_exist_xyz\n")
    write_tool_file(tools_env.tools, "boom", "raise RuntimeError('exploded at import')\n")
    write_tool_file(tools_env.tools, "exits", "import sys\nsys.exit(3)\n")
    write_tool_file(tools_env.tools, "partial", "name = 'partial'\ndescription = 'x'\n")
    write_tool_file(tools_env.tools, "shadow", good_tool("filesystem"))
    write_tool_file(tools_env.tools, "badname", good_tool("Bad-Name"))
    write_tool_file(tools_env.tools, "badschema", '''
        name = "badschema"
        description = "x"
        parameters = {"type": "object", "properties": {"a": {"type": "strin"}}}
        async def execute(params): return ""
    ''')
    write_tool_file(tools_env.tools, "_ignored", "raise RuntimeError('never imported')\n")
    result = loader.load(tools_env.tools, reserved=RESERVED)
    assert list(result.tools) == ["good"]
    errors = _errors(result)
    assert errors["syntax.py"].startswith("SyntaxError:") and "line 2" in errors["syntax.py"]
    assert errors["importer.py"].startswith("ModuleNotFoundError:")
    assert errors["boom.py"] == "RuntimeError: exploded at import"
    assert errors["exits.py"].startswith("SystemExit")
    assert "missing module-level parameters, execute" in errors["partial.py"]
    assert "'filesystem' is a built-in tool" in errors["shadow.py"]
    assert "invalid tool name 'Bad-Name'" in errors["badname.py"]
    assert "not a valid JSON schema" in errors["badschema.py"]
    assert "_ignored.py" not in errors
    assert "navi_user_tools.boom" not in sys.modules


def test_duplicate_names_reported(loader, tools_env):  # noqa: F811
    write_tool_file(tools_env.tools, "a_one", good_tool("same"))
    write_tool_file(tools_env.tools, "b_two", good_tool("same"))
    result = loader.load(tools_env.tools, reserved=RESERVED)
    assert list(result.tools) == ["same"]
    assert "already defined by a_one.py" in _errors(result)["b_two.py"]


@pytest.mark.parametrize(
    ("content", "enabled", "error"),
    [
        (None, [], None),
        ('["greet", "greet"]', ["greet"], None),
        ("{not json", [], "not valid JSON"),
        ('{"greet": true}', [], "must be a JSON list"),
    ],
)
def test_enabled_json(loader, tools_env, content, enabled, error):  # noqa: F811
    write_tool_file(tools_env.tools, "greet", good_tool("greet"))
    if content is not None:
        (tools_env.tools / "enabled.json").write_text(content)
    result = loader.load(tools_env.tools, reserved=RESERVED)
    assert result.enabled == enabled
    assert "greet" in result.tools
    if error:
        assert error in _errors(result)["enabled.json"]
    else:
        assert result.errors == []


async def test_hot_reload_reimports_changed_files_only(loader, tools_env):  # noqa: F811
    path = write_tool_file(tools_env.tools, "greet", good_tool("greet"))
    first = loader.load(tools_env.tools, reserved=RESERVED).tools["greet"]
    again = loader.load(tools_env.tools, reserved=RESERVED).tools["greet"]
    assert again is first
    path.write_text(good_tool("greet").replace('"hello "', '"hi there "'))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    changed = loader.load(tools_env.tools, reserved=RESERVED).tools["greet"]
    assert changed is not first
    assert (await changed.execute({"who": "Bo"})).output == "hi there Bo"
    path.unlink()
    assert loader.load(tools_env.tools, reserved=RESERVED).tools == {}
    assert "navi_user_tools.greet" not in sys.modules


def test_missing_tools_dir_is_empty(loader, tmp_path):
    result = loader.load(tmp_path / "nope", reserved=RESERVED)
    assert result.tools == {} and result.errors == []


async def test_shipped_user_tools_load(loader, settings, tmp_path):
    from agent.ctx import current_user_id

    result = loader.load(settings.BASE_DIR / "tools", reserved=RESERVED)
    assert result.errors == []
    assert result.enabled == ["get_current_datetime", "user_notes"]
    clock = result.tools["get_current_datetime"]
    out = (await clock.execute({"timezone": "Asia/Tokyo"})).output
    assert out.startswith("UTC: ") and "Asia/Tokyo: " in out and "+09:00" in out
    for utc in ("UTC", "Etc/UTC"):  # the same time twice is one line
        assert (await clock.execute({"timezone": utc})).output.count("\n") == 0, utc
    assert "Europe/London: " in (await clock.execute({"timezone": "Europe/London"})).output  # GMT in winter, still said
    with pytest.raises(Exception, match="unknown time zone"):
        await clock.execute({"timezone": "Mars/Olympus"})
    settings.DATA_DIR = tmp_path
    notes = result.tools["user_notes"]
    token = current_user_id.set(1)
    try:
        assert (await notes.execute({"action": "add", "text": "Buy milk", "tags": ["shop"]})).output == "Saved note #1."
        await notes.execute({"action": "add", "text": "Call Bob"})
        assert "Buy milk" in (await notes.execute({"action": "search", "query": "SHOP"})).output
        current_user_id.set(2)
        assert (await notes.execute({"action": "list"})).output == "No notes yet."
        current_user_id.set(1)
        assert (await notes.execute({"action": "delete", "id": 1})).output == "Deleted note #1."
        listed = (await notes.execute({"action": "list"})).output
        assert "Call Bob" in listed and "Buy milk" not in listed
    finally:
        current_user_id.reset(token)
