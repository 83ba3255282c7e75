"""Constrained tool calls (issue 24): the model's own reply decides between answering and calling;
a call it cannot write validly is generated under a JSON schema by the model server; the answer
streams unconstrained; answers after tools are words, honestly."""
from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings
from structlog.testing import capture_logs

from agent.decide import call_schema, grammar_parameters, parse_decision

pytestmark = pytest.mark.django_db(transaction=True)

OFFERED = ["todo", "scratchpad", "spawn_agent", "switch_profile", "filesystem", "image_view", "reflect"]


def schema_names(schema: dict) -> list[str]:
    return [b["properties"]["tool"]["const"] for b in schema["anyOf"]]


def as_text(name: str, **arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def constrained_call(fake, tool: str, **arguments: object) -> None:
    fake.script(text=json.dumps({"tool": tool, "arguments": arguments}))


async def constrained(agent_env, **fields) -> None:
    await agent_env.set_profile(tool_calling="constrained", **fields)


def calls(events: list[dict]) -> list[tuple]:
    return [(e["tool"], e["args"], e["success"]) for e in events if e["type"] == "tool_call"]


def shown(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "stream_delta")


async def test_a_valid_call_runs_as_written_and_prose_streams_as_the_answer(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="Your list is empty.")
    events = await agent_env.run("what is on my list?")
    assert calls(events) == [("todo", {"action": "read"}, True)]
    assert events[-1]["content"] == "Your list is empty." == shown(events)
    assert all(agent_env.fake.schema_of(r) is None for r in agent_env.fake.chat_requests)  # nothing to repair


async def test_a_call_of_a_tool_that_does_not_exist_is_generated_again_under_the_schema(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("plumber", invoice="4711"))  # the user's words as a tool name
    constrained_call(agent_env.fake, "todo", action="set", steps=["call the plumber about invoice 4711"])
    agent_env.fake.script(text="Added to your list: call the plumber about invoice 4711.")
    events = await agent_env.run("jot down: call the plumber about invoice 4711")
    assert calls(events) == [("todo", {"action": "set", "steps": ["call the plumber about invoice 4711"]}, True)]
    assert '"name"' not in shown(events) and "plumber\"" not in shown(events)  # the raw attempt is never shown
    assert events[-1]["content"] == "Added to your list: call the plumber about invoice 4711."
    first, constrained_request, answer = agent_env.fake.chat_requests
    schema = agent_env.fake.schema_of(constrained_request)
    assert sorted(schema_names(schema)) == sorted(OFFERED)  # only real tools, each with its own parameters
    todo = next(b for b in schema["anyOf"] if b["properties"]["tool"]["const"] == "todo")
    actions = todo["properties"]["arguments"]["anyOf"]  # one variant per action, each with its own fields
    assert [(v["properties"]["action"]["const"], v["required"]) for v in actions] == [
        ("set", ["action", "steps"]), ("update", ["action", "step", "status"]), ("read", ["action"])]
    assert "Write the one tool call" in constrained_request.json["messages"][-1]["content"]
    # The same prompt prefix in every request (system prompt and tools), so the server's cache holds.
    assert len({json.dumps([r.json["messages"][0], r.json.get("tools")]) for r in agent_env.fake.chat_requests}) == 1
    assert agent_env.fake.schema_of(answer) is None


async def test_a_call_named_in_the_users_words_after_prose_is_generated_again_never_shown(agent_env, settings) -> None:
    """The 0.5B answered "Could you make a file shopping.txt with milk, eggs and bread on separate lines?" with
    prose and a fenced call of "file shopping.txt" (round 20): the user read the JSON and no file was written."""
    await constrained(agent_env)
    agent_env.fake.script(text=(
        "Certainly! Here's a file named `shopping.txt` with milk, eggs and bread on separate lines:\n\n```json\n"
        '{\n  "name": "file shopping.txt",\n  "arguments": {\n    "content": "milk\\neggs\\nbread"\n  }\n}\n```\n\n'
        "This file is stored in the session directory."))
    constrained_call(agent_env.fake, "filesystem", action="write", path="shopping.txt", content="milk\neggs\nbread\n")
    agent_env.fake.script(text="I wrote milk, eggs and bread to shopping.txt.")
    events = await agent_env.run("Could you make a file shopping.txt with milk, eggs and bread on separate lines?")
    assert [(tool, args.get("path"), ok) for tool, args, ok in calls(events)] == [("filesystem", "shopping.txt", True)]
    assert (Path(settings.SESSION_FILES_DIR) / agent_env.session_id / "shopping.txt").read_text() == "milk\neggs\nbread\n"
    assert '"name"' not in shown(events) and "```" not in shown(events)
    assert events[-1]["content"] == "I wrote milk, eggs and bread to shopping.txt."


async def test_invalid_arguments_are_generated_again_under_the_schema(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("todo", action="explode"))
    constrained_call(agent_env.fake, "todo", action="read")
    agent_env.fake.script(text="The list is empty.")
    events = await agent_env.run("what is on my list?")
    assert calls(events) == [("todo", {"action": "read"}, True)]
    assert agent_env.fake.schema_of(agent_env.fake.chat_requests[1]) is not None


async def test_a_write_without_its_path_is_generated_again_with_one(agent_env, settings) -> None:
    """The 0.5B wrote {"action": "write", "content": "milk\\neggs\\nbread"} with no path: the schema left the
    path optional, so the call ran and failed ("A path is required.") until the turn's step limit (round 17)."""
    from pathlib import Path

    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="write", content="milk\neggs\nbread\n"))
    constrained_call(agent_env.fake, "filesystem", action="write", path="shopping.txt", content="milk\neggs\nbread\n")
    agent_env.fake.script(text="I wrote milk, eggs and bread to shopping.txt.")
    events = await agent_env.run("Store milk, eggs and bread in shopping.txt, one item per line.")
    assert [(tool, args.get("path"), ok) for tool, args, ok in calls(events)] == [("filesystem", "shopping.txt", True)]
    assert (Path(settings.SESSION_FILES_DIR) / agent_env.session_id / "shopping.txt").read_text() == "milk\neggs\nbread\n"
    schema = agent_env.fake.schema_of(agent_env.fake.chat_requests[1])
    (branch,) = [b for b in schema["anyOf"] if b["properties"]["tool"] == {"const": "filesystem"}]
    required = {v["properties"]["action"]["const"]: v["required"] for v in branch["properties"]["arguments"]["anyOf"]}
    assert required["write"] == ["action", "path", "content"] and required["read"] == ["action", "path"]
    assert required["list"] == ["action"]  # a list or a search may leave the path out: the session directory


