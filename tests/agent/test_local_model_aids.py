"""Local-model aids, with the fake server imitating small local models (issue: real local model)."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.agent_env import types

pytestmark = pytest.mark.django_db(transaction=True)

CALL = json.dumps({"name": "todo", "arguments": {"action": "set", "steps": ["water plants"]}})


def shown(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "stream_delta")


@pytest.mark.parametrize("text", [CALL, f"```json\n{CALL}\n```", f"[{CALL}]", f"<tool_call>{CALL}</tool_call>"])
async def test_json_call_in_text_is_executed_and_not_shown(agent_env, text) -> None:
    agent_env.fake.script(text=text, token_size=3)
    agent_env.fake.script(text="Your list has one step.")
    events = await agent_env.run("make a todo list with: water plants")
    assert types(events) == ["tool_started", "tool_call", "stream_delta", "stream_end"]
    assert events[1]["success"] is True and "water plants" in events[1]["result"]
    assert shown(events) == "Your list has one step."


async def test_mixed_prose_and_call(agent_env) -> None:
    agent_env.fake.script(text=f"Sure, I'll set that up. {CALL}", token_size=4)
    agent_env.fake.script(text="Done.")
    events = await agent_env.run("make a todo list with: water plants")
    assert [e["type"] for e in events if e["type"] != "stream_delta"] == ["tool_started", "tool_call", "stream_end"]
    assert '"name"' not in shown(events)


async def test_call_one_brace_short_is_run(agent_env) -> None:
    # Qwen2.5-Coder 0.5B, observed against the real model: the outer brace is missing.
    agent_env.fake.script(text='{"name": "todo", "arguments": {"action": "read"}')
    agent_env.fake.script(text="Your list is empty.")
    events = await agent_env.run("what's on my todo list?")
    assert [e["type"] for e in events if e["type"] != "stream_delta"] == ["tool_started", "tool_call", "stream_end"]
    assert events[-1]["content"] == "Your list is empty."


async def test_unknown_tool_in_text_is_told_and_not_run(agent_env) -> None:
    agent_env.fake.script(text=json.dumps({"name": "launch_rocket", "arguments": {"target": "moon"}}))
    agent_env.fake.script(text="I can't launch rockets.")
    events = await agent_env.run("launch a rocket")
    assert types(events) == ["stream_delta", "stream_end"]
    told = agent_env.requests()[1]["messages"][-1]
    assert told["role"] == "user" and "no tool named 'launch_rocket'" in told["content"] and "todo" in told["content"]
    assert [m.content for m in await agent_env.messages()] == ["launch a rocket", "I can't launch rockets."]


async def test_invalid_arguments_in_text_are_a_tool_error(agent_env) -> None:
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "explode"}}))
    agent_env.fake.script(text="Sorry.")
    events = await agent_env.run("x")
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["success"] is False and "action" in call["result"]


async def test_malformed_call_gets_one_repair_prompt_then_failure(agent_env) -> None:
    broken = '{"name": "todo", "arguments": {"action": "re'
    agent_env.fake.script(text=broken)
    agent_env.fake.script(text=broken)
    agent_env.fake.script(text="I could not use the todo tool.")
    events = await agent_env.run("read my todo list")
    assert types(events) == ["stream_delta", "stream_end"]
    reqs = agent_env.requests()
    assert "could not be parsed" in reqs[1]["messages"][-1]["content"]
    assert "failed again" in reqs[2]["messages"][-2]["content"]
    assert "Do not call any tool" in reqs[2]["messages"][-1]["content"]  # the model must answer now


async def test_repair_prompt_fixes_the_call(agent_env) -> None:
    agent_env.fake.script(text='{"name": "todo", "arguments": {"action": "read",')
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "read"}}))
    agent_env.fake.script(text="Your list is empty.")
    events = await agent_env.run("read my todo list")
    assert [e["type"] for e in events if e["type"] != "stream_delta"] == ["tool_started", "tool_call", "stream_end"]


async def test_example_in_an_answer_is_not_a_call(agent_env) -> None:
    answer = (
        "To call a tool, the model writes JSON. Here is an example of a tool call:\n\n"
        f"```json\n{CALL}\n```\n\nThe agent then runs it and returns the result."
    )
    agent_env.fake.script(text=answer, token_size=6)
    events = await agent_env.run("how do tool calls look?")
    assert types(events) == ["stream_delta", "stream_end"]
    assert shown(events) == answer and events[-1]["content"] == answer


async def test_repeated_call_is_not_run_again(agent_env) -> None:
    read = {"name": "todo", "arguments": {"action": "read"}}
    for _ in range(5):
        agent_env.fake.script(tool_calls=[read])
    agent_env.fake.script(text="The list is empty.")
    events = await agent_env.run("what's on my list?")
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls[0]["success"] is True
    assert all(c["success"] is False and "already called todo" in c["result"] for c in calls[1:])
    assert len(calls) == 2  # after a refused repeat, the model is asked to answer without tools
    third = agent_env.requests()[2]
    assert third.get("tools")  # the same prompt prefix (a local server reuses its cache) ...
    assert "Do not call any tool" in third["messages"][-1]["content"]  # ... with an order to answer
    # The model still called (and again when asked once more): nothing runs, the user gets an honest
    # account of the result that succeeded.
    content = events[-1]["content"]
    assert events[-1]["type"] == "stream_end" and content.startswith("The todo list is empty")
    assert "already called" not in content and '"name"' not in content


async def test_aids_off_leaves_text_alone(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_enabled=False)
    agent_env.fake.script(text=CALL)
    events = await agent_env.run("make a list")
    assert types(events) == ["stream_delta", "stream_end"] and events[-1]["content"] == CALL


async def test_model_without_tool_support_still_gets_work_done(agent_env) -> None:
    agent_env.fake.set_capabilities("fake-model", ["completion"])
    agent_env.fake.ollama_schema_format = False  # an old server: no constrained decisions either
    agent_env.fake.script(text=CALL)
    agent_env.fake.script(text="Done.")
    events = await agent_env.run("make a todo list with: water plants")
    assert "tools" not in agent_env.requests()[-2] and "think" not in agent_env.requests()[-2]
    assert next(e for e in events if e["type"] == "tool_call")["success"] is True



READ_AS_TEXT = "<tool_call>\n" + json.dumps({"name": "todo", "arguments": {"action": "read"}}) + "\n</tool_call>"


SET_AS_TEXT = "<tool_call>\n" + json.dumps({"name": "todo", "arguments": {"action": "set", "steps": ["a", "b"]}}) + \
    "\n</tool_call>"


async def test_repeated_text_call_is_not_run_again(agent_env) -> None:
    # Qwen2.5-Coder 0.5B's habit: the same call, written as text, again after it got the result.
    # (A todo list with open steps keeps the tools offered after the first success.)
    for _ in range(2):
        agent_env.fake.script(text=SET_AS_TEXT)
    agent_env.fake.script(text="The list has two steps.")
    events = await agent_env.run("make a todo list with the steps a and b")
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls[0]["success"] is True and len(calls) == 2
    assert calls[1]["success"] is False and "already called todo" in calls[1]["result"]
    assert "Do not call any tool" in agent_env.requests()[2]["messages"][-1]["content"]
    assert events[-1]["type"] == "stream_end" and events[-1]["content"] == "The list has two steps."


async def test_text_call_after_tools_were_withdrawn_is_not_shown(agent_env) -> None:
    for _ in range(5):
        agent_env.fake.script(text=READ_AS_TEXT)
    events = await agent_env.run("what's on my list?")
    assert events[-1]["type"] == "stream_end"
    assert '"name"' not in events[-1]["content"] and "<tool_call>" not in events[-1]["content"]


async def test_global_switch_turns_the_aids_off(agent_env, settings) -> None:
    settings.LLM_LOCAL_MODEL_AIDS = False
    agent_env.fake.script(text=CALL)
    events = await agent_env.run("make a list")
    assert events[-1]["content"] == CALL and not any(e["type"] == "tool_call" for e in events)


async def test_output_token_cap_is_sent(agent_env, settings) -> None:
    settings.LLM_MAX_OUTPUT_TOKENS = 256
    agent_env.fake.script(text="short")
    await agent_env.run("x")
    assert agent_env.requests()[-1]["options"]["num_predict"] == 256


async def test_system_prompt_prefix_is_stable_within_a_day(agent_env) -> None:
    agent_env.fake.script(text="a")
    await agent_env.run("x")
    agent_env.fake.script(text="b")
    await agent_env.run("y")
    first, second = (r["messages"][0]["content"] for r in agent_env.requests())
    assert first == second and "Today is" in first


async def test_only_the_first_of_several_text_calls_runs(agent_env) -> None:
    junk = json.dumps({"name": "scratchpad", "arguments": {"action": "clear"}})
    agent_env.fake.script(text=f"{READ_AS_TEXT}\n{junk}")
    agent_env.fake.script(text="Your list is empty.")
    events = await agent_env.run("what's on my list?")
    assert [e["tool"] for e in events if e["type"] == "tool_call"] == ["todo"]


def _workspace(session_id: str) -> Path:
    root = Path(settings.SESSION_FILES_DIR) / session_id
    (root / "notes").mkdir(parents=True, exist_ok=True)
    (root / "report.txt").write_text("Quarterly report\nAuthor: someone\n")
    (root / "notes" / "plan.md").write_text("# plan\n")
    (root / "other.txt").write_text("not named\n")
    (root / ".navi").mkdir(exist_ok=True)
    return root


async def test_files_a_message_names_add_nothing_to_the_request(agent_env) -> None:
    """A line announcing the named files ("… until you read them with the filesystem tool") made both small
    models read the file themselves when the user had asked a helper to (bench/tool_choice.py): the model
    chooses from the user's words alone."""
    _workspace(agent_env.session_id)
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="Let me look.")
    await agent_env.run("Have a helper compare report.txt with plan.md.")
    messages = agent_env.requests()[0]["messages"]
    assert messages[-1] == {"role": "user", "content": "Have a helper compare report.txt with plan.md."}
    assert not any("working directory" in m["content"] for r in agent_env.requests() for m in r["messages"])


