"""A small model's answer that opens with a tool's output copied, framing and all ("Wrote 21 B to
/tmp/…/shopping.txt.", "UTC: 2026-…", a read's path and size), is a raw dump (issue 24): held back,
asked for once more in words, and never shown twice. A helper's answer, or a line of what a file
says, is words for the user and may be passed on."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.agent.test_constrained import as_text, calls, constrained, shown

pytestmark = pytest.mark.django_db(transaction=True)


def _folder(agent_env, settings) -> Path:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def test_a_write_answered_with_the_tools_output_is_asked_for_again_in_words(agent_env, settings) -> None:
    # The 0.5B, round 12: "Make a new file, shopping.txt, listing milk, eggs and bread." → write →
    # "Wrote 16 B to /tmp/…/shopping.txt."
    written = str((_folder(agent_env, settings) / "shopping.txt").resolve())
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="write", path="shopping.txt", content="milk\neggs\nbread\n"))
    agent_env.fake.script(text=f"Wrote 16 B to {written}.")
    agent_env.fake.script(text="I saved milk, eggs and bread in shopping.txt.")
    events = await agent_env.run("Make a new file, shopping.txt, listing milk, eggs and bread.")
    [(_tool, _args, ok)] = calls(events)
    assert ok and next(e for e in events if e["type"] == "tool_call")["result"].split("\n")[2] == f"Wrote 16 B to {written}."  # inside the untrusted-data envelope
    assert events[-1]["content"] == "I saved milk, eggs and bread in shopping.txt." == shown(events)
    assert "Tell the user in a sentence or two" in agent_env.requests()[2]["messages"][-1]["content"]


async def test_a_second_copy_is_replaced_by_what_was_done_in_words(agent_env, settings) -> None:
    written = str((_folder(agent_env, settings) / "shopping.txt").resolve())
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="write", path=written, content="milk\neggs\nbread\n"))
    agent_env.fake.script(text=f"Wrote 16 B to {written}.")
    agent_env.fake.script(text=f"Wrote 16 B to {written}.")
    events = await agent_env.run("Put milk, eggs and bread into shopping.txt.")
    # The tool's own words for the user (ports.SUMMARY): the file as the session knows it, lines not bytes.
    assert events[-1]["type"] == "stream_end" and events[-1]["content"] == "Wrote shopping.txt (3 lines)."
    assert "16 B" not in shown(events) and len(agent_env.requests()) == 3  # asked once more, no more


@pytest.mark.parametrize(("tool", "args", "request_text", "said"), [
    ("user_notes", {"action": "add", "text": "Call the plumber about invoice 2958."},
     "Note: call the plumber about invoice 2958.", r"Noted: Call the plumber about invoice 2958\.\Z"),
    ("todo", {"action": "set", "steps": ["buy stamps", "post the letter"]}, "Todo: buy stamps, post the letter.",
     r"Your todo list:\n1\. buy stamps\n2\. post the letter\Z"),
    ("memory_save", {"category": "environment", "key": "server_name", "value": "atlas"},
     "Remember that my server is called atlas.", r"I'll remember this: server name: atlas\.\Z"),
    ("get_current_datetime", {"timezone": "Asia/Tokyo"}, "What time is it in Tokyo?",
     r"It is \d\d:\d\d on \w+day, \d+ \w+ 20\d\d UTC\. In Tokyo it is \d\d:\d\d on \w+day, \d+ \w+ 20\d\d\.\Z"),
    ("schedule_recall", {"call_type": "once", "when": "in 10 minutes", "additional_context_message": "Tell the user to stretch."},
     "Remind me in 10 minutes to stretch.", r"Scheduled in 10 minutes \(\d\d:\d\d UTC\): Tell the user to stretch\.\Z"),
    # An instruction Navi framed around the user's words (the model left it empty) is read as those words.
    ("schedule_recall", {"call_type": "once", "when": "in 10 minutes", "additional_context_message": ""},
     "In 10 minutes check whether the oven is off.",
     r'Scheduled in 10 minutes \(\d\d:\d\d UTC\): a reminder of what you asked, "check whether the oven is off"\Z'),
])
async def test_with_no_answer_in_words_the_user_reads_the_tools_own_words(bundled, tool, args, request_text,
                                                                           said) -> None:
    agent_env = bundled
    await constrained(agent_env, enabled_tools=[tool])
    agent_env.fake.script(text=as_text(tool, **args))
    for _ in range(2):
        agent_env.fake.script(text="I'm sorry, but I can't assist with that.")
    events = await agent_env.run(request_text)
    [(_tool, _args, ok)] = calls(events)
    assert ok, events
    assert events[-1]["type"] == "stream_end" and re.match(said, events[-1]["content"]), events[-1]["content"]
    assert "sorry" not in shown(events).lower()


async def test_a_long_copy_of_a_read_is_held_before_anyone_sees_it(agent_env, settings) -> None:
    lines = "".join(f"Line {i}: the quarterly figures of region {i} grew by {i} per cent.\n" for i in range(1, 9))
    (_folder(agent_env, settings) / "report.txt").write_text(lines)
    path = str((_folder(agent_env, settings) / "report.txt").resolve())
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt"))
    agent_env.fake.script(text=f"{path} ({len(lines)} B), lines 1-8:\n{lines}")
    agent_env.fake.script(text="Every region grew; region 8 grew most, by 8 per cent.")
    events = await agent_env.run("How did the regions in report.txt do?")
    result = next(e for e in events if e["type"] == "tool_call")["result"]
    assert f"{path} ({len(lines)} B), lines 1-8:" in result  # what the model copied is the read's own framing
    assert events[-1]["content"] == "Every region grew; region 8 grew most, by 8 per cent." == shown(events)


async def test_a_line_of_the_file_itself_is_the_models_answer(agent_env, settings) -> None:
    (_folder(agent_env, settings) / "project.txt").write_text("Project notes\nThe project codename is HERON-512.\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="project.txt"))
    agent_env.fake.script(text="The project codename is HERON-512.")
    events = await agent_env.run("What's the codename in project.txt?")
    assert events[-1]["content"] == "The project codename is HERON-512." == shown(events)
    assert len(agent_env.requests()) == 2


async def test_a_helpers_answer_may_be_passed_on_as_it_is(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["spawn_agent"], subagent_tools=[])
    agent_env.fake.script(text=as_text("spawn_agent", task="Find the magic number in facts.txt."))
    agent_env.fake.script(text="The magic number is 4242, as facts.txt says.")  # the helper's answer
    agent_env.fake.script(text="The magic number is 4242, as facts.txt says.")  # passed on whole
    events = await agent_env.run("Have a helper find the magic number in facts.txt.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("spawn_agent", True)]
    assert events[-1]["content"] == "The magic number is 4242, as facts.txt says."
    assert len(agent_env.requests()) == 3  # not asked for again