async def test_arguments_the_schema_could_not_rule_out_get_one_repair_round(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("nope"))
    constrained_call(agent_env.fake, "todo", action="explode")  # a server that does not enforce enums
    constrained_call(agent_env.fake, "todo", action="read")
    agent_env.fake.script(text="The list is empty.")
    events = await agent_env.run("what is on my list?")
    assert calls(events) == [("todo", {"action": "read"}, True)]
    repair = agent_env.fake.chat_requests[2].json["messages"]
    assert repair[-2] == {"role": "assistant", "content": json.dumps({"tool": "todo", "arguments": {"action": "explode"}})}
    assert "could not be used" in repair[-1]["content"] and "'explode' is not one of" in repair[-1]["content"]
    assert events[-1]["content"] == "The list is empty."


async def test_a_second_unusable_call_ends_in_an_answer_not_a_broken_turn(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("nope"))
    constrained_call(agent_env.fake, "no_such_tool")
    agent_env.fake.script(text="not json at all")
    agent_env.fake.script(text="I can tell you without tools: nothing is pending.")
    events = await agent_env.run("anything pending?")
    assert not [e for e in events if e["type"] == "tool_started"]
    assert events[-1]["type"] == "stream_end"
    assert events[-1]["content"] == "I can tell you without tools: nothing is pending."


async def test_a_decision_the_server_cut_off_is_not_generated_again(agent_env) -> None:
    # Qwen 0.5B, round 21: a todo list of "step 1", "step 2", … until the context was full, twice, 135 s each.
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("nope"))
    runaway = '{"tool": "todo", "arguments": {"action": "set", "steps": [' + ", ".join(f'"step {n}"' for n in range(1, 60))
    agent_env.fake.script(text=runaway, done_reason="length")
    agent_env.fake.script(text="I could not make that list; which steps should it have?")
    events = await agent_env.run("Don't forget: my server's name is atlas.")
    assert not [e for e in events if e["type"] == "tool_started"]
    assert [agent_env.fake.schema_of(r) is not None for r in agent_env.fake.chat_requests] == [False, True, False]
    assert events[-1]["content"] == "I could not make that list; which steps should it have?" == shown(events)


async def test_a_constrained_decision_has_an_output_cap_and_a_free_reply_has_none(agent_env) -> None:
    """A grammar does not end a list that keeps growing, and a server that shifts its context (Ollama) would
    generate for ever (the review's case, round 21)."""
    from agent.loop import DECISION_MAX_TOKENS

    await constrained(agent_env)
    agent_env.fake.script(text=as_text("nope"))
    constrained_call(agent_env.fake, "todo", action="read")
    agent_env.fake.script(text="The list is empty.")
    await agent_env.run("what is on my list?")

    def cap(body: dict) -> object:
        return body.get("max_tokens", (body.get("options") or {}).get("num_predict"))

    assert [cap(r.json) for r in agent_env.fake.chat_requests] == [None, DECISION_MAX_TOKENS, None]


def test_a_request_s_cap_never_raises_the_backend_s_own() -> None:
    from agent.llm.http_common import cap_tokens

    assert (cap_tokens(0, None), cap_tokens(0, 2048), cap_tokens(512, 2048), cap_tokens(4096, 2048)) == (0, 2048, 512, 2048)


def test_a_todo_list_s_limit_is_in_its_schema_so_a_grammar_ends_the_list() -> None:
    import jsonschema

    from tools_app.builtins_meta.todo import MAX_STEPS, TodoTool

    assert TodoTool.parameters["properties"]["steps"]["maxItems"] == MAX_STEPS
    assert grammar_parameters(TodoTool.parameters)["anyOf"][0]["properties"]["steps"]["maxItems"] == MAX_STEPS
    jsonschema.validate({"action": "read", "steps": []}, TodoTool.parameters)  # an empty list beside a read is no error


async def test_a_greeting_answered_in_words_costs_one_request(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text="Hello! How can I help?")
    events = await agent_env.run("hey there")
    assert not [e for e in events if e["type"] == "tool_started"]
    assert events[-1]["content"] == "Hello! How can I help?" == shown(events)
    assert len(agent_env.fake.chat_requests) == 1


async def test_the_prompt_prefix_is_byte_identical_across_the_turns_of_a_session(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text="Hello!")
    await agent_env.run("hi")
    agent_env.fake.script(text=as_text("todo", action="nope"))
    constrained_call(agent_env.fake, "todo", action="read")
    agent_env.fake.script(text="Your list is empty.")
    await agent_env.run("what is on my list?")
    prefixes = {json.dumps([r.json["messages"][0], r.json.get("tools")]) for r in agent_env.fake.chat_requests}
    assert len(prefixes) == 1 and len(agent_env.fake.chat_requests) == 4


async def test_a_model_without_native_tool_calls_gets_constrained_calls(agent_env) -> None:
    agent_env.fake.set_capabilities("fake-model", ["completion"])  # auto: the probe says no tools
    agent_env.fake.script(text=as_text("todo", action="plan"))  # not an action todo has
    constrained_call(agent_env.fake, "todo", action="set", steps=["water plants"])
    agent_env.fake.script(text="Done: one step on your list.")
    events = await agent_env.run("make a todo list with: water plants")
    assert calls(events) == [("todo", {"action": "set", "steps": ["water plants"]}, True)]
    assert agent_env.fake.chat_requests[1].json["format"]["anyOf"]
    assert events[-1]["content"] == "Done: one step on your list."


