"""The memory tools the model calls: memory_search, memory_forget, memory_save.

They act for ``agent.ctx.current_user_id`` only; without a user they refuse.
"""
from __future__ import annotations

from typing import Any, ClassVar

from asgiref.sync import sync_to_async

from agent.ctx import current_session_id, current_user_id
from agent.ports import SUMMARY, Doubt
from memory_app import selectors, services
from memory_app.models import CATEGORIES, MemoryFact, MemoryFactChange
from memory_app.normalize import MAX_KEY, MAX_VALUE, normalize_category
from memory_app.search import search_facts
from navi_site.errors import NaviError
from tools_app.base import (
    QUESTION_STORED,
    Tool,
    ToolError,
    ToolResult,
    content_words,
    kept_not_scheduled,
    takes_a_word,
    the_question,
)

MAX_RESULTS = 20


def _user_id() -> int:
    user_id = current_user_id.get()
    if user_id is None:
        raise ToolError("Long-term memory is not available here: no user is signed in for this run.")
    return user_id


def _session_id() -> str | None:
    """The current persistent session (subagents have no persistent session: no provenance)."""
    sid = current_session_id.get()
    return None if not sid or sid.startswith("subagent_") else sid


def _describe(fact: MemoryFact) -> str:
    return f"#{fact.pk} [{fact.category}] {fact.key}: {fact.value} (learned {fact.created_at:%Y-%m-%d})"


def _search(user_id: int, query: str, category: str | None, limit: int) -> list[MemoryFact]:
    if query.strip():
        return search_facts(user_id=user_id, query=query, limit=limit, category=category)
    return list(selectors.fact_list(user_id=user_id, category=category)[:limit])


class MemorySearchTool(Tool):
    name = "memory_search"
    description = (
        "Search what you remember long-term about the user (facts from earlier conversations), by keywords. "
        "Call memory_search when the user mentions something personal or before making assumptions about "
        "their environment. Do not call at session start reflexively — only when context warrants it. "
        "Returns matching facts, best first, as '#id [category] key: value (learned date)'."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Keywords, e.g. 'editor' or 'home server os'."},
            "category": {"type": "string", "enum": list(CATEGORIES), "description": "Only this category."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Default 10."},
        },
        "required": ["query"],
    }

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        user_id = _user_id()
        query = str(params.get("query") or "")[:500]
        category = normalize_category(params["category"]) if params.get("category") else None
        if not query.strip() and category is None:
            raise ToolError("Give a 'query' (keywords) or a 'category'.")
        try:
            limit = max(1, min(MAX_RESULTS, int(params.get("limit") or 10)))
        except (TypeError, ValueError):
            raise ToolError("'limit' must be a whole number from 1 to 20.") from None
        facts = await sync_to_async(_search)(user_id, query, category, limit)
        if not facts:
            return ToolResult(success=True, output=f"No remembered facts match {query!r}.")
        return ToolResult(success=True, output="\n".join(_describe(f) for f in facts))


def _forget(user_id: int, params: dict[str, Any]) -> MemoryFact | None:
    if params.get("id") not in (None, ""):
        try:
            fact = services.fact_access(user_id=user_id, fact_id=str(params["id"]).lstrip("#"))
        except NaviError:
            return None
        services.fact_delete(fact=fact)
        services.summary_rebuild_later(user_id=user_id)
        return fact
    if not params.get("key"):
        raise ToolError("Give the fact's 'id' (from memory_search) or its 'category' and 'key'.")
    fact = services.fact_forget(user_id=user_id, category=str(params.get("category") or ""), key=str(params["key"]))
    if fact is not None:
        services.summary_rebuild_later(user_id=user_id)
    return fact


class MemoryForgetTool(Tool):
    name = "memory_forget"
    description = (
        "Delete one fact from long-term memory, by its id from memory_search or by category and key. "
        "Call memory_forget only when explicitly asked (the user asks you to forget something, or says a "
        "remembered fact is wrong)."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "description": "The fact's id, shown as #id by memory_search."},
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "key": {"type": "string", "description": "The fact's key, e.g. 'favourite_editor'."},
        },
    }

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        user_id = _user_id()
        fact = await sync_to_async(_forget)(user_id, params)
        if fact is None:
            raise ToolError("No such fact in memory; use memory_search to find its id.")
        return ToolResult(success=True, output=f"Forgot [{fact.category}] {fact.key}: {fact.value}")


def _save(user_id: int, params: dict[str, Any]) -> services.UpsertResult:
    try:
        result = services.fact_upsert(
            user_id=user_id, category=str(params.get("category") or "other"), key=str(params.get("key") or ""),
            value=str(params.get("value") or ""), confidence=1.0, session_id=(sid := _session_id()),
            message_id=selectors.stating_message_id(session_id=sid) if sid else None,
            reason=MemoryFactChange.Reason.USER_REQUEST,
            one_per_key=True,
        )
    except NaviError as exc:
        raise ToolError(exc.message) from None
    services.summary_rebuild_later(user_id=user_id)
    return result


class MemorySaveTool(Tool):
    name = "memory_save"
    description = (
        "Remember a fact about the user for later chats; not for notes, to-dos or reminders. It is saved to "
        "long-term memory right away, so you know it in future conversations. "
        "Call memory_save only when the user asks you to remember something, or explicitly states a lasting "
        "preference ('from now on, always ...'). Do not save guesses, one-off details or secrets (passwords, "
        "keys). Saving a key again replaces its old value, whatever the category."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "key": {"type": "string", "maxLength": MAX_KEY, "description": "Short snake_case name, e.g. 'shell'."},
            "value": {"type": "string", "maxLength": MAX_VALUE, "description": "The fact, one short statement."},
        },
        "required": ["category", "key", "value"],
    }

    def records(self, params: dict[str, Any]) -> bool:
        """A fact is words kept: a file it names is not read by saving it (``Tool.records``)."""
        return True

    def doubt(self, params: dict[str, Any], request: str) -> Doubt | None:
        """A fact that takes no word or number of the user's words is no fact they told: the 0.5B saved
        "time_now: 2026-11-28T05:42Z" for "What is my server called?" (round 12). Advisory: a fact told in an
        earlier message ("Remember that.") is saved when the call is made again. Loosely too, a fact for a request
        that says when something is to happen ("in 3 minutes", "hourly": ``kept_not_scheduled``)."""
        value = str(params.get("value") or "")
        if the_question(value, request):
            return Doubt(reason=QUESTION_STORED.format(what=f"The fact {value[:120]!r}"), answer=True)
        if not request.strip() or not content_words(value) or takes_a_word(value, request):
            return kept_not_scheduled(request, [value, str(params.get("key") or "").replace("_", " ")], what="a fact",
                                      done="saved", keep="save a fact") if content_words(value) else None
        return Doubt(reason=f"the fact {value[:120]!r} is nothing the user's words ({request[:160]!r}) say, so it "
                            "was not saved. Save only what the user told you; if they asked something, answer it.",
                     answer=True, repeated_runs=True)

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        user_id = _user_id()
        result = await sync_to_async(_save)(user_id, params)
        fact = result.fact
        verb = "Saved" if result.created else "Updated" if result.changed else "Already remembered"
        return ToolResult(success=True, output=f"{verb}: [{fact.category}] {fact.key}: {fact.value} (#{fact.pk})",
                          metadata={SUMMARY: f"I'll remember this: {fact.key.replace('_', ' ')}: {fact.value}."})


MEMORY_TOOLS: tuple[type[Tool], ...] = (MemorySearchTool, MemoryForgetTool, MemorySaveTool)
