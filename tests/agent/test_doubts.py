"""The ``doubts`` aid (issue 24): before a small model's call runs, the tool compares it with the user's
words using only what the tool itself knows. A look at a file nobody named that is not there is a
guess: not run, no card, the model is told what is there (a second guess, and it answers). A reminder
whose time the request's own relative time contradicts is set as the user said it."""
from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from recall_app.timeparse import said_times
from tests.agent.test_constrained import as_text, calls, constrained, constrained_call, schema_names, shown

pytestmark = pytest.mark.django_db(transaction=True)


def started(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "tool_started"]


async def test_a_read_of_a_file_nobody_named_that_is_not_there_is_not_run(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="spider_legs.txt"))
    agent_env.fake.script(text="A spider has eight legs.")
    events = await agent_env.run("How many legs does a spider have?")
    assert not started(events) and not calls(events)  # no card, nothing ran
    assert events[-1]["type"] == "stream_end" and events[-1]["content"] == "A spider has eight legs." == shown(events)
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "spider_legs.txt does not exist" in told
    assert "The user named no such file" in told and "answer it in words" in told
    assert "tools" in agent_env.requests()[1]  # the model may still use a tool: the note says what is there


async def test_a_path_outside_the_allowed_folders_that_nobody_named_is_a_guess_too(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="/usr/share/zoneinfo/Europe/Berlin"))
    agent_env.fake.script(text="Paris.")
    events = await agent_env.run("What is the capital of France?")
    assert not started(events)
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert "outside the allowed directories" in told and "The user named no such path" in told
    assert events[-1]["content"] == "Paris."


async def test_told_what_the_folder_has_the_model_reads_the_right_file(agent_env, settings) -> None:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.md").write_text("Dentist on Friday.\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="notes.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="notes.md"))
    agent_env.fake.script(text="Your notes say: dentist on Friday.")
    events = await agent_env.run("What do my notes say?")
    assert [(tool, args["path"], ok) for tool, args, ok in calls(events)] == [("filesystem", "notes.md", True)]
    assert "notes.txt does not exist" in agent_env.requests()[1]["messages"][-1]["content"]
    assert "notes.md" in agent_env.requests()[1]["messages"][-1]["content"]
    assert events[-1]["content"] == "Your notes say: dentist on Friday."


async def test_a_second_guess_and_the_model_answers_without_tools(agent_env, settings) -> None:
    (_folder(agent_env, settings) / "notes.md").write_text("Dentist on Friday.\n")  # something to look at
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="planets.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="list", path="/home/user/planets"))
    agent_env.fake.script(text="Mars is known as the Red Planet.")
    events = await agent_env.run("Which planet is known as the Red Planet?")
    assert not started(events)
    assert events[-1]["content"] == "Mars is known as the Red Planet."
    # Told to answer, without the calls that did not run and Navi's notes about them (round 18: the 1.5B
    # answered a note instead of the user): the request ends with the user's message, then the order.
    answer = agent_env.requests()[2]["messages"]
    assert answer[-1]["content"].startswith("No tool ran for the user's last message. Answer it now")
    assert answer[-2] == {"role": "user", "content": "Which planet is known as the Red Planet?"}
    assert not any("planets" in str(m["content"]) for m in answer)


async def test_an_answer_in_the_words_of_the_question_a_note_quoted_is_shown(agent_env, settings) -> None:
    # The 1.5B's "The boiling point of water in Fahrenheit is 212 degrees." took seven words of the question,
    # which the note of its doubted read quoted: judged twice as Navi's instruction repeated, the user got "I
    # could not produce an answer" (round 19). What a note quotes is the user's, not Navi's.
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="/usr/share/dict/words"))
    agent_env.fake.script(text="The boiling point of water in Fahrenheit is 212 degrees.")
    events = await agent_env.run("What is the boiling point of water in Fahrenheit?")
    assert not started(events)
    assert events[-1]["content"] == "The boiling point of water in Fahrenheit is 212 degrees." == shown(events)
    assert len(agent_env.requests()) == 2


async def test_a_request_whose_calls_were_all_doubted_is_answered_with_navis_notes_in_view(agent_env, settings) -> None:
    # Not a question: asked to do something, with the notes left out, the 0.5B made up that it was done ("The
    # plumber is called, and the invoice has been paid."; round 18). The notes stay, and so does the order.
    (_folder(agent_env, settings) / "notes.md").write_text("Dentist on Friday.\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="invoice_2069.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="list", path="/home/user/invoices"))
    agent_env.fake.script(text="I could not find an invoice file, so nothing was noted.")
    events = await agent_env.run("Take this down: plumber to be called, invoice 2069.")
    assert not started(events)
    answer = agent_env.requests()[2]["messages"]
    assert answer[-1]["content"].startswith("Answer the user now in plain language")
    assert any("invoice_2069.txt does not exist" in str(m["content"]) for m in answer)


# -- a tool with nothing for the request (round 14) ----------------------------------------------------------
# The 0.5B guessed "invoice_4084.txt", then "/home/navi/invoices/4084.txt", in an empty folder for "Put in my
# notes: invoice 4084, ring the plumber", and the user got "I could not produce an answer this time".

async def test_after_a_guess_in_an_empty_folder_the_next_call_is_chosen_among_the_other_tools(bundled) -> None:
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["filesystem", "user_notes", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="invoice_4084.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="/home/navi/invoices/4084.txt"))
    constrained_call(agent_env.fake, "user_notes", action="add", text="invoice 4084, ring the plumber")
    agent_env.fake.script(text="Noted: ring the plumber about invoice 4084.")
    events = await agent_env.run("Put in my notes: invoice 4084, ring the plumber.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert events[-1]["content"] == "Noted: ring the plumber about invoice 4084."
    choice = agent_env.requests()[2]
    branches = choice["format"]["anyOf"]
    offered = [b["properties"]["tool"]["const"] for b in branches]
    assert "filesystem" not in offered and {"none", "user_notes", "todo"} <= set(offered)
    told = [m["content"] for m in choice["messages"]]
    assert any("filesystem was tried and has nothing for this request" in c for c in told)
    assert any("none: no tool, answer in words" in c for c in told)


async def test_after_a_guess_in_an_empty_folder_a_call_written_again_is_not_of_that_tool(bundled) -> None:
    # Round 14: the second attempt was no valid call, and the call generated for it named the same tool.
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["filesystem", "user_notes", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="invoice_5816.txt"))
    agent_env.fake.script(text='{"name": "filesystem", "arguments": {"action": "read", "path": ')  # cut short
    constrained_call(agent_env.fake, "user_notes", action="add", text="invoice 5816: call the plumber")
    agent_env.fake.script(text="Noted: call the plumber about invoice 5816.")
    events = await agent_env.run("Jot this down: plumber, invoice 5816.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    offered = [b["properties"]["tool"]["const"] for b in agent_env.requests()[2]["format"]["anyOf"]]
    assert "filesystem" not in offered and "none" in offered


async def test_after_a_guess_in_an_empty_folder_the_model_may_choose_no_tool_and_answer(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["filesystem", "memory_save", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="planets.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="list", path="/home/user/planets"))
    agent_env.fake.script(text='{"tool": "none"}')
    agent_env.fake.script(text="Mars is known as the Red Planet.")
    events = await agent_env.run("Which planet is known as the Red Planet?")
    assert not started(events) and events[-1]["content"] == "Mars is known as the Red Planet." == shown(events)
    assert "Do not write a tool call" in agent_env.requests()[3]["messages"][-1]["content"]  # told to answer


async def test_a_file_the_user_named_is_read_even_when_missing_and_its_error_is_the_answer(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt"))
    agent_env.fake.script(text="There is no report.txt in this session.")
    events = await agent_env.run("Who wrote report.txt?")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["path"], ok) == ("filesystem", "report.txt", False)
    assert events[-1]["content"] == "There is no report.txt in this session."


async def test_an_existing_file_and_a_write_are_never_doubted(agent_env, settings) -> None:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.txt").write_text("The magic number is 4242.\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt"))
    agent_env.fake.script(text="The number is 4242.")
    events = await agent_env.run("What is the magic number?")  # the file exists: not a guess
    assert [(tool, args["action"], ok) for tool, args, ok in calls(events)] == [("filesystem", "read", True)]
    agent_env.fake.script(text=as_text("filesystem", action="write", path="copy.txt", content="4242"))
    agent_env.fake.script(text="I saved 4242 to copy.txt.")
    events = await agent_env.run("Keep a copy of it.")
    assert [(tool, args["action"], ok) for tool, args, ok in calls(events)] == [("filesystem", "write", True)]
    assert (folder / "copy.txt").read_text() == "4242"


async def test_a_file_name_with_a_word_of_the_request_before_it_is_the_file_the_user_named(agent_env, settings) -> None:
    """The 0.5B wrote "file shopping.txt" for "I need a file shopping.txt with …": the user got no shopping.txt."""
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="write", path="the file todo.md", content="call Bob"))
    agent_env.fake.script(text="I wrote 'call Bob' into todo.md.")
    events = await agent_env.run("Make me the file todo.md that says call Bob.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["path"], ok) == ("filesystem", "todo.md", True)
    assert (folder / "todo.md").read_text() == "call Bob" and not (folder / "the file todo.md").exists()
    (folder / "my plan.md").write_text("Step one: call Bob.")  # a name with a space that is there is the file
    agent_env.fake.script(text=as_text("filesystem", action="read", path="my plan.md"))
    agent_env.fake.script(text="Step one is to call Bob.")
    events = await agent_env.run("What does my plan.md say?")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["path"], ok) == ("filesystem", "my plan.md", True)


async def test_a_named_file_looked_for_in_a_made_up_folder_is_the_working_directorys(agent_env, settings) -> None:
    """The 0.5B read "file:///home/navi/report.txt", then "/home/navi/report.txt", for "who wrote the file
    report.txt?" (round 11): both failed and the user got no author."""
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text("Author: Priya Raman\n")
    await constrained(agent_env)
    for made_up in ("file:///home/navi/report.txt", "docs/report.txt"):
        agent_env.fake.script(text=as_text("filesystem", action="read", path=made_up))
        agent_env.fake.script(text="Priya Raman wrote it.")
        events = await agent_env.run("Can you see who wrote the file report.txt?")
        [(tool, args, ok)] = calls(events)
        assert (tool, args["path"], ok) == ("filesystem", "report.txt", True), made_up
        assert events[-1]["content"] == "Priya Raman wrote it."


async def test_a_path_the_user_wrote_or_a_file_not_there_is_not_moved(agent_env, settings) -> None:
    from agent.ctx import current_session_id
    from tools_app.builtins.filesystem import _elsewhere

    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text("x")
    token = current_session_id.set(agent_env.session_id)
    try:
        assert _elsewhere("/home/navi/report.txt", "who wrote /home/navi/report.txt?", "read") is None  # the user's path
        assert _elsewhere("/home/navi/plan.txt", "what does plan.txt say?", "read") is None  # no plan.txt here
        assert _elsewhere("/home/navi/report.txt", "what is in the report?", "read") is None  # not named
        assert _elsewhere("report.txt", "read report.txt", "read") is None  # already the working directory's
        for action in ("write", "append", "delete", "move", "list"):
            assert _elsewhere("/home/navi/report.txt", "report.txt", action) is None, action
        assert _elsewhere("/tmp/x/report.txt", "read report.txt", "stat") == "report.txt"
    finally:
        current_session_id.reset(token)


def test_a_file_name_with_a_space_stays_when_quoted_or_not_the_users() -> None:
    from tools_app.builtins.filesystem import _unspaced

    def fixed(raw: str, request: str, action: str = "write") -> str | None:
        return _unspaced(raw, request, action)

    assert fixed("my notes.txt", 'Save it in "my notes.txt".') is None  # quoted: the user's own name
    assert fixed("my notes.txt", "Save it in 'my notes.txt' please") is None
    assert fixed("docs/my notes.txt", 'Save it as "docs/my notes.txt" now') is None
    assert fixed("my notes.txt", 'Save it as "my notes.txt."') is None
    assert fixed("notes.txt", "Save it in my notes.txt") is None  # no space
    assert fixed("shopping list", "Save a shopping list") is None  # no file name
    assert fixed("old plan.md", "Write plan.txt") is None  # the last word is no file the user named
    assert fixed("C:\\Users\\me\\my notes.txt", "save my notes.txt") is None  # a Windows path
    assert fixed("my\tnotes.txt", "save my notes.txt") is None
    assert fixed("/etc/my hosts", "read my hosts", "read") is None
    # Never where it could cost a file: a delete or a move stays as written.
    assert fixed("old notes.txt", "Delete old notes.txt, keep notes.txt", "delete") is None
    assert fixed("old notes.txt", "Move old notes.txt to archive/", "move") is None


async def test_a_spaced_name_is_never_fixed_onto_a_file_that_is_there_or_away_from_one(agent_env, settings) -> None:
    """A write never replaces a file that is there; a read never goes to one that is not."""
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("keep me")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="write", path="old notes.txt", content="copy"))
    agent_env.fake.script(text="I made old notes.txt.")
    events = await agent_env.run("Copy notes.txt into a new file old notes.txt")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["path"], ok) == ("filesystem", "old notes.txt", True)
    assert (folder / "notes.txt").read_text() == "keep me" and (folder / "old notes.txt").read_text() == "copy"
    agent_env.fake.script(text=as_text("filesystem", action="read", path="the plan.md"))
    agent_env.fake.script(text="There is no plan.md.")
    events = await agent_env.run("What does the plan.md say?")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["path"], ok) == ("filesystem", "the plan.md", False)  # plan.md is not there either


async def test_with_the_aid_off_a_guessed_read_runs(agent_env) -> None:
    await constrained(agent_env, local_model_aids_off=["doubts"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="spider_legs.txt"))
    agent_env.fake.script(text="A spider has eight legs.")
    events = await agent_env.run("How many legs does a spider have?")
    [(tool, _args, ok)] = calls(events)
    assert (tool, ok) == ("filesystem", False)