async def test_native_tool_callers_stay_native(agent_env) -> None:
    agent_env.fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "read"}}])
    agent_env.fake.script(text="Empty.")
    await agent_env.run("what is on my list?")
    assert all(agent_env.fake.schema_of(r) is None and r.json.get("tools") for r in agent_env.fake.chat_requests)


async def test_an_old_ollama_without_schemas_falls_back_to_text_calls_with_a_log_line(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.ollama_schema_format = False
    agent_env.fake.script(text=as_text("nope"))
    agent_env.fake.script(text=as_text("todo", action="read"))  # after the aids told it the tools
    agent_env.fake.script(text="Your list is empty.")
    with capture_logs() as logs:
        events = await agent_env.run("what is on my list?")
    assert calls(events) == [("todo", {"action": "read"}, True)]
    assert events[-1]["content"] == "Your list is empty."
    line = next(entry for entry in logs if entry["event"] == "constrained_decisions_unavailable")
    assert "does not take a JSON schema" in line["error"] and line["fallback"] == "tool calls written as text"
    # Remembered for the server: a later turn never sends a schema.
    agent_env.fake.script(text=as_text("nope"))
    agent_env.fake.script(text="Hi!")
    await agent_env.run("hi")
    assert all("format" not in r.json for r in agent_env.fake.chat_requests[-2:])


@pytest.mark.parametrize("refusal", ["I'm sorry, but I can't assist with that.",
                                     "I apologize, but I cannot assist with that request."])  # the 1.5B, round 4
async def test_after_successful_tools_a_refusal_is_asked_again_and_never_shown(agent_env, refusal) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("todo", action="set", steps=["a", "b"]))
    agent_env.fake.script(text=refusal)
    agent_env.fake.script(text="Your list now has two steps: a and b.")
    events = await agent_env.run("set up my list with a and b")
    assert "sorry" not in shown(events).lower() and "apologize" not in shown(events).lower()
    assert events[-1]["content"] == "Your list now has two steps: a and b." == shown(events)
    assert "Your tools did their work" in agent_env.fake.chat_requests[-1].json["messages"][-1]["content"]


async def test_an_answer_that_repeats_the_request_is_asked_for_again_before_anyone_sees_it(agent_env) -> None:
    """The 1.5B set the list, then answered with the user's own message (17 words: too long to be held as short)."""
    await constrained(agent_env)
    request = "I have two errands today: collect the parcel and water the garden. Please make me a to-do list."
    agent_env.fake.script(text=as_text("todo", action="set", steps=["collect the parcel", "water the garden"]))
    agent_env.fake.script(text=request)
    agent_env.fake.script(text="Your to-do list has two steps: collect the parcel, then water the garden.")
    events = await agent_env.run(request)
    assert shown(events) == "Your to-do list has two steps: collect the parcel, then water the garden."
    assert events[-1]["content"] == shown(events)


async def test_a_request_repeated_twice_becomes_an_honest_summary(agent_env) -> None:
    await constrained(agent_env)
    request = "Could you put collect the parcel and water the garden on a to-do list for me?"
    agent_env.fake.script(text=as_text("todo", action="set", steps=["collect the parcel", "water the garden"]))
    agent_env.fake.script(text=request.upper())  # opens like the request: held
    agent_env.fake.script(text="Sure, I can help you with that. " + request)  # the last attempt is held whole
    events = await agent_env.run(request)
    final = events[-1]["content"]
    assert "collect the parcel" in final and "water the garden" in final and "Could you" not in final
    assert shown(events) == final


async def test_a_greeting_answered_with_the_greeting_itself_is_asked_for_again_in_words(agent_env) -> None:
    """Both models answered "Morning! Ready for a new day?" with those words, no tool needed (round 20):
    held while streaming, then asked for once more, told what was wrong."""
    await constrained(agent_env)
    agent_env.fake.script(text="Morning! Ready for a new day?")
    agent_env.fake.script(text="Good morning! I'm ready. What shall we start with?")
    with capture_logs() as logs:
        events = await agent_env.run("Morning! Ready for a new day?")
    assert events[-1]["content"] == "Good morning! I'm ready. What shall we start with?" == shown(events)
    assert calls(events) == []
    *_, echo, told = agent_env.fake.chat_requests[-1].json["messages"]
    # The echo goes back as the model's own reply, then what was wrong with it (round 27: with the echo left out,
    # the 1.5B echoed again).
    assert (echo["role"], echo["content"]) == ("assistant", "Morning! Ready for a new day?")
    assert told["content"].startswith("That reply only repeated the user's message back")
    assert "in your own words" in told["content"]
    assert [e["reason"] for e in logs if e["event"] == "answer_retried"] == ["the user's request repeated"]
    # Never stored: the conversation keeps the answer the user saw, not the echo.
    for buffer in ("context", "display"):
        kept = [m.content for m in await agent_env.messages(buffer) if m.role == "assistant"]
        assert kept == [shown(events)], buffer


async def test_a_question_said_back_from_the_models_side_is_held_and_asked_for_again(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text="What is your server called?")
    agent_env.fake.script(text="Your server is called atlas.")
    events = await agent_env.run("What is my server called?")
    assert events[-1]["content"] == "Your server is called atlas." == shown(events)  # the echo never streamed


async def test_a_greeting_echoed_twice_is_not_shown(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text="Hey Navi, nice to see you.")
    agent_env.fake.script(text="Hey Navi, nice to see you!")
    events = await agent_env.run("Hey Navi, nice to see you.")
    assert "nice to see you" not in shown(events).lower()
    assert events[-1]["content"] == shown(events) and events[-1]["content"].startswith("I could not produce an answer")


@pytest.mark.parametrize(("message", "reply"), [
    # The review's case (round 20): with nothing done, only an answer that is the message itself is an echo.
    ("What is the capital of France?", "What is the capital of France? The capital of France is Paris."),
    ("Hello there!", "Hello there!"),  # a short greeting returned
])
async def test_an_answer_that_is_no_echo_is_shown_after_one_request(agent_env, message, reply) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=reply)
    events = await agent_env.run(message)
    assert events[-1]["content"] == reply == shown(events)
    assert len(agent_env.fake.chat_requests) == 1