async def test_with_the_aid_off_an_answer_about_an_unread_file_is_shown(agent_env) -> None:
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", local_model_aids_off=["named_files"])
    agent_env.fake.script(text="The author of report.txt is Navi.")
    events = await agent_env.run("Who wrote report.txt?")
    assert events[-1]["content"] == "The author of report.txt is Navi." and len(agent_env.requests()) == 1


@pytest.mark.parametrize(("answer", "poor"), [
    ("The report.txt file is not in this conversation until you read it with the filesystem tool.", True),
    ("Tell the user in a sentence or two, in plain words, what was done.", True),
    ("The author of report.txt is Miriam Okafor.", False),
    ("I read the file with the filesystem tool: it was written by Miriam Okafor.", False),
])
def test_an_answer_that_copies_navis_own_steering_is_no_answer(answer: str, poor: bool) -> None:
    from agent.aids import poor_answer

    assert (poor_answer(answer) is not None) is poor


async def test_a_small_models_answer_about_a_named_file_it_never_read_is_held_and_it_is_told(agent_env) -> None:
    """The 0.5B answered "The author of report.txt is Navi." without reading the file."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text="The author of report.txt is Navi.")
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "report.txt"}}))
    agent_env.fake.script(text="Report.txt is a quarterly report; its author is someone.")
    events = await agent_env.run("Who is the author of report.txt?")
    shown = "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert "Navi" not in shown and events[-1]["content"] == "Report.txt is a quarterly report; its author is someone."
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith('Not shown to the user: you have not read "report.txt"') and "filesystem tool" in told
    assert [(e["tool"], e["success"]) for e in events if e["type"] == "tool_call"] == [("filesystem", True)]


async def test_told_once_a_second_unread_answer_gets_the_read_made(agent_env) -> None:
    """The 1.5B, told it had not read report.txt, answered "you can use the filesystem tool to read the file":
    the read the note asked for is made (a read of the named file, nothing a grammar could turn into a write),
    and a model calling tools natively is never told."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text="report.txt was written by Navi.")
    agent_env.fake.script(text="To find who wrote report.txt, you can use the filesystem tool to read it.")
    agent_env.fake.script(text="It was written by someone.")
    events = await agent_env.run("Who wrote report.txt?")
    assert [(e["tool"], e["args"], e["success"]) for e in events if e["type"] == "tool_call"] == [
        ("filesystem", {"action": "read", "path": "report.txt"}, True)]
    shown = "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert "Navi" not in shown and "filesystem tool" not in shown
    assert events[-1]["content"] == "It was written by someone."
    assert all(agent_env.fake.schema_of(r) is None for r in agent_env.fake.chat_requests)  # nothing generated
    before = len(agent_env.requests())
    await agent_env.set_profile(tool_calling="native")
    agent_env.fake.script(text="Probably Navi.")
    events = await agent_env.run("And who wrote plan.md?")
    assert events[-1]["content"] == "Probably Navi." and len(agent_env.requests()) == before + 1


