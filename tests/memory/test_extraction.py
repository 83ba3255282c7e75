"""Extraction against the fake Ollama server over real HTTP."""
from __future__ import annotations

from typing import Any

import pytest

from memory_app.models import MemoryFact, MemoryFactChange, MemorySummary, SessionMemoryState
from memory_app.tasks import extract_session
from tests.memory.conftest import FACTS_EDITOR, add_turns, chat_text, make_session, reply_json

pytestmark = pytest.mark.django_db

TURNS = [("user", "I use Neovim on my Debian 12 home server."), ("assistant", "Noted, Neovim on Debian.")]


def test_new_facts_are_extracted_with_provenance_and_summary(llm: Any, user: Any) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, FACTS_EDITOR)
    llm.script(text="Alice edits with Neovim and runs Debian 12 at home.")

    assert extract_session.run(str(session.id)) == "extracted"

    facts = {(f.category, f.key): f for f in MemoryFact.objects.filter(user=user)}
    assert set(facts) == {("preferences", "favourite_editor"), ("environment", "home_server_os")}
    editor = facts[("preferences", "favourite_editor")]
    assert (editor.value, editor.confidence, editor.source_session_id) == ("Neovim", 0.9, session.id)
    # No "source" in the answer: the user message that shares the fact's words, not the end of the window.
    assert editor.source_message.content == "I use Neovim on my Debian 12 home server."
    request = llm.chat_requests[0].json
    assert request["format"]["required"] == ["facts", "forget"]
    assert request["think"] is False and request["options"]["temperature"] == 0.1
    assert "I use Neovim" in chat_text(llm.chat_requests[0])
    summary = MemorySummary.objects.get(user=user)
    assert summary.text == "Alice edits with Neovim and runs Debian 12 at home."
    assert summary.stale is False
    assert "Neovim" in chat_text(llm.chat_requests[1])  # the summary call saw the facts
    state = SessionMemoryState.objects.get(session=session)
    assert state.extracted_up_to_seq == 2 and state.attempts == 0 and state.claim_token == ""


def test_changed_value_replaces_the_old_one_and_is_recorded(llm: Any, user: Any) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, FACTS_EDITOR)
    llm.script(text="summary 1")
    extract_session.run(str(session.id))

    add_turns(session, [("user", "I switched to Helix, by the way."), ("assistant", "Helix it is.")])
    reply_json(llm, {"facts": [{"category": "preferences", "key": "favourite_editor", "value": "Helix",
                                "confidence": 0.95}], "forget": []})
    llm.script(text="summary 2")
    extract_session.run(str(session.id))

    fact = MemoryFact.objects.get(user=user, key="favourite_editor")
    assert fact.value == "Helix"
    change = MemoryFactChange.objects.get(fact=fact)
    assert (change.old_value, change.new_value, change.reason) == ("Neovim", "Helix", "contradicted")
    assert change.session_id == session.id
    assert MemoryFact.objects.filter(user=user).count() == 2
    assert MemorySummary.objects.get(user=user).text == "summary 2"


def test_a_fact_filed_under_another_category_later_replaces_the_old_one(llm: Any, user: Any) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, FACTS_EDITOR)
    llm.script(text="summary 1")
    extract_session.run(str(session.id))

    add_turns(session, [("user", "Helix is my editor now."), ("assistant", "Helix it is.")])
    reply_json(llm, {"facts": [{"category": "work", "key": "favourite_editor", "value": "Helix",
                                "confidence": 0.95}], "forget": []})
    llm.script(text="summary 2")
    extract_session.run(str(session.id))

    editors = [(f.category, f.value) for f in MemoryFact.objects.filter(user=user, key="favourite_editor")]
    assert editors == [("work", "Helix")]


def test_forget_entries_delete_facts(llm: Any, user: Any) -> None:
    MemoryFact.objects.create(user=user, category="preferences", key="favourite_editor", value="Neovim")
    session = make_session(user, [("user", "Forget which editor I use.")])
    reply_json(llm, {"facts": [], "forget": [{"category": "preferences", "key": "Favourite Editor"}]})
    extract_session.run(str(session.id))
    assert not MemoryFact.objects.filter(user=user).exists()
    assert MemorySummary.objects.get(user=user).text == ""  # no facts: empty summary, no LLM call
    assert len(llm.chat_requests) == 1


def test_redelivered_task_does_nothing_twice(llm: Any, user: Any) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, FACTS_EDITOR)
    llm.script(text="summary")
    extract_session.run(str(session.id))
    extract_session.run(str(session.id))  # redelivery
    assert len(llm.chat_requests) == 2  # one extraction + one summary, nothing more
    assert MemoryFact.objects.filter(user=user).count() == 2
    assert MemoryFactChange.objects.count() == 0


def test_a_claimed_session_is_left_alone(llm: Any, user: Any) -> None:
    from memory_app.extraction import claim, release

    session = make_session(user, TURNS)
    token = claim(session.id)
    assert token is not None
    assert extract_session.run(str(session.id)) == "busy"
    assert llm.chat_requests == []
    release(session.id, token)
    reply_json(llm, FACTS_EDITOR)
    assert extract_session.run(str(session.id)) == "extracted"


def test_only_new_messages_are_sent(llm: Any, user: Any) -> None:
    session = make_session(user, TURNS)
    reply_json(llm, {"facts": [], "forget": []})
    extract_session.run(str(session.id))
    add_turns(session, [("user", "My daughter is called Mia.")])
    add_turns(session, [("tool", "TOOL NOISE output")], tool_call_id="c1", name="web_search")
    reply_json(llm, {"facts": [{"category": "people", "key": "daughter_name", "value": "Mia",
                                "confidence": 1}], "forget": []})
    llm.script(text="Alice has a daughter, Mia.")
    extract_session.run(str(session.id))

    sent = chat_text(llm.chat_requests[1])
    assert "My daughter is called Mia." in sent
    assert "I use Neovim" not in sent and "TOOL NOISE" not in sent
    assert SessionMemoryState.objects.get(session=session).extracted_up_to_seq == 4