def test_with_nothing_done_only_the_message_itself_is_an_echo() -> None:
    from agent.aids import ECHOED, poor_answer

    asked = ["Merry Christmas and a happy new year!"]
    assert poor_answer("Merry Christmas and a happy new year!", small=True, asked=asked) == ECHOED
    assert poor_answer("merry christmas and a happy new year", small=True, asked=asked) == ECHOED
    for fine in ("Merry Christmas and a happy new year! Wishing you all the best.",
                 "Thank you, and merry Christmas and a happy new year to you too!"):
        assert poor_answer(fine, small=True, asked=asked) is None, fine


def test_only_a_whole_message_repeated_from_a_sentence_start_is_an_echo() -> None:
    from agent.aids import _echoes_request, request_openers

    asked = ["Nag me every hour about drinking water."]
    assert _echoes_request("nag me, every hour about drinking water", asked)
    assert _echoes_request("Okay! Nag me every hour about drinking water. Done.", asked)
    assert not _echoes_request("I will nag you every hour about drinking water.", asked)  # its own words
    assert not _echoes_request("Every hour about drinking water, set.", asked)  # a part of it
    assert not _echoes_request("Read notes.txt now", ["Read notes.txt now"])  # too short to tell
    assert _echoes_request("Make a list of my errands", ["hi", "make a list of my errands"])  # one of the messages
    # A message inside the model's own sentence, or a line the user dictated, is the answer's to repeat.
    assert not _echoes_request("Got it! I'll remember that my wife's birthday is on March 3rd.",
                               ["Remember that my wife's birthday is on March 3rd."])
    dictated = "Add these to my list:\nbuy milk and eggs for breakfast\ncall the garage about the brakes"
    assert not _echoes_request("Your list: 1. buy milk and eggs for breakfast 2. call the garage about the brakes",
                               [dictated])
    assert request_openers(["Hi", "Nag me every hour about drinking water."]) == ("nag me every hour about ",)


def test_a_message_said_back_from_the_models_side_is_an_echo() -> None:
    """The 1.5B answered "What is my server called?" with "What is your server called?" (round 27), and "Morning!
    Everything fine on your side?" with "Morning! Everything fine on my side?"."""
    from agent.aids import ECHOED, _echoes_request, poor_answer, request_openers

    assert poor_answer("What is your server called?", small=True, asked=["What is my server called?"]) == ECHOED
    assert poor_answer("Morning! Everything fine on my side?", small=True,
                       asked=["Morning! Everything fine on your side?"]) == ECHOED
    assert poor_answer("How am I doing today?", small=True, asked=["How are you doing today?"]) == ECHOED
    assert _echoes_request("Sure. What is your server called?", ["What is my server called?"])
    for fine in ("Your server is called atlas.", "I don't know what your server is called yet.",
                 "What is your server called? It is called atlas."):
        assert poor_answer(fine, small=True, asked=["What is my server called?"]) is None, fine
    # A statement said back from the model's side is what confirming it means (the review's cases).
    for message, reply in (("My favourite colour is green.", "Got it! Your favourite colour is green."),
                           ("I live in Berlin with my wife.", "Okay! You live in Berlin with your wife."),
                           ("Remind me to call my sister at noon.", "Reminder set: remind you to call your sister at noon.")):
        assert not _echoes_request(reply, [message]), reply
        assert poor_answer(reply.split("! ")[-1], small=True, asked=[message]) is None, reply
    assert "what is your server call" in request_openers(["What is my server called?"])
    assert "how am i doing today?" in request_openers(["How are you doing today?"])
    assert request_openers(["Remind me to call my sister at noon."]) == ("remind me to call my sis",)


async def _shopping_written(agent_env) -> Path:
    """A constrained profile whose model's first step writes shopping.txt into the session's folder (returned)."""
    await constrained(agent_env)
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    agent_env.fake.script(text=as_text("filesystem", action="write", path="shopping.txt", content="milk\neggs\nbread\n"))
    return folder


async def test_a_second_refusal_after_successful_tools_becomes_an_honest_summary(agent_env) -> None:
    folder = await _shopping_written(agent_env)
    agent_env.fake.script(text="I'm sorry, but I can't assist with that.")
    agent_env.fake.script(text="")
    events = await agent_env.run("write milk, eggs and bread into shopping.txt")
    assert (folder / "shopping.txt").read_text() == "milk\neggs\nbread\n"
    final = events[-1]["content"]
    assert final.startswith("Wrote ") and "shopping.txt" in final
    assert "sorry" not in final.lower() and "Here is the result" not in final
    assert shown(events) == final


async def test_an_echo_after_a_tool_goes_back_with_what_the_tools_did(agent_env) -> None:
    await _shopping_written(agent_env)
    request = "Please write milk, eggs and bread into shopping.txt for me."
    agent_env.fake.script(text=request)
    agent_env.fake.script(text="I wrote milk, eggs and bread into shopping.txt.")
    events = await agent_env.run(request)
    assert events[-1]["content"] == "I wrote milk, eggs and bread into shopping.txt." == shown(events)
    *_, echo, told = agent_env.fake.chat_requests[-1].json["messages"]
    assert (echo["role"], echo["content"]) == ("assistant", request)
    assert told["content"].startswith("That reply only repeated the user's message back")
    assert "Your tools did their work" in told["content"]


async def test_a_retry_for_another_reason_shows_the_model_no_reply_of_its_own(agent_env) -> None:
    await _shopping_written(agent_env)
    agent_env.fake.script(text="I'm sorry, but I can't assist with that.")
    agent_env.fake.script(text="I wrote milk, eggs and bread into shopping.txt.")
    await agent_env.run("write milk, eggs and bread into shopping.txt")
    *_, before, told = agent_env.fake.chat_requests[-1].json["messages"]
    assert before["role"] != "assistant" and told["content"].startswith("Your tools did their work")