async def test_a_call_about_something_else_has_not_read_the_named_file(agent_env) -> None:
    """The 0.5B's helper, asked to read facts.txt, got the time (or searched the notes) and answered with that: a call whose arguments
    do not name the file did not read it, so the answer is held and the model may still read."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "read"}}))
    agent_env.fake.script(text="Your todo list is empty.")
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "report.txt"}}))
    agent_env.fake.script(text="It was written by someone.")
    events = await agent_env.run("Who wrote report.txt?")
    assert [(e["tool"], e["success"]) for e in events if e["type"] == "tool_call"] == [
        ("todo", True), ("filesystem", True)]
    assert "empty" not in "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert events[-1]["content"] == "It was written by someone."


async def test_a_call_that_names_the_file_has_dealt_with_it(agent_env) -> None:
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "set",
                                                                       "steps": ["send report.txt to Bob"]}}))
    agent_env.fake.script(text="Noted: send report.txt to Bob.")
    events = await agent_env.run("Put on my list: send report.txt to Bob.")
    assert events[-1]["content"] == "Noted: send report.txt to Bob." and len(agent_env.requests()) == 2


async def test_a_step_of_a_plan_that_names_the_file_has_not_read_it(agent_env) -> None:
    """The 0.5B, asked to have a helper find the magic number in facts.txt, set a todo step "dig the magic number
    out of facts.txt" and answered "The magic number is 42." (round 24): a call that only keeps words
    (``Tool.records``) opened nothing, so specifics no result gave are held, and the model may read."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "set",
                                                                       "steps": ["dig the name out of report.txt"]}}))
    agent_env.fake.script(text="The author of the report is Priya Raman.")
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "report.txt"}}))
    agent_env.fake.script(text="It was written by someone.")
    events = await agent_env.run("Who wrote report.txt?")
    assert [(e["tool"], e["success"]) for e in events if e["type"] == "tool_call"] == [("todo", True), ("filesystem", True)]
    assert "Priya" not in "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert events[-1]["content"] == "It was written by someone."
    told = agent_env.requests()[2]["messages"][-1]["content"]
    assert told.startswith('Not shown to the user: your answer says "priya", "raman", which no result')
    assert 'you have not read "report.txt"' in told


