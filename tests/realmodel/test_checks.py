"""The broad suite's own checks of what the user saw (tests/realmodel/broad.py), with no model: a check
that could not fail would let the benchmark report a non-answer as a success."""
from __future__ import annotations

from tests.realmodel.broad import answered
from tests.realmodel.scenarios import Turn


def _turn(asked: str, answer: str) -> Turn:
    return Turn(events=[{"type": "stream_delta", "delta": answer}, {"type": "stream_end", "content": answer}],
                seconds=1.0, asked=asked)


def test_the_users_message_shown_back_is_no_answer() -> None:
    assert answered(_turn("Morning! Ready for a new day?", "Morning! Ready for a new day?")) == \
        "the user's message repeated back"
    assert answered(_turn("Hey Navi, nice to see you.", "hey navi nice to see you")) is not None


def test_a_greeting_returned_or_an_answer_in_the_requests_words_is_an_answer() -> None:
    assert answered(_turn("Hi!", "Hi!")) is None  # a short greeting returned is a greeting
    assert answered(_turn("Morning! Ready for a new day?", "Good morning! Ready when you are.")) is None
    assert answered(_turn("What is the chemical formula of water?",
                          "The chemical formula of water is H2O.")) is None


def test_navis_fallback_is_no_answer() -> None:
    shown = "I could not produce an answer this time. Please rephrase or try again."
    assert answered(_turn("Hey Navi, nice to see you.", shown)) == "Navi's own admission that it has no answer"


def test_an_approval_card_for_what_the_task_never_needs_fails_the_task() -> None:
    from tests.realmodel.scenarios import _done

    shown = _turn("Nudge me to drink water once every hour.", "I'll remind you every hour to drink water.")
    assert _done(0.0, True, "ok", shown).ok
    asked = Turn(events=[{"type": "approval_required", "approval_id": "a1", "tool": "filesystem",
                          "args": {"action": "write", "path": "/home/navi/water.txt"}}, *shown.events],
                 seconds=1.0, asked=shown.asked)
    outcome = _done(0.0, True, "ok", asked)
    assert not outcome.ok and outcome.core_ok
    assert "asked to approve filesystem" in outcome.detail and "water.txt" in outcome.detail


def test_an_instruction_for_the_model_shown_as_the_answer_is_no_answer() -> None:
    # The 0.5B answered a reminder with its instruction, Navi's framing and all, and passed (fresh21, round 29).
    asked = "Once 3 minutes are up, send word that it's time I stretched my legs."
    instruction = ('When due: remind the user of what they asked, "send word that it\'s time I stretched my legs" '
                   "(this recall is that reminder; set no other).")
    call = {"type": "tool_call", "tool": "schedule_recall", "success": True, "result": "Recall scheduled",
            "args": {"call_type": "once", "when": "in 3 minutes", "additional_context_message": instruction}}

    def shown(answer: str) -> Turn:
        return Turn(events=[call, *_turn(asked, answer).events], seconds=1.0, asked=asked)

    assert answered(shown(instruction)).startswith("an instruction meant for the model shown")
    # The user's own words, which the instruction quotes, and an answer about the reminder are answers.
    assert answered(shown("Sure: in 3 minutes, send word that it's time I stretched my legs.")) is None
    assert answered(shown("In 3 minutes I'll remind you that it's time to stretch your legs.")) is None
    # What was written for the user, quoted, is an answer, whatever it says of "the user" (the review).
    guide = "Step one: the user opens the settings page and chooses a new password."
    wrote = {"type": "tool_call", "tool": "filesystem", "success": True, "result": "Wrote guide.txt",
             "args": {"action": "write", "path": "guide.txt", "content": guide}}
    quoted = Turn(events=[wrote, *_turn("Write a one-line password guide to guide.txt.", f"I wrote: {guide}").events],
                  seconds=1.0, asked="Write a one-line password guide to guide.txt.")
    assert answered(quoted) is None
    # Seven words of a recall's instruction the model wrote that do not speak of the user are the reminder told.
    own = {**call, "args": {**call["args"], "additional_context_message": "Tell them to drink a full glass of cold water."}}
    told = Turn(events=[own, *_turn("Remind me every hour to drink water.",
                                    "Every hour I'll tell you to drink a full glass of cold water.").events],
                seconds=1.0, asked="Remind me every hour to drink water.")
    assert answered(told) is None