async def test_answer_retry_off_shows_the_refusal(agent_env) -> None:
    await constrained(agent_env, local_model_aids_off=["answer_retry"])
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="I'm sorry, but I can't assist with that.")
    events = await agent_env.run("what is on my list?")
    assert events[-1]["content"] == "I'm sorry, but I can't assist with that."


async def test_a_refusal_without_any_tool_is_the_answer_once_no_tool_is_chosen(agent_env) -> None:
    # A refusal before any tool ran is decided once more under the grammar (round 15); none chosen, the model
    # answers again, and that answer is shown: "I can't launch rockets" may be the honest one.
    await constrained(agent_env)
    agent_env.fake.script(text="I'm sorry, I can't help with that.")
    agent_env.fake.script(text='{"tool": "none"}')
    agent_env.fake.script(text="I'm sorry, I can't launch rockets.")
    events = await agent_env.run("launch a rocket")
    assert events[-1]["content"] == "I'm sorry, I can't launch rockets." == shown(events)
    assert len(agent_env.fake.chat_requests) == 3 and not calls(events)
    offered = json.dumps(agent_env.requests()[1].get("response_format") or agent_env.requests()[1].get("format"))
    assert '"none"' in offered


async def test_a_refusal_before_any_tool_ran_gets_the_tool_it_needed(bundled) -> None:
    # The 0.5B, fresh7 blind: "Have you got the time?" → "I'm sorry, but I don't have the time to answer your
    # question." The refusal is never shown; chosen under the grammar, the clock runs and the model answers.
    agent_env = bundled
    await constrained(agent_env)
    agent_env.fake.script(text="I'm sorry, but I don't have the time to answer your question.")
    constrained_call(agent_env.fake, "get_current_datetime")
    answer = f"It is {datetime.now(UTC):%A, %Y-%m-%d}."  # words of the clock's result: an answer that says it
    agent_env.fake.script(text=answer)
    events = await agent_env.run("Have you got the time?")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("get_current_datetime", True)]
    assert "sorry" not in shown(events).lower() and events[-1]["content"] == answer


async def test_a_refusal_is_reconsidered_once_a_turn(agent_env) -> None:
    # None chosen, the second refusal is the answer: the turn does not reconsider again.
    await constrained(agent_env)
    agent_env.fake.script(text="I'm sorry, I can't.")
    agent_env.fake.script(text='{"tool": "none"}')
    agent_env.fake.script(text="Sorry, I cannot do that.")
    events = await agent_env.run("Do the impossible")
    assert len(agent_env.fake.chat_requests) == 3 and events[-1]["content"] == "Sorry, I cannot do that."


async def test_a_native_tool_caller_s_refusal_is_its_answer(agent_env) -> None:
    await agent_env.set_profile(tool_calling="native")
    agent_env.fake.script(text="I'm sorry, I can't help with that.")
    events = await agent_env.run("do something impossible")
    assert events[-1]["content"] == "I'm sorry, I can't help with that."
    assert len(agent_env.fake.chat_requests) == 1


async def test_a_stop_during_a_constrained_call_ends_the_turn(agent_env, stop_after) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("nope"))
    agent_env.fake.script(text=json.dumps({"tool": "todo", "arguments": {"action": "read"}}), hang_before_first_chunk=5)
    events = await agent_env.run("hello", stop_event=stop_after(0.5))
    assert events[-1]["type"] == "stream_stopped"
    assert not [e for e in events if e["type"] == "tool_started"]


# -- the pure parts ---------------------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "save", "description": "Save it. More words.", "parameters": {
    "type": "object", "properties": {"key": {"type": "string", "description": "The key."},
                                     "extra": {"type": "object", "description": "Anything."}},
    "required": ["key"]}}}


def test_the_grammar_keeps_structure_and_drops_descriptions() -> None:
    schema = call_schema([TOOL])
    assert schema_names(schema) == ["save"]
    arguments = schema["anyOf"][0]["properties"]["arguments"]
    assert arguments == {"type": "object", "properties": {"key": {"type": "string"}, "extra": {"type": "object"}},
                         "required": ["key"]}
    assert grammar_parameters(None) == {"type": "object"}


@pytest.mark.parametrize(("text", "problem"), [
    ('{"tool": "save", "arguments": {"key": "k"}}', None),
    ('{"tool": "save", "arguments": {}}', "'key' is a required property"),
    ('{"tool": "save", "arguments": {"key": 3}}', "key: 3 is not of type 'string'"),
    ('{"tool": "nope", "arguments": {}}', "there is no tool 'nope'"),
    ('{"tool": "save", "arguments": [1]}', "must be a JSON object"),
    ('{"action": "dance"}', 'a call needs "tool" and "arguments"'),
    ("{broken", "not valid JSON"),
])
def test_a_decision_is_validated_against_the_tools_full_schema(text, problem) -> None:
    decision = parse_decision(text, [TOOL])
    if problem is None:
        assert decision.problem is None
    else:
        assert problem in (decision.problem or "")


async def test_an_answer_that_repeats_navis_own_instruction_is_not_shown(agent_env) -> None:
    # Qwen 0.5B, asked once more, answered with the instruction itself.
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text="I'm sorry, I can't.")
    agent_env.fake.script(text="Your tools did their work; the results are above.")
    events = await agent_env.run("what is on my list?")
    assert events[-1]["content"].startswith("The todo list is empty")
    assert "tools did their work" not in shown(events)


@pytest.mark.parametrize("attempt", [
    '```json\n{"action": "set", "steps": ["buy stamps", "post the letter"]}\n```',  # no tool named at all
    '{"name": "buy stamps", "arguments": {"step": 1}}',  # a name no tool can have
])
async def test_a_reply_of_json_that_names_no_tool_is_made_a_valid_call_and_never_shown(agent_env, attempt) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=attempt)
    constrained_call(agent_env.fake, "todo", action="set", steps=["buy stamps", "post the letter"])
    agent_env.fake.script(text="Your list has two steps.")
    events = await agent_env.run("make a todo list: buy stamps, post the letter")
    assert calls(events) == [("todo", {"action": "set", "steps": ["buy stamps", "post the letter"]}, True)]
    assert "{" not in shown(events) and events[-1]["content"] == "Your list has two steps."