async def test_a_model_with_native_calls_is_not_doubted(agent_env) -> None:
    agent_env.fake.script(tool_calls=[{"name": "filesystem", "arguments": {"action": "read", "path": "legs.txt"}}])
    agent_env.fake.script(text="Eight.")
    events = await agent_env.run("How many legs does a spider have?")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("filesystem", False)]


# -- reminders ------------------------------------------------------------------------------------

async def _recall(agent_env) -> object:
    from recall_app.models import Recall

    return await sync_to_async(lambda: Recall.objects.filter(session_id=agent_env.session_id).first())()


async def test_a_reminder_time_the_request_contradicts_is_set_as_the_user_said_it(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    wrong = (timezone.now() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")  # the model's own arithmetic
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when=wrong,
                                       additional_context_message="Remind the user to stretch their legs."))
    agent_env.fake.script(text="I'll remind you to stretch in 3 minutes.")
    asked = timezone.now()
    events = await agent_env.run("Remind me in 3 minutes to stretch my legs.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["when"], ok) == ("schedule_recall", "in 3 minutes", True)  # the card shows what ran
    recall = await _recall(agent_env)
    assert timedelta(minutes=2, seconds=50) <= recall.trigger_at - asked <= timedelta(minutes=3, seconds=10)
    assert recall.additional_context_message == "Remind the user to stretch their legs."
    assert len(agent_env.fake.chat_requests) == 2  # no model call spent on it
    assert events[-1]["content"] == "I'll remind you to stretch in 3 minutes."


async def test_an_answer_that_shows_the_instruction_navi_framed_is_asked_for_again(agent_env) -> None:
    # After a reminder whose empty instruction Navi framed around the user's words, the 0.5B answered with the
    # instruction itself ("When due: remind the user of what they asked, …"; fresh21, round 29).
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="in 3 minutes",
                                       additional_context_message=""))
    framed = _asked("send word that it's time I stretched my legs")
    agent_env.fake.script(text=framed)
    agent_env.fake.script(text="In 3 minutes I'll tell you it's time to stretch your legs.")
    events = await agent_env.run("Once 3 minutes are up, send word that it's time I stretched my legs.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["additional_context_message"], ok) == ("schedule_recall", framed, True)
    assert framed not in shown(events)
    assert events[-1]["content"] == "In 3 minutes I'll tell you it's time to stretch your legs."


@pytest.mark.parametrize(("when", "instruction", "fixed"), [
    # The time fixed with the instruction (the 0.5B's usual call, the review), and no fix at all: the model wrote its
    # own instruction and then gave the framing as its answer, which any turn must not show.
    ("300", "", 'When due: remind the user of what they asked, "remind me to check the oven" (this recall is that reminder; set no other).'),
    ("in 5 minutes", "Tell the user to check the oven.", "Tell the user to check the oven."),
])
async def test_the_framing_is_asked_for_again_whatever_fixed_the_call(agent_env, when, instruction, fixed) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when=when,
                                       additional_context_message=instruction))
    agent_env.fake.script(text=_asked("check the oven"))
    agent_env.fake.script(text="In 5 minutes I'll remind you to check the oven.")
    events = await agent_env.run("In 5 minutes remind me to check the oven.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["when"], args["additional_context_message"], ok) == ("schedule_recall", "in 5 minutes", fixed, True)
    assert "When due" not in shown(events)
    assert events[-1]["content"] == "In 5 minutes I'll remind you to check the oven."


def test_the_tools_framing_is_known_to_every_turn() -> None:
    """The registry gives every tool's own framing (``Tool.framing``); one given as a string or holding a
    non-string gives none (a string would count letter by letter), and the turn goes on."""
    from recall_app.tools import ASKED_CLOSE, ASKED_OPEN, ScheduleRecallTool
    from tools_app.base import Tool
    from tools_app.registry import ToolRegistry

    registry = ToolRegistry()  # its own: the odd tool stays out of every other test's registry
    registry.register_builtin(ScheduleRecallTool())
    assert registry.framing() == (ASKED_OPEN, ASKED_CLOSE)
    for bad in ("When due", ("When due", 7), None):
        tool = type("Odd", (Tool,), {"name": "odd_framing", "description": "An odd tool.", "framing": bad,
                                     "execute": lambda self, params: None})()
        registry.register_builtin(tool)
        assert registry.framing() == (ASKED_OPEN, ASKED_CLOSE), bad


@pytest.mark.parametrize(("asked", "when", "answer"), [
    # The user's own words, which the framing quotes, are an answer's to say; so is the time the fix set as they
    # said it; and words of theirs in quotes inside the framing (the review).
    ("Once 3 minutes are up, send word that it's time I stretched my legs.", "in 3 minutes",
     "Sure: in 3 minutes, send word that it's time I stretched my legs."),
    ('In 5 minutes remind me to read "Dune" chapter 3 and then call the user group about it.', "in 5 minutes",
     "In 5 minutes."),
    ('In 5 minutes remind me to read "Dune" chapter 3 and then call the user group about it.', "in 5 minutes",
     "Sure, I'll remind you to read Dune chapter 3 and then call the user group about it."),
])
async def test_only_the_framing_navi_put_around_the_users_words_is_no_answer(agent_env, asked, when, answer) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="300", additional_context_message=""))
    agent_env.fake.script(text=answer)
    events = await agent_env.run(asked)
    [(tool, args, ok)] = calls(events)
    assert (tool, args["when"], ok) == ("schedule_recall", when, True)
    assert args["additional_context_message"].startswith("When due: remind the user of what they asked")
    assert events[-1]["content"] == answer == shown(events)


async def test_a_reminder_set_to_run_now_for_a_later_time_is_set_for_that_time(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="immediate",
                                       additional_context_message="Remind the user to get up and stretch."))
    agent_env.fake.script(text="Done: in three minutes I'll remind you to stretch.")
    asked = timezone.now()
    events = await agent_env.run("Can you nudge me in three minutes to get up and stretch?")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["call_type"], args["when"], ok) == ("schedule_recall", "once", "in three minutes", True)
    recall = await _recall(agent_env)
    assert recall.call_type == "once" and timedelta(minutes=2, seconds=50) <= recall.trigger_at - asked


async def test_a_repeat_the_request_asks_for_is_not_set_once(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="1h",
                                       additional_context_message="Remind the user to drink water."))
    agent_env.fake.script(text="Every hour I'll remind you to drink water.")
    events = await agent_env.run("Please remind me every hour to drink a glass of water.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["call_type"], args["interval_seconds"], args["when"], ok) == (
        "schedule_recall", "recurring", 3600, "1h", True)
    recall = await _recall(agent_env)
    assert recall.call_type == "recurring" and recall.interval_seconds == 3600


async def test_a_reminder_said_by_its_length_is_set_once_for_then(agent_env) -> None:
    """The 1.5B set "a 3-minute reminder" to repeat every 3 minutes, first due in an hour (round 11)."""
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    later = (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="recurring", when=later, interval_seconds=180,
                                       additional_context_message="Remind the user to stretch."))
    agent_env.fake.script(text="In 3 minutes I'll remind you to stretch.")
    asked = timezone.now()
    events = await agent_env.run("Set a 3-minute reminder to stretch.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["call_type"], ok) == ("schedule_recall", "once", True)
    recall = await _recall(agent_env)
    assert recall.call_type == "once" and timedelta(minutes=2, seconds=50) <= recall.trigger_at - asked <= timedelta(
        minutes=3, seconds=10)


async def test_a_repeat_said_with_each_is_not_set_once(agent_env) -> None:
    """The 1.5B set "remind me to drink water each hour" once, the next morning (round 11)."""
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    tomorrow = (timezone.now() + timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when=tomorrow,
                                       additional_context_message="Remind the user to drink water."))
    agent_env.fake.script(text="Each hour I'll remind you to drink water.")
    events = await agent_env.run("Could you remind me to drink water each hour?")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["call_type"], args["interval_seconds"], ok) == ("schedule_recall", "recurring", 3600, True)
    recall = await _recall(agent_env)
    assert recall.call_type == "recurring" and recall.interval_seconds == 3600


async def test_a_repeat_said_as_a_rate_is_not_set_once(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="in 1 hour",
                                       additional_context_message="Remind the user to stand up."))
    agent_env.fake.script(text="Twice a day I'll remind you to stand up.")
    events = await agent_env.run("Remind me to stand up twice a day.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["call_type"], args["interval_seconds"], ok) == ("schedule_recall", "recurring", 43200, True)
    recall = await _recall(agent_env)
    assert recall.call_type == "recurring" and recall.interval_seconds == 43200


async def test_a_recurring_reminder_with_a_past_start_starts_one_interval_from_now(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="recurring", when="yesterday-ish",
                                       interval_seconds=300, additional_context_message="Remind the user to drink."))
    agent_env.fake.script(text="Every 2 hours I'll remind you to drink water.")
    asked = timezone.now()
    await agent_env.run("Every 2 hours, remind me to drink water.")
    recall = await _recall(agent_env)
    assert recall.interval_seconds == 7200
    assert timedelta(minutes=119) <= recall.trigger_at - asked <= timedelta(minutes=121)