async def test_after_a_plans_step_made_up_specifics_twice_the_user_reads_what_was_done(agent_env) -> None:
    """Told it had not read the file its todo step named, the model stated the made-up name again: the user reads
    what the call did, and nothing is read that they may never have asked to have read."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "set",
                                                                       "steps": ["dig the name out of report.txt"]}}))
    agent_env.fake.script(text="The author of the report is Priya Raman.")
    agent_env.fake.script(text="It is Priya Raman.")
    events = await agent_env.run("Who wrote report.txt?")
    assert [e["tool"] for e in events if e["type"] == "tool_call"] == ["todo"]
    assert "Priya" not in "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert "dig the name out of report.txt" in events[-1]["content"] and "Priya" not in events[-1]["content"]
    assert "have not read" not in events[-1]["content"]


async def test_a_confirmation_with_what_the_model_was_shown_is_no_made_up_answer(agent_env) -> None:
    """A name from earlier in the conversation, today's weekday and month from the prompt: the confirmation of a todo step
    that names a file is shown as it was written, without a hidden round."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text="Nice to meet you, Sam.")
    await agent_env.run("Hi, I'm Sam.")
    today = datetime.now(UTC)
    said = f"Added it to your list for {today:%A}, {today:%B} {today.day}, Sam."  # the prompt's date, in words
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "set",
                                                                       "steps": ["send report.txt to Bob"]}}))
    agent_env.fake.script(text=said)
    before = len(agent_env.requests())
    events = await agent_env.run("Put on my list: send report.txt to Bob.")
    assert events[-1]["content"] == said
    assert len(agent_env.requests()) == before + 2