async def test_a_reply_that_describes_a_call_before_any_result_gets_the_call_made(agent_env) -> None:
    # Qwen 1.5B: "To find it, I would use the `filesystem` function with: ```json {...}```".
    await constrained(agent_env)
    agent_env.fake.script(text='To see your list I would use the `todo` function with:\n```json\n{"action": "read"}\n```')
    constrained_call(agent_env.fake, "todo", action="read")
    agent_env.fake.script(text="Your list is empty.")
    events = await agent_env.run("what is on my list?")
    assert calls(events) == [("todo", {"action": "read"}, True)]
    assert '{"action"' not in shown(events) and events[-1]["content"] == "Your list is empty."


async def test_a_reply_that_says_it_will_call_a_named_tool_gets_the_call_made(agent_env) -> None:
    # Qwen 1.5B, round 12: "To find out …, I can call the `filesystem` function with the action "stat" …".
    await constrained(agent_env)
    agent_env.fake.script(text="To see what is on your list, I can call the `todo` function with the action read.")
    constrained_call(agent_env.fake, "todo", action="read")
    agent_env.fake.script(text="Your list is empty.")
    events = await agent_env.run("what is on my list?")
    assert calls(events) == [("todo", {"action": "read"}, True)]
    assert events[-1]["content"] == "Your list is empty."


@pytest.mark.parametrize("answer", ["The `todo` tool keeps a list of steps for a task.",
                                    "You can use the `todo` tool to keep a list; just ask."])
async def test_an_answer_about_a_tool_is_no_call(agent_env, answer) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=answer)
    events = await agent_env.run("what is the todo tool for?")
    assert calls(events) == [] and events[-1]["content"] == answer


async def test_a_described_call_after_a_result_is_just_the_answer(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("todo", action="read"))
    agent_env.fake.script(text='I used `todo` with {"action": "read"}: your list is empty.')
    events = await agent_env.run("what is on my list?")
    assert len(calls(events)) == 1 and events[-1]["content"].endswith("your list is empty.")


async def test_a_fenced_call_streamed_two_characters_at_a_time_shows_nothing_of_itself(agent_env) -> None:
    # llama-cpp-python streams Qwen's "```json\n{" in small pieces; the first backticks were shown.
    await constrained(agent_env)
    agent_env.fake.script(text='```json\n{"name": "todo", "arguments": {"action": "read"}}\n```', token_size=2)
    agent_env.fake.script(text="Your list is empty.")
    events = await agent_env.run("what is on my list?")
    assert calls(events) == [("todo", {"action": "read"}, True)]
    assert shown(events) == "Your list is empty."


def test_conditions_on_an_enumerated_field_become_one_grammar_variant_per_value() -> None:
    parameters = {"type": "object", "properties": {"kind": {"type": "string", "enum": ["once", "every", "now"]},
                                                   "when": {"type": "string"}, "interval": {"type": "integer"}},
                  "required": ["kind"],
                  "allOf": [{"if": {"properties": {"kind": {"const": "once"}}}, "then": {"required": ["when"]}},
                            {"if": {"properties": {"kind": {"const": "every"}}},
                             "then": {"required": ["when", "interval"]}}]}
    variants = grammar_parameters(parameters)["anyOf"]
    assert [(v["properties"]["kind"], v["required"]) for v in variants] == [
        ({"const": "once"}, ["kind", "when"]), ({"const": "every"}, ["kind", "when", "interval"]),
        ({"const": "now"}, ["kind"])]
    # A field only some cases require is offered to those cases only; an optional number to none.
    assert [sorted(v["properties"]) for v in variants] == [["kind", "when"], ["interval", "kind", "when"], ["kind"]]
    assert variants[0]["properties"]["when"] == {"type": "string"}
    plain = grammar_parameters({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"},
                                                                 "step": {"type": "integer"}}, "required": ["step"]})
    assert sorted(plain["properties"]) == ["path", "step"]
    # A case names its optional fields in then.properties (empty schemas, which validation ignores): only
    # that case is offered them (the 0.5B wrote its instructions into the "note" of a todo "set").
    todo = {"type": "object", "properties": {"action": {"type": "string", "enum": ["set", "update", "read"]},
                                             "steps": {"type": "array"}, "step": {"type": "integer"},
                                             "note": {"type": "string"}},
            "required": ["action"],
            "allOf": [{"if": {"properties": {"action": {"const": "set"}}}, "then": {"required": ["steps"]}},
                      {"if": {"properties": {"action": {"const": "update"}}},
                       "then": {"required": ["step"], "properties": {"note": {}}}}]}
    assert [sorted(v["properties"]) for v in grammar_parameters(todo)["anyOf"]] == [
        ["action", "steps"], ["action", "note", "step"], ["action"]]
    from jsonschema import Draft202012Validator

    assert Draft202012Validator(todo).is_valid({"action": "update", "step": 1, "note": "late"})
    # A condition of another shape is left to validation after generation.
    odd = {**parameters, "allOf": [{"if": {"properties": {"when": {"pattern": "^in"}}}, "then": {"required": ["kind"]}}]}
    assert "anyOf" not in grammar_parameters(odd) and "allOf" not in grammar_parameters(odd)


