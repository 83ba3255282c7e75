"""Planning phases 1–3 (spec 001 "Planning phase").

Phase 1 classifies the request (``DIRECT`` → no plan) and analyses it, ending with
``REFLECT: yes/no``. Phase 2 (only with ``planning_phase2_enabled`` and ``REFLECT: yes``)
reviews the analysis as Critic, Pragmatist, Detailer and Plan Adjustments. Phase 3
writes milestones and numbered steps, each with an executor ``TOOL: name``,
``AGENT: profile_id`` or ``SELF``. All calls: think=False, temperature 0.3, no tools.
Malformed output at any phase skips planning.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from agent.llm.base import ChatMessage, LLMBackend, LLMError

log = structlog.get_logger(__name__)

MAX_STEPS = 15
PLANNING_TEMPERATURE = 0.3
_STEP = re.compile(r"^\s*(\d+)[\.\)]\s+(.+)$", re.MULTILINE)
_REFLECT = re.compile(r"REFLECT:\s*(yes|no)", re.IGNORECASE)
_EXECUTOR = re.compile(r"\s*[\[(—–-]*\s*(TOOL:\s*[\w.-]+|AGENT:\s*[\w.-]+|SELF)\s*[\])]*\s*$", re.IGNORECASE)

PHASE1 = """\
You are the planning module of an AI agent. Decide whether the user's request needs a plan.

If it is simple (a greeting, a question answerable directly or with one tool call, small talk),
answer with exactly the single word: DIRECT

Otherwise write a short analysis:
- Goal: what the user really wants, in one sentence.
- Complexity: medium (several steps) or complex (many steps, autonomy, uncertainty).
- Information needed and where to get it (which tools, files, URLs).
- Risks and unknowns.
Finish with one line: REFLECT: yes   (if the plan would benefit from a critical review)
                  or: REFLECT: no

Available tools: {tools}
Available subagent profiles: {profiles}"""

PHASE2 = """\
Review this analysis of a user request before a plan is written. Answer in four sections:
## Critic
Wrong assumptions, risks, contradictions, facts that must be verified.
## Pragmatist
A simpler path, unnecessary steps, better choices of tool or subagent.
## Detailer
Missing requirements, source files/docs/tools to inspect, how each result will be validated.
## Plan Adjustments
Concrete changes the plan must apply.

Analysis:
{analysis}"""

PHASE3 = """\
Write the execution plan for the user's request.

Format:
Milestones: one line naming the 1-3 milestones.
Then a numbered list of steps, one per line: `N. <what to do> — <executor>` where executor is
one of:
- TOOL: <tool_name>   a single tool call
- AGENT: <profile_id> a bounded subtask of 3+ tool calls delegated to a subagent
- SELF                synthesis or a context-dependent action done by you
Depth: simple 1-3 steps, medium 5-9 steps, complex 8-15 steps. Never more than 15 steps.
Comma test: if a step lists several things joined by "and" or commas, split it into separate steps.
The last step delivers the answer to the user.

Available tools: {tools}
Available subagent profiles: {profiles}

Analysis:
{analysis}
{review}"""


@dataclass(frozen=True, slots=True)
class Plan:
    text: str
    steps: tuple[str, ...]


def parse_steps(text: str) -> list[str]:
    """The numbered steps of a plan (titles without executors), at most MAX_STEPS."""
    steps = []
    for match in _STEP.finditer(text):
        title = _EXECUTOR.sub("", match.group(2)).strip(" -—–*`")
        if title:
            steps.append(title)
    return steps[:MAX_STEPS]


def _trim_plan(text: str) -> str:
    """The plan text cut after step MAX_STEPS (the hard maximum)."""
    matches = list(_STEP.finditer(text))
    if len(matches) <= MAX_STEPS:
        return text.strip()
    return text[: matches[MAX_STEPS].start()].strip()


async def make_plan(
    backend: LLMBackend,
    *,
    model: str,
    request: str,
    history: Sequence[ChatMessage],
    tools: Sequence[str],
    profiles: Sequence[str],
    phase2_enabled: bool,
    num_ctx: int | None = None,
) -> Plan | None:
    """Run phases 1–3; None when no plan is needed or the output is unusable."""
    fmt = {"tools": ", ".join(tools) or "none", "profiles": ", ".join(profiles) or "none"}
    recent = [m for m in history if m.role in ("user", "assistant") and m.content][-6:]

    async def ask(system: str) -> str:
        messages = [ChatMessage(role="system", content=system), *recent]
        if not recent or recent[-1].content != request:
            messages.append(ChatMessage(role="user", content=request))
        completion = await backend.complete(
            messages, model=model, think=False, temperature=PLANNING_TEMPERATURE, num_ctx=num_ctx
        )
        return completion.text.strip()

    try:
        analysis = await ask(PHASE1.format(**fmt))
        if not analysis or analysis.upper().startswith("DIRECT"):
            return None
        reflect = _REFLECT.search(analysis)
        review = ""
        if phase2_enabled and reflect and reflect.group(1).lower() == "yes":
            review = await ask(PHASE2.format(analysis=analysis))
            review = f"\nReview to apply:\n{review}" if review else ""
        plan_text = await ask(PHASE3.format(analysis=analysis, review=review, **fmt))
    except LLMError as exc:
        log.warning("planning_failed", error=str(exc))
        return None
    if plan_text.upper().startswith("DIRECT"):
        return None
    steps = parse_steps(plan_text)
    if not steps:
        log.info("planning_skipped_malformed", preview=plan_text[:200])
        return None
    return Plan(text=_trim_plan(plan_text), steps=tuple(steps))