async def test_a_repeat_first_due_later_than_one_interval_starts_one_interval_from_now(agent_env) -> None:
    """The 1.5B set "every hour" from 07:00 the next morning: the user said no start, and waited all night."""
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    morning = (timezone.now() + timedelta(hours=8)).strftime("%Y-%m-%dT%H:%M:%SZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="recurring", when=morning,
                                       interval_seconds=3600, additional_context_message="Remind the user to drink water."))
    agent_env.fake.script(text="Every hour I'll remind you to drink water.")
    asked = timezone.now()
    events = await agent_env.run("Every hour, tell me to drink water.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["interval_seconds"], ok) == ("schedule_recall", 3600, True) and args["when"] != morning
    recall = await _recall(agent_env)
    assert timedelta(minutes=59) <= recall.trigger_at - asked <= timedelta(minutes=61)


def test_a_late_start_the_user_may_have_said_is_kept() -> None:
    """Only a repeat of less than a day whose request says nothing of when it starts is started anew."""
    from recall_app.tools import ScheduleRecallTool

    tool = ScheduleRecallTool()
    def args(hours: float, interval: int) -> dict:
        when = (timezone.now() + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"call_type": "recurring", "when": when, "interval_seconds": interval,
                "additional_context_message": "Remind the user to water the plants."}
    assert tool.doubt(args(24 * 20, 604800), "Every week starting next month, remind me to water the plants") is None
    assert tool.doubt(args(3, 3600), "Every hour from 3 hours from now, remind me to water the plants") is None
    assert tool.doubt(args(1.05, 3600), "Every hour, remind me to water the plants") is None  # within 10 %
    assert tool.doubt(args(2, 3600), "Every hour, remind me to water the plants").fix["when"] == "in 60 minutes"
    assert tool.doubt(args(8, 3600), "Every hour from now on, remind me to water the plants").fix["when"] == "in 60 minutes"


async def test_a_daily_repeat_first_due_within_the_day_keeps_its_start(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    later = (timezone.now() + timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="recurring", when=later,
                                       interval_seconds=86400, additional_context_message="Remind the user to water the plants."))
    agent_env.fake.script(text="Every day I'll remind you to water the plants.")
    events = await agent_env.run("Remind me every day to water the plants.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["when"], ok) == ("schedule_recall", later, True)


async def test_a_repeat_whose_start_the_parser_cannot_read_starts_one_interval_from_now(agent_env) -> None:
    """The 1.5B wrote when "every 60 minutes" beside the right interval: the call failed and no reminder was set."""
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="recurring", when="every 60 minutes",
                                       interval_seconds=3600, additional_context_message="Remind the user to drink."))
    agent_env.fake.script(text="Every hour I'll remind you to drink some water.")
    asked = timezone.now()
    events = await agent_env.run("Every 60 minutes, remind me to drink some water.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["when"], args["interval_seconds"], ok) == ("schedule_recall", "in 60 minutes", 3600, True)
    recall = await _recall(agent_env)
    assert timedelta(minutes=59) <= recall.trigger_at - asked <= timedelta(minutes=61)


async def test_a_reminder_that_agrees_with_the_request_runs_as_written(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    soon = (timezone.now() + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when=soon,
                                       additional_context_message="Remind the user to stretch."))
    agent_env.fake.script(text="Reminder set: stretch in 3 minutes.")
    events = await agent_env.run("Set a reminder for 3 minutes from now: stretch my legs.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["when"], ok) == ("schedule_recall", soon, True)


def test_the_relative_times_a_request_says() -> None:
    assert said_times("Remind me in 3 minutes to stretch").once == (("in 3 minutes", 180),)
    assert said_times("Set a reminder for ten minutes from now").once == (("ten minutes from now", 600),)
    assert said_times("check the build in 2 hours and 15 minutes").once == (("in 2 hours and 15 minutes", 8100),)
    assert said_times("after an hour, look again").once == (("after an hour", 3600),)
    assert said_times("a reminder three minutes out so I stretch").once == (("three minutes out", 180),)  # round 13
    assert said_times("the score was 3 minutes out of 10").once == ()
    # The time until it is due said as passing (the 1.5B set "once 3 minutes have passed" for 09:00 the next day;
    # fresh15, round 23); not a story in the past.
    for text, said, seconds in (("Alert me to stretch once 3 minutes have passed.", "once 3 minutes have passed", 180),
                                ("when ten minutes are up, ping me", "when ten minutes are up", 600),
                                ("after an hour has gone by, check the oven", "after an hour has gone by", 3600),
                                ("once five minutes pass, remind me to turn the rice", "once five minutes pass", 300),
                                ("when 2 hours have elapsed tell me to stop", "when 2 hours have elapsed", 7200),
                                ("once an hour has passed, check the oven", "once an hour has passed", 3600),
                                # the second review: no comma needed, and "an hour passes" is no rate
                                ("once five minutes pass remind me to turn the rice", "once five minutes pass", 300),
                                ("Once an hour passes, take the bread out", "once an hour passes", 3600),
                                ("Once an hour is over, check the oven", "once an hour is over", 3600)):
        assert said_times(text).once == ((said, seconds),), text
        assert said_times(text).every == () and said_times(text).plain, text
    for past in ("I called him once 3 minutes had passed", "When 2 hours elapsed I went home",
                 "once 3 minutes pass the mark, stop"):
        assert said_times(past).once == (), past
    assert not said_times("once 4 hours have passed since the last one").plain  # counted from something else
    assert said_times("remind me in 5 minutes since I am busy").once == (("in 5 minutes", 300),)
    assert said_times("every 2 hours water the plants").every == (("every 2 hours", 7200),)
    assert said_times("Every hour, drink").every == (("every hour", 3600),)
    assert said_times("remind me to drink water each hour?").every == (("each hour", 3600),)  # round 11
    assert said_times("each 2 hours check the oven").every == (("each 2 hours", 7200),)
    assert said_times("Remind me to drink water every single hour.").every == (("every single hour", 3600),)  # round 17
    assert said_times("every single one of the files").every == ()
    # A one-off said as the length of a thing a recall is (round 11); not one already there.
    assert said_times("Set a 3-minute reminder to stretch.").once == (("3-minute", 180),)
    assert said_times("start a ten minute timer for the tea").once == (("ten minute", 600),)
    for text in ("cancel the 10-minute reminder", "my 5-minute alarm is too loud", "a 3-minute video about reminders",
                 "log an entry for each day you worked", "each hour of the trip was fun",
                 # how often before the length: one already there, or no reminder at all (round 24)
                 "cancel the daily 10-minute reminder", "my daily 5-minute alarm is too loud",
                 "these hourly 2-minute pings are annoying", "a daily 10-minute reminder-free period",
                 "a daily reminder-free period", "I do a daily 10-minute workout",
                 "turn off daily 10-minute stretch alarms", "stop hourly 5-minute walk pings",
                 # a range or a choice of lengths is no one time (the review's "a daily 10 to 15 minute reminder")
                 "a daily 10 to 15 minute reminder", "set a daily 5-minute or 10-minute reminder", "a 5 or 10 minute timer",
                 # how often is the count's, and a limit is no rate
                 "at most twice daily", "no more than twice daily reminders"):
        assert said_times(text).once == () and said_times(text).every == (), text
    # A repeat said as a rate or an adverb of how often: the interval it means.
    for text, seconds in (("Please remind me hourly to stretch.", 3600), ("once an hour, stand up", 3600),
                          ("Can you remind me hourly that I should drink water?", 3600),  # the 1.5B, fresh7 (round 15)
                          ("twice a day take the pills", 43200), ("3 times a day, drink", 28800),
                          ("every other day water the cactus", 172800), ("once every hour, look at the build", 3600),
                          ("check the backups daily.", 86400), ("Weekly, please: clean the filter", 604800),
                          ("seven times a day, drink", 12360),
                          # before a noun, only the things a recall is: a reminder, an alarm, a nudge …
                          ("I want an hourly reminder to drink water, please.", 3600),
                          ("Set a daily reminder: take the pills", 86400), ("set up weekly alarms for the bins", 604800),
                          ("a daily check-in on the build, please", 86400),
                          ("Set an hourly recurring reminder: drink water.", 3600),  # the 0.5B, fresh11 (round 19)
                          # with what it is about between (the 1.5B set it once, fresh15, round 23)
                          ("Can you set an hourly drink-water reminder for me?", 3600),
                          ("a daily pill reminder, please", 86400), ("set a weekly bin day alarm", 604800),
                          # how long what it is about lasts, between: not a one-off of that length (round 24)
                          ("Set a daily 10-minute reminder to stretch.", 86400),
                          ("Give me a daily ten minute stretch reminder", 86400),
                          ("set up hourly 5-minute alarms", 3600), ("a weekly 2 hour review reminder", 604800),
                          # how many times, then the adverb (it was read as the adverb alone: daily; round 24)
                          ("remind me twice daily to take my pills", 43200), ("Set a twice daily reminder", 43200),
                          ("3 times weekly, water the plants", 201600), ("once daily, check the logs", 86400)):
        assert [s for _, s in said_times(text).every] == [seconds], text
    # Not a repeat (nor a wrong one): another interval hyphenated, a noun, a limit, a rate no recall keeps.
    for text in ("Remind me bi-weekly to pay rent", "Take meds twice-daily.", "remind me half-hourly",
                 "Remind me before the daily.", "Remind me to join the daily", "bring the weekly to-do list",
                 "read the daily that came in",
                 "pack an outfit for every day of the trip", "at most once a day, check mail", "5 times a minute",
                 "zero times a day"):
        assert said_times(text).every == (), text
    # "The weekly report", "my hourly rate", "a daily summary" name a kind of thing: no schedule; nor "every second week".
    assert said_times("Remind me this evening to send the weekly report").every == ()
    assert said_times("my hourly rate is 50 euros; remind me in 3 minutes to bill it").every == ()
    assert said_times("Send me a daily summary in 2 hours").every == ()
    assert said_times("I need a daily summary and a reminder in 2 hours").every == ()
    # Words between only for one thing asked for ("an hourly … reminder"): not kinds of alert one has (the review).
    for text in ("Remind me to cancel weekly newsletter alerts", "turn off hourly battery low alerts",
                 "Daily I get reminders, so remind me in 5 minutes to turn them off",
                 "I hate hourly push notifications, remind me in 3 minutes to disable them"):
        assert said_times(text).every == (), text
    # ... nor one already there: "cancel my weekly reminder" is a one-off about a repeat.
    for text in ("the weekly reminders email came; remind me in 5 minutes to read it", "my hourly reminderless rate",
                 "Remind me to cancel my weekly reminder", "in 10 minutes, remind me to read the daily alerts",
                 "stop the hourly pings", "that daily alarm is too loud", "Tom's weekly reminder"):
        assert said_times(text).every == (), text
    assert said_times("in 10 minutes, remind me to read the daily alerts").once == (("in 10 minutes", 600),)
    assert said_times("every second week, water the cactus").every == ()
    # A repeat is not also a one-off, and words that only look like times are none.
    assert said_times("every 60 minutes remind me").once == ()
    assert said_times("What is in the file?") == said_times("") == said_times("in the morning")
    assert said_times("in the morning").once == () and said_times("in the morning").every == ()
    # A time that is only part of one, or relative to something else, does not say it all.
    for qualified in ("in an hour and a half", "in 10 minutes, 5 minutes before the call",
                      "The meeting is in 2 hours; remind me 30 minutes before", "in 3 minutes or so"):
        assert not said_times(qualified).plain, qualified
    assert said_times("Remind me in 3 minutes to stretch my legs.").plain


def test_an_absolute_time_stays_the_models_to_give() -> None:
    """A request with a clock time or a day, or with two times, is not judged: the model combines them."""
    from recall_app.tools import ScheduleRecallTool

    tool = ScheduleRecallTool()
    args = {"call_type": "once", "when": (datetime.now() + timedelta(days=1)).strftime("%Y-%m-%dT09:00:00Z"),
            "additional_context_message": "Call the dentist."}
    assert tool.doubt(args, "Remind me tomorrow at 9 to call the dentist.") is None
    assert tool.doubt(args, "Remind me in 3 minutes and again in 5 minutes.") is None
    assert tool.doubt(args, "On Monday, in 2 hours after lunch, remind me to call the dentist.") is None
    assert tool.doubt(args, "at 14:00 remind me to call the dentist, the meeting is in 10 minutes") is None
    assert tool.doubt(args, "in 2 days in the morning, remind me to call the dentist") is None
    assert tool.doubt(args, "in an hour and a half, remind me to call the dentist") is None
    assert tool.doubt(args, "every day at 9 remind me to call the dentist") is None


async def test_a_reminder_time_already_past_is_set_as_the_user_said_it(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    past = (timezone.now() - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%MZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when=past,
                                       additional_context_message="Remind the user to stretch."))
    agent_env.fake.script(text="I'll remind you to stretch in 3 minutes.")
    events = await agent_env.run("Remind me in 3 minutes to stretch my legs.")
    assert [(tool, args["when"], ok) for tool, args, ok in calls(events)] == [("schedule_recall", "in 3 minutes", True)]


async def test_an_answer_that_repeats_the_note_about_a_guess_is_asked_for_again(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="plumber_note.txt"))
    agent_env.fake.script(text="The user named no such file.")  # the 0.5B's answer: the note's own words
    agent_env.fake.script(text='{"tool": "none"}')  # decided again under the grammar (round 15): no tool
    agent_env.fake.script(text="A spider has eight legs.")
    events = await agent_env.run("How many legs does a spider have?")
    assert "named no such file" not in shown(events)  # held back, never shown
    assert events[-1]["content"] == "A spider has eight legs." == shown(events)
    told = agent_env.requests()[2]["messages"][-1]["content"]
    assert "before any tool did what the user asked" in told and not started(events)


async def test_no_answer_after_a_doubt_gets_the_tool_the_request_needed(bundled) -> None:
    # The 0.5B, dev half (round 15): a note taken as a file it guessed; told the file is not there, it repeated
    # the request, then Navi's note, and the user read "I could not produce an answer". Decided again under the
    # grammar (the guessed tool left out: the folder is empty), it takes the note.
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["filesystem", "user_notes", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="invoice 8962.txt"))
    agent_env.fake.script(text="Make a memo for me: phone the plumber about invoice 8962.")
    constrained_call(agent_env.fake, "user_notes", action="add", text="phone the plumber about invoice 8962")
    agent_env.fake.script(text="Noted: phone the plumber about invoice 8962.")
    events = await agent_env.run("Make a memo for me: phone the plumber about invoice 8962.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert events[-1]["content"] == "Noted: phone the plumber about invoice 8962." == shown(events)
    offered = json.dumps(agent_env.requests()[2].get("response_format") or agent_env.requests()[2].get("format"))
    assert '"none"' in offered and '"user_notes"' in offered and '"filesystem"' not in offered


async def test_an_answer_about_the_path_only_the_note_named_is_asked_for_again(agent_env) -> None:
    """The 1.5B reworded the note into its answer; the path it had made up is nothing the user asked about."""
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="/home/user/capitals/france"))
    agent_env.fake.script(text="The user's request is not valid because the path /home/user/capitals/france is "
                               "outside the allowed directories.")
    agent_env.fake.script(text='{"tool": "none"}')
    agent_env.fake.script(text="The capital of France is Paris.")
    events = await agent_env.run("What is the capital of France?")
    assert "/home/user" not in shown(events)
    assert events[-1]["content"] == "The capital of France is Paris." == shown(events)


def test_an_answer_may_name_the_path_the_user_gave_or_the_allowed_folders() -> None:
    from agent.aids import GUESSED, NOT_RUN, poor_answer
    from agent.llm.base import ChatMessage

    note = ChatMessage(role="user", metadata={"synthetic": True}, content=(
        f"{NOT_RUN} '/home/user/reports' resolves to /home/user/reports, which is outside the allowed directories "
        f"(/srv/navi/files). The user named no such path. {GUESSED}"))
    answer = "/home/user/reports is outside the folders I may read."
    assert poor_answer(answer, [note], small=True, request="What is the capital of France?") is not None
    assert poor_answer(answer, [note], small=True, request="What is in /home/user/reports.") is None
    assert poor_answer("I can only read files in /srv/navi/files.", [note], small=True, request="Paris?") is None


async def test_a_second_echo_of_the_note_is_replaced_by_an_honest_line(agent_env) -> None:
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="plumber_note.txt"))
    agent_env.fake.script(text="The user named no such file.")
    agent_env.fake.script(text='{"tool": "none"}')
    agent_env.fake.script(text="The user named no such file.")  # after none: asked once more in words
    agent_env.fake.script(text="The user named no such file.")
    events = await agent_env.run("How many legs does a spider have?")
    assert "named no such file" not in shown(events) and len(agent_env.requests()) == 5
    assert events[-1]["type"] == "stream_end" and "could not produce an answer" in events[-1]["content"]


def test_which_paths_a_request_names() -> None:
    from tools_app.builtins.filesystem import _named

    for raw, request in (("report.txt", "Who wrote docs/report.txt?"), ("./report.txt", "Who wrote report.txt?"),
                         ("docs/report.txt", "Open ./docs/report.txt"), ("todo.md", "what's in ~/todo.md"),
                         ("/etc/hosts", "read /etc/hosts please"), ("Report.TXT", "who wrote report.txt"),
                         ("/home/user/reports", "What is in /home/user/reports."), ("/srv/x", "list /srv/x/")):
        assert _named(raw, request), (raw, request)
    for raw, request in (("planets", "tell me about the planets"), ("/home/user/planets", "the planets?"),
                         ("notes.txt", "what do my notes say?"), ("report.txt", "who wrote myreport.txt?"),
                         ("/home/user", "read /home/user/x.txt"), ("/", "this and/or that")):
        assert not _named(raw, request), (raw, request)


async def test_a_look_whether_a_file_nobody_named_exists_is_answered_by_the_note(agent_env) -> None:
    """The 1.5B checked /home/user/temperature.txt with "stat" for a question of general knowledge: the
    note says what the check would have said (not there), without a card."""
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="exists", path="notes.txt"))
    agent_env.fake.script(text="You have no notes file yet.")
    events = await agent_env.run("Do I have any notes?")
    assert not started(events) and events[-1]["content"] == "You have no notes file yet."
    assert "notes.txt does not exist" in agent_env.requests()[1]["messages"][-1]["content"]