async def test_a_one_off_reminder_without_its_time_is_generated_again_with_it(agent_env) -> None:
    """schedule_recall says in its schema that a one-off needs 'when': a written call without it is
    not run (it would fail) but generated again under a grammar that requires it."""
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once",
                                       additional_context_message="Remind the user to stretch their legs."))
    constrained_call(agent_env.fake, "schedule_recall", call_type="once", when="3m",
                     additional_context_message="Remind the user to stretch their legs.")
    agent_env.fake.script(text="I'll remind you in 3 minutes.")
    events = await agent_env.run("ping me in a bit to stretch my legs")  # no time said: the model's to give
    [(tool, args, ok)] = calls(events)
    assert (tool, args["when"], ok) == ("schedule_recall", "3m", True)
    grammar = agent_env.fake.schema_of(agent_env.fake.chat_requests[1])
    (branch,) = [b for b in grammar["anyOf"] if b["properties"]["tool"] == {"const": "schedule_recall"}]
    once = next(v for v in branch["properties"]["arguments"]["anyOf"] if v["properties"]["call_type"] == {"const": "once"})
    assert "when" in once["required"]
    # ... and the time only in a form the recall parser reads (the grammar's pattern), counted from the
    # time the instruction gives; the model's prompt has neither the pattern nor the time.
    from recall_app.timeparse import WHEN_PATTERN

    assert once["properties"]["when"]["pattern"] == WHEN_PATTERN
    instruction = agent_env.fake.chat_requests[1].json["messages"][-1]["content"]
    assert re.search(r"The time now is \d{4}-\d\d-\d\dT\d\d:\d\dZ \(\w+day, UTC\)\.$", instruction)
    assert "The tools: schedule_recall: Set a reminder or schedule future work for yourself" in instruction
    assert "todo:" not in instruction  # the attempt named schedule_recall: the menu offers that tool alone
    for request in agent_env.fake.chat_requests:
        assert "x-navi-pattern" not in json.dumps(request.json.get("tools")) and "pattern" not in json.dumps(
            request.json.get("tools"))


def test_a_value_that_repeats_a_parameters_description_is_not_valid() -> None:
    from agent.decide import argument_problem

    parameters = {"type": "object", "properties": {
        "message": {"type": "string", "description": "Your self-instruction, written as a todo naming tools, files or URLs."},
        "when": {"type": "string", "description": "Trigger time: '30m', 'in 3 hours', 'tomorrow at 09:00'."}}}
    problem = argument_problem({"message": "your self-instruction, written as a todo naming tools, files or urls.",
                                "when": "3m"}, parameters)
    assert problem and problem.startswith("message: ") and "repeats the description" in problem
    # A short value, or one that only shares words with a description, is a value.
    assert argument_problem({"message": "Remind the user to stretch, naming tools", "when": "tomorrow at 09:00"},
                            parameters) is None


def test_a_value_that_repeats_the_tools_own_description_is_not_valid() -> None:
    from agent.decide import argument_problem

    parameters = {"type": "object", "properties": {"message": {"type": "string"}, "when": {"type": "string"}}}
    tool = ("Set a reminder or schedule future work for yourself, once or repeating (a 'recall' of this session): "
            "when it fires you wake up and continue.")
    problem = argument_problem({"message": "Set a reminder or schedule future work for yourself, once or repeating",
                                "when": "1h"}, parameters, tool)
    assert problem and problem.startswith("message: ") and "repeats a tool's description" in problem
    # Copied words amid the user's own (fewer than six in a row) are a value.
    assert argument_problem({"message": "Remind the user to drink water, once every hour", "when": "1h"},
                            parameters, tool) is None
    assert argument_problem({"message": "Set a reminder or schedule future work for yourself, once or repeating",
                             "when": "1h"}, parameters) is None  # no description given: nothing to compare


def test_a_value_that_repeats_another_offered_tools_description_is_not_valid() -> None:
    """The 0.5B set a todo list whose steps were memory_save's description ("Write a note about the user
    to long-term memory right away, so you know it in future conversations")."""
    from agent.decide import argument_problem, descriptions

    memory = {"type": "function", "function": {"name": "memory_save", "description": (
        "Save a fact about the user to long-term memory right away, so you know it in future conversations.")}}
    todo = {"type": "object", "properties": {"action": {"type": "string"}, "steps": {"type": "array",
                                                                                       "items": {"type": "string"}}}}
    copied = {"action": "set", "steps": ["call the plumber",
                                         "Write a note about the user to long-term memory right away, so you know it"]}
    problem = argument_problem(copied, todo, descriptions([memory]))
    assert problem and problem.startswith("steps: ") and "repeats a tool's description" in problem
    assert argument_problem({"action": "set", "steps": ["call the plumber about invoice 4711", "save the receipt"]},
                            todo, descriptions([memory])) is None
    # The user's own words may be the same as a description's: "get the current date and time" on a list.
    clock = {"type": "function", "function": {"name": "get_current_datetime",
                                              "description": "Get the current date and time."}}
    steps = {"action": "set", "steps": ["get the current date and time of the flight", "book the taxi"]}
    assert argument_problem(steps, todo, descriptions([clock, memory]),
                            "Make a list: get the current date and time of the flight, book the taxi") is None
    assert argument_problem(steps, todo, descriptions([clock, memory])) is not None
    # A long text is the model's own composition (a file's content): its words are not judged.
    long = "Notes for the trip. " * 10 + "Write a note about the user to long-term memory right away, so you know it."
    assert argument_problem({"action": "set", "steps": [long]}, todo, descriptions([memory])) is None



async def test_a_call_that_copies_navis_own_instruction_is_generated_again(agent_env) -> None:
    """The 0.5B, told that a call rested on a guess, set a todo step of the user's words followed by the note's
    "If the user's request needs no tool, answer it in words from what you know": stored, the user would have
    found Navi's instruction on their list."""
    from agent.aids import GUESSED

    await constrained(agent_env)
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "set", "steps": [
        "buy stamps", f"post the letter. {GUESSED}"]}}))
    constrained_call(agent_env.fake, "todo", action="set", steps=["buy stamps", "post the letter"])
    agent_env.fake.script(text="Your list has two steps: buy stamps, post the letter.")
    events = await agent_env.run("make a checklist: buy stamps, post the letter")
    assert calls(events) == [("todo", {"action": "set", "steps": ["buy stamps", "post the letter"]}, True)]
    assert schema_names(agent_env.fake.schema_of(agent_env.fake.chat_requests[1])) == ["todo"]
    assert "answer it in words" not in json.dumps(events, default=str)