def test_input_respects_the_context_budget(llm: Any, user: Any, settings: Any) -> None:
    from memory_app.llm import input_budget_chars

    settings.OLLAMA_NUM_CTX = 2048  # ≈ 4 600 characters of prompt, ~3 000 for the conversation
    turns = [("user", f"Message {i}: " + "x" * 700) for i in range(8)]
    session = make_session(user, turns)
    for _ in range(8):
        reply_json(llm, {"facts": [], "forget": []})

    extract_session.run(str(session.id))

    budget = input_budget_chars()
    first = llm.chat_requests[0]
    assert len(chat_text(first)) <= budget
    assert first.json["options"]["num_ctx"] == 2048
    assert len(llm.chat_requests) > 1
    assert "Message 0:" in chat_text(first) and "Message 7:" not in chat_text(first)
    # Every message was sent exactly once, in order, over several batches.
    sent = [chat_text(r) for r in llm.chat_requests]
    assert all(len(t) <= budget for t in sent)
    for i in range(8):
        assert sum(f"Message {i}:" in t for t in sent) == 1
    assert SessionMemoryState.objects.get(session=session).extracted_up_to_seq == 8


def test_a_message_larger_than_the_budget_is_cut(llm: Any, user: Any, settings: Any) -> None:
    from memory_app.llm import input_budget_chars

    settings.OLLAMA_NUM_CTX = 1024
    session = make_session(user, [("user", "y" * 20_000)])
    reply_json(llm, {"facts": [], "forget": []})
    extract_session.run(str(session.id))
    assert len(chat_text(llm.chat_requests[0])) <= input_budget_chars()
    assert "…[truncated]" in chat_text(llm.chat_requests[0])
    assert SessionMemoryState.objects.get(session=session).extracted_up_to_seq == 1


def test_active_sessions_wait_unless_named(llm: Any, user: Any) -> None:
    from memory_app.extraction import extract_session as run

    session = make_session(user, TURNS, idle_minutes=5)
    assert extract_session.run(str(session.id)) == "not_idle"
    reply_json(llm, FACTS_EDITOR)
    assert run(session.id, ignore_idle=True, rebuild_summary=False).status == "extracted"


def test_only_tool_noise_moves_the_watermark_without_a_call(llm: Any, user: Any) -> None:
    session = make_session(user, [("tool", "output")])
    assert extract_session.run(str(session.id)) == "nothing_new"
    assert llm.chat_requests == []
    assert SessionMemoryState.objects.get(session=session).extracted_up_to_seq == 1


PROVENANCE_TURNS = [
    ("user", "My daughter Mia starts school in September."),
    ("assistant", "How exciting for Mia!"),
    ("user", "Also, I run Arch Linux on my laptop."),
    ("assistant", "Arch, nice."),
    ("user", "What's the weather like?"),
    ("assistant", "Sunny."),
]


def test_each_fact_records_the_message_that_stated_it(llm: Any, user: Any) -> None:
    session = make_session(user, PROVENANCE_TURNS)
    reply_json(llm, {"facts": [
        {"category": "people", "key": "daughter_name", "value": "Mia", "confidence": 0.9, "source": 1},
        {"category": "environment", "key": "laptop_os", "value": "Arch Linux", "confidence": 0.9, "source": "#3"},
    ], "forget": []})
    llm.script(text="summary")
    assert extract_session.run(str(session.id)) == "extracted"

    sent = chat_text(llm.chat_requests[0])
    assert "[#1] User: My daughter Mia" in sent and "[#3] User: Also, I run Arch" in sent
    assert llm.chat_requests[0].json["format"]["properties"]["facts"]["items"]["required"][-1] == "source"
    facts = {f.key: f for f in MemoryFact.objects.filter(user=user).select_related("source_message")}
    assert facts["daughter_name"].source_message.content == "My daughter Mia starts school in September."
    assert facts["laptop_os"].source_message.content == "Also, I run Arch Linux on my laptop."
    assert facts["laptop_os"].source_message.seq == 3
    last = session.message_rows.order_by("-seq").first()
    assert all(f.source_message_id != last.pk for f in facts.values())  # never the end of the window


@pytest.mark.parametrize("source", [2, 99, -1, "three", None, True])
def test_a_wrong_or_missing_source_falls_back_to_the_words_of_the_fact(llm: Any, user: Any, source: Any) -> None:
    """An assistant message, a number outside the batch or junk: the user message sharing the fact's words."""
    session = make_session(user, PROVENANCE_TURNS)
    reply_json(llm, {"facts": [
        {"category": "environment", "key": "laptop_os", "value": "Arch Linux", "confidence": 0.9, "source": source},
    ], "forget": []})
    llm.script(text="summary")
    assert extract_session.run(str(session.id)) == "extracted"
    fact = MemoryFact.objects.select_related("source_message").get(user=user)
    assert fact.source_message.content == "Also, I run Arch Linux on my laptop."


def test_a_fact_no_user_message_mentions_gets_no_provenance(llm: Any, user: Any) -> None:
    session = make_session(user, PROVENANCE_TURNS)
    reply_json(llm, {"facts": [
        {"category": "work", "key": "employer", "value": "ACME Corp", "confidence": 0.9, "source": 6},
    ], "forget": []})
    llm.script(text="summary")
    extract_session.run(str(session.id))
    fact = MemoryFact.objects.get(user=user)
    assert fact.source_session_id == session.id and fact.source_message_id is None