async def test_told_an_answer_with_specifics_from_nowhere_gets_the_read_made(agent_env) -> None:
    """Told it had not read the file, the model answered again without naming it but with a year nothing of the
    turn said: the read is made (before, that answer was shown)."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text="The author of report.txt is Navi.")
    agent_env.fake.script(text="It was written in 2019 by the finance team.")
    agent_env.fake.script(text="It was written by someone.")
    events = await agent_env.run("Who wrote report.txt?")
    assert [(e["tool"], e["args"]) for e in events if e["type"] == "tool_call"] == [
        ("filesystem", {"action": "read", "path": "report.txt"})]
    assert "2019" not in "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert events[-1]["content"] == "It was written by someone."


@pytest.mark.parametrize(("answer", "sources", "made_up"), [
    ("The magic number is 42.", ["Find the magic number in facts.txt.", "Your todo list:\n1. dig in facts.txt"],
     {"42"}),
    ("Noted: send report.txt to Bob.", ["Put on my list: send report.txt to bob."], set()),
    ("I'll remind you on Monday at 9 AM. I added it.", ["Remind me to call Ann.", "2026-11-29T09:00:00+00:00"],
     {"monday"}),
    # a date or a time the sources write in figures, said in words: 2026-11-29 was a Sunday, 15:00 is 3 PM
    ("I'll remind you on Sunday, November 29, at 3 PM.", ["Remind me to call Ann.", "2026-11-29T15:00:00+00:00"],
     set()),
    ("Set for 3:30 PM, Nov 29.", ["Remind me at 15:30 to call Ann.", "Today is 2026-11-29."], set()),
    ("Set for 4 PM on December 1.", ["Remind me at 15:30 to call Ann.", "Today is 2026-11-29."], {"4", "december", "1"}),
    # a timestamp's offset is no time of its own; a date that is none says no name
    ("I'll remind you at 12 PM.", ["Remind me to call Ann.", "2026-11-29T09:00:00+00:00"], {"12"}),
    ("Set for 5 PM.", ["Remind me at 17:00UTC to call Ann."], set()),
    ("Set for 3 PM on a Monday in February.", ["at 2026-02-30T15:00"], {"3", "monday", "february"}),
    ("Set for 2026-11-29 at 09:00.", ["trigger_at=2026-11-29T09:00:00+00:00"], set()),
    ("Your list:\n1. buy stamps\n2. post it", ["1. buy stamps\n2. post it"], set()),
    ("Done! Codename HERON-7 is set.", ["set it"], {"7"}),
    ("  The meeting moved to Paris (e.g. Lyon), said Ann.", ["Note: meeting moved"], {"paris", "ann"}),
    ("Bob's report is noted, OK.\nSend it to Bob 1) Call Ann", ["bob: report. call ann"], {"1"}),
])
def test_specifics_an_answer_took_from_nowhere(answer: str, sources: list[str], made_up: set[str]) -> None:
    from agent.aids import unfounded

    assert unfounded(answer, sources) == made_up


async def test_a_file_read_in_an_earlier_turn_may_be_answered_about(agent_env) -> None:
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "report.txt"}}))
    agent_env.fake.script(text="It is a quarterly report by someone.")
    await agent_env.run("What is report.txt about?")
    agent_env.fake.script(text="You're welcome!")
    events = await agent_env.run("Thanks for summing up report.txt!")
    assert events[-1]["content"] == "You're welcome!" and len(agent_env.requests()) == 3


async def test_an_answer_that_does_not_name_the_unread_file_is_held_too(agent_env) -> None:
    """The 0.5B answered "The cake should bake for 30 minutes." for a question about recipe.txt."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text="The report was written in May by the finance team.")
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "report.txt"}}))
    agent_env.fake.script(text="It was written by someone.")
    events = await agent_env.run("In report.txt, who is the author?")
    assert "finance" not in "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert events[-1]["content"] == "It was written by someone."
    assert agent_env.requests()[1]["messages"][-1]["content"].startswith('Not shown to the user: you have not read')


async def test_a_reply_that_is_not_about_the_named_file_reaches_the_user_after_one_hidden_round(agent_env) -> None:
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text="You're welcome!")
    agent_env.fake.script(text="You're welcome!")
    events = await agent_env.run("Thanks, report.txt looks good now.")
    assert [e["delta"] for e in events if e["type"] == "stream_delta"] == ["You're welcome!"]
    assert events[-1]["content"] == "You're welcome!" and len(agent_env.requests()) == 2