async def test_a_call_that_copies_navis_note_of_this_turn_is_generated_again(agent_env) -> None:
    """The 0.5B's fact was doubted (nothing the user said), and its next call set a todo step of the note it had
    just read ("Not run: the fact 'boreas' is nothing the user's words … say"; round 18)."""
    await constrained(agent_env, enabled_tools=["memory_save", "todo"])
    agent_env.fake.script(text=as_text("memory_save", category="environment", key="server_name", value="boreas"))
    agent_env.fake.script(text=json.dumps({"name": "todo", "arguments": {"action": "set", "steps": [
        "drink water every hour", "Not run: the fact 'boreas' is nothing the user's words say, so it was not saved"]}}))
    constrained_call(agent_env.fake, "todo", action="set", steps=["drink water every hour"])
    agent_env.fake.script(text="Your list: drink water every hour.")
    events = await agent_env.run("put drink water every hour on my list")
    assert calls(events) == [("todo", {"action": "set", "steps": ["drink water every hour"]}, True)]
    assert schema_names(agent_env.fake.schema_of(agent_env.fake.chat_requests[2])) == ["todo"]
    assert "Not run" not in json.dumps([e for e in events if e.get("type") != "stream_delta"], default=str)


async def test_a_refusal_as_a_value_to_keep_is_generated_again(agent_env) -> None:
    """The 0.5B saved the fact "atlas: I'm sorry, but I can't assist with that." (fresh13, round 21)."""
    await constrained(agent_env, enabled_tools=["memory_save", "todo"])
    agent_env.fake.script(text=as_text("memory_save", category="environment", key="atlas",
                                       value="I'm sorry, but I can't assist with that."))
    constrained_call(agent_env.fake, "memory_save", category="environment", key="server_name", value="atlas")
    agent_env.fake.script(text="Noted: your server is called atlas.")
    events = await agent_env.run("For future conversations, keep in mind my server is called atlas.")
    assert calls(events) == [("memory_save", {"category": "environment", "key": "server_name", "value": "atlas"}, True)]
    assert agent_env.fake.schema_of(agent_env.fake.chat_requests[1]) is not None  # generated again under the grammar


def test_words_of_regret_the_user_said_are_a_value() -> None:
    from agent.decide import argument_problem

    params = {"type": "object", "properties": {"text": {"type": "string"}}}
    assert argument_problem({"text": "Sorry, I'm late for dinner"}, params, "", "Note: sorry, I'm late for dinner") is None
    assert argument_problem({"text": "I can't attend on Friday"}, params, "", "note that I can't attend Friday") is None
    assert "is a refusal" in argument_problem({"text": "I'm sorry, I cannot help with that."}, params, "", "note: milk")


async def test_the_tool_an_attempt_names_stays_its_choice(agent_env) -> None:
    """The 0.5B wrote {"name": "schedule_recall", "additional_context_message": "Water the plants at 6 pm."}
    (the arguments beside the name) and, asked again under every tool's schema, chose todo."""
    await constrained(agent_env)
    agent_env.fake.script(text='{"name": "todo", "steps": ["buy stamps", "post the letter"]}')
    constrained_call(agent_env.fake, "todo", action="set", steps=["buy stamps", "post the letter"])
    agent_env.fake.script(text="Your list has two steps: buy stamps, post the letter.")
    events = await agent_env.run("make a checklist: buy stamps, post the letter")
    assert calls(events) == [("todo", {"action": "set", "steps": ["buy stamps", "post the letter"]}, True)]
    request = agent_env.fake.chat_requests[1]
    assert schema_names(agent_env.fake.schema_of(request)) == ["todo"]
    menu = request.json["messages"][-1]["content"]
    assert "todo:" in menu and "filesystem:" not in menu and "{" not in shown(events)


async def test_an_attempt_naming_no_tool_is_offered_the_tools_its_arguments_fit(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text='```json\n{"name": "read_notes_md", "arguments": {"action": "read", "path": "notes.md"}}\n```')
    constrained_call(agent_env.fake, "filesystem", action="read", path="notes.md")
    agent_env.fake.script(text="notes.md is not there.")
    await agent_env.run("what does notes.md say?")
    assert schema_names(agent_env.fake.schema_of(agent_env.fake.chat_requests[1])) == ["filesystem"]


def _offered(*names: str) -> list[dict]:
    from tools_app.registry import get_registry

    return get_registry().schemas(list(names))


@pytest.mark.parametrize(("text", "native", "pointed"), [
    ('{"name": "todo", "steps": ["a"]}', None, ["todo"]),  # named, arguments beside the name
    ('<tool_call>{"name": "save_fact", "arguments": {"task": "x"}}</tool_call>', None, ["spawn_agent"]),
    ('{"type": "function", "function": {"name": "filesystem", "arguments": "{\\"path\\": 1}"}}', None, ["filesystem"]),
    ('I would use the `todo` function with: ```json {"action": "read"}```', None, ["todo"]),
    ('{"name": "look", "arguments": {"action": "list", "path": "."}}', None, ["filesystem"]),  # a valid call
    ('{"action": "read"}', None, ["todo"]),  # a read of no file is no call of the filesystem
    ('{"action": "read", "path": "a.txt"}', None, ["filesystem"]),
    ('{"name": "greeting", "arguments": {"text": "Hello!"}}', None, []),  # a loose fit is no sign
    ('{"name": "plumber", "arguments": {"invoice": 4711}}', None, []),  # points nowhere: every tool
    ("no JSON at all", None, []),
    ("", ("helper", {"task": "read facts.txt"}), ["spawn_agent"]),  # a native call of a tool that does not exist
])
def test_an_attempt_points_at_the_tool_it_names_or_whose_parameters_it_wrote(text, native, pointed) -> None:
    from agent.decide import attempted_tools
    from agent.llm.base import ToolCallRequest

    native_calls = [ToolCallRequest(id="c1", name=native[0], arguments=native[1])] if native else []
    assert sorted(attempted_tools(text, native_calls, _offered("todo", "spawn_agent", "filesystem"))) == sorted(pointed)
