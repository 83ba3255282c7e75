"""Bad model output: retried once, then skipped with the state recorded and no fact touched."""
from __future__ import annotations

import time
from typing import Any

import pytest

from memory_app.models import MemoryFact, MemoryFactChange, SessionMemoryState
from memory_app.parsing import InvalidOutput, parse_extraction
from memory_app.selectors import stale_sessions
from memory_app.tasks import extract_session
from tests.memory.conftest import make_session, reply_json

pytestmark = pytest.mark.django_db

TURNS = [("user", "I moved to Helix."), ("assistant", "OK.")]
MANY = {"facts": [{"category": "other", "key": f"k{i}", "value": "v", "confidence": 1} for i in range(51)],
        "forget": []}
BAD_ANSWERS = {
    "invalid_json": "Sure! Here are the facts: {facts: [",
    "wrong_shape": {"facts": {"category": "preferences", "key": "editor", "value": "Helix"}},
    "wrong_item_type": {"facts": [{"category": "preferences", "key": "editor", "value": {"name": "Helix"}}]},
    "enormous_list": MANY,
    "not_an_object": ["Helix"],
}


@pytest.fixture
def existing(user: Any) -> MemoryFact:
    return MemoryFact.objects.create(user=user, category="preferences", key="favourite_editor", value="Neovim")


def _assert_untouched(fact: MemoryFact) -> None:
    assert list(MemoryFact.objects.values_list("key", "value")) == [("favourite_editor", "Neovim")]
    fresh = MemoryFact.objects.get(pk=fact.pk)
    assert fresh.updated_at == fact.updated_at
    assert not MemoryFactChange.objects.exists()


@pytest.mark.parametrize("answer", list(BAD_ANSWERS.values()), ids=list(BAD_ANSWERS))
def test_bad_answers_are_retried_once_then_skipped(llm: Any, user: Any, existing: MemoryFact, answer: Any) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, answer)
    reply_json(llm, answer)

    assert extract_session.run(str(session.id)) == "failed"

    assert len(llm.chat_requests) == 2  # the try and one retry; no summary call
    state = SessionMemoryState.objects.get(session=session)
    assert (state.extracted_up_to_seq, state.attempts, state.claim_token) == (0, 1, "")
    assert state.last_error.startswith("InvalidOutput")
    _assert_untouched(existing)
    assert stale_sessions(user_id=user.pk) == [session.id]  # tried again on the next run


def test_a_good_retry_is_used(llm: Any, user: Any, existing: MemoryFact) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, "not json")
    reply_json(llm, {"facts": [{"category": "preferences", "key": "favourite_editor", "value": "Helix",
                                "confidence": 0.9}], "forget": []})
    llm.script(text="summary")
    assert extract_session.run(str(session.id)) == "extracted"
    assert MemoryFact.objects.get(pk=existing.pk).value == "Helix"
    assert SessionMemoryState.objects.get(session=session).attempts == 0


def test_timeout_is_retried_once_then_skipped(llm: Any, user: Any, existing: MemoryFact, settings: Any) -> None:
    settings.MEMORY_LLM_TIMEOUT = 0.3
    session = make_session(user, TURNS)
    llm.script(text='{"facts": [], "forget": []}', hang_before_first_chunk=3.0)
    llm.script(text='{"facts": [], "forget": []}', hang_before_first_chunk=3.0)
    started = time.monotonic()

    assert extract_session.run(str(session.id)) == "failed"

    assert time.monotonic() - started < 2.0
    # The second request may still be on its way in when the client gives up on it (a loaded machine):
    # it counts once the fake has read it.
    assert llm.wait_for_sync(lambda fake: len(fake.chat_requests) == 2, within=5)
    state = SessionMemoryState.objects.get(session=session)
    assert state.attempts == 1 and "did not answer within 0.3 s" in state.last_error
    assert state.extracted_up_to_seq == 0
    _assert_untouched(existing)


def test_model_server_errors_are_recorded(llm: Any, user: Any, existing: MemoryFact) -> None:
    session = make_session(user, TURNS)
    llm.script(http_status=500, error="out of memory")
    llm.script(http_status=500, error="out of memory")
    assert extract_session.run(str(session.id)) == "failed"
    assert "out of memory" in SessionMemoryState.objects.get(session=session).last_error
    _assert_untouched(existing)


def test_repeated_failures_wait_for_new_activity(llm: Any, user: Any) -> None:
    from tests.memory.conftest import add_turns

    session = make_session(user, TURNS)
    SessionMemoryState.objects.create(session=session, attempts=5, attempted_at=session.last_active)
    assert stale_sessions(user_id=user.pk) == []
    add_turns(session, [("user", "more")])
    assert stale_sessions(user_id=user.pk) == [session.id]


def test_empty_keys_and_oversized_fields_are_dropped(llm: Any, user: Any, existing: MemoryFact) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, {"facts": [
        {"category": "preferences", "key": "", "value": "Helix", "confidence": 1},
        {"category": "preferences", "key": "  !!  ", "value": "Helix", "confidence": 1},
        {"category": "preferences", "key": "k" * 101, "value": "x", "confidence": 1},
        {"category": "preferences", "key": "long_value", "value": "x" * 501, "confidence": 1},
        {"category": "preferences", "key": "empty_value", "value": "  ", "confidence": 1},
        {"category": "astrology", "key": "Star Sign", "value": "Leo", "confidence": 0.9},
    ], "forget": [{"category": "preferences", "key": ""}]})
    llm.script(text="summary")
    assert extract_session.run(str(session.id)) == "extracted"
    assert sorted(MemoryFact.objects.values_list("category", "key", "value")) == [
        ("other", "star_sign", "Leo"), ("preferences", "favourite_editor", "Neovim"),
    ]
    _ = existing


def test_parser_normalises_and_validates() -> None:
    parsed = parse_extraction(
        '```json\n{"facts": [{"category": "Preference", "key": "Größe in CM", "value": 180, "confidence": 7},'
        '{"category": "work", "key": "guess", "value": "maybe", "confidence": 0.1}], "forget": []}\n```'
    )
    assert [(f.category, f.key, f.value, f.confidence) for f in parsed.facts] == [
        ("preferences", "größe_in_cm", "180", 1.0)
    ]
    with pytest.raises(InvalidOutput):
        parse_extraction('{"facts": [{"key": "a", "value": "b", "confidence": "NaN"}]}')
    with pytest.raises(InvalidOutput):
        parse_extraction('{"forget": []}')