async def test_without_the_filesystem_tool_the_model_is_never_told_to_read(agent_env) -> None:
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", enabled_tools=["todo"])
    agent_env.fake.script(text="I cannot open report.txt here.")
    agent_env.fake.script(text='{"tool": "none"}')  # the refusal, decided again under the grammar (round 15)
    agent_env.fake.script(text="I cannot open report.txt here.")
    events = await agent_env.run("Who wrote report.txt?")
    assert events[-1]["content"] == "I cannot open report.txt here." and len(agent_env.requests()) == 3
    assert not any("you have not read" in (m.get("content") or "") for r in agent_env.requests() for m in r["messages"])



async def test_after_a_look_at_a_file_a_small_model_may_still_read_it(agent_env) -> None:
    """The 1.5B answered "who wrote report.txt?" with the file's date: ordered to answer after its stat, it
    could not read. After a step that only looked (stat, exists, list, search) the model may go on."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "stat", "path": "report.txt"}}))
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "report.txt"}}))
    agent_env.fake.script(text="It was written by someone.")
    events = await agent_env.run("Who wrote report.txt?")
    assert [(e["args"]["action"], e["success"]) for e in events if e["type"] == "tool_call"] == [
        ("stat", True), ("read", True)]
    stat = next(e for e in events if e["type"] == "tool_call")["result"]
    assert "What it says is not shown here: read it for that." in stat
    assert "Answer the user now" not in json.dumps(agent_env.requests()[1]["messages"])  # free to read
    assert events[-1]["content"] == "It was written by someone."
    # After the read, the next step is the answer again (the tools stay offered, the answer is ordered).
    assert "Answer the user now" in agent_env.requests()[-1]["messages"][-1]["content"]


async def test_an_answer_after_a_look_reaches_the_user_once_the_file_was_read(agent_env) -> None:
    """A look is no read, failed or not ("report.txt: whose report is that?" — the 1.5B listed the file, then
    answered from the error): the answer is held, and answered about the file again, Navi reads it. An answer
    that a look gave (its size) still reaches the user, after that read."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "list", "path": "report.txt"}}))
    agent_env.fake.script(text="report.txt is not a directory.")  # held: nothing read yet
    agent_env.fake.script(text="report.txt is 33 B.")  # about the file again: Navi reads it
    agent_env.fake.script(text="report.txt is 33 B.")
    events = await agent_env.run("How big is report.txt?")
    assert [(e["args"]["action"], e["success"]) for e in events if e["type"] == "tool_call"] == [
        ("list", False), ("read", True)]
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == "report.txt is 33 B."
    assert events[-1]["content"] == "report.txt is 33 B."


async def test_looking_around_ends_in_an_answer(agent_env) -> None:
    """Looks are no answer once; the second look in a row is followed by the answer, not by a third look."""
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained")
    for path in (".", "notes"):
        agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "list", "path": path}}))
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "stat", "path": "other.txt"}}))
    agent_env.fake.script(text="You have report.txt, other.txt and notes/plan.md.")
    events = await agent_env.run("What do I have here?")
    assert [e["args"]["action"] for e in events if e["type"] == "tool_call"] == ["list", "list"]
    assert events[-1]["content"] == "You have report.txt, other.txt and notes/plan.md."


async def test_a_helper_answering_about_a_file_its_task_names_without_reading_it_is_told_too(agent_env) -> None:
    _workspace(agent_env.session_id)
    await agent_env.set_profile(tool_calling="constrained", enabled_tools=["spawn_agent", "filesystem"],
                                subagent_tools=["filesystem"])
    agent_env.fake.script(text=json.dumps({"name": "spawn_agent", "arguments": {"task": "Who wrote report.txt?"}}))
    agent_env.fake.script(text="report.txt was written by Navi.")  # the helper, from imagination: held
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "report.txt"}}))
    agent_env.fake.script(text="It was written by someone.")
    agent_env.fake.script(text="Your helper says someone wrote it.")
    events = await agent_env.run("Have a helper find out who wrote report.txt.")
    helper = [(e["tool"], e["args"].get("action"), e["success"]) for e in events
              if e["type"] == "tool_call" and e.get("is_subagent")]
    assert helper == [("filesystem", "read", True)]
    spawned = next(e for e in events if e["type"] == "tool_call" and e["tool"] == "spawn_agent")
    assert spawned["result"] == "It was written by someone." and "Navi" not in spawned["result"]
    assert events[-1]["content"] == "Your helper says someone wrote it."