async def test_a_guess_told_a_listing_may_answer_with_it(agent_env, settings) -> None:
    """The note's news (the folder's files) is the model's to give; only its fixed sentences are Navi's."""
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / name).write_text("x\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="notes.txt"))
    agent_env.fake.script(text="The folder has: a.txt, b.txt, c.txt.")
    events = await agent_env.run("What do my notes say?")
    assert events[-1]["content"] == "The folder has: a.txt, b.txt, c.txt." and len(agent_env.requests()) == 2


async def test_the_users_words_while_the_turn_ran_count_too(agent_env) -> None:
    from recall_app.tools import ScheduleRecallTool

    args = {"call_type": "once", "when": "in 10 minutes", "additional_context_message": "Stretch."}
    # Two times said (the request, then "make it 10 minutes"): the model combines them, nothing is fixed.
    assert ScheduleRecallTool().doubt(args, "Remind me in 5 minutes to stretch.\nActually, make it in 10 minutes.") is None


class _Kettle:
    """A tool that doubts a call the request contradicts without knowing the fix: written again, told why."""

    name = "kettle"
    description = "Boil water to a temperature in Celsius."
    parameters = {"type": "object", "properties": {"celsius": {"type": "integer"}}, "required": ["celsius"]}

    def doubt(self, params, request):
        from agent.ports import Doubt

        if "tea" in request and params.get("celsius", 0) > 100:
            return Doubt(reason="water does not get hotter than 100 °C in a kettle")
        return None

    async def execute(self, params):
        from tools_app.base import ToolResult

        return ToolResult(success=True, output=f"Boiled to {params['celsius']} °C.")


async def test_a_doubt_without_a_fix_gets_the_call_written_again_told_why(agent_env) -> None:
    from tools_app.base import Tool
    from tools_app.registry import get_registry

    kettle = type("Kettle", (_Kettle, Tool), {})()
    get_registry().register_builtin(kettle)
    await constrained(agent_env, enabled_tools=["kettle", "todo"])
    agent_env.fake.script(text=as_text("kettle", celsius=250))
    constrained_call(agent_env.fake, "kettle", celsius=100)
    agent_env.fake.script(text="Boiled to 100 °C for your tea.")
    events = await agent_env.run("Boil water for my tea.")
    assert [(tool, args, ok) for tool, args, ok in calls(events)] == [("kettle", {"celsius": 100}, True)]
    regenerated = agent_env.requests()[1]["messages"]
    assert agent_env.fake.schema_of(agent_env.fake.chat_requests[1]) is not None
    assert '"celsius": 250' in regenerated[-2]["content"] and "hotter than 100" in regenerated[-1]["content"]


async def test_optional_numbers_nobody_said_are_left_to_their_defaults(agent_env, settings) -> None:
    """The 0.5B wrote every parameter it read: "limit": 1 on a read returned the file's first line only."""
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text("Quarterly report\nAuthor: Ana Beltran\n")
    await constrained(agent_env, enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt", offset=0, limit=1,
                                       max_bytes=1000000))
    agent_env.fake.script(text="Ana Beltran wrote it.")
    events = await agent_env.run("Who wrote report.txt?")
    [(tool, args, ok)] = calls(events)
    assert args == {"action": "read", "path": "report.txt"} and ok
    assert "Author: Ana Beltran" in next(e for e in events if e["type"] == "tool_call")["result"]
    # A number the user said stays.
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt", limit=1))
    agent_env.fake.script(text="It says: Quarterly report.")
    events = await agent_env.run("Show me the first 1 line of report.txt")
    assert calls(events)[0][1] == {"action": "read", "path": "report.txt", "limit": 1}


async def test_an_optional_choice_nobody_said_is_left_to_its_default(agent_env) -> None:
    """The 0.5B gave its helper the profile "secretary", whose model was not there: the helper failed."""
    await constrained(agent_env, enabled_tools=["spawn_agent", "todo"])
    agent_env.fake.script(text=as_text("spawn_agent", task="Say which day it is.", profile_id="secretary"))
    agent_env.fake.script(text="It is Friday.")  # the helper, on this chat's own profile
    agent_env.fake.script(text="Your helper says it is Friday.")
    events = await agent_env.run("Have a helper tell me which day it is.")
    spawned = [(args, ok) for tool, args, ok in calls(events) if tool == "spawn_agent"]
    assert spawned == [({"task": "Say which day it is."}, True)]
    assert events[-1]["content"] == "Your helper says it is Friday."


async def test_a_helper_task_of_one_word_is_written_again_in_words(agent_env) -> None:
    """The 1.5B gave its helper the task "get_magic_number_from_facts.txt": the helper read a file of that name,
    found none, and the user heard about a missing file (round 21)."""
    await constrained(agent_env, enabled_tools=["spawn_agent", "todo"])
    agent_env.fake.script(text=as_text("spawn_agent", task="get_magic_number_from_facts.txt"))
    constrained_call(agent_env.fake, "spawn_agent", task="Read facts.txt and say what the magic number is.")
    agent_env.fake.script(text="The magic number is 6651.")  # the helper
    agent_env.fake.script(text="Your helper found the magic number: 6651.")
    events = await agent_env.run("Use a subagent to get the magic number out of facts.txt.")
    spawned = [args["task"] for tool, args, ok in calls(events) if tool == "spawn_agent" and ok]
    assert spawned == ["Read facts.txt and say what the magic number is."]
    told = agent_env.fake.chat_requests[1].json["messages"][-1]["content"]
    assert "'get_magic_number_from_facts.txt' is a single word, not an instruction" in told
    assert events[-1]["content"] == "Your helper found the magic number: 6651."


def test_a_helper_task_in_a_script_without_spaces_is_an_instruction() -> None:
    from tools_app.builtins_meta.agents import SpawnAgentTool

    tool = SpawnAgentTool()
    assert tool.doubt({"task": "读取facts.txt并告诉我魔术数字"}, "让助手读取facts.txt") is None
    assert tool.doubt({"task": "Read facts.txt and report the magic number."}, "") is None
    assert tool.doubt({"task": "get_magic_number_from_facts.txt"}, "") is not None


async def test_a_number_a_tool_result_gave_is_kept(agent_env, settings) -> None:
    """"read again with offset=2 to continue": the offset came from the tool, not from the user."""
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "big.txt").write_text("one\ntwo\nthree\nfour\n")
    await constrained(agent_env, enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="big.txt", limit=2))
    agent_env.fake.script(text="It starts: one, two.")
    events = await agent_env.run("Read big.txt to me, 2 lines at a time.")
    assert "offset=2" in next(e for e in events if e["type"] == "tool_call")["result"]
    agent_env.fake.script(text=as_text("filesystem", action="read", path="big.txt", offset=2))
    agent_env.fake.script(text="Then: three, four.")
    events = await agent_env.run("Go on.")
    [(_tool, args, ok)] = calls(events)
    assert args == {"action": "read", "path": "big.txt", "offset": 2} and ok
    assert "three" in next(e for e in events if e["type"] == "tool_call")["result"]


async def test_a_tool_whose_look_check_breaks_still_runs_and_the_turn_ends(agent_env) -> None:
    """Tool.looks is the tool's own code (a user tool's too): when it raises, the call counts as more than a
    look, the tool runs, and the user gets the answer."""
    from tools_app.base import Tool
    from tools_app.registry import get_registry

    def broken(self, params):
        raise RuntimeError("looks is broken")

    kettle = type("BrokenKettle", (_Kettle, Tool), {"looks": broken})()
    get_registry().register_builtin(kettle)
    await constrained(agent_env, enabled_tools=["kettle", "todo"])
    agent_env.fake.script(text=as_text("kettle", celsius=80))
    agent_env.fake.script(text="Boiled to 80 °C.")
    events = await agent_env.run("Boil water to 80 degrees.")
    assert calls(events) == [("kettle", {"celsius": 80}, True)]
    assert events[-1]["type"] == "stream_end" and events[-1]["content"] == "Boiled to 80 °C."


def test_a_reminder_whose_instruction_says_nothing_of_the_request_is_doubted() -> None:
    """The 0.5B's instruction was its own chatter ("I'm going to set a reminder for you tomorrow at 20:54Z."
    for "Give me a nudge to stretch my legs 3 minutes from now"): when it fired, the recall would have done
    something nobody asked for. No fix: only the model can say what the reminder is for."""
    from recall_app.tools import ScheduleRecallTool

    tool = ScheduleRecallTool()
    soon = (timezone.now() + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    request = "Give me a nudge to stretch my legs 3 minutes from now."
    chatter = {"call_type": "once", "when": soon,
               "additional_context_message": "I'm going to set a reminder for you tomorrow at 20:54Z."}
    doubt = tool.doubt(chatter, request)
    assert doubt is not None and doubt.fix is None and not doubt.answer
    assert "says nothing of what the user asked for" in doubt.reason and "I'm going to set" in doubt.reason
    # What the user asked for, in any inflection, is enough; so is an instruction when the request says only when.
    for instruction in ("Tell the user to stretch.", "Stretching time: get up!", "Remind the user: legs."):
        assert tool.doubt({**chatter, "additional_context_message": instruction}, request) is None, instruction
    # A request that says only when (or what in one word: "call Mom" may be "Phone mom") is not judged.
    for only_when in ("Remind me in 3 minutes.", "Set a reminder for 3 minutes from now, please.",
                      "Okay, in 3 minutes then, thanks", "Navi, remind me in 30 seconds", "remind me in 2 days",
                      "Remind me next month", "In 10 minutes remind me to call Mom"):
        doubt = tool.doubt(chatter, only_when)
        assert doubt is None or doubt.fix is not None, only_when  # at most the time, which has its fix
    # A wrong time is fixed first, whatever the instruction says: the fix runs with no model call.
    late = tool.doubt({**chatter, "when": "2030-01-01T17:00:00Z"}, request)
    assert late is not None and late.fix == {"call_type": "once", "when": "3 minutes from now", "interval_seconds": None}
    # Words in any alphabet are words.
    assert tool.doubt({**chatter, "additional_context_message": "Beine dehnen"},
                      "Erinnere mich in 3 Minuten daran, die Beine zu dehnen.") is None


def _asked(words: str) -> str:
    return f'When due: remind the user of what they asked, "{words}" (this recall is that reminder; set no other).'


def test_a_reminder_with_no_instruction_of_its_own_gets_the_users_words() -> None:
    """No word of what ("", "Nudge!": the 1.5B left the instruction empty, round 26), or six words in a row of
    schedule_recall's own description (the 0.5B copied it, rounds 25 and 26): when it fired, the recall would do
    nothing anybody asked. The fix is the user's words without their time, with the time's own fix if any."""
    from recall_app.tools import ScheduleRecallTool

    tool = ScheduleRecallTool()
    request = "In 10 minutes check whether the oven is off."
    call = {"call_type": "once", "when": "in 10 minutes", "additional_context_message": ScheduleRecallTool.description}
    for instruction in (ScheduleRecallTool.description, "", "Nudge!",
                        ScheduleRecallTool.parameters["properties"]["additional_context_message"]["description"]):
        doubt = tool.doubt({**call, "additional_context_message": instruction}, request)
        assert doubt is not None and not doubt.answer, instruction
        assert doubt.fix == {"additional_context_message": _asked("check whether the oven is off")}, instruction
    # Six words in a row of the description that the user said themselves are theirs.
    own = "Read your instruction and continue with your tools"
    assert tool.doubt({**call, "additional_context_message": own}, f"In 10 minutes {own.lower()}.") is None
    assert tool.doubt({**call, "additional_context_message": "Check whether the oven is off."}, request) is None
    # A repeat's words go with the time, and a wrong time is fixed in the same fix.
    every = tool.doubt({**call, "additional_context_message": ""}, "Every sixty minutes, nudge me to drink some water.")
    assert every is not None and every.fix == {"call_type": "recurring", "interval_seconds": 3600,
                                               "additional_context_message": _asked("nudge me to drink some water")}


def test_the_users_words_are_no_instruction_where_they_still_say_a_time() -> None:
    # Words a run could read as a time to schedule again (a clock time, a day, a time in another language, two
    # times), or words that say no what: the model is left to write it (an empty instruction is refused on saving).
    from recall_app.tools import ScheduleRecallTool

    tool = ScheduleRecallTool()
    call = {"call_type": "once", "when": "in 10 minutes", "additional_context_message": "Nudge!"}
    for request in ("Remind me tomorrow at 9am to call the plumber.", "Erinnere mich in 10 Minuten, die Beine zu dehnen.",
                    "Remind me in 5 minutes and again in 10 minutes to check the oven.", "Okay, in 10 minutes then.",
                    "Ping me in 10 minutes, before the meeting with Sarah starts."):
        doubt = tool.doubt(call, request)
        assert doubt is None or "additional_context_message" not in (doubt.fix or {}), request
    # A copy of Navi's words the user's cannot replace (one word of what) is written again by the model.
    copied = {**call, "additional_context_message": ScheduleRecallTool.description}
    for request in ("Remind me to stretch in 10 minutes.", "Remind me tomorrow at 9am to call the plumber."):
        doubt = tool.doubt(copied, request)
        assert doubt is not None and doubt.fix is None and "write in additional_context_message" in doubt.reason, request


def test_in_a_recalls_own_run_its_prompt_is_no_words_of_the_user() -> None:
    # The request of a recall's run is the recall's prompt: kept as an instruction it would nest in every next one.
    from agent.ctx import current_guard
    from agent.gate import RunRules, TurnGuard
    from recall_app.tools import ScheduleRecallTool

    call = {"call_type": "once", "when": "in 10 minutes", "additional_context_message": ""}
    request = "In 10 minutes check whether the oven is off."
    token = current_guard.set(TurnGuard(rules=RunRules()))
    try:
        doubt = ScheduleRecallTool().doubt(call, request)
        assert doubt is not None and doubt.fix is None  # the model is asked to write it
    finally:
        current_guard.reset(token)
    live = current_guard.set(TurnGuard())
    try:
        doubt = ScheduleRecallTool().doubt(call, request)
        assert doubt is not None and doubt.fix == {"additional_context_message": _asked("check whether the oven is off")}
    finally:
        current_guard.reset(live)


async def test_a_reminder_with_an_empty_instruction_is_set_with_the_users_words(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    soon = (timezone.now() + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when=soon, additional_context_message=""))
    agent_env.fake.script(text="In 3 minutes I'll remind you to stretch your legs.")
    events = await agent_env.run("Give me a nudge to stretch my legs 3 minutes from now.")
    asked = _asked("Give me a nudge to stretch my legs")
    assert [(tool, args["additional_context_message"], ok) for tool, args, ok in calls(events)] == [
        ("schedule_recall", asked, True)]
    assert (await _recall(agent_env)).additional_context_message == asked
    assert len(agent_env.requests()) == 2  # the call and the answer: no model call to write it again
    assert shown(events) == "In 3 minutes I'll remind you to stretch your legs."


async def test_a_reminder_at_a_wrong_time_without_an_instruction_is_set_as_the_user_said_it(agent_env) -> None:
    """The time and the instruction are fixed in one go: never a time the request contradicts, never a recall
    that does nothing when it fires."""
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="2030-01-01T17:00:00Z",
                                       additional_context_message="Nudge!"))
    agent_env.fake.script(text="Reminder set for 3 minutes from now.")
    asked = timezone.now()
    events = await agent_env.run("Give me a nudge to stretch my legs 3 minutes from now.")
    assert [agent_env.fake.schema_of(r) is not None for r in agent_env.fake.chat_requests] == [False, False]
    assert [(tool, args["when"], ok) for tool, args, ok in calls(events)] == [("schedule_recall", "3 minutes from now", True)]
    recall = await _recall(agent_env)
    assert timedelta(minutes=2) <= recall.trigger_at - asked <= timedelta(minutes=4)
    assert recall.additional_context_message == _asked("Give me a nudge to stretch my legs")
    assert events[-1]["content"] == "Reminder set for 3 minutes from now."


