"""The aids for models seen writing tool calls as text: shortlist, answer after success, todo progress."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from agent.aids import shortlist

pytestmark = pytest.mark.django_db(transaction=True)

LOCAL = ["get_current_datetime", "filesystem", "user_notes", "memory_save", "schedule_recall", "todo",
         "spawn_agent"]


def as_text(name: str, **arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


@pytest.mark.parametrize(("request_text", "expected"), [
    ("What time is it right now (UTC)?", ["get_current_datetime"]),
    ("Read the file project.txt and tell me the project codename.", ["filesystem"]),
    ("Note down: call the plumber about invoice 4411.", ["user_notes"]),
    ("Remember that my server is called atlas.", ["memory_save"]),
    ("Remind me in 2 minutes to check /tmp/build.log", ["filesystem", "schedule_recall"]),
    ("Use a subagent (spawn_agent) to read the file facts.txt and tell me the magic number.", ["spawn_agent"]),
    ("Make a todo list with two steps and then do them: 1) find out today's date, 2) note down 'order 5 ships'.",
     ["get_current_datetime", "user_notes", "todo"]),
    ("What is the capital of France?", []),
    ("Write a long story about a dragon who learns to bake bread.", []),
    ("What is my server called?", []),
])
def test_shortlist_offers_the_tools_a_request_points_at(request_text, expected) -> None:
    assert shortlist(request_text, LOCAL) == expected


def test_a_tool_without_hints_is_matched_by_the_words_of_its_name() -> None:
    assert shortlist("check the backup status", ["backup_status", "todo"]) == ["backup_status"]


async def test_a_text_caller_is_ordered_to_answer_after_a_good_result(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text=as_text("scratchpad", action="read"))  # a stray call, as the 0.5B model does
    events = await agent_env.run("what's on my todo list?")
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["todo"]  # the stray call is neither run ...
    second = agent_env.requests()[1]
    assert "Do not call any tool" in second["messages"][-1]["content"]
    assert tool_names(second) == tool_names(agent_env.requests()[0])  # same prompt prefix for the cache
    assert events[-1]["type"] == "stream_end"
    assert '"name"' not in events[-1]["content"]  # ... nor shown: the user gets the result
    assert "todo list is empty" in events[-1]["content"]


async def test_a_known_text_caller_gets_only_the_tools_its_message_points_at(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Your list is empty.")
    await agent_env.run("what's on my todo list?")  # the model shows that it writes calls as text
    agent_env.fake.script(text="I will read it.")
    await agent_env.run("read the file plan.md")
    assert tool_names(agent_env.requests()[-1]) == ["filesystem"]
    agent_env.fake.script(text="Paris.")
    events = await agent_env.run("What is the capital of France?")
    assert "tools" not in agent_env.requests()[-1]
    assert events[-1]["content"] == "Paris."


async def test_a_structured_caller_keeps_every_tool_and_may_chain_calls(agent_env) -> None:
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "set", "steps": ["x"]}}])
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="One step.")
    events = await agent_env.run("what is the capital of France? also set up my list")
    assert [e["tool"] for e in events if e["type"] == "tool_call"] == ["todo", "todo"]
    requests = agent_env.requests()
    assert len(requests) == 3 and len(tool_names(requests[1])) == 7
    assert all("Do not call any tool" not in (m.get("content") or "") for r in requests for m in r["messages"])
    assert events[-1]["content"] == "One step."


async def test_text_caller_works_through_its_todo_list_then_answers(agent_env) -> None:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.txt").write_text("alpha 17\n")
    (folder / "b.txt").write_text("beta 29\n")
    agent_env.fake.script(text=as_text("todo", action="set", steps=["read a.txt", "read b.txt"]))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="a.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="b.txt"))
    agent_env.fake.script(text="alpha is 17 and beta is 29.")
    events = await agent_env.run("make a todo list, then read a.txt and b.txt")
    calls = [(e["tool"], e["success"]) for e in events if e["type"] == "tool_call"]
    assert calls == [("todo", True), ("filesystem", True), ("filesystem", True)]
    requests = agent_env.requests()
    # Tools stay usable while steps are open, the next open step is named; once the list is done
    # the model must answer.
    assert all("Do not call any tool" not in r["messages"][-1]["content"] for r in requests[:3])
    assert requests[1]["messages"][-1]["content"].startswith("Next step of your todo list: read a.txt.")
    assert requests[2]["messages"][-1]["content"].startswith("Next step of your todo list: read b.txt.")
    assert "Do not call any tool" in requests[3]["messages"][-1]["content"]
    todo = json.loads((folder / ".navi" / "todo.json").read_text())["steps"]
    assert [s["status"] for s in todo] == ["done", "done"]
    assert todo[0]["validation"] == "filesystem succeeded"
    assert events[-1]["content"] == "alpha is 17 and beta is 29."


async def test_a_failed_call_leaves_the_tools_to_the_text_caller(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="explode"))
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    events = await agent_env.run("what's on my todo list?")
    assert [(e["tool"], e["success"]) for e in events if e["type"] == "tool_call"] == [("todo", False), ("todo", True)]
    assert "Do not call any tool" not in agent_env.requests()[1]["messages"][-1]["content"]
    assert events[-1]["content"] == "Empty."


async def test_aids_off_offers_every_tool_to_a_text_caller(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")
    await agent_env.set_profile(local_model_aids_enabled=False)
    agent_env.fake.script(text="Paris.")
    await agent_env.run("What is the capital of France?")
    assert len(tool_names(agent_env.requests()[-1])) == 7


async def test_a_call_of_a_tool_left_off_the_shortlist_is_redirected_not_run(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")  # now known as a text caller
    agent_env.fake.script(text=as_text("scratchpad", action="read"))  # the wrong tool for the request
    agent_env.fake.script(text=as_text("scratchpad", action="read"))  # and again, after being told
    events = await agent_env.run("read the file plan.md")
    assert not [e for e in events if e["type"] == "tool_started"]
    told = agent_env.requests()[-1]["messages"][-1]["content"]
    assert "'scratchpad' is not for this request" in told and "filesystem" in told
    assert '"name"' not in events[-1]["content"] and events[-1]["type"] == "stream_end"


async def test_the_prompt_shows_only_the_call_templates_of_offered_tools(agent_env) -> None:
    template = '- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file>"}}'
    other = '- the todo list: {"name": "todo", "arguments": {"action": "read"}}'
    await agent_env.set_profile(system_prompt=f"Use these calls:\n{template}\n{other}")
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")
    first = agent_env.requests()[0]["messages"][0]["content"]
    assert template in first and other in first  # not yet known as a text caller: the prompt is whole
    agent_env.fake.script(text="ok")
    await agent_env.run("read the file plan.md")
    system = agent_env.requests()[-1]["messages"][0]["content"]
    assert template in system and other not in system and "Use these calls:" in system


# -- each aid can be switched off on its own (AgentProfile.local_model_aids_off) -----------------


def test_an_unknown_aid_name_is_refused_with_the_valid_names() -> None:
    from django.core.exceptions import ValidationError

    from profiles_app.models import AgentProfile

    profile = AgentProfile(id="p", name="P", local_model_aids_off=["shortlist", "telepathy"])
    with pytest.raises(ValidationError) as err:
        profile.full_clean()
    assert "'telepathy'" in str(err.value) and "answer_after_success" in str(err.value)


async def test_text_calls_off_shows_the_call_as_text(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["text_calls"])
    call = as_text("todo", action="read")
    agent_env.fake.script(text=call)
    events = await agent_env.run("what's on my todo list?")
    assert not [e for e in events if e["type"] == "tool_started"] and events[-1]["content"] == call


async def test_repair_off_sends_no_repair_prompt(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["repair"])
    agent_env.fake.script(text='{"name": "todo", "arguments": {"action": "re')
    await agent_env.run("read my todo list")
    assert len(agent_env.requests()) == 1


async def test_repeat_guard_off_runs_a_repeated_call(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["repeat_guard"])
    for _ in range(2):
        agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="Empty.")
    events = await agent_env.run("what's on my list?")
    assert [e["success"] for e in events if e["type"] == "tool_call"] == [True, True]


async def test_greeting_off_offers_tools_to_a_greeting(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["greeting"])
    agent_env.fake.script(text="Hello!")
    await agent_env.run("Hi!")
    assert tool_names(agent_env.requests()[0])


async def test_nudges_off_sends_no_nudge_after_results(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["nudges"])
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my list?")
    assert agent_env.requests()[1]["messages"][-1]["role"] == "tool"


async def test_shortlist_off_offers_every_tool_to_a_known_text_caller(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["shortlist"])
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")
    agent_env.fake.script(text="Paris.")
    await agent_env.run("What is the capital of France?")
    assert len(tool_names(agent_env.requests()[-1])) == 7


async def test_answer_after_success_off_leaves_the_tools_usable(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["answer_after_success"])
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text=as_text("todo", action="set", steps=["x"]))
    agent_env.fake.script(text="Done.")
    events = await agent_env.run("what's on my todo list? then add x")
    assert [e["tool"] for e in events if e["type"] == "tool_call"] == ["todo", "todo"]


async def test_todo_progress_off_leaves_the_steps_to_the_model(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["todo_progress"])
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.txt").write_text("alpha\n")
    agent_env.fake.script(text=as_text("todo", action="set", steps=["read a.txt", "answer"]))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="a.txt"))
    agent_env.fake.script(text="alpha.")
    await agent_env.run("make a todo list, then read a.txt")
    todo = json.loads((folder / ".navi" / "todo.json").read_text())["steps"]
    assert [s["status"] for s in todo] == ["pending", "pending"]


async def test_an_unknown_tool_note_quotes_the_offered_tools_call_template(agent_env) -> None:
    template = '- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file>"}}'
    await agent_env.set_profile(system_prompt=f"Use these calls:\n{template}")
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")  # now known as a text caller
    # Qwen 0.5B on "Note down: call the plumber": the user's words became a tool name.
    agent_env.fake.script(text=json.dumps({"name": "plumber", "arguments": {"file": "plan.md"}}))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="plan.md"))
    agent_env.fake.script(text="It is missing.")
    events = await agent_env.run("read the file plan.md")
    told = agent_env.requests()[-2]["messages"][-1]["content"]
    assert "no tool named 'plumber'" in told and template.lstrip("- ") in told
    assert [e["tool"] for e in events if e["type"] == "tool_call"] == ["filesystem"]


async def test_a_known_text_caller_gets_compact_schemas(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")
    full = next(t for t in agent_env.requests()[0]["tools"] if t["function"]["name"] == "todo")["function"]
    agent_env.fake.script(text="ok")
    await agent_env.run("show my todo list")
    (compact,) = [t["function"] for t in agent_env.requests()[-1]["tools"]]
    assert full["description"].startswith(compact["description"]) and compact["description"].endswith(".")
    assert len(compact["description"]) < len(full["description"])
    assert "description" in full["parameters"]["properties"]["action"]
    assert compact["parameters"]["properties"]["action"] == {"type": "string", "enum": ["set", "update", "read"]}
    assert compact["parameters"]["required"] == ["action"]


async def test_the_fallback_answer_shows_a_file_without_the_untrusted_envelope(agent_env) -> None:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "project.txt").write_text("The codename is HERON-410.\n")
    agent_env.fake.script(text=as_text("filesystem", action="read", path="project.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="project.txt"))  # ordered to answer: a call
    events = await agent_env.run("Read the file project.txt and tell me the codename.")
    result = next(e for e in events if e["type"] == "tool_call")["result"]
    assert result.startswith("<untrusted")  # what the model read ...
    answer = events[-1]["content"]
    assert "HERON-410" in answer and "<untrusted" not in answer and "</untrusted" not in answer  # ... not the user


async def test_the_unknown_tool_note_of_a_small_model_ends_with_the_request(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")
    agent_env.fake.script(text=json.dumps({"name": "plumber", "arguments": {}}))
    agent_env.fake.script(text="ok")
    await agent_env.run("show my todo list: call the plumber")
    told = agent_env.requests()[-1]["messages"][-1]["content"]
    assert "The user's request: show my todo list: call the plumber" in told


async def test_a_tool_with_a_call_template_in_the_prompt_gets_no_description(agent_env) -> None:
    # Seen with Qwen 0.5B: memory_save's value was the first sentence of its description.
    template = '- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file>"}}'
    await agent_env.set_profile(system_prompt=f"Use these calls:\n{template}")
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")
    agent_env.fake.script(text="ok")
    await agent_env.run("read the file plan.md and my todo list")
    described = {t["function"]["name"]: t["function"]["description"] for t in agent_env.requests()[-1]["tools"]}
    assert described["filesystem"] == "" and described["todo"].endswith(".") and described["todo"]


RECALL_TEMPLATE = ('- "remind me in N minutes to ...": {"name": "schedule_recall", "arguments": {"call_type": "once", '
                   '"when": "<N>m", "additional_context_message": "<what to do, with the file names>"}}')


async def _pending_recall(session_id: str):
    from asgiref.sync import sync_to_async

    from recall_app.models import Recall

    return await sync_to_async(lambda: Recall.objects.filter(session_id=session_id).first())()


async def test_a_call_filling_a_template_runs_without_arguments_the_template_does_not_show(agent_env) -> None:
    # Qwen 0.5B added an interval to a one-off reminder; the recall service refuses that combination.
    await agent_env.set_profile(system_prompt=f"Use these calls:\n{RECALL_TEMPLATE}", enabled_tools=["schedule_recall"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="2m", interval_seconds=120,
                                       additional_context_message="Check /tmp/build.log"))
    agent_env.fake.script(text="I will remind you.")
    events = await agent_env.run("Remind me in 2 minutes to check /tmp/build.log")
    (call,) = [e for e in events if e["type"] == "tool_call"]
    assert call["success"] and "interval_seconds" not in call["args"]
    recall = await _pending_recall(agent_env.session_id)
    assert recall is not None and recall.additional_context_message == "Check /tmp/build.log"


async def test_template_args_off_runs_the_call_as_written(agent_env) -> None:
    await agent_env.set_profile(system_prompt=f"Use these calls:\n{RECALL_TEMPLATE}", enabled_tools=["schedule_recall"],
                                local_model_aids_off=["template_args"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="2m", interval_seconds=120,
                                       additional_context_message="Check /tmp/build.log"))
    agent_env.fake.script(text="Sorry.")
    events = await agent_env.run("Remind me in 2 minutes to check /tmp/build.log")
    (call,) = [e for e in events if e["type"] == "tool_call"]
    assert not call["success"] and call["args"]["interval_seconds"] == 120
    assert await _pending_recall(agent_env.session_id) is None


def test_a_call_with_other_literal_values_than_the_template_keeps_its_arguments() -> None:
    from agent.aids import fit_template
    from agent.llm.base import ToolCallRequest

    prompt = '- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file name>"}}'
    write = ToolCallRequest(id="1", name="filesystem", arguments={"action": "write", "path": "a", "content": "x"})
    assert fit_template(write, prompt) is write  # not the read template: "content" is the write's own
    read = ToolCallRequest(id="2", name="filesystem", arguments={"action": "read", "path": "a", "lines": 3})
    assert fit_template(read, prompt).arguments == {"action": "read", "path": "a"}
    partial = ToolCallRequest(id="3", name="filesystem", arguments={"action": "read", "offset": 3})
    assert fit_template(partial, prompt) is partial  # does not fill the template: left to the tool's own check


async def test_a_reminder_without_the_file_the_user_named_gets_the_request(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=["schedule_recall"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="2m",
                                       additional_context_message="Check the build log"))
    agent_env.fake.script(text="I will remind you.")
    await agent_env.run("Remind me in 2 minutes to check /tmp/build.log")
    recall = await _pending_recall(agent_env.session_id)
    # Only the missing path: the whole request in the instruction would schedule the reminder again.
    assert recall.additional_context_message == "Check the build log (/tmp/build.log)"


async def test_keep_request_off_keeps_the_models_instruction(agent_env) -> None:
    await agent_env.set_profile(enabled_tools=["schedule_recall"], local_model_aids_off=["keep_request"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="2m",
                                       additional_context_message="Check the build log"))
    agent_env.fake.script(text="I will remind you.")
    await agent_env.run("Remind me in 2 minutes to check /tmp/build.log")
    assert (await _pending_recall(agent_env.session_id)).additional_context_message == "Check the build log"


async def test_a_subagent_is_helped_by_the_templates_of_its_own_prompt(agent_env) -> None:
    template = '- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file name>"}}'
    await agent_env.set_profile(subagent_system_prompt=f"You are a helper.\n{template}")
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.txt").write_text("The magic number is 4242.\n")
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")  # now known as a text caller
    agent_env.fake.script(text=as_text("spawn_agent", task="read facts.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt", encoding="utf-8"))
    agent_env.fake.script(text="The magic number is 4242.")
    agent_env.fake.script(text="The magic number is 4242.")
    events = await agent_env.run("Use a subagent (spawn_agent) to read the file facts.txt")
    spawn = next(e for e in events if e["type"] == "tool_call" and not e["is_subagent"])
    assert spawn["success"]
    sub = agent_env.requests()[-3]
    assert "You are a helper." in sub["messages"][0]["content"]
    assert [t["function"]["description"] for t in sub["tools"]] == [""]  # its template stands for it
    assert "4242" in events[-1]["content"]


READ_TEMPLATE = '- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file name>"}}'


async def _known_text_caller(agent_env) -> None:
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what's on my todo list?")


async def test_a_text_caller_offered_no_tool_is_told_to_answer_in_words(agent_env) -> None:
    # Qwen 0.5B, shortlisted to nothing for "write a story", answered "I can't assist with that".
    await _known_text_caller(agent_env)
    agent_env.fake.script(text="Once upon a time…")
    await agent_env.run("Write a short story about a dragon.")
    last = agent_env.requests()[-1]["messages"][-1]
    assert last == {"role": "system", "content": "No tool is needed for this request. Answer the user directly in words."}


async def test_nudges_off_leaves_a_request_without_tools_alone(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["nudges"])
    await _known_text_caller(agent_env)
    agent_env.fake.script(text="Once upon a time…")
    await agent_env.run("Write a short story about a dragon.")
    assert agent_env.requests()[-1]["messages"][-1]["role"] == "user"


async def test_a_text_caller_may_not_set_its_todo_list_again_and_is_shown_the_next_call(agent_env) -> None:
    await agent_env.set_profile(system_prompt=f"Use these calls:\n{READ_TEMPLATE}")
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.txt").write_text("alpha 17\n")
    await _known_text_caller(agent_env)
    agent_env.fake.script(text=as_text("todo", action="set", steps=["read the file a.txt", "answer"]))
    agent_env.fake.script(text=as_text("todo", action="set", steps=["read the file a.txt"]))  # as Qwen 0.5B did
    agent_env.fake.script(text=as_text("filesystem", action="read", path="a.txt"))
    agent_env.fake.script(text="alpha is 17.")
    events = await agent_env.run("make a todo list, then read the file a.txt")
    calls = [(e["tool"], e["success"]) for e in events if e["type"] == "tool_call"]
    assert calls == [("todo", True), ("filesystem", True)]  # the second todo set is not run
    requests = agent_env.requests()
    template = READ_TEMPLATE[READ_TEMPLATE.find("{"):]
    assert requests[-3]["messages"][-1]["content"].endswith(template)  # the nudge after the list was set
    assert tool_names(requests[-4]) == ["filesystem", "todo"] and tool_names(requests[-3]) == ["filesystem"]
    assert requests[-2]["messages"][-1]["content"] == (
        "Your todo list is already set. Next step of your todo list: read the file a.txt. "
        f"Do it now with one tool call. {template}")
    steps = json.loads((folder / ".navi" / "todo.json").read_text())["steps"]
    assert [s["title"] for s in steps] == ["read the file a.txt", "answer"]
    assert events[-1]["content"] == "alpha is 17."


async def test_todo_progress_off_lets_a_text_caller_set_its_list_again(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["todo_progress"])
    await _known_text_caller(agent_env)
    agent_env.fake.script(text=as_text("todo", action="set", steps=["one", "two"]))
    agent_env.fake.script(text=as_text("todo", action="set", steps=["one"]))
    agent_env.fake.script(text="Set.")
    events = await agent_env.run("make a todo list with two steps")
    assert [(e["tool"], e["success"]) for e in events if e["type"] == "tool_call"] == [("todo", True), ("todo", True)]


async def test_a_subagent_task_without_the_file_the_user_named_gets_the_request(agent_env) -> None:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.txt").write_text("The magic number is 4242.\n")
    await _known_text_caller(agent_env)
    # Qwen 0.5B gave its subagent the task "read_file_facts.txt": "facts.txt" only inside another word.
    agent_env.fake.script(text=as_text("spawn_agent", task="read_file_facts.txt"))
    agent_env.fake.script(text="The magic number is 4242.")  # the subagent
    agent_env.fake.script(text="The magic number is 4242.")
    request = "Use a subagent (spawn_agent) to read the file facts.txt and tell me the magic number."
    events = await agent_env.run(request)
    spawn = next(e for e in events if e["type"] == "tool_call")
    task = "Read the file facts.txt and tell me the magic number."  # without "use a subagent"
    assert spawn["args"]["task"] == task
    assert agent_env.requests()[-2]["messages"][-1]["content"] == task  # what the subagent reads


async def test_a_refusal_of_a_request_the_tools_are_for_is_asked_again_with_the_template(agent_env) -> None:
    template = '- the todo list: {"name": "todo", "arguments": {"action": "set", "steps": ["<step 1>", "<step 2>"]}}'
    await agent_env.set_profile(system_prompt=f"Use these calls:\n{template}")
    await _known_text_caller(agent_env)
    agent_env.fake.script(text="I'm sorry, but I can't assist with that.")  # Qwen 0.5B on the two-step task
    agent_env.fake.script(text=as_text("todo", action="set", steps=["find the date", "note it"]))
    agent_env.fake.script(text="Your list is set.")
    request = "Make a todo list with two steps: find out today's date, then note it down."
    events = await agent_env.run(request)
    told = agent_env.requests()[-2]["messages"][-1]["content"]
    assert told == ("You can do this with your tools. Start with this call, filled in for the request: "
                    f"{template[template.find('{'):]}\nThe user's request: {request}")
    assert [e["tool"] for e in events if e["type"] == "tool_call"] == ["todo"]
    shown = "".join(e["delta"] for e in events if e["type"] == "stream_delta")
    assert "sorry" not in shown.lower() and events[-1]["content"] == "Your list is set."


async def test_a_second_refusal_is_shown(agent_env) -> None:
    await _known_text_caller(agent_env)
    for _ in range(2):
        agent_env.fake.script(text="I'm sorry, but I can't assist with that.")
    events = await agent_env.run("Make a todo list with two steps.")
    assert len(agent_env.requests()) == 4  # two for the first turn, two for this one
    assert events[-1]["content"] == "I'm sorry, but I can't assist with that."
    assert "".join(e["delta"] for e in events if e["type"] == "stream_delta") == events[-1]["content"]


async def test_refusal_retry_off_shows_the_refusal(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["refusal_retry"])
    await _known_text_caller(agent_env)
    agent_env.fake.script(text="I'm sorry, but I can't assist with that.")
    events = await agent_env.run("Make a todo list with two steps.")
    assert len(agent_env.requests()) == 3 and events[-1]["content"] == "I'm sorry, but I can't assist with that."


async def _recurring_reminder(agent_env, request: str, interval: int, off: tuple[str, ...] = ()):
    """The recall stored after a text caller scheduled a recurring reminder for ``request``."""
    await agent_env.set_profile(enabled_tools=["schedule_recall"], local_model_aids_off=list(off))
    agent_env.fake.script(text=as_text("schedule_recall", call_type="recurring", when="2m", interval_seconds=interval,
                                       additional_context_message="Check /tmp/build.log"))
    agent_env.fake.script(text="I will remind you.")
    await agent_env.run(request)
    return await _pending_recall(agent_env.session_id)


async def test_a_reminder_the_user_did_not_ask_to_repeat_is_made_a_one_off(agent_env) -> None:
    # Qwen 0.5B, for "remind me in 2 minutes": recurring, every minute.
    recall = await _recurring_reminder(agent_env, "Remind me in 2 minutes to check /tmp/build.log", 60)
    assert recall.call_type == "once" and recall.interval_seconds is None


async def test_a_reminder_the_user_asked_to_repeat_stays_recurring(agent_env) -> None:
    recall = await _recurring_reminder(agent_env, "Remind me every hour to check /tmp/build.log", 3600)
    assert recall.call_type == "recurring" and recall.interval_seconds == 3600


async def test_one_off_reminder_off_keeps_the_recurring_call(agent_env) -> None:
    recall = await _recurring_reminder(agent_env, "Remind me in 2 minutes to check /tmp/build.log", 60,
                                       off=("one_off_reminder",))
    assert recall.call_type == "recurring"


async def test_a_known_text_caller_writing_a_call_with_an_imagined_result_gets_the_call_run(agent_env) -> None:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.txt").write_text("The magic number is 4242.\n")
    await _known_text_caller(agent_env)
    # Qwen 0.5B as a subagent: the call plus the number it made up.
    agent_env.fake.script(text=json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "facts.txt"},
                                           "content": "42"}))
    agent_env.fake.script(text="The magic number is 4242.")
    events = await agent_env.run("Read the file facts.txt and tell me the magic number.")
    (call,) = [e for e in events if e["type"] == "tool_call"]
    assert call["success"] and "4242" in call["result"] and events[-1]["content"] == "The magic number is 4242."


async def test_a_request_for_json_keeps_such_an_object_as_the_answer(agent_env) -> None:
    await _known_text_caller(agent_env)
    record = json.dumps({"name": "filesystem", "arguments": {"action": "read", "path": "a.txt"}, "content": "x"})
    agent_env.fake.script(text=record)
    events = await agent_env.run("Show me a JSON record of a filesystem read with its content.")
    assert not [e for e in events if e["type"] == "tool_started"] and events[-1]["content"] == record



def test_template_args_keeps_what_the_request_names_and_ignores_empty_templates() -> None:
    from agent.aids import fit_template
    from agent.llm.base import ToolCallRequest

    prompt = '- the time: {"name": "get_current_datetime", "arguments": {}}'
    tokyo = ToolCallRequest(id="1", name="get_current_datetime", arguments={"timezone": "Asia/Tokyo"})
    assert fit_template(tokyo, prompt, "What time is it in Tokyo?") is tokyo  # {} says nothing about arguments
    read = '- read a file: {"name": "filesystem", "arguments": {"action": "read", "path": "<file name>"}}'
    lines = ToolCallRequest(id="2", name="filesystem", arguments={"action": "read", "path": "a", "offset": 10})
    assert fit_template(lines, read, "read a.txt from line 10").arguments["offset"] == 10
    assert "offset" not in fit_template(lines, read, "read a.txt").arguments


@pytest.mark.parametrize("request_text", ["Remind me twice a day to drink water", "Remind me on weekdays to stretch",
                                          "Keep reminding me to check /tmp/build.log", "Remind me nightly to back up"])
def test_a_reminder_asked_to_repeat_in_other_words_stays_recurring(request_text) -> None:
    from agent.aids import one_off
    from agent.llm.base import ToolCallRequest

    call = ToolCallRequest(id="1", name="schedule_recall", arguments={"call_type": "recurring", "interval_seconds": 60})
    assert one_off(call, request_text) is call


@pytest.mark.parametrize(("request_text", "task"), [
    ("Could you use subagents to read notes.md and sum it up?", "Read notes.md and sum it up?"),
    ("Spawn a subagent that reads notes.md", "Reads notes.md"),
    ("Read notes.md with a subagent", "Read notes.md with a subagent"),
])
def test_a_subagent_task_drops_the_words_that_asked_for_a_subagent(request_text, task) -> None:
    from agent.aids import request_in_instruction
    from agent.llm.base import ToolCallRequest

    call = ToolCallRequest(id="1", name="spawn_agent", arguments={"task": "read_notes"})
    assert request_in_instruction(call, request_text).arguments["task"] == task


def test_paths_inside_words_are_not_addresses() -> None:
    from agent.aids import request_in_instruction
    from agent.llm.base import ToolCallRequest

    call = ToolCallRequest(id="1", name="schedule_recall",
                           arguments={"additional_context_message": "Weigh the pros/cons of logs/build.log"})
    assert request_in_instruction(call, "Remind me to weigh the pros/cons of logs/build.log and/or x") is call


async def test_a_refusal_after_a_tool_result_is_the_answer(agent_env) -> None:
    await _known_text_caller(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="missing.txt"))
    agent_env.fake.script(text="Sorry, missing.txt does not exist.")
    events = await agent_env.run("Read the file missing.txt")
    assert len(agent_env.requests()) == 4 and events[-1]["content"] == "Sorry, missing.txt does not exist."


async def test_todo_is_not_set_twice_when_the_shortlist_is_off(agent_env) -> None:
    await agent_env.set_profile(local_model_aids_off=["shortlist"])
    await _known_text_caller(agent_env)
    agent_env.fake.script(text=as_text("todo", action="set", steps=["read the file a.txt", "answer"]))
    agent_env.fake.script(text=as_text("todo", action="set", steps=["read the file a.txt"]))
    agent_env.fake.script(text="Done.")
    events = await agent_env.run("make a todo list, then read the file a.txt")
    assert [e["tool"] for e in events if e["type"] == "tool_call"] == ["todo"]
    assert "todo" not in tool_names(agent_env.requests()[-2])
