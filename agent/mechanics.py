"""Thinking mechanics (spec 001 table): iteration budget, goal anchoring, anti-stall,
adaptive re-plan. Each produces transient system messages for the next LLM call;
nothing here is stored in the session.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.llm.base import ChatMessage
from agent.profiles import ProfileSpec


def budget_message(iteration: int, max_iterations: int) -> ChatMessage:
    remaining = max_iterations - iteration
    urgency = (
        " This is the last step: answer the user now with what you have."
        if remaining == 0
        else " Wrap up soon: finish the current step and answer." if remaining <= 2 else ""
    )
    return ChatMessage(
        role="system",
        content=f"Iteration budget: step {iteration} of {max_iterations} ({remaining} left after this one).{urgency}",
    )


def goal_anchor_message(goal: str, todo: Sequence[dict[str, Any]]) -> ChatMessage:
    lines = [f"Goal reminder — the user asked: {goal.strip()[:1500]}"]
    if todo:
        done = sum(1 for s in todo if s.get("status") == "done")
        lines.append(f"Todo progress: {done}/{len(todo)} steps done.")
        nxt = next((s for s in todo if s.get("status") in ("in_progress", "pending")), None)
        if nxt is not None:
            lines.append(f"Next step: {nxt.get('title', '')}")
    lines.append("Stay on this goal; do not drift into unrelated work.")
    return ChatMessage(role="system", content="\n".join(lines))


def stall_message(iterations: int) -> ChatMessage:
    return ChatMessage(
        role="system",
        content=(
            f"Anti-stall warning: {iterations} iterations have passed without progress on the todo list. "
            "Stop repeating the same actions. Either complete the current step (and mark it done), mark it "
            "failed and choose another approach, or answer the user with what you have and what is blocking you."
        ),
    )


def replan_message(failed: Sequence[str]) -> ChatMessage:
    steps = "; ".join(failed)
    return ChatMessage(
        role="system",
        content=(
            f"A plan step failed: {steps}. Re-plan before continuing: think about why it failed, update the "
            "todo list (todo action=set or update) with a different approach for the remaining work, then go on."
        ),
    )


@dataclass
class Mechanics:
    """Per-turn state of the thinking mechanics."""

    profile: ProfileSpec
    goal: str
    max_iterations: int
    _last_done: int = -1
    _stalled_for: int = 0
    _failed_seen: set[str] = field(default_factory=set)
    _queued_replan: list[str] = field(default_factory=list)

    def injections(self, iteration: int, todo: Sequence[dict[str, Any]]) -> list[ChatMessage]:
        """Messages appended to the context of this iteration's LLM call (steps 2–4)."""
        p = self.profile
        out: list[ChatMessage] = []
        if p.iteration_budget_enabled:
            out.append(budget_message(iteration, self.max_iterations))
        if p.goal_anchoring_enabled and p.goal_anchoring_interval > 0 and iteration > 1 \
                and (iteration - 1) % p.goal_anchoring_interval == 0:
            out.append(goal_anchor_message(self.goal, todo))
        if p.anti_stall_enabled and self._stalled_for >= max(1, p.anti_stall_threshold):
            out.append(stall_message(self._stalled_for))
            self._stalled_for = 0
        if self._queued_replan:
            out.append(replan_message(self._queued_replan))
            self._queued_replan = []
        return out

    def after_iteration(self, todo: Sequence[dict[str, Any]]) -> None:
        """Step 7: update the anti-stall counter and detect newly failed steps."""
        done = sum(1 for s in todo if s.get("status") == "done")
        if done > self._last_done:
            self._stalled_for = 0
        else:
            self._stalled_for += 1
        self._last_done = max(done, self._last_done)
        failed = {str(s.get("title", "")) for s in todo if s.get("status") == "failed"}
        new = sorted(failed - self._failed_seen)
        self._failed_seen |= failed
        if new and self.profile.adaptive_replan_enabled:
            self._queued_replan.extend(new)