async def test_a_reminder_with_an_unrelated_instruction_is_written_again(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    soon = (timezone.now() + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when=soon,
                                       additional_context_message="I'm going to set a reminder for you."))
    constrained_call(agent_env.fake, "schedule_recall", call_type="once", when=soon,
                     additional_context_message="Tell the user to stretch their legs.")
    agent_env.fake.script(text="In 3 minutes I'll remind you to stretch your legs.")
    events = await agent_env.run("Give me a nudge to stretch my legs 3 minutes from now.")
    [(tool, args, ok)] = calls(events)
    assert (tool, args["additional_context_message"], ok) == ("schedule_recall", "Tell the user to stretch their legs.", True)
    recall = await _recall(agent_env)
    assert recall.additional_context_message == "Tell the user to stretch their legs."
    told = agent_env.requests()[1]["messages"]
    assert "I'm going to set a reminder" in told[-2]["content"] and "says nothing of what the user asked" in told[-1]["content"]
    assert shown(events) == "In 3 minutes I'll remind you to stretch your legs."


async def test_a_reminder_whose_time_was_fixed_is_still_doubted_for_its_instruction(agent_env) -> None:
    """The 0.5B set "every hour" with an instruction from the memory block, "Atlas is called atlas."; its time was
    fixed as the user said it, and the fixed call ran as it was (round 21)."""
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="in 1 hour",
                                       additional_context_message="Atlas is called atlas."))
    constrained_call(agent_env.fake, "schedule_recall", call_type="recurring", when="in 1 hour", interval_seconds=3600,
                     additional_context_message="Drink some water.")
    agent_env.fake.script(text="I'll remind you to drink water every hour.")
    events = await agent_env.run("Set up a reminder to drink water that repeats every hour.")
    assert [(tool, args["additional_context_message"], ok) for tool, args, ok in calls(events)] == [
        ("schedule_recall", "Drink some water.", True)]
    recall = await _recall(agent_env)
    assert (recall.call_type, recall.interval_seconds) == ("recurring", 3600)
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert "'Atlas is called atlas.' says nothing of what the user asked for" in told
    assert events[-1]["content"] == "I'll remind you to drink water every hour."


async def test_the_clock_called_for_a_greeting_is_not_run_and_the_model_answers(bundled) -> None:
    agent_env = bundled
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("get_current_datetime"))
    agent_env.fake.script(text="Hello! Nice to see you too.")
    events = await agent_env.run("Hey! Glad you're here.")
    assert not started(events) and not calls(events)
    assert events[-1]["content"] == "Hello! Nice to see you too." == shown(events)
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "says nothing about a date or a time" in told


@pytest.mark.parametrize("request_text", [
    "Evening, Navi!",  # a part of the day greets; it does not ask the time
    "Good morning!",
    "Write this in my notes: invoice 3811, the plumber needs a call.",  # a number, no year
])
async def test_the_clock_called_without_a_word_of_time_is_doubted(bundled, request_text) -> None:
    agent_env = bundled
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("get_current_datetime", timezone="UTC"))
    agent_env.fake.script(text="Hello!")
    events = await agent_env.run(request_text)
    assert not started(events) and not calls(events)
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "says nothing about a date or a time" in told


async def test_the_clock_called_again_after_its_doubt_runs(bundled) -> None:
    # The clock's words of time are English: a question in other words, asked again, still gets the clock.
    agent_env = bundled
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("get_current_datetime"))
    agent_env.fake.script(text=as_text("get_current_datetime", timezone="UTC"))
    constrained_call(agent_env.fake, "get_current_datetime", timezone="Europe/Berlin")  # confirmed (round 14)
    agent_env.fake.script(text="Es ist 10:00 Uhr.")
    events = await agent_env.run("Wie spät ist es?")
    assert [(tool, args, ok) for tool, args, ok in calls(events)] == [
        ("get_current_datetime", {"timezone": "Europe/Berlin"}, True)]
    assert events[-1]["content"] == "Es ist 10:00 Uhr."
    confirm = agent_env.requests()[2]
    offered = [b["properties"]["tool"]["const"] for b in confirm["format"]["anyOf"]]
    assert offered == ["none", "get_current_datetime"]
    assert any("says nothing about a date or a time" in m["content"] and "choose none" in m["content"]
               for m in confirm["messages"])


async def test_the_clock_called_again_for_a_greeting_may_be_given_up_for_an_answer(bundled) -> None:
    # The 1.5B called the clock for "Hi!", told, called it again, and answered with the time (round 14).
    agent_env = bundled
    await constrained(agent_env)
    for _ in range(2):
        agent_env.fake.script(text=as_text("get_current_datetime", timezone="UTC"))
    agent_env.fake.script(text='{"tool": "none"}')
    agent_env.fake.script(text="Hi! How can I help you today?")
    events = await agent_env.run("Hi!")
    assert not calls(events) and not started(events)
    assert events[-1]["content"] == "Hi! How can I help you today?" == shown(events)


@pytest.mark.parametrize(("request_text", "args"), [
    ("What's the date?", {}),
    ("Is it the weekend yet?", {}),
    ("How long is it until 2030?", {}),
    ("Is 2028 a leap year?", {}),
    ("And in Tokyo?", {"timezone": "Asia/Tokyo"}),  # a follow-up that names the zone's place
])
async def test_a_question_about_time_or_a_named_place_runs_the_clock_at_once(bundled, request_text, args) -> None:
    agent_env = bundled
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("get_current_datetime", **args))
    agent_env.fake.script(text="Here you are.")
    events = await agent_env.run(request_text)
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("get_current_datetime", True)]
    told = [m.get("content") or "" for r in agent_env.requests() for m in r["messages"]]
    assert not any("says nothing about a date or a time" in m for m in told)


async def test_a_reminder_at_a_time_nobody_said_is_not_set_and_the_model_does_what_was_asked(bundled) -> None:
    # The 1.5B set a reminder for 14:30 when asked to write a note down (round 12).
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["schedule_recall", "user_notes", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="2026-11-28T14:30:00+01:00",
                                       additional_context_message="Call the plumber about invoice 2567."))
    agent_env.fake.script(text=as_text("user_notes", action="add", text="Call the plumber about invoice 2567."))
    agent_env.fake.script(text="Noted: call the plumber about invoice 2567.")
    events = await agent_env.run("Can you write down for me that the plumber needs calling about invoice 2567?")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert await _recall(agent_env) is None
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "say no time for a recall" in told and "ask them when" in told
    assert events[-1]["content"] == "Noted: call the plumber about invoice 2567."


async def test_a_note_set_as_an_immediate_recall_is_not_scheduled_and_the_note_is_added(bundled) -> None:
    # The 0.5B set "Put this in a note: I need to ring the plumber about invoice 8907." as a recall to run
    # at once (fresh12, round 20): no note was kept.
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["schedule_recall", "user_notes", "todo"])
    agent_env.fake.script(text=as_text("schedule_recall", call_type="immediate",
                                       additional_context_message="I need to ring the plumber about invoice 8907."))
    agent_env.fake.script(text=as_text("user_notes", action="add", text="Ring the plumber about invoice 8907."))
    agent_env.fake.script(text="Noted: ring the plumber about invoice 8907.")
    events = await agent_env.run("Put this in a note: I need to ring the plumber about invoice 8907.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert await _recall(agent_env) is None
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "no recall was scheduled" in told and "in the background" in told


async def test_background_work_confirmed_after_the_doubt_runs_now(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    args = {"call_type": "immediate", "additional_context_message": "Summarise the build logs in logs/ for the user."}
    agent_env.fake.script(text=as_text("schedule_recall", **args))
    agent_env.fake.script(text=as_text("schedule_recall", **args))
    constrained_call(agent_env.fake, "schedule_recall", **args)  # confirmed under the grammar
    agent_env.fake.script(text="I'll go through the build logs in the background and tell you what I find.")
    events = await agent_env.run("Go through the build logs in the background and sum them up for me.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("schedule_recall", True)]
    recall = await _recall(agent_env)
    assert recall is not None and recall.call_type == "immediate"


async def test_a_confirmed_call_may_not_copy_the_instruction_that_asked_for_it(agent_env) -> None:
    # Told to confirm its recall, the 0.5B wrote that instruction into the recall's own (fresh12, round 20).
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    for _ in range(2):
        agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="in 2 hours",
                                           additional_context_message="Remind the user to call mom."))
    copied = ("Call schedule_recall only if the user's words need it; else choose none and answer in words.")
    constrained_call(agent_env.fake, "schedule_recall", call_type="once", when="in 2 hours",
                     additional_context_message=copied)
    constrained_call(agent_env.fake, "schedule_recall", call_type="once", when="in 2 hours",
                     additional_context_message="Remind the user to call mom.")
    agent_env.fake.script(text="I'll remind you to call mom in 2 hours.")
    events = await agent_env.run("to call mom")
    assert [(tool, args["additional_context_message"], ok) for tool, args, ok in calls(events)] == [
        ("schedule_recall", "Remind the user to call mom.", True)]
    repair = agent_env.requests()[-2]["messages"][-1]["content"]
    assert "repeats a tool's description or an instruction you were given" in repair


async def test_an_argument_may_not_copy_the_instruction_of_a_constrained_call(agent_env) -> None:
    # The 0.5B handed its helper "Write the one tool call the user's last message needs now, as {" (fresh14,
    # round 22): the instruction a constrained call's request ends with, which it had just read.
    await constrained(agent_env, enabled_tools=["memory_save", "todo"])
    agent_env.fake.script(text=as_text("memory_save", category="preferences", key="server_name",
                                       value="Write the one tool call the user's last message needs now, as {"))
    constrained_call(agent_env.fake, "memory_save", category="preferences", key="server_name", value="boreas")
    agent_env.fake.script(text="I'll remember that your server is called boreas.")
    events = await agent_env.run("From now on, write down in your memory that my server is called boreas.")
    assert [(tool, args.get("value"), ok) for tool, args, ok in calls(events)] == [("memory_save", "boreas", True)]
    assert await _fact_values() == ["boreas"]
    assert events[-1]["content"] == "I'll remember that your server is called boreas."


async def test_a_reminder_without_a_time_made_again_after_the_doubt_is_set(agent_env) -> None:
    # "to call mom" may answer "What should I remind you of at 5pm?": the time was said before this message.
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    for _ in range(2):
        agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="in 2 hours",
                                           additional_context_message="Remind the user to call mom."))
    constrained_call(agent_env.fake, "schedule_recall", call_type="once", when="in 2 hours",
                     additional_context_message="Remind the user to call mom.")  # confirmed (round 14)
    agent_env.fake.script(text="I'll remind you to call mom in 2 hours.")
    events = await agent_env.run("to call mom")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("schedule_recall", True)]
    assert (await _recall(agent_env)) is not None


def test_which_requests_say_a_time() -> None:
    from recall_app.timeparse import says_when

    assert all(says_when(t) for t in ["Remind me at 5 to call mom", "call mom at 5pm", "at 17:30", "on the 3rd",
                                      "in 10min", "later today", "in a bit", "next week", "hourly",
                                      "when I get home"])
    assert not any(says_when(t) for t in ["Remind me to call mom", "Note that invoice 2567 needs paying",
                                          "to call mom", ""])


async def _fact_values() -> list[str]:
    from memory_app.models import MemoryFact

    return await sync_to_async(lambda: list(MemoryFact.objects.values_list("value", flat=True)))()


async def test_a_fact_the_user_never_said_is_not_saved_and_the_model_answers(agent_env) -> None:
    # The 0.5B saved the time from its instruction as a fact, for "What is my server called?" (round 12).
    await constrained(agent_env, enabled_tools=["memory_save", "todo"])
    agent_env.fake.script(text=as_text("memory_save", category="preferences", key="time_now",
                                       value="2026-11-28T05:42Z (Saturday, UTC)"))
    agent_env.fake.script(text="I don't know your server's name yet.")
    events = await agent_env.run("What is my server called?")
    assert not started(events) and not calls(events)
    assert await _fact_values() == []
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "is nothing the user's words" in told
    assert events[-1]["content"] == "I don't know your server's name yet."


async def test_a_fact_that_shares_only_little_words_with_the_request_is_not_saved(agent_env) -> None:
    # Asked for a helper to read facts.txt, the 0.5B saved a fact copied from its memory of another chat; "the"
    # and "for" were words of both, so the fact was saved (round 19).
    await constrained(agent_env, enabled_tools=["memory_save", "todo"])
    agent_env.fake.script(text=as_text("memory_save", category="preferences", key="server_admin",
                                       value="boreas: Remember the name of my server as boreas for later chats."))
    agent_env.fake.script(text="I can't start a helper here.")
    events = await agent_env.run("Have a subagent look up the magic number in facts.txt for me.")
    assert not started(events) and not calls(events)
    assert await _fact_values() == []
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "is nothing the user's words" in told