def test_a_number_counts_only_whole() -> None:
    from tests.realmodel.broad import mentions

    assert not mentions("1000", "100")  # centimetres in a metre, answered wrong (fresh23, round 30)
    assert not mentions("It is 1,000.", "100") and not mentions("About 100.5", "100")
    assert mentions("There are 100 centimetres in a metre.", "100") and mentions("100.", "100")
    assert mentions("A spider has 8 legs", "8") and not mentions("18 legs", "8")
    assert mentions("The capital is Paris.", "paris")


def test_items_asked_a_line_each_must_be_on_lines_of_their_own() -> None:
    from tests.realmodel.broad import on_own_lines

    items = ("milk", "eggs", "bread")
    assert on_own_lines("milk\neggs\nbread\n", items)
    assert on_own_lines("- Milk\n\n- Eggs\n- Bread", items)
    assert not on_own_lines("milk, eggs and bread", items)
    assert not on_own_lines("milk, eggs\nbread", items)
    assert not on_own_lines("bread\neggs\nmilk", items)


def test_a_file_changed_by_a_task_that_only_reads_is_an_unrequested_side_effect() -> None:
    from tests.realmodel.scenarios import READING, _done

    def with_calls(*calls: tuple[str, dict[str, str]]) -> Turn:
        answer = _turn("Spin up a subagent to read facts.txt.", "The magic number is 8565.")
        events = [{"type": "tool_call", "tool": tool, "args": args, "success": True} for tool, args in calls]
        return Turn(events=[*events, *answer.events], seconds=1.0, asked=answer.asked)

    reads = with_calls(("filesystem", {"action": "read", "path": "facts.txt"}), ("spawn_agent", {"task": "read facts.txt"}))
    assert _done(0.0, True, "ok", reads, allowed=frozenset({"spawn_agent", READING})).ok
    wrote = with_calls(("filesystem", {"action": "write", "path": "subagent.conf", "content": "magic_number=12345"}),
                       ("spawn_agent", {"task": "read facts.txt"}))
    outcome = _done(0.0, True, "ok", wrote, allowed=frozenset({"spawn_agent", READING}))
    assert not outcome.ok and outcome.detail.startswith("ran unrequested tools ['filesystem']")
    assert _done(0.0, True, "ok", wrote, allowed=frozenset({"spawn_agent", "filesystem", READING})).ok
    outcome = _done(0.0, True, "ok", reads)  # a greeting that read a file
    assert not outcome.ok and "filesystem (reading)" in outcome.detail


def test_a_reminder_time_the_answer_states_must_be_the_reminders() -> None:
    from datetime import UTC, datetime, timedelta

    from tests.realmodel.broad import misstated_times

    now = datetime(2026, 12, 2, 17, 42, tzinfo=UTC)
    due = [datetime(2026, 12, 2, 18, 0, tzinfo=UTC) + n * timedelta(hours=1) for n in range(25)]
    said = "I have set a reminder every hour. The reminder will fire at 20:00 on Wednesday, December 2nd, 2026 (UTC)."
    assert misstated_times(said, due[:1], now) == ["20:00"]  # fresh23, the 1.5B: due at 18:00
    assert misstated_times("First at 18:00, then 19:00 and 20:00.", due, now) == []
    assert misstated_times("Due at 7:00 pm your time (+01:00); it is 18:42 there now.", due, now, ["+01:00"]) == []
    assert misstated_times("Due at 2026-12-02T18:00:00+00:00 (in 18 minutes).", due, now) == []
    assert misstated_times("Due at 2026-12-02T19:00:00+00:00.", due[:1], now) == ["2026-12-02T19:00:00+00:00"]
    assert misstated_times("Scheduled in 3 minutes (17:45 UTC).", [now + timedelta(minutes=3)], now) == []
    assert misstated_times("Scheduled for 5:45 pm.", [now + timedelta(minutes=3)], now) == []
    assert misstated_times("Scheduled for 6:45 pm.", [now + timedelta(minutes=3)], now) == ["6:45 pm"]
    # the first time stated is the first firing: a later one said as "will fire at" misleads
    assert misstated_times(said, due, now) == ["20:00"]
    assert misstated_times("It is 17:42; the first is at 18:00, the next at 19:00.", due, now) == []