async def test_a_fact_of_only_little_words_is_saved_at_once(agent_env) -> None:
    # "she/her" has no word the doubt compares (three-letter function words are left out since round 19): nothing
    # to judge, as for a note or a todo list.
    await constrained(agent_env, enabled_tools=["memory_save"])
    agent_env.fake.script(text=as_text("memory_save", category="personal", key="pronouns", value="she/her"))
    agent_env.fake.script(text="I'll remember that your pronouns are she/her.")
    events = await agent_env.run("Remember my pronouns are she/her.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("memory_save", True)]
    assert await _fact_values() == ["she/her"]
    assert not any("Not run:" in str(m["content"]) for m in agent_env.requests()[1]["messages"])


async def test_a_fact_from_an_earlier_message_is_saved_when_the_call_is_made_again(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["memory_save", "todo"])
    for _ in range(2):
        agent_env.fake.script(text=as_text("memory_save", category="environment", key="server_name", value="boreas"))
    constrained_call(agent_env.fake, "memory_save", category="environment", key="server_name",
                     value="boreas")  # confirmed (round 14)
    agent_env.fake.script(text="Saved: your server is called boreas.")
    events = await agent_env.run("Remember that.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("memory_save", True)]
    assert await _fact_values() == ["boreas"]


async def test_a_todo_list_of_steps_the_user_never_said_is_not_set_and_the_model_answers(agent_env) -> None:
    # The 0.5B set "Create a new note. Add some details about the note." for a fact to keep (round 15).
    await constrained(agent_env, enabled_tools=["memory_save", "todo"])
    agent_env.fake.script(text=as_text("todo", action="set", steps=["Create a new note.", "Add some details."]))
    constrained_call(agent_env.fake, "memory_save", category="environment", key="server_name", value="atlas")
    agent_env.fake.script(text="I'll remember that your server is named atlas.")
    events = await agent_env.run("Don't forget that my server is named atlas.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("memory_save", True)]
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "are nothing the user's words" in told and "Create a new note" in told
    assert not _todo_steps(agent_env) and await _fact_values() == ["atlas"]
    assert events[-1]["content"] == "I'll remember that your server is named atlas."


async def test_a_plan_of_the_models_own_making_is_set_when_it_calls_again(agent_env) -> None:
    # "Plan my week" takes none of its steps' words: told once, the model sets the list again and confirms it.
    await constrained(agent_env, enabled_tools=["todo"])
    plan = ["Monday: gym", "Tuesday: groceries"]
    for _ in range(2):
        agent_env.fake.script(text=as_text("todo", action="set", steps=plan))
    constrained_call(agent_env.fake, "todo", action="set", steps=plan)
    agent_env.fake.script(text="Your week: gym on Monday, groceries on Tuesday.")
    events = await agent_env.run("Plan my week")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("todo", True)]
    assert [s["title"] for s in _todo_steps(agent_env)] == plan


async def test_todo_steps_in_the_users_words_are_set_at_once(agent_env) -> None:
    await constrained(agent_env, enabled_tools=["todo"])
    agent_env.fake.script(text=as_text("todo", action="set", steps=["Buy stamps", "Post the letter"]))
    agent_env.fake.script(text="Your list: buy stamps, then post the letter.")
    events = await agent_env.run("To-do for today: buy stamps, post the letter.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("todo", True)]
    assert len(agent_env.requests()) == 2


def _note_texts(settings) -> list[str]:
    path = Path(settings.DATA_DIR) / "user_notes.json"
    books = json.loads(path.read_text())["users"] if path.exists() else {}
    return [n["text"] for book in books.values() for n in book["notes"]]


async def test_a_note_the_user_never_said_is_not_added_and_the_model_answers(bundled, settings) -> None:
    # The 1.5B noted "Hello! I'm here to help." for "Hi there! Hope all is well." (round 18).
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes", "todo"])
    agent_env.fake.script(text=as_text("user_notes", action="add", text="Hello! I'm here to help."))
    agent_env.fake.script(text="Hi! All is well here. How can I help?")
    events = await agent_env.run("Hi there! Hope all is well.")
    assert not started(events) and not calls(events)
    assert _note_texts(settings) == []
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "is nothing the user's words" in told and "I'm here to help" in told
    assert events[-1]["content"] == "Hi! All is well here. How can I help?"


async def test_a_note_of_an_earlier_message_is_added_when_the_call_is_made_again(bundled, settings) -> None:
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes", "todo"])
    for _ in range(2):
        agent_env.fake.script(text=as_text("user_notes", action="add", text="call the plumber about invoice 7341"))
    constrained_call(agent_env.fake, "user_notes", action="add", text="call the plumber about invoice 7341")
    agent_env.fake.script(text="Noted: call the plumber about invoice 7341.")
    events = await agent_env.run("Note that down.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert _note_texts(settings) == ["call the plumber about invoice 7341"]


async def test_a_note_made_again_of_the_users_words_after_its_doubt_is_confirmed_first(bundled, settings) -> None:
    # Told that its note for a greeting was nothing the user said, the 1.5B noted the greeting itself, which the
    # doubt no longer judged (round 18): made again after a doubt, the call is confirmed under the grammar of
    # the tool and none.
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes", "todo"])
    agent_env.fake.script(text=as_text("user_notes", action="add", text="Hello! I'm here to help."))
    # A part of the greeting: the whole of it is doubted on its own (round 19, ``the_whole_message``).
    agent_env.fake.script(text=as_text("user_notes", action="add", text="All is well."))
    agent_env.fake.script(text='{"tool": "none"}')
    agent_env.fake.script(text="Hi! All is well, thanks. What can I do for you?")
    events = await agent_env.run("Hi there! Hope all is well.")
    assert not calls(events) and not started(events) and _note_texts(settings) == []
    assert events[-1]["content"] == "Hi! All is well, thanks. What can I do for you?" == shown(events)
    confirm = agent_env.requests()[2]
    assert [b["properties"]["tool"]["const"] for b in confirm["format"]["anyOf"]] == ["none", "user_notes"]
    assert any("is nothing the user's words" in m["content"] and "choose none" in m["content"]
               for m in confirm["messages"])


async def test_a_note_in_the_users_words_is_added_at_once(bundled, settings) -> None:
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes", "todo"])
    agent_env.fake.script(text=as_text("user_notes", action="add", text="Plumber: invoice 2069"))
    agent_env.fake.script(text="Noted.")
    events = await agent_env.run("Take this down as a note: plumber to be called, invoice 2069.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert _note_texts(settings) == ["Plumber: invoice 2069"] and len(agent_env.requests()) == 2


def _todo_steps(agent_env) -> list[dict]:
    from tools_app.builtins_meta.todo import read_todo

    return read_todo(agent_env.session_id)


def _folder(agent_env, settings) -> Path:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def test_an_answer_that_says_nothing_the_file_says_is_asked_for_again(agent_env, settings) -> None:
    # The 0.5B, rounds 11 and 12: "Who wrote report.txt?" → read → "The user wrote the file report.txt."
    (_folder(agent_env, settings) / "report.txt").write_text("Quarterly report\nAuthor: Miriam Okafor\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt"))
    agent_env.fake.script(text="The user wrote the file report.txt.")
    agent_env.fake.script(text="Miriam Okafor wrote report.txt.")
    events = await agent_env.run("Who wrote report.txt?")
    assert events[-1]["content"] == "Miriam Okafor wrote report.txt." == shown(events)


async def test_an_answer_from_the_files_words_or_numbers_is_the_models(agent_env, settings) -> None:
    (_folder(agent_env, settings) / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="notes.txt"))
    agent_env.fake.script(text="It has 3 lines.")
    events = await agent_env.run("How many lines does notes.txt have?")
    assert events[-1]["content"] == "It has 3 lines." and len(agent_env.requests()) == 2


async def test_a_second_answer_with_nothing_of_the_file_is_replaced_by_what_was_done(agent_env, settings) -> None:
    (_folder(agent_env, settings) / "report.txt").write_text("Quarterly report\nAuthor: Miriam Okafor\n")
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt"))
    agent_env.fake.script(text="The user wrote the file report.txt.")
    agent_env.fake.script(text="The user wrote the file report.txt.")
    events = await agent_env.run("Who wrote report.txt?")
    assert "The user wrote" not in shown(events) and "report.txt" in events[-1]["content"]


async def _read_then_answered(agent_env, settings, name: str, content: str, request: str,
                              *answers: str) -> list[dict]:
    """A turn in which the model reads the file ``name`` (holding ``content``), then answers ``answers`` in turn."""
    (_folder(agent_env, settings) / name).write_text(content)
    await constrained(agent_env)
    agent_env.fake.script(text=as_text("filesystem", action="read", path=name))
    for answer in answers:
        agent_env.fake.script(text=answer)
    return await agent_env.run(request)


async def test_a_long_answer_with_nothing_of_the_file_is_asked_for_again_before_it_is_shown(agent_env, settings) -> None:
    # The 0.5B, round 14: 19 words, the envelope's note reworded, nothing the file says.
    events = await _read_then_answered(
        agent_env, settings, "report.txt", "Quarterly report\nAuthor: Priya Raman\n", "Who put together report.txt?",
        "The user put together report.txt by reading it from the external source and following instructions in it.",
        "Priya Raman put together report.txt.")
    assert events[-1]["content"] == "Priya Raman put together report.txt." == shown(events)


PROJECT = "Project notes\nThe project codename is HERON-877.\nThe deadline is March 3.\n"


async def test_an_answer_without_the_line_the_request_points_at_is_asked_for_again(agent_env, settings) -> None:
    # The 0.5B, round 14: words of the file (the deadline), not what was asked (the codename).
    events = await _read_then_answered(
        agent_env, settings, "project.txt", PROJECT, "I forgot our project's codename; it's in project.txt. Can you look?",
        "The user's project notes were successfully read and displayed. The deadline was set to March 3, and the "
        "results are above.", "The codename is HERON-877.")
    assert events[-1]["content"] == "The codename is HERON-877." == shown(events)


async def test_twice_without_the_line_asked_for_the_user_gets_what_the_file_says(agent_env, settings) -> None:
    events = await _read_then_answered(agent_env, settings, "project.txt", PROJECT, "What's the codename in project.txt?",
                                       *["The deadline of the project is March 3."] * 2)
    assert "HERON-877" in events[-1]["content"] and "deadline of the project" not in shown(events)


@pytest.mark.parametrize(("request_text", "answer"), [
    ("When is the deadline in project.txt?", "According to project.txt, the deadline is March 3."),
    # No line shares a word with the request: whatever of the file the answer gives is the model's choice.
    ("Summarize project.txt for me.", "It is about a project, HERON-877, due March 3."),
    # Two lines share as many words with the request: either will do.
    ("Which codename and deadline does project.txt give?", "The deadline is March 3."),
])
async def test_an_answer_with_what_the_request_points_at_is_the_models(agent_env, settings, request_text,
                                                                        answer) -> None:
    events = await _read_then_answered(agent_env, settings, "project.txt", PROJECT, request_text, answer)
    assert events[-1]["content"] == answer == shown(events) and len(agent_env.requests()) == 2


# -- the user's question kept as if it were a note, a step or a fact (round 13) ------------------------------

@pytest.mark.parametrize(("tool", "args"), [
    ("todo", {"action": "set", "steps": ["What is my server called?"]}),  # the 0.5B, fresh5
    ("user_notes", {"action": "add", "text": "What is my server called?", "tags": ["server"]}),  # the 1.5B, fresh5
    ("memory_save", {"category": "environment", "key": "server", "value": "what is my server called"}),
])
async def test_the_users_question_is_not_kept_and_the_model_answers_it(bundled, tool, args) -> None:
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["todo", "user_notes", "memory_save"])
    for _ in range(2):  # made again after the note: held as firmly
        agent_env.fake.script(text=as_text(tool, **args))
    agent_env.fake.script(text="Your server is called atlas.")
    events = await agent_env.run("What is my server called?")
    assert not started(events) and not calls(events)  # no card, nothing kept
    assert events[-1]["content"] == "Your server is called atlas." == shown(events)
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "is the user's own question, word for word" in told
    assert await _fact_values() == []


async def test_a_question_the_user_asks_to_keep_is_kept(bundled) -> None:
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes"])
    agent_env.fake.script(text=as_text("user_notes", action="add", text="Why does the boiler click?"))
    agent_env.fake.script(text="Noted: why does the boiler click?")
    events = await agent_env.run("Add to my notes: why does the boiler click?")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]


@pytest.mark.parametrize(("text", "request_text", "question"), [
    ("What is my server called?", "What is my server called?", True),
    ("what is my server called", "Hi.\nWhat is my server called?", True),  # a second message of the turn
    ("Why does the boiler click?", "Add to my notes: why does the boiler click?", False),
    ("Call the plumber.", "Call the plumber.", False),  # an order, not a question
    ("Really?", "Really?", False),  # too short to tell
])
def test_the_question(text, request_text, question) -> None:
    from tools_app.base import the_question

    assert the_question(text, request_text) is question


async def test_a_greeting_noted_whole_is_not_added_and_the_model_answers(bundled, settings) -> None:
    # The 1.5B noted "Hi! Good to have you around." for "Hi hi! Good to have you around." in every run of round 19:
    # the note takes the user's words, all of them, so nothing in the message asked for it.
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes", "todo"])
    agent_env.fake.script(text=as_text("user_notes", action="add", text="Hi! Good to have you around.",
                                       tags=["greeting"]))
    agent_env.fake.script(text="Hi! Good to be here. What can I do for you?")
    events = await agent_env.run("Hi hi! Good to have you around.")
    assert not started(events) and not calls(events) and _note_texts(settings) == []
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "is the user's whole message" in told
    assert events[-1]["content"] == "Hi! Good to be here. What can I do for you?"


async def test_a_request_listed_whole_as_a_todo_step_is_not_set(bundled, settings) -> None:
    # The 0.5B listed "Write my shopping list to shopping.txt: milk, eggs, bread." as a todo step (round 19).
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["filesystem", "todo"])
    agent_env.fake.script(text=as_text("todo", action="set",
                                       steps=["Write my shopping list to shopping.txt: milk, eggs, bread."]))
    agent_env.fake.script(text=as_text("filesystem", action="write", path="shopping.txt", content="milk\neggs\nbread\n"))
    agent_env.fake.script(text="I wrote milk, eggs and bread to shopping.txt.")
    events = await agent_env.run("Write my shopping list to shopping.txt: milk, eggs, bread.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("filesystem", True)]
    assert not _todo_steps(agent_env)
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "is the user's whole message" in told


def test_what_keeps_the_users_whole_message() -> None:
    from tools_app.base import the_whole_message

    assert the_whole_message("Hi! Good to have you around.", "Hi hi! Good to have you around.")
    assert the_whole_message("Write my shopping list to shopping.txt: milk, eggs, bread.",
                             "Write my shopping list to shopping.txt: milk, eggs, bread.")
    # A request to keep something has words the kept text leaves out; so has a list in the user's lines, and a
    # plan whose steps share the request's words between them; a message of no word compares nothing.
    assert not the_whole_message("invoice 2025, must call the plumber.", "Add a quick note: invoice 2025, must call the plumber.")
    assert not the_whole_message("Buy stamps", "Make a todo list: buy stamps, post the letter.")
    assert not the_whole_message("WiFi password is hunter2", "Please add this to my notes:\nWiFi password is hunter2")
    assert not the_whole_message("buy milk", "Here's my todo list:\n- buy milk\n- call mom\n- fix bike")
    assert not the_whole_message("Read report.txt", "Summarize report.txt")
    assert not the_whole_message("Hello!", "Hi!") and not the_whole_message("", "Hi there, friend")


async def test_a_valid_call_written_as_the_answer_when_no_tool_ran_runs(agent_env, settings) -> None:
    # The 0.5B chose memory_save twice, with a refusal as the value, for "Can you see in report.txt who wrote it?",
    # then, told to answer, wrote the read the request needed; the user got Navi's fallback (fresh15, round 23).
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text("Quarterly report\nAuthor: Dana Okafor\n")
    await constrained(agent_env, enabled_tools=["memory_save", "filesystem"])
    refusal = dict(category="preferences", key="author", value="I'm sorry, but I can't assist with that.")
    agent_env.fake.script(text=as_text("memory_save", **refusal))
    constrained_call(agent_env.fake, "memory_save", **refusal)
    constrained_call(agent_env.fake, "memory_save", **refusal)  # the repair round: the same at temperature 0
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt"))  # where the answer was asked
    agent_env.fake.script(text="Dana Okafor wrote report.txt.")
    events = await agent_env.run("Can you see in report.txt who wrote it?")
    assert [(tool, args.get("path"), ok) for tool, args, ok in calls(events)] == [("filesystem", "report.txt", True)]
    assert await _fact_values() == []
    assert events[-1]["content"] == "Dana Okafor wrote report.txt." == shown(events)


def _report(agent_env, settings) -> Path:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text("Quarterly report\nAuthor: Dana Okafor\n")
    (folder / "other.txt").write_text("Nothing here.\n")
    return folder


async def test_a_call_written_as_the_answer_does_not_run_after_a_tool_ran(agent_env, settings) -> None:
    # Only when no tool ran: after a result, a call where the answer was asked is never run nor shown.
    _report(agent_env, settings)
    await constrained(agent_env, enabled_tools=["memory_save", "filesystem"])
    refusal = dict(category="preferences", key="author", value="I'm sorry, but I can't assist with that.")
    agent_env.fake.script(text=as_text("memory_save", **refusal))
    constrained_call(agent_env.fake, "memory_save", **refusal)
    constrained_call(agent_env.fake, "memory_save", **refusal)  # no usable call: ordered to answer
    agent_env.fake.script(text="The author of report.txt is Navi.")  # held: the file was not read, and it is told
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt"))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="other.txt"))  # where the answer was asked
    agent_env.fake.script(text="Dana Okafor wrote report.txt.")  # asked again: the call was no answer
    events = await agent_env.run("Who wrote report.txt? And what is in other.txt?")
    assert [(tool, args["path"]) for tool, args, ok in calls(events)] == [("filesystem", "report.txt")]
    assert events[-1]["content"] == "Dana Okafor wrote report.txt." == shown(events)


async def test_a_call_written_as_the_answer_after_the_model_chose_no_tool_does_not_run(agent_env, settings) -> None:
    # Reconsidered under the grammar, the model chose none: the order to answer is its own choice (the review).
    _report(agent_env, settings)
    await constrained(agent_env, enabled_tools=["memory_save", "filesystem"])
    agent_env.fake.script(text="I'm sorry, but I can't help with that.")
    agent_env.fake.script(text=json.dumps({"tool": "none"}))
    agent_env.fake.script(text=as_text("filesystem", action="read", path="report.txt"))
    events = await agent_env.run("Hello there, Navi!")
    assert not calls(events) and not started(events)
    assert events[-1]["type"] == "stream_end" and '"arguments"' not in shown(events)


async def test_a_call_written_as_the_answer_that_changes_something_does_not_run(agent_env, settings) -> None:
    # Navi ordered an answer: a write or a delete nobody saw coming is worse than no answer (the review's
    # "delete report.txt" after the refusals of the first test).
    folder = _report(agent_env, settings)
    await constrained(agent_env, enabled_tools=["memory_save", "filesystem"])
    refusal = dict(category="preferences", key="author", value="I'm sorry, but I can't assist with that.")
    agent_env.fake.script(text=as_text("memory_save", **refusal))
    constrained_call(agent_env.fake, "memory_save", **refusal)
    constrained_call(agent_env.fake, "memory_save", **refusal)
    agent_env.fake.script(text=as_text("filesystem", action="delete", path="report.txt"))
    events = await agent_env.run("Can you see in report.txt who wrote it?")
    assert not calls(events) and not started(events)
    assert (folder / "report.txt").exists() and await _fact_values() == []
    assert events[-1]["type"] == "stream_end" and '"arguments"' not in shown(events)


async def test_a_change_outside_the_conversations_folder_at_a_place_nobody_named_is_not_made(agent_env, settings,
                                                                                             tmp_path) -> None:
    # The 0.5B wrote /home/navi/water.txt for "Nudge me to drink water once every hour.", and the user got an
    # approval card for a file they never asked for (fresh15, round 23).
    settings.FS_ALLOWED_PATHS = [str(tmp_path)]
    await constrained(agent_env, enabled_tools=["filesystem", "schedule_recall"])
    guessed = str(tmp_path / "water.txt")
    agent_env.fake.script(text=as_text("filesystem", action="write", path=guessed, content="Drink water."))
    agent_env.fake.script(text=as_text("schedule_recall", call_type="recurring", when="in 1 hour", interval_seconds=3600,
                                       additional_context_message="Remind the user to drink water."))
    agent_env.fake.script(text="I'll remind you to drink water every hour.")
    events = await agent_env.run("Nudge me to drink water once every hour.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("schedule_recall", True)]
    assert not [e for e in events if e["type"] == "approval_required"] and not (tmp_path / "water.txt").exists()
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "outside this conversation's folder" in told
    assert events[-1]["content"] == "I'll remind you to drink water every hour."


def test_which_changes_are_a_guess_at_a_place(settings, tmp_path) -> None:
    from agent.ctx import current_session_id
    from tools_app.builtins.filesystem import FilesystemTool

    settings.FS_ALLOWED_PATHS = [str(tmp_path)]
    settings.SESSION_FILES_DIR = str(tmp_path / "sessions")
    token = current_session_id.set("s1")
    try:
        tool = FilesystemTool()
        outside = str(tmp_path / "water.txt")
        doubt = tool.doubt({"action": "write", "path": outside, "content": "x"}, "Nudge me to drink water hourly.")
        assert doubt is not None and doubt.answer and doubt.again and not doubt.repeated_runs and doubt.fix is None
        # Named by the user (the path, or its folder), inside the conversation's folder, or a new file there: no guess.
        assert tool.doubt({"action": "write", "path": outside, "content": "x"}, f"Save it as {outside}") is None
        assert tool.doubt({"action": "mkdir", "path": str(tmp_path / "backup")}, f"Make a backup folder in {tmp_path}") is None
        # A file name alone names no folder: "Create water.txt" is no water.txt elsewhere (the second review).
        assert tool.doubt({"action": "write", "path": outside, "content": "x"}, "Save it as water.txt") is not None
        assert tool.doubt({"action": "write", "path": "poem.txt", "content": "x"}, "Put that in a file.") is None
        assert tool.doubt({"action": "append", "path": "notes/a.md", "content": "x"}, "Add it somewhere.") is None
        # A move out of the folder to a place nobody named, and a place no tool may write to.
        assert tool.doubt({"action": "move", "path": "a.txt", "destination": outside}, "Tidy up a.txt") is not None
        refused = tool.doubt({"action": "delete", "path": "/etc/hosts"}, "Clean up, please.")
        assert refused is not None and "outside the allowed directories" in refused.reason
        # A link in the folder that points outside: a delete removes the link itself, inside.
        own = tmp_path / "sessions" / "s1"
        own.mkdir(parents=True, exist_ok=True)
        (own / "link.txt").symlink_to(outside)
        assert tool.doubt({"action": "delete", "path": "link.txt"}, "Clean up, please.") is None
    finally:
        current_session_id.reset(token)


def test_the_time_grammar_reads_long_or_huge_input_without_error() -> None:
    # The review of round 23: a run of 10 000 digits took 8 s of the agent loop (now milliseconds: measured, not
    # asserted here); a number of a thousand nines overflowed a float.
    from recall_app.timeparse import SAID_MAX_CHARS, parse_duration

    assert said_times("once " + "1" * 10000).once == ()
    assert said_times("in " + "9" * 1000 + " minutes").once == ()  # no duration, not an OverflowError
    assert parse_duration("9" * 400 + " minutes") is None
    long = "in 3 minutes " + "x" * SAID_MAX_CHARS
    assert said_times(long).once == () and not said_times(long).plain  # not read: nothing to correct


async def test_a_list_for_a_time_from_now_is_not_set_and_the_reminder_is(agent_env) -> None:
    # The 0.5B set the todo steps "stretch legs", "3 minutes" for a 3-minute reminder (round 25): a list does
    # nothing in 3 minutes, so it is held loosely and the model may schedule the recall the user asked for.
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo"])
    agent_env.fake.script(text=as_text("todo", action="set", steps=["check the oven", "10 minutes"]))
    agent_env.fake.script(text=as_text("schedule_recall", call_type="once", when="in 10 minutes",
                                       additional_context_message="Remind the user to check the oven."))
    agent_env.fake.script(text="I'll remind you to check the oven in 10 minutes.")
    events = await agent_env.run("Buzz me in 10 minutes to check the oven.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("schedule_recall", True)]
    assert not _todo_steps(agent_env) and (await _recall(agent_env)) is not None
    told = agent_env.requests()[1]["messages"][-1]["content"]
    assert told.startswith("Not run: ") and "say when ('in 10 minutes')" in told and "schedule a recall" in told
    assert events[-1]["content"] == "I'll remind you to check the oven in 10 minutes."


async def test_a_note_that_keeps_the_time_from_now_is_added_at_once(bundled, settings) -> None:
    # A note may keep a time from now: the user's time kept with what it is for is what they asked to keep.
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes", "schedule_recall"])
    agent_env.fake.script(text=as_text("user_notes", action="add", text="pizza arrives in 20 minutes", tags=[]))
    agent_env.fake.script(text="Noted: the pizza arrives in 20 minutes.")
    events = await agent_env.run("Note that the pizza arrives in 20 minutes.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert _note_texts(settings) == ["pizza arrives in 20 minutes"]
    assert events[-1]["content"] == "Noted: the pizza arrives in 20 minutes." and len(agent_env.requests()) == 2


async def test_a_note_without_the_time_is_added_when_the_call_is_made_again(bundled, settings) -> None:
    agent_env = bundled
    await constrained(agent_env, enabled_tools=["user_notes", "schedule_recall"])
    for _ in range(2):
        agent_env.fake.script(text=as_text("user_notes", action="add", text="the pizza is coming", tags=[]))
    constrained_call(agent_env.fake, "user_notes", action="add", text="the pizza is coming", tags=[])  # confirmed
    agent_env.fake.script(text="Noted: the pizza is coming.")
    events = await agent_env.run("Note that the pizza arrives in 20 minutes.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("user_notes", True)]
    assert _note_texts(settings) == ["the pizza is coming"]
    assert "say when ('in 20 minutes')" in agent_env.requests()[1]["messages"][-1]["content"]


@pytest.mark.parametrize(("request_text", "when"), [
    ("Buzz me in 10 minutes to check the oven.", "in 10 minutes"),
    ("Hourly, please nudge me to stand up.", "hourly"),
    ("I need a 5-minute timer for the tea.", "5-minute"),
    # no time from now, or more than one: left to the model
    ("Add to my list: call mom at 5 pm.", None),
    ("Remember that my server is called atlas.", None),
    ("I go to the gym every Monday.", None),
    ("Note: call Ann in 10 minutes and Bob in 20 minutes.", None),
    ("", None),
    # a time days away is more often a list's or a note's deadline than a reminder; "from now on" is no time
    ("Make me a todo list for the move in 2 days: pack boxes, book a van.", None),
    ("Remember my commute takes 45 minutes from now on.", None),
])
def test_the_time_from_now_a_request_says(request_text: str, when: str | None) -> None:
    from tools_app.base import said_when

    assert said_when(request_text) == when


def test_what_keeps_words_is_doubted_loosely_where_the_request_says_when() -> None:
    from memory_app.tools import MemorySaveTool
    from tools_app.builtins_meta.todo import TodoTool

    request = "Every hour, nudge me to drink some water."
    fact = MemorySaveTool().doubt({"category": "preferences", "key": "water", "value": "drink water"}, request)
    assert fact is not None and fact.answer and fact.repeated_runs and "it was not saved" in fact.reason
    steps = TodoTool().doubt({"action": "set", "steps": ["drink water"]}, request)
    assert steps is not None and steps.repeated_runs and "so it was not set" in steps.reason
    # nor where what is kept says the time itself, nor for requests that say no time from now
    assert TodoTool().doubt({"action": "set", "steps": ["drink water every hour"]}, request) is None
    assert MemorySaveTool().doubt({"category": "preferences", "key": "water", "value": "drink water hourly"},
                                  request) is None
    assert MemorySaveTool().doubt({"category": "preferences", "key": "water", "value": "drinks water"},
                                  "I drink a lot of water.") is None
    assert TodoTool().doubt({"action": "set", "steps": ["drink water"]}, "Add drink water to my list.") is None
    assert MemorySaveTool().doubt({"category": "habits", "key": "water_every_hour", "value": "drinks water"},
                                  request) is None  # the key keeps the time
    assert TodoTool().doubt({"action": "set", "steps": []}, "Clear my list, I'll redo it in an hour.") is None
    assert steps.needs == "schedule_recall"


async def test_a_list_set_again_after_the_doubt_may_become_the_recall_it_advised(agent_env) -> None:
    # Told that a list does nothing in 3 minutes, the 0.5B set it again (round 25): the grammar that confirms the
    # call offers the recall the doubt advised, as well as the list and none.
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo", "user_notes"])
    for _ in range(2):
        agent_env.fake.script(text=as_text("todo", action="set", steps=["check the oven"]))
    constrained_call(agent_env.fake, "schedule_recall", call_type="once", when="in 10 minutes",
                     additional_context_message="Remind the user to check the oven.")
    agent_env.fake.script(text="I'll remind you to check the oven in 10 minutes.")
    events = await agent_env.run("Buzz me in 10 minutes to check the oven.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("schedule_recall", True)]
    assert not _todo_steps(agent_env) and (await _recall(agent_env)) is not None
    confirm = agent_env.fake.schema_of(agent_env.fake.chat_requests[2])
    assert sorted(schema_names(confirm)) == ["none", "schedule_recall", "todo"]
    told = agent_env.requests()[2]["messages"][-1]["content"]
    assert "Call todo only if the user's words need it; call schedule_recall if the user's words ask" in told
    assert events[-1]["content"] == "I'll remind you to check the oven in 10 minutes."


async def test_a_broken_call_after_the_doubt_is_generated_again_with_the_advised_tool_offered(agent_env) -> None:
    # The 0.5B's next call after the doubt copied a tool's description into the list (round 25): generated again,
    # the grammar offers the tool it named and the recall the doubt advised.
    await constrained(agent_env, enabled_tools=["schedule_recall", "todo", "user_notes"])
    agent_env.fake.script(text=as_text("todo", action="set", steps=["check the oven"]))
    agent_env.fake.script(text=as_text("todo", action="set", steps="check the oven"))  # not a list
    constrained_call(agent_env.fake, "schedule_recall", call_type="once", when="in 10 minutes",
                     additional_context_message="Remind the user to check the oven.")
    agent_env.fake.script(text="I'll remind you to check the oven in 10 minutes.")
    events = await agent_env.run("Buzz me in 10 minutes to check the oven.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("schedule_recall", True)]
    assert sorted(schema_names(agent_env.fake.schema_of(agent_env.fake.chat_requests[2]))) == [
        "schedule_recall", "todo"]
    assert not _todo_steps(agent_env) and (await _recall(agent_env)) is not None
    assert events[-1]["content"] == "I'll remind you to check the oven in 10 minutes."


def test_advice_followed_is_not_offered_again() -> None:
    # The review (round 26): once the advised recall ran, a later call generated again in the turn was still
    # offered it, and a second recall is refused (one pending recall a session).
    from agent.aids import LoopState
    from agent.llm.base import ToolCallRequest

    state = LoopState(aids=True, start=0)
    state.advised.add("schedule_recall")
    recall = ToolCallRequest(id="1", name="schedule_recall", arguments={})
    state.ran(recall, False)
    assert state.advised == {"schedule_recall"}  # failed: the advice still stands
    state.ran(recall, True)
    assert state.advised == set()


async def test_without_recalls_a_list_for_a_time_from_now_is_set_at_once(agent_env) -> None:
    # The doubt's advice is a recall: a profile that cannot schedule one keeps the list the model chose.
    await constrained(agent_env, enabled_tools=["todo"])
    agent_env.fake.script(text=as_text("todo", action="set", steps=["check the oven"]))
    agent_env.fake.script(text="Your list: check the oven.")
    events = await agent_env.run("Buzz me in 10 minutes to check the oven.")
    assert [(tool, ok) for tool, _args, ok in calls(events)] == [("todo", True)]
    assert events[-1]["content"] == "Your list: check the oven." and len(agent_env.requests()) == 2


def _facts(agent_env, settings) -> None:
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.txt").write_text("The magic number is 6651.\n")


async def test_a_read_where_the_user_asked_for_a_helper_by_name_gets_the_helper(agent_env, settings) -> None:
    """Both models read facts.txt themselves for "Hand facts.txt to a subagent and …": the user asked for a helper
    and got none (rounds 26 and 27). The call is written again as one of the tool named, told why."""
    _facts(agent_env, settings)
    await constrained(agent_env, enabled_tools=["filesystem", "spawn_agent", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt"))
    constrained_call(agent_env.fake, "spawn_agent", task="Read facts.txt and say what the magic number is.")
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt"))  # the helper reads
    agent_env.fake.script(text="The magic number is 6651.")  # and answers
    agent_env.fake.script(text="Your helper found the magic number: 6651.")
    events = await agent_env.run("Hand facts.txt to a sub-agent and have it tell me the magic number.")
    assert [e["tool"] for e in started(events)][0] == "spawn_agent"  # the first thing that ran: the helper
    assert sorted((tool, ok) for tool, args, ok in calls(events)) == [("filesystem", True), ("spawn_agent", True)]
    assert events[-1]["content"] == "Your helper found the magic number: 6651."
    again = agent_env.fake.chat_requests[1]
    assert schema_names(agent_env.fake.schema_of(again)) == ["spawn_agent"]  # the one named
    told = again.json["messages"][-1]["content"]
    assert "the user's words name 'sub-agent', which is the tool spawn_agent, so filesystem was not run" in told


async def test_a_mention_of_a_helper_costs_a_helper_doing_the_read(agent_env, settings) -> None:
    """What the mechanism costs (round 28): a mention that is no request still gets the helper, whose tools read."""
    _facts(agent_env, settings)
    await constrained(agent_env, enabled_tools=["filesystem", "spawn_agent", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt"))
    constrained_call(agent_env.fake, "spawn_agent", task="Read facts.txt and say what the magic number is.")
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt"))  # the helper reads
    agent_env.fake.script(text="The magic number is 6651.")
    agent_env.fake.script(text="The magic number is 6651.")
    events = await agent_env.run("Don't bother with a helper agent: read facts.txt and tell me the magic number.")
    assert [e["tool"] for e in started(events)][0] == "spawn_agent"
    assert sum(1 for r in agent_env.fake.chat_requests if agent_env.fake.schema_of(r)) == 1  # chosen again once
    assert events[-1]["content"] == "The magic number is 6651."


async def test_no_usable_call_of_the_helper_named_and_the_models_read_runs(agent_env, settings) -> None:
    """The 0.5B, told a helper was named, twice gave it the tool's own description as its task: the user got
    Navi's fallback where its read had the answer. The read runs, as it would have."""
    _facts(agent_env, settings)
    await constrained(agent_env, enabled_tools=["filesystem", "spawn_agent", "todo"])
    copied = "Hand a task to a helper agent (a subagent with a fresh context), which does it with its own tools"
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt"))
    constrained_call(agent_env.fake, "spawn_agent", task=copied)
    constrained_call(agent_env.fake, "spawn_agent", task=copied)
    agent_env.fake.script(text="The magic number is 6651.")
    events = await agent_env.run("Let a subagent read facts.txt and tell me the magic number.")
    assert [(tool, ok) for tool, args, ok in calls(events)] == [("filesystem", True)]
    assert events[-1]["content"] == "The magic number is 6651."


@pytest.mark.parametrize("task", [
    "Hand a task to a helper agent (a subagent with a fresh context), which does it with its own tools",  # copied
    "get_magic_number",  # one word: a problem of its own, never told
])
async def test_no_usable_helper_in_the_repair_and_the_read_it_held_runs(agent_env, settings, task) -> None:
    _facts(agent_env, settings)
    await constrained(agent_env, enabled_tools=["filesystem", "spawn_agent", "todo"])
    agent_env.fake.script(text='I would use the filesystem function with {"action": "read", "path": "facts.txt"}')
    constrained_call(agent_env.fake, "filesystem", action="read", path="facts.txt")
    constrained_call(agent_env.fake, "spawn_agent", task=task)
    agent_env.fake.script(text="The magic number is 6651.")
    events = await agent_env.run("Let a subagent read facts.txt and tell me the magic number.")
    assert [(tool, ok) for tool, args, ok in calls(events)] == [("filesystem", True)]
    assert events[-1]["content"] == "The magic number is 6651."


def test_a_tool_whose_names_are_no_tuple_names_nothing() -> None:
    """A user's tool that gives ``named_as`` as one string (matched letter by letter it would name any request) or
    holds a non-string: named by nothing, and the turn goes on."""
    from tools_app.base import Tool
    from tools_app.registry import ToolRegistry

    registry = ToolRegistry()  # its own: the odd tool stays out of every other test's registry
    for bad in ("subagent", ("helper agent", 7), None):
        tool = type("Odd", (Tool,), {"name": "odd_named", "description": "An odd tool.", "named_as": bad,
                                     "execute": lambda self, params: None})()
        registry.register_builtin(tool)
        named = registry.named("Use a subagent, or a helper agent.", ["odd_named"])
        assert named == ([("odd_named", "helper agent")] if isinstance(bad, tuple) else []), bad


async def test_a_helper_named_where_the_grammar_offered_only_the_models_tool_is_the_repairs_grammar(agent_env, settings) -> None:
    """A call that needed its grammar (described in prose) is generated again among the tools it pointed at; told there
    that the user's words name a helper, the model can choose one: the grammar of the repair offers it."""
    _facts(agent_env, settings)
    await constrained(agent_env, enabled_tools=["filesystem", "spawn_agent", "todo"])
    agent_env.fake.script(text='I would use the filesystem function with {"action": "read", "path": "facts.txt"}')
    constrained_call(agent_env.fake, "filesystem", action="read", path="facts.txt")
    constrained_call(agent_env.fake, "spawn_agent", task="Read facts.txt and say what the magic number is.")
    agent_env.fake.script(text=as_text("filesystem", action="read", path="facts.txt"))  # the helper reads
    agent_env.fake.script(text="The magic number is 6651.")
    agent_env.fake.script(text="Your helper found the magic number: 6651.")
    events = await agent_env.run("Let a subagent read facts.txt and tell me the magic number.")
    grammars = [schema_names(agent_env.fake.schema_of(r)) for r in agent_env.fake.chat_requests
                if agent_env.fake.schema_of(r)]
    assert grammars[:2] == [["filesystem"], ["spawn_agent"]]
    assert [e["tool"] for e in started(events)][0] == "spawn_agent"
    assert events[-1]["content"] == "Your helper found the magic number: 6651."


@pytest.mark.parametrize("request_text", [
    "Read facts.txt and tell me the magic number.",  # no helper named
    "What does agents.txt say about the subagentry?",  # no whole word names one
    "Read subagent.md and tell me the magic number.",  # a file name
    "Open the file called subagent and tell me the magic number.",  # the call's own argument
])
async def test_a_read_where_no_helper_was_asked_for_runs(agent_env, settings, request_text) -> None:
    _facts(agent_env, settings)
    folder = Path(settings.SESSION_FILES_DIR) / agent_env.session_id
    (folder / "agents.txt").write_text("Nothing yet.\n")
    (folder / "subagent.md").write_text("The magic number is 6651.\n")
    (folder / "subagent").write_text("The magic number is 6651.\n")
    await constrained(agent_env, enabled_tools=["filesystem", "spawn_agent", "todo"])
    path = next((p for p in ("agents.txt", "subagent.md", "subagent") if p in request_text), "facts.txt")
    agent_env.fake.script(text=as_text("filesystem", action="read", path=path))
    agent_env.fake.script(text="It says: Nothing yet." if path == "agents.txt" else "It says: The magic number is 6651.")
    events = await agent_env.run(request_text)
    assert [(tool, ok) for tool, args, ok in calls(events)] == [("filesystem", True)]
    assert not any(agent_env.fake.schema_of(r) for r in agent_env.fake.chat_requests)  # nothing chosen again


async def test_a_change_where_a_helper_is_named_is_left_alone(agent_env, settings) -> None:
    """A call that changes something does more than a helper's look: "Write down what the subagent should do"."""
    await constrained(agent_env, enabled_tools=["filesystem", "spawn_agent", "todo"])
    agent_env.fake.script(text=as_text("filesystem", action="write", path="plan.txt", content="Check the logs."))
    agent_env.fake.script(text="Wrote plan.txt.")
    events = await agent_env.run("Write plan.txt saying what the subagent should do: check the logs.")
    assert [(tool, ok) for tool, args, ok in calls(events)] == [("filesystem", True)]


def test_what_names_a_helper() -> None:
    from tools_app.registry import get_registry

    named = get_registry().named
    among = ["filesystem", "spawn_agent", "todo"]
    for said, words in (("Use a subagent for this.", "subagent"), ("Two SUBAGENTS, please.", "SUBAGENTS"),
                        ("Get a sub-agent on it.", "sub-agent"), ("a Sub agent", "Sub agent"),
                        ("Let a helper agent do it.", "helper agent"), ("helper-agents?", "helper-agents"),
                        ("The subagent's answer.", "subagent"), ("Ask subagents.", "subagents")):
        assert named(said, among) == [("spawn_agent", words)], said
    for said in ("subagentry", "my_subagent.py", "subagent.py", "docs/subagent/", "https://x.org/subagent",
                 "an agent", "a helper"):
        assert named(said, among) == [], said
    assert named("Use a subagent.", ["filesystem", "todo"]) == []  # not offered


def test_the_names_a_tool_answers_to_are_its_descriptions_own() -> None:
    """``named_as`` holds what the tool's own description calls it, never the wording of requests."""
    from tools_app.registry import get_registry

    registry = get_registry()
    named = [tool for tool in registry.names() if getattr(registry.get(tool), "named_as", ())]
    assert "spawn_agent" in named
    for name in named:
        tool = registry.get(name)
        described = tool.description.lower().replace("-", "").replace(" ", "")
        for phrase in tool.named_as:
            assert phrase == phrase.lower() and phrase.replace(" ", "") in described, (name, phrase)
