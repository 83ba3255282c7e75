"""The agent loop: run_stream, run, run_ephemeral (spec 001, spec 003).

Each iteration: (1) stop check, (2) context with iteration budget and goal anchor,
(3) anti-stall warning, (4) queued re-plan, (5) the streamed LLM call, (6a) no tool
calls → save, StreamEnd, workers, (6b) tool calls → run each, events, results into
the context, (7) anti-stall counters and failed steps, (8) profile switch reload.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeGuard

import structlog
from asgiref.sync import sync_to_async
from django.conf import settings

from agent import ctx, gate, ports
from agent.aids import (
    DOUBTED,
    ECHOED,
    GUESSED,
    NOT_RUN,
    QUOTED,
    REPEATED,
    Decision,
    LoopState,
    asked,
    framing_openers,
    held_words,
    instruction_openers,
    interpret,
    names_a_file,
    notes,
    nudges,
    observe,
    only_doubted,
    poor_answer,
    request_openers,
    result_openers,
    results,
    retry_messages,
    steering,
    successes,
    summary_of,
    unfounded,
    unfounded_note,
    unread_answer,
    unread_note,
    writes_text_calls,
)
from agent.compression import format_old, should_compress, split_turns, summarise, summary_message
from agent.context import ContextBuilder
from agent.decide import (
    CALL,
    NO_TOOL,
    StepDecision,
    argument_problem,
    attempted_tools,
    call_messages,
    call_schema,
    described_call,
    descriptions,
    parse_decision,
    without_unsaid_options,
)
from agent.decide import repair_note as decision_repair_note
from agent.domains import PROFILES, TOOLS, close_domains
from agent.events import (
    AgentEvent,
    ContextCompressed,
    Error,
    PlanReady,
    SteerAccepted,
    StreamDelta,
    StreamEnd,
    StreamStopped,
    ToolCall,
    ToolStarted,
    TurnThinking,
)
from agent.llm.base import ChatMessage, ConstraintsUnsupported, LLMBackend, LLMError, ToolCallRequest
from agent.llm.http_common import new_call_id
from agent.llm.registry import get_backend
from agent.mechanics import Mechanics
from agent.planner import make_plan
from agent.profiles import ProfileSpec, aload_profile
from agent.store import SessionNotFound, SessionState, SessionStore, repair_context
from agent.stream_guard import iter_stream_guarded
from agent.streaming import StreamedCall
from agent.textcalls import extract_text_tool_calls
from agent.toolplan import FIND_TOOLS, ToolPlan, estimate_tokens, loaded_tools, plan_tools
from agent.toolrun import ToolOutcome, canonical, execute_with_sink
from agent.turn import Turn

log = structlog.get_logger(__name__)

SUBAGENT_EXCLUDED = frozenset({"spawn_agent", "switch_profile"})
MAX_NAMED_READS = 3  # files a message names that Navi reads for a small model that would not (named_files)
class AgentError(Exception):
    """A turn ended with an error event (run() raises it with the event's message)."""




# What a call generated again came to (``Agent._decide_again``), besides a new decision.
STOPPED, ANSWER, UNCHANGED = object(), object(), object()
# Why an answer before any tool ran is decided again (``Agent._may_reconsider``); {why}: what is wrong with it.
RECONSIDER = ("{why}, before any tool did what the user asked; if one of the tools does it, call it; "
              f"else choose {NO_TOOL} and answer in words")


# A constrained decision (one call) ends here: a grammar does not end a list that keeps growing, and a server that
# shifts its context when it fills (Ollama) would generate for ever. About 750 words of a file's content; a call
# the model writes itself, before any grammar, has no cap. (real_model's server stops a request at 1024 too.)
DECISION_MAX_TOKENS = 1024


def _max_context() -> int:
    return int(settings.OLLAMA_NUM_CTX)


class Agent:
    def __init__(self, *, store: SessionStore, builder: ContextBuilder | None = None) -> None:
        self.store = store
        self.builder = builder or ContextBuilder()

    # ------------------------------------------------------------------ entry points
    async def run_stream(
        self,
        session_id: str,
        user_message: str,
        *,
        images: Sequence[str] = (),
        files: Sequence[dict[str, Any]] = (),
        is_recall: bool = False,
        stop_event: asyncio.Event | None = None,
        user_id: int | None = None,
        user_role: str | None = None,
        run_id: str | None = None,
        planning: bool = True,
        rules: gate.RunRules | None = None,
        tainted_by: Sequence[str] = (),
        user_metadata: dict[str, Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Stream one turn. Ends with StreamEnd (+ ContextCompressed), StreamStopped or Error.

        ``rules``: an unattended run's own rules (a recall's; None for a live turn); ``tainted_by``:
        untrusted content the turn starts with (an incoming message), see ``agent.gate``;
        ``user_metadata``: stored with the user message (an edited exchange's branch group)."""
        run_id = run_id or uuid.uuid4().hex[:16]
        stop_event = stop_event or asyncio.Event()
        saved = ctx.snapshot()
        structlog.contextvars.bind_contextvars(session_id=str(session_id), run_id=run_id)
        turn: Turn | None = None
        try:
            try:
                state = await self.store.load(str(session_id))
            except SessionNotFound as exc:
                yield Error(message=str(exc))
                return
            profile = _capped(_session_model(await aload_profile(state.profile_id), state), rules)
            role = user_role or ("staff" if state.owner_is_staff else "user")
            self._set_context(str(session_id), stop_event, user_id or state.owner_id, role, state.owner_info, profile)
            content = _with_files(user_message, files)
            memory = await _memory(user_id or state.owner_id)
            history = repair_context([m.message for m in state.context])

            async def save(message: ChatMessage, buffer: str) -> None:
                await self.store.append(str(session_id), message, run_id=run_id, buffer=buffer)

            guard = gate.TurnGuard(taint=gate.Taint(tuple(tainted_by)), rules=rules, run_id=run_id)
            ctx.current_guard.set(guard)
            turn = Turn(session_id=str(session_id), profile=profile, history=history, save=save,
                        stop_event=stop_event, goal=user_message, memory=memory, guard=guard)
            await turn.add(ChatMessage(role="user", content=content, images=tuple(images), is_recall=is_recall,
                                       metadata=dict(user_metadata or {})))
            # Files the message names are noted, not announced: a line after the request saying they exist and
            # must be read made both small models read them themselves even when the user asked for a helper
            # (bench/tool_choice.py). An answer given without reading them is held instead (``_unread``).
            turn.named_files = tuple(name for name, _size in await _named_files(turn, user_message))
            if _compression_due(state.context_token_count):
                async for ev in self._compress(turn):
                    yield ev
            if planning and profile.planning_enabled and not stop_event.is_set():
                async for ev in self._plan(turn):
                    yield ev
            async for ev in self._iterate(turn):
                yield ev
            if turn.outcome in ("stop", "max_iterations"):
                await self.store.set_token_count(turn.session_id, turn.context_tokens)
                if _compression_due(turn.context_tokens):
                    async for ev in self._compress(turn):
                        yield ev
        except LLMError as exc:
            log.warning("turn_llm_error", error=str(exc))
            yield Error(message=str(exc))
        except Exception as exc:  # a bug: log with context, tell the user, keep the session usable
            log.exception("turn_failed")
            if turn is not None:
                await self.store.mark_interrupted(str(session_id), run_id)
            yield Error(message=f"Something went wrong inside Navi ({type(exc).__name__}: {exc}). "
                                "The turn was interrupted; you can send your message again.")
        finally:
            structlog.contextvars.unbind_contextvars("session_id", "run_id")
            ctx.restore(saved)

    async def run(self, session_id: str, user_message: str, **kwargs: Any) -> str:
        """The whole turn without streaming and without planning; returns the final text."""
        final = ""
        async for ev in self.run_stream(session_id, user_message, planning=False, **kwargs):
            if isinstance(ev, StreamEnd):
                final = ev.content
            elif isinstance(ev, Error):
                raise AgentError(ev.message)
        return final

    async def run_ephemeral(
        self,
        user_message: str,
        profile_id: str | None = None,
        *,
        parent_session_id: str | None = None,
        timeout: float | None = None,
    ) -> tuple[str, bool]:
        """A subagent with an in-memory context. Returns (result_text, completed_normally)."""
        saved = ctx.snapshot()
        sink = ctx.current_event_sink.get()
        stop_event = ctx.current_stop_event.get() or asyncio.Event()
        try:
            parent_profile = ctx.current_profile.get()
            if profile_id:
                profile = await aload_profile(profile_id)
            elif parent_session_id and not str(parent_session_id).startswith("subagent_"):
                parent = await self.store.load(parent_session_id)
                profile = _session_model(await aload_profile(parent.profile_id), parent)
            elif parent_profile is not None:
                profile = parent_profile
            else:
                raise LLMError("spawn_agent needs a profile_id when there is no parent session.")
            parent_guard = ctx.current_guard.get()
            guard = parent_guard.child() if isinstance(parent_guard, gate.TurnGuard) else gate.TurnGuard()
            profile = _capped(profile, guard.rules)
            session_id = parent_session_id or f"subagent_{uuid.uuid4().hex[:12]}"
            ctx.current_guard.set(guard)
            ctx.current_session_id.set(session_id)
            ctx.current_profile.set(profile)
            ctx.current_model.set(profile.model or settings.OLLAMA_DEFAULT_MODEL)
            memory = await _memory(ctx.current_user_id.get())
            messages: list[ChatMessage] = []

            async def save(message: ChatMessage, buffer: str) -> None:
                return None

            turn = Turn(session_id=session_id, profile=profile, history=messages, save=save, stop_event=stop_event,
                        goal=user_message, memory=memory, emit=False, subagent=True, persistent=False,
                        excluded_tools=SUBAGENT_EXCLUDED, guard=guard)
            await turn.add(ChatMessage(role="user", content=user_message))
            # A helper works in its parent's folder: the files its task names are noted there (named_files).
            turn.named_files = tuple(name for name, _size in await _named_files(turn, user_message))
            limit = timeout or float(profile.subagent_timeout_seconds)
            try:
                async with asyncio.timeout(limit) as deadline:
                    guard.deadline = deadline  # paused while one of its calls waits for approval
                    if profile.subagent_planning_enabled:
                        async for ev in self._plan(turn):
                            _forward(sink, ev)
                    async for ev in self._iterate(turn):
                        _forward(sink, ev)
            except TimeoutError:
                return (f"The subagent did not finish within {limit:.0f} s. {turn.final_text}".strip(), False)
            return turn.final_text, turn.outcome == "stop"
        finally:
            ctx.restore(saved)

    # ------------------------------------------------------------------ pieces
    def _set_context(self, session_id: str, stop_event: asyncio.Event, user_id: int | None, role: str,
                     info: dict[str, Any], profile: ProfileSpec) -> None:
        ctx.current_session_id.set(session_id)
        ctx.current_stop_event.set(stop_event)
        ctx.current_user_id.set(user_id)
        ctx.current_user_role.set(role)
        ctx.current_user_info.set(info)
        ctx.current_profile.set(profile)
        ctx.current_model.set(profile.model or settings.OLLAMA_DEFAULT_MODEL)

    async def _plan(self, turn: Turn) -> AsyncIterator[AgentEvent]:
        registry = await ports.tools().for_turn()
        profile = turn.profile
        plan = await make_plan(
            get_backend(profile.llm_backend), model=_model(profile), request=turn.goal, history=turn.history,
            tools=self._tool_names(registry, turn), profiles=await _profile_ids(), num_ctx=_max_context(),
            phase2_enabled=profile.planning_phase2_enabled,
        )
        if plan is None:
            return
        await turn.add(ChatMessage(role="assistant", content=plan.text, is_plan=True))
        if turn.subagent:  # a subagent's plan stays inside it: no card, and the parent's todo list is untouched
            return
        yield PlanReady(plan=plan.text)
        _set_todo(turn.session_id, list(plan.steps))

    def _tool_names(self, registry: Any, turn: Turn) -> list[str]:
        wanted = turn.profile.subagent_tools or turn.profile.enabled_tools if turn.subagent else turn.profile.enabled_tools
        return [n for n in registry.tools_for_profile(wanted)
                if n not in turn.excluded_tools and turn.guard.allows_tool(n) and registry.can_use(n)]

    async def _iterate(self, turn: Turn) -> AsyncIterator[AgentEvent]:
        registry = await ports.tools().for_turn()
        mech = Mechanics(profile=turn.profile, goal=turn.goal, max_iterations=turn.profile.max_iterations)
        aids = _aids_on(turn.profile)
        model = f"{turn.profile.llm_backend}:{_model(turn.profile)}"
        framing = getattr(registry, "framing", None)  # a ToolSet from before the port had it: no framing known
        state = LoopState(aids=aids, start=len(turn.history), model=model,
                          off=frozenset(turn.profile.local_model_aids_off),
                          framing=list(framing()) if framing is not None else [])
        # Decided once a turn: the same kind of request every step keeps a server's prompt cache.
        state.constrained = await self._constrained(turn, model)
        profile_ids = await _profile_ids()  # a closed domain of tool parameters (agent.domains)
        for iteration in range(1, turn.profile.max_iterations + 1):
            if turn.stop_event.is_set():
                turn.outcome = "stopped"
                yield StreamStopped()
                return
            for ev in await self._steer(turn, state, await _queued(turn)):
                yield ev
            names = self._tool_names(registry, turn)
            allow = bool(names) and not state.force_answer
            todo = _read_todo(turn.session_id)
            plan = self._tool_plan(registry, turn, names, {PROFILES: profile_ids, TOOLS: names})
            messages = (self._context(turn, without_doubted=not allow and only_doubted(turn, state))
                        + mech.injections(iteration, todo) + nudges(turn, state, allow, [] if turn.subagent else todo))
            if state.answer_retried and not allow:
                messages = [*messages, *retry_messages(turn.history[state.start:], state.retry_reason, state.echoed)]
            # With the aids on (or under constraints), text that may be a call written as JSON is held back
            # until it is clear; an answer after tools that opens like a refusal is held too.
            call = StreamedCall(self._stream(turn, messages, plan.schemas), emit=turn.emit,
                                holdback=state.on("text_calls") or state.constrained,
                                hold_refusal=self._may_retry(turn, state) or self._may_reconsider(turn, state, allow),
                                hold_openers=(*instruction_openers(),
                                              *(request_openers(asked(turn, state)) if state.small else ()),
                                              *(result_openers(turn.history[state.start:]) if state.small else ()),
                                              *framing_openers(state.framing)),
                                hold_all=(state.answer_retried and not allow or _after_note(turn, state)
                                          or self._unread(turn, state, bool(names), names) or _still_unread(turn, state)),
                                hold_words=held_words(turn.history[state.start:], turn.named_files)
                                if state.small and self._may_retry(turn, state) else 0)
            async for ev in call.events():
                yield ev
            turn.context_tokens = (call.prompt_tokens or 0) + (call.eval_tokens or 0) or turn.context_tokens
            if turn.stop_event.is_set():
                async for ev in self._stopped(turn, call):
                    yield ev
                return
            offered = list(dict.fromkeys([*plan.names, *names]))
            decision = interpret(call, turn, state, allow, offered, set(registry.names()))
            if aids:
                observe(state.model, structured=bool(call.tool_calls), text=decision.from_text)
            why = (self._poor(turn, state, decision, call, plan) if not decision.calls and decision.note is None
                   and not decision.replaced and self._may_reconsider(turn, state, allow) else None)
            if why == "a refusal" or why and state.doubted:
                # A refusal before any tool ran ("I'm sorry, but I don't have the time to answer your question."
                # for "Have you got the time?", the 0.5B; round 15): the model may lack no ability but the
                # thought of its tools; and no answer after a call was doubted (the 0.5B, told that its guessed
                # file for a note is not there, repeated the request, then Navi's note). It chooses once under the
                # grammar, a tool (not one withheld) or none; none answers again. Nobody saw the answer: a
                # refusal is held while streaming, and so is an answer to a doubt's note.
                state.reconsidered = True
                log.info("answer_reconsidered", reason=why, answer=decision.content[:200])
                again = await self._decide_again(turn, messages, plan, state, registry,
                                                 contradicted=(call.text, RECONSIDER.format(why=why)), none=True)
                if again is STOPPED:
                    yield StreamStopped()
                    return
                if again is ANSWER:
                    continue  # none chosen: the next step answers (force_answer is set)
                if isinstance(again, tuple):
                    decision = again[0]
            if decision.calls:
                decision = dataclasses.replace(decision, calls=[self._unsaid_dropped(c, plan, turn, state)
                                                                for c in decision.calls])
            doubt = self._doubt(registry, turn, state, decision.calls, plan.callable)
            if doubt is not None and doubt.fix is not None:
                decision = dataclasses.replace(decision, calls=_fixed(decision.calls, doubt))
                # The fixed call is doubted again, for what the fix did not touch (a reminder whose time was set as
                # the user said it, with an instruction taken from the memory block; round 21).
                doubt = _left_after_fix(self._doubt(registry, turn, state, decision.calls, plan.callable))
            withheld = next((c.name for c in decision.calls if c.name in state.withheld), None)
            if withheld is not None and state.constrained and allow:
                # Told that the tool has nothing for this request (``ports.Doubt.again``), the model calls it
                # again (the 0.5B guessed two files in an empty folder for a note and for a fact to keep,
                # then had no answer; round 14): the call is chosen again among the other tools, or none.
                log.info("call_withheld", tool=withheld)
                again = await self._decide_again(
                    turn, messages, plan, state, registry,
                    contradicted=(call.text, f"{withheld} was tried and has nothing for this request; choose "
                                             f"another tool, or {NO_TOOL} to answer in words"))
                if again is STOPPED:
                    yield StreamStopped()
                    return
                if again is ANSWER:
                    continue  # none chosen, or no usable call: the next step answers (force_answer is set)
                if isinstance(again, tuple):
                    decision, doubt = again
            contradicted = doubt is not None and not doubt.answer
            if state.constrained and allow and (contradicted or self._needs_constraint(call, decision, plan, turn, state)):
                # The model chose to call a tool but wrote no valid call, or one the user's words contradict:
                # the call is generated again under the schema of the offered tools, so a missing tool or
                # invalid arguments cannot be produced.
                # The tool the attempt named (or whose parameters it wrote) stays its choice: asked to choose
                # again among every tool, the 0.5B chose almost blindly.
                doubted = next((c for c in decision.calls if not c.arguments_error), None)
                pointed = ([doubted.name] if contradicted and doubted is not None
                           else attempted_tools(call.text, decision.calls, plan.every))
                # What a doubt of the turn advised stays a choice too: told that a list does nothing in 3 minutes
                # and a recall would, the 0.5B wrote the list again (round 25).
                if contradicted and doubt is not None:
                    log.info("call_contradicted", tool=doubted.name if doubted else None, reason=doubt.reason[:300])
                    if doubt.needs:
                        state.advised.add(doubt.needs)
                if contradicted and _by_name(doubt, state):
                    pointed = [doubt.needs]  # the tool the user's words named, alone (see ``_decide``)
                elif pointed:
                    pointed = [*pointed, *sorted(state.advised - set(pointed))]
                again = await self._decide_again(
                    turn, messages, plan, state, registry,
                    contradicted=(call.text, doubt.reason) if doubt and contradicted else None, tools=pointed)
                if again is STOPPED:
                    yield StreamStopped()
                    return
                if (again is ANSWER and contradicted and state.undecided and doubted is not None
                        and _by_name(doubt, state) and not self._needs_constraint(call, decision, plan, turn, state)):
                    # No usable call of the tool the user's words named (the 0.5B copied its description as the
                    # helper's task): the model's own call runs, as it would have (``_asked_by_name``); only the
                    # call that was doubted, and only one that is valid as written.
                    log.info("call_named_kept", tool=doubted.name)
                    state.force_answer = state.undecided = False
                    decision = dataclasses.replace(decision, calls=[doubted])
                    doubt = None
                elif again is ANSWER:
                    continue  # no usable call: the next step answers (force_answer is set)
                if isinstance(again, tuple):
                    decision, doubt = again
            first = next((c for c in decision.calls if not c.arguments_error), None)  # the call doubts judge
            if (first is not None and first.name not in state.confirmed and state.constrained and allow
                    and (doubt is not None and doubt.repeated_runs and first.name in state.doubted_tools
                         or doubt is None and first.name in state.loose)):
                # Told once, the model calls the tool again: it confirms the call under a grammar that also offers
                # no call (the 1.5B called the clock again for "Hi!" and answered with the time; round 14). So
                # too when the call made again is no longer doubted: told that its note for "Hi there! Hope all
                # is well." was nothing the user said, the 1.5B noted the greeting itself (round 18).
                reason = doubt.reason if doubt is not None else state.loose[first.name]
                state.confirmed.add(first.name)
                log.info("call_doubted_confirm", tool=first.name)
                advised = sorted(state.advised - {first.name})
                instead = "".join(f"; call {name} if the user's words ask for what it does" for name in advised)
                again = await self._decide_again(
                    turn, messages, plan, state, registry,
                    contradicted=(call.text, f"{reason.rstrip('.')}. Call {first.name} only if the user's "
                                             f"words need it{instead}; else choose {NO_TOOL} and answer in words"),
                    tools=[first.name, *advised], none=True)
                if again is STOPPED:
                    yield StreamStopped()
                    return
                if again is ANSWER:
                    continue  # none chosen: the next step answers (force_answer is set)
                if isinstance(again, tuple):
                    decision, doubt = again
                    first = decision.calls[0]
            if doubt is not None and doubt.repeated_runs and first is not None and first.name in state.doubted_tools:
                # The tool held its doubt loosely (its words may miss how the user put it): told once, the model
                # called it again (and confirmed it, where calls are constrained), so it runs.
                log.info("call_doubted_repeated_runs", tool=first.name)
                doubt = None
            if doubt is not None and doubt.answer and decision.calls:
                # A call resting on a guess (a file nobody named that is not there) is not run and shows no
                # card: the model is told what is there, once; a second guess, and it answers.
                log.info("call_doubted", tools=[c.name for c in decision.calls], reason=doubt.reason[:300])
                if state.doubted:
                    state.force_answer = True
                    continue
                state.doubted = True
                state.doubted_tools.update(c.name for c in decision.calls if not c.arguments_error)
                if doubt.repeated_runs and first is not None:
                    state.loose[first.name] = doubt.reason
                if doubt.needs:
                    state.advised.add(doubt.needs)
                if not doubt.again:
                    state.withheld.update(c.name for c in decision.calls if not c.arguments_error)
                decision = Decision(calls=[], content=call.text or decision.content,
                                    note=f"{NOT_RUN} {doubt.reason} The user's message: {_said(turn, state)[:300]!r}. "
                                         f"{GUESSED}")
            if decision.note is not None:
                marked: dict[str, Any] = {DOUBTED: True} if doubt is not None and doubt.answer else {}
                await turn.add(ChatMessage(role="assistant", content=call.text, metadata=marked), buffer="context")
                await turn.add(ChatMessage(role="user", content=decision.note, metadata={"synthetic": True, **marked}),
                               buffer="context")
                continue
            if (not decision.calls and not decision.replaced
                    and self._unread(turn, state, bool(names), names, decision.content)):
                # An answer to a message that names a file nobody read (the 0.5B: "The author of report.txt
                # is Navi.", "The cake should bake for 30 minutes."): not shown nor kept, and the model is told
                # once that the file's content is not known yet.
                state.unread_told = True
                state.force_answer = False  # ordered to answer after a call about something else: it may read now
                log.info("answer_unread_file", files=list(turn.named_files))
                # After a note or a plan's step that named the file, the model is told what it made up, not sent to
                # read a file the user may only have named.
                made_up = self._made_up(decision.content, turn, state) if _only_recorded(turn, state) else set()
                await turn.add(ChatMessage(role="user", content=unfounded_note(turn.named_files, made_up) if made_up
                                           else unread_note(turn.named_files), metadata={"synthetic": True}),
                               buffer="context")
                continue
            if (not decision.calls and not decision.replaced and state.small and allow
                    and "filesystem" in plan.callable and _still_unread(turn, state)
                    and not _only_recorded(turn, state) and self._about_unread(decision.content, turn, state)):
                # Told the file was not read, the model answered about it again ("you can use the filesystem tool
                # to read it", the 1.5B): the read the note asked for is made, of the files the user named (a read
                # and nothing else: a call generated under the tool's schema could as well write).
                log.info("unread_file_read", files=list(turn.named_files))
                decision = Decision(calls=[ToolCallRequest(id=new_call_id(), name="filesystem",
                                                           arguments={"action": "read", "path": name})
                                           for name in turn.named_files[:MAX_NAMED_READS]], content="", from_text=True)
            late = self._late_call(call, decision, plan, turn, state, registry, bool(names))
            if late is not None:
                # Ordered to answer because its calls could not be used, with no tool run, the model wrote a valid
                # read of an offered tool that no doubt holds: the 0.5B chose memory_save twice, with a refusal as the
                # value, for "Can you see in report.txt who wrote it?", then wrote the read, and the user got Navi's
                # fallback (round 23). It runs, once a turn; the next step answers from its result. Only a call that
                # changes nothing: Navi ordered an answer, and a write or a delete the user never saw coming is worse
                # than no answer (the review's "delete report.txt").
                log.info("answer_call_run", tool=late[0].name)
                decision = Decision(calls=[late[0]], content=late[1], from_text=True)
            if not decision.calls:
                this_turn = turn.history[state.start:]
                why = "a tool call" if decision.replaced else self._poor(turn, state, decision, call, plan)
                if why == "a refusal" and not results(this_turn):
                    why = None  # no tool ran (only Navi's notes): "I can't launch rockets" may be the honest answer
                unread = _still_unread(turn, state) and self._about_unread(decision.content, turn, state)
                if unread:
                    why = None  # told, it answered about the file again without reading it: replaced below
                if why and self._may_retry(turn, state, why):
                    # A refusal or non-answer after tools did their work: ask once more (nothing was shown).
                    log.info("answer_retried", reason=why, answer=(decision.content or call.text)[:200])
                    state.answer_retried = True
                    state.retry_reason = why
                    state.echoed = (decision.content or call.text) if why == ECHOED else ""
                    state.force_answer = True
                    continue
                if unread and _only_recorded(turn, state):
                    # A note or a plan's step named the file, and the answer still has specifics from nowhere: the
                    # user reads what the calls did, not "I have not read it" (they may never have asked to).
                    log.info("answer_replaced", reason="specifics from nowhere", answer=decision.content[:200])
                    decision = Decision(calls=[], content=summary_of(this_turn), replaced=True)
                elif unread:  # what it says of the file would be made up
                    decision = Decision(calls=[], content=unread_answer(turn.named_files), replaced=True)
                elif decision.replaced or (state.answer_retried and why):
                    log.info("answer_replaced", reason=why, answer=(decision.content or call.text)[:200])
                    decision = Decision(calls=[], content=summary_of(this_turn), replaced=True)
                queued = await _queued(turn)
                async for ev in self._final(turn, call, decision, end=not queued):
                    yield ev
                if not queued:
                    return
                # The user wrote while this answer streamed: it stays, and the turn goes on with their message.
                for ev in await self._steer(turn, state, queued):
                    yield ev
                continue
            if call.thinking:
                yield TurnThinking(thinking=call.thinking)
            await turn.add(ChatMessage(role="assistant", content=decision.content or None,
                                       tool_calls=tuple(decision.calls), thinking=call.thinking or None))
            repeated = False
            outcomes: list[tuple[str, bool]] = []
            looked: list[bool] = []
            for tc in decision.calls:
                if turn.stop_event.is_set():
                    await turn.add(ChatMessage(role="tool", tool_call_id=tc.id, name=tc.name,
                                               content="Error: stopped by the user before this tool ran."))
                    continue
                blocked = state.on("repeat_guard") and canonical(tc) in state.previous_calls
                repeated = repeated or blocked
                refusal = REPEATED.format(tool=tc.name) if blocked else state.refusal(tc)
                async for ev in self._run_tool(turn, registry, tc, {*names, *plan.names}, refusal=refusal):
                    if isinstance(ev, ToolCall) and not ev.is_subagent:
                        outcomes.append((tc.name, ev.success))
                        state.ran(tc, ev.success and refusal is None)
                    yield ev
                looked.append(_only_looks(registry, tc))
            state.previous_calls = {canonical(c) for c in decision.calls}
            state.repeats = state.repeats + 1 if repeated else 0
            state.force_answer = state.force_answer or state.repeats >= 1
            if turn.subagent:  # a subagent answers after its first good step; the parent's todo is not its own
                state.after_step(outcomes, list, lambda tool: None)
            else:
                state.after_step(outcomes, lambda: _read_todo(turn.session_id),
                                 lambda tool: _advance_todo(turn.session_id, tool), looked=bool(looked) and all(looked))
            if turn.stop_event.is_set():
                turn.outcome = "stopped"
                yield StreamStopped()
                return
            mech.after_iteration(_read_todo(turn.session_id))
            if turn.profile_switched_to:
                turn.profile = await aload_profile(turn.profile_switched_to)
                ctx.current_profile.set(turn.profile)
                self.builder.invalidate(turn.profile.id)
                turn.profile_switched_to = None
        async for ev in self._max_iterations(turn):
            yield ev

    def _unread(self, turn: Turn, state: LoopState, allow: bool, names: Sequence[str], answer: str | None = None,
                ) -> bool:
        """This step's answer (None: before it is written) may be about a file the user named that no tool of this
        turn opened (``named_files``, a small model that has the filesystem tool, once a turn)."""
        if not (turn.named_files and allow and state.small and state.on("named_files") and not state.unread_told
                and "filesystem" in names):
            return False
        if _did_more_than_look(turn, state):
            return False  # a file's size and date say nothing of what it says: a look does not count
        # Read in an earlier turn ("thanks for summing up report.txt"): its content is in the conversation
        # (a read's result begins "<path> (<size>)").
        if any(f"{name} (" in (m.content or "") for m in turn.history if m.role == "tool" for name in turn.named_files):
            return False
        # Named only by calls that kept words ("Put on my list: send report.txt to Bob"): saying what they kept is
        # no answer about the file, but specifics nothing of the turn gave are ("The magic number is 42.").
        return answer is None or not _only_recorded(turn, state) or bool(self._made_up(answer, turn, state))

    def _made_up(self, answer: str, turn: Turn, state: LoopState) -> set[str]:
        """The specifics the answer states (numbers, names: ``aids.unfounded``) that nothing the model was shown
        says: the system prompt and memory, the conversation, this turn's calls and their results."""
        calls = [json.dumps(c.arguments, ensure_ascii=False) for m in turn.history[state.start:]
                 if m.role == "assistant" for c in m.tool_calls]
        return unfounded(answer, [*(m.content or "" for m in self._context(turn)), *calls, *turn.named_files])

    def _about_unread(self, answer: str, turn: Turn, state: LoopState) -> bool:
        """Told that a file the user named was not read, the answer still speaks of it: it states specifics nothing
        the model was shown gave (the 0.5B's "The cake should bake for 30 minutes."), or, unless only a note or a
        plan's step named the file (their confirmation names it), it names the file."""
        return (not _only_recorded(turn, state) and names_a_file(answer, turn.named_files)
                or bool(self._made_up(answer, turn, state)))

    @staticmethod
    def _poor(turn: Turn, state: LoopState, decision: Decision, call: StreamedCall, plan: ToolPlan) -> str | None:
        """Why this step's answer is no answer for the user (``poor_answer``; None: it is one)."""
        messages = asked(turn, state)
        return poor_answer(decision.content, turn.history[state.start:], small=state.small,
                           descriptions=[plan.description(n) for n in plan.callable], request="\n".join(messages),
                           asked=messages, streamed=call.streamed_text, files=turn.named_files,
                           framing=state.framing)

    @staticmethod
    def _may_reconsider(turn: Turn, state: LoopState, allow: bool) -> bool:
        """A small model's answer may still be reconsidered under the grammar: calls are constrained and
        tools offered, no tool ran in this turn yet, and none was reconsidered (``answer_retry``)."""
        return (state.small and state.constrained and allow and state.on("answer_retry") and not state.reconsidered
                and not results(turn.history[state.start:]))

    def _may_retry(self, turn: Turn, state: LoopState, why: str = "") -> bool:
        """An answer may still be asked for again: the aid is on, not used yet, and tools ran (a refusal
        after a failed call is no answer either: the user is owed what went wrong) or Navi told the model
        something in this turn (its note is never the answer), or a small model's answer only repeated the
        user's message (``why``: ``poor_answer`` says so only of a small model; both models answered "Morning! Ready for a new day?" with those words, no
        tool needed; round 20)."""
        this_turn = turn.history[state.start:]
        return state.on("answer_retry") and not state.answer_retried and (
            bool(results(this_turn) or notes(this_turn)) or why == ECHOED)

    async def _constrained(self, turn: Turn, model: str) -> bool:
        """Whether this turn's decisions are generated under a schema (agent.decide).

        ``tool_calling`` "native" never, "constrained" always (unless the server refused schemas),
        "auto" for a model without native tool calls: the capability probe says so (Ollama's
        ``/api/show``; an OpenAI-compatible server that refused ``tools``), or it was seen writing
        its calls as text."""
        mode = turn.profile.tool_calling
        backend = get_backend(turn.profile.llm_backend)
        if mode == "native" or getattr(backend, "format_support", None) is False:
            return False
        if mode == "constrained":
            return True
        if writes_text_calls(model) and turn.profile.local_model_aids_enabled and settings.LLM_LOCAL_MODEL_AIDS:
            return True
        try:
            caps = await backend.capabilities(_model(turn.profile))
        except LLMError:
            return False  # the request itself will say what is wrong
        return not caps.tools

    def _tool_plan(self, registry: Any, turn: Turn, names: list[str],
                   domains: dict[str, list[str]] | None = None) -> ToolPlan:
        """The tools of this request within the profile's prompt budget (agent.toolplan), their closed
        parameters (agent.domains) as enums."""
        budget = int(turn.profile.prompt_budget_tokens or 0)
        order = {name: i for i, name in enumerate(names)}  # the profile's order: under a budget, the first stay
        schemas = sorted(close_domains(registry.schemas(names), domains or {}),
                         key=lambda s: order.get(s["function"]["name"], len(order)))
        fixed = estimate_tokens(self.builder.system_prompt(turn.profile, persona=settings.NAVI_PERSONA,
                                                           subagent=turn.subagent)) + 40
        finder = registry.schemas([FIND_TOOLS]) if FIND_TOOLS not in names else []
        return plan_tools(schemas, budget=budget, fixed_tokens=fixed, loaded=loaded_tools(turn.history),
                          finder=finder[0] if finder else None)

    def _late_call(self, call: StreamedCall, decision: Decision, plan: ToolPlan, turn: Turn, state: LoopState,
                   registry: ports.ToolSet, offered: bool) -> tuple[ToolCallRequest, str] | None:
        """The call a small model wrote where its answer was asked for, and the prose before it, when the call may
        still run (``_iterate``, the ``answer_retry`` aid): the order to answer came from calls that could not be
        used (``LoopState.undecided``; not from a choice of none, nor a doubt), no tool ran in this turn (so once a
        turn: the call's result is one), and the call is the first one written, a valid one of a tool this turn
        offers, not withheld nor doubted in this turn, that changes nothing (``ToolSet.changes``: a read), with
        arguments no check and no doubt of its tool holds once fixed."""
        if not (decision.replaced and offered and state.small and state.constrained and state.undecided
                and state.on("answer_retry") and state.on("doubts") and not results(turn.history[state.start:])):
            return None
        changes = getattr(registry, "changes", None)  # a ToolSet from before the port had it: every call may change
        found = extract_text_tool_calls(call.text, set(registry.names()))
        first = found.calls[0] if found.calls else None
        if (changes is None or first is None or first.arguments_error or first.name not in plan.callable
                or first.name in state.withheld or first.name in state.doubted_tools):
            return None
        first = self._unsaid_dropped(first, plan, turn, state)
        # Only the tool's own doubt: ordered to answer, a read that runs beats Navi's fallback (``_asked_by_name``).
        doubt = self._doubt(registry, turn, state, [first], plan.callable, by_name=False)
        if doubt is not None and doubt.fix is not None:
            first = _fixed([first], doubt)[0]
            doubt = _left_after_fix(self._doubt(registry, turn, state, [first], plan.callable, by_name=False))
        if (doubt is not None or changes(first.name, first.arguments)
                or argument_problem(first.arguments, plan.parameters(first.name),
                                    descriptions(plan.every, _steering(turn, state)), turn.goal)):
            return None
        return first, found.remaining_text.strip()

    @staticmethod
    def _unsaid_dropped(call: ToolCallRequest, plan: ToolPlan, turn: Turn, state: LoopState) -> ToolCallRequest:
        """A small model's ``call`` without the optional numbers and choices that neither the user nor a tool
        result of the conversation said (an id a search found, "read again with offset=40") (``doubts``)."""
        if not (state.small and state.on("doubts")):
            return call
        seen = "\n".join(m.content or "" for m in turn.history if m.role == "tool")
        kept = without_unsaid_options(call.arguments, plan.parameters(call.name), f"{_said(turn, state)}\n{seen}")
        return call if kept == call.arguments else dataclasses.replace(call, arguments=kept)

    @staticmethod
    def _doubt(registry: ports.ToolSet, turn: Turn, state: LoopState,
               calls: Sequence[ToolCallRequest], callable_: set[str], *, by_name: bool = True) -> ports.Doubt | None:
        """The tool's own doubt (``ToolSet.doubt``) about the first of a small model's ``calls`` that runs
        (only the first call a small model writes runs), against the words of the user's request, or else
        (``by_name``) that the request names another tool (``_asked_by_name``); none whose advice needs a tool
        outside ``callable_`` (``Doubt.needs``)."""
        if not (state.small and state.on("doubts")):
            return None
        call = next((c for c in calls if not c.arguments_error), None)
        doubt = getattr(registry, "doubt", None)  # a ToolSet from before the port had it knows no doubts
        if call is None or doubt is None:
            return None
        found: ports.Doubt | None = doubt(call.name, call.arguments, _said(turn, state))
        if found is None and by_name:
            found = _asked_by_name(registry, turn, state, call, callable_)
        if found is not None and found.needs and found.needs not in callable_:
            return None  # its advice names a tool this turn cannot call (a profile without recalls)
        return found

    def _needs_constraint(self, call: StreamedCall, decision: Decision, plan: ToolPlan, turn: Turn,
                          state: LoopState) -> bool:
        """The model tried to call a tool (a call, a broken or unknown one) and what it wrote cannot run as is."""
        if decision.note is not None or (decision.replaced and not call.tool_calls):
            return True
        if not decision.calls and call.opened_like_a_call:
            return True  # JSON no parser took for a call ({"name": "buy stamps", …}, {"action": "set", …})
        if not decision.calls and not successes(turn.history[state.start:]) and described_call(call.text, plan.callable):
            return True  # "I would use the filesystem function with {…}": before any result, that is a call
        return any(c.arguments_error or c.name not in plan.callable
                   or argument_problem(c.arguments, plan.parameters(c.name), descriptions(plan.every, _steering(turn, state)),
                                       turn.goal)
                   for c in decision.calls)

    async def _decide_again(self, turn: Turn, messages: list[ChatMessage], plan: ToolPlan, state: LoopState,
                            registry: ports.ToolSet, contradicted: tuple[str, str] | None = None,
                            tools: Sequence[str] = (), none: bool = False,
                            ) -> tuple[Decision, ports.Doubt | None] | object:
        """This step's call generated again under a schema (``_decide``), as the step's new decision and its
        doubt; ``ANSWER`` when none was chosen or no usable call came (the next step answers), ``STOPPED``
        when the user stopped the turn meanwhile (``turn.outcome`` set), ``UNCHANGED`` when the server takes
        no schema (the call as written goes on)."""
        step = await self._decide(turn, messages, plan, state,
                                  lambda c: self._doubt(registry, turn, state, [c], plan.callable),
                                  contradicted=contradicted, tools=tools, none=none)
        if turn.stop_event.is_set():
            turn.outcome = "stopped"
            return STOPPED
        if step is None:
            return UNCHANGED
        if step.call is None:
            return ANSWER
        decision = Decision(calls=[self._unsaid_dropped(step.call, plan, turn, state)], content="", from_text=True)
        return decision, self._doubt(registry, turn, state, decision.calls, plan.callable)

    async def _decide(self, turn: Turn, messages: list[ChatMessage], plan: ToolPlan, state: LoopState,
                      doubt: Callable[[ToolCallRequest], ports.Doubt | None],
                      contradicted: tuple[str, str] | None = None, tools: Sequence[str] = (),
                      none: bool = False) -> StepDecision | None:
        """The call, generated under the schema of the offered tools (the model already chose to call
        one); one repair round for what the schema could not rule out (free-form arguments, an argument
        the user's words contradict: ``doubt``). ``contradicted``: the model's own call and why the user's
        words contradict it, told before the first attempt. None: the server takes no schema (logged;
        the call as written goes through the text-call aids instead). ``tools``: the offered tools the model's
        attempt pointed at (``attempted_tools``); the grammar offers only those (none: every offered tool).
        ``none`` (and wherever a tool said it has nothing for the request, ``state.withheld``): the grammar
        offers the choice of no call too (``NO_TOOL``), which the step returns as an answer."""
        # A withheld tool is never offered again; the model's attempt may have pointed at it.
        open_ = [s for s in plan.every if s["function"]["name"] not in state.withheld]
        if not open_:
            state.force_answer = True
            return StepDecision()
        offered = [s for s in open_ if s["function"]["name"] in tools] or open_
        none = none or bool(state.withheld)
        schema = call_schema(offered, none=none)
        request = call_messages(messages, tools=offered, none=none)
        if contradicted is not None:
            request = [*request, ChatMessage(role="assistant", content=contradicted[0] or "(a call)"),
                       ChatMessage(role="system", content=decision_repair_note(contradicted[1]))]
        kept: StepDecision | None = None  # a call whose doubt fixed its arguments, asked again for the rest
        named: StepDecision | None = None  # a usable call held because the user's words named another tool
        for attempt in (1, 2):
            try:
                text, cut = await self._collect(turn, request, schema, plan.schemas)
            except ConstraintsUnsupported as exc:
                log.warning("constrained_decisions_unavailable", model=state.model, error=str(exc),
                            fallback="tool calls written as text")
                state.constrained = False
                return None
            if turn.stop_event.is_set():
                return StepDecision()
            # Nor what this request told it (the 0.5B, told to confirm its recall, wrote the instruction "Call
            # schedule_recall only if the user's words ne…"; round 20).
            told = (QUOTED.sub(" … ", contradicted[1]),) if contradicted is not None else ()
            step = parse_decision(text, plan.every, turn.goal, (*_steering(turn, state), *told))
            found = doubt(step.call) if step.call is not None and step.problem is None else None
            if _by_name(found, state) and attempt == 1:
                named = step
                if state.on("repair"):
                    # The user's words named the tool (``_asked_by_name``): the repair offers it alone (with a read of
                    # its own in context, the 0.5B wrote the read again whatever else was offered; round 28).
                    offered = [s for s in open_ if s["function"]["name"] == found.needs] or offered
                    schema = call_schema(offered, none=none)
            if found is not None and found.fix is not None and step.call is not None:
                step, found = _refixed(step.call, found, doubt)
                if found is None:
                    return step
                kept = kept or step
            if found is not None and not found.answer and attempt == 2 and step.call is not None and named is None:
                # Told twice, the model still writes what the user's words contradict and nothing can fix: its
                # call runs (a reminder whose instruction is its own words is still the reminder asked for).
                log.info("call_contradicted_kept", tool=step.call.name, reason=found.reason[:300])
                return step
            if found is not None and not found.answer:
                step = StepDecision(call=step.call, problem=found.reason)
            if step.answer:  # the choice of none
                state.force_answer = True
            if step.problem is None:
                return step
            log.info("decision_unusable", attempt=attempt, problem=step.problem[:300])
            if cut and step.call is None:
                # The grammar was not done when the server stopped it (its token limit, or the context full): the
                # same request would run to the limit again, minutes on a CPU (the 0.5B wrote "step 1", "step 2",
                # … twice, 135 s each; round 21). The model answers instead.
                log.info("decision_cut", attempt=attempt, chars=len(text))
                break
            if attempt == 1 and state.on("repair"):
                request = [*request, ChatMessage(role="assistant", content=text),
                           ChatMessage(role="system", content=decision_repair_note(step.problem))]
        if kept is not None and kept.call is not None:
            # Asked again about an argument its fix did not touch, the model wrote no usable call: the call as fixed
            # runs (a reminder at the time the user said is still the reminder asked for).
            log.info("call_contradicted_kept", tool=kept.call.name)
            return kept
        if named is not None and named.call is not None:
            # No usable call of the tool the user's words named: the model's own call runs, as it would have.
            log.info("call_named_kept", tool=named.call.name)
            return named
        state.force_answer = True
        state.undecided = True  # no usable call came (not a choice of none): ``_late_call``
        return StepDecision()

    async def _collect(self, turn: Turn, messages: list[ChatMessage], schema: dict[str, Any],
                       tools: list[dict[str, Any]]) -> tuple[str, bool]:
        """A whole constrained answer, streamed under the stream guard (a stop is seen during prefill), and
        whether the server cut it off (``length``). The tool definitions go along unchanged: the prompt prefix
        stays the one the server has cached."""
        text, cut = "", False
        async for chunk in self._stream(turn, messages, tools, format=schema, max_tokens=DECISION_MAX_TOKENS):
            if chunk.kind == "text":
                text += chunk.text
            elif chunk.kind == "done":
                turn.context_tokens = (chunk.prompt_eval_count or 0) + (chunk.eval_count or 0) or turn.context_tokens
                cut = chunk.done_reason == "length"
        return text, cut

    async def _steer(self, turn: Turn, state: LoopState, notes: list[ports.SteerNote]) -> list[AgentEvent]:
        """Messages the user sent while the turn ran become user messages of the history, in order,
        at this step boundary; the model reads them in its next request. A new instruction resets the
        aids that pushed the model towards answering: it may need tools again."""
        events: list[AgentEvent] = []
        for note in notes:
            await turn.add(ChatMessage(role="user", content=note.content, metadata={"steer_id": note.id}))
            events.append(SteerAccepted(id=note.id, content=note.content))
        if notes:
            state.force_answer = False
            state.answer_retried = False
            state.echoed = ""
            state.unread_told = False
            state.undecided = False
            turn.named_files = ()  # a new message: the files the first one named are not its subject
            state.repeats = 0
            state.previous_calls = set()
            log.info("steer_accepted", count=len(notes))
        return events

    async def _final(self, turn: Turn, call: StreamedCall, decision: Decision,
                     end: bool = True) -> AsyncIterator[AgentEvent]:
        for ev in call.finish_events(is_tool_turn=False, drop_held=decision.replaced):
            yield ev
        turn.final_text = decision.content.strip()
        if turn.emit and turn.final_text and (decision.replaced or not call.streamed_text):
            yield StreamDelta(delta=turn.final_text)
        await turn.add(ChatMessage(role="assistant", content=turn.final_text, thinking=call.thinking or None))
        if turn.emit and end:
            yield StreamEnd(content=turn.final_text, context_tokens=turn.context_tokens,
                            max_context_tokens=_max_context())

    def _context(self, turn: Turn, *, without_doubted: bool = False) -> list[ChatMessage]:
        """The request's messages; ``without_doubted``: without the calls the doubts kept from running and
        Navi's notes about them (``aids.only_doubted``)."""
        history = [m for m in turn.history if not (m.metadata or {}).get(DOUBTED)] if without_doubted else turn.history
        return self.builder.build(profile=turn.profile, persona=settings.NAVI_PERSONA, memory=turn.memory,
                                  history=history, subagent=turn.subagent)

    def _stream(self, turn: Turn, messages: list[ChatMessage], tools: list[dict[str, Any]],
                format: dict[str, Any] | None = None, max_tokens: int | None = None) -> AsyncIterator[Any]:
        profile = turn.profile
        backend: LLMBackend = get_backend(profile.llm_backend)
        gen = backend.stream_complete(
            messages, model=_model(profile), tools=tools or None,
            think=bool(profile.think_enabled and settings.OLLAMA_THINK),
            temperature=profile.temperature, num_ctx=_max_context(), format=format, max_tokens=max_tokens,
        )
        return iter_stream_guarded(
            gen, stop_event=turn.stop_event,
            first_chunk_timeout=float(settings.LLM_STREAM_FIRST_CHUNK_TIMEOUT),
            chunk_timeout=float(settings.LLM_STREAM_CHUNK_TIMEOUT),
            poll_interval=float(getattr(settings, "LLM_STREAM_POLL_INTERVAL", 1.0)),
        )

    async def _run_tool(self, turn: Turn, registry: Any, tc: ToolCallRequest, allowed: set[str],
                        *, refusal: str | None) -> AsyncIterator[AgentEvent]:
        yield ToolStarted(tool=tc.name, args=tc.arguments)
        passage = gate.OPEN
        # The policy point (allow, ask and wait, or deny) for a call the registry would run at all.
        if refusal is None and not tc.arguments_error and tc.name in allowed:
            check = gate.check_for(turn.guard, tool=tc.name, args=tc.arguments, session_id=turn.session_id,
                                   profile_id=turn.profile.id, is_subagent=turn.subagent)
            async for step in gate.pass_gate(turn.guard, check, stop_event=turn.stop_event):
                if isinstance(step, gate.Passage):
                    passage = step
                else:
                    yield step
            refusal = passage.refusal
        if refusal is not None:
            outcome = ToolOutcome(success=False, metadata={}, text=refusal)
        elif tc.arguments_error:
            outcome = ToolOutcome(success=False, metadata={}, text=(
                f"Error: the arguments for {tc.name} were not valid: {tc.arguments_error}. "
                "Call the tool again with a JSON object of arguments."))
        else:
            outcome = ToolOutcome(success=False, text="Error: the tool returned nothing.", metadata={})
            async for item in execute_with_sink(registry, tc, allowed=allowed, stop_event=turn.stop_event):
                if isinstance(item, ToolOutcome):
                    outcome = item
                else:
                    yield item
        yield ToolCall(tool=tc.name, args=tc.arguments, result=outcome.text, success=outcome.success)
        turn.guard.observe(outcome.metadata)
        if passage.run and refusal is None:
            await passage.done(outcome.success, outcome.text)
        meta = {k: v for k, v in outcome.metadata.items() if k != "base64"}
        if _only_looks(registry, tc):
            meta[ports.LOOKUP] = True
        if _only_records(registry, tc):
            meta[ports.RECORDS] = True
        await turn.add(ChatMessage(role="tool", tool_call_id=tc.id, name=tc.name, content=outcome.text, metadata=meta))
        if outcome.metadata.get("is_image") and outcome.metadata.get("base64"):
            # The image reaches the model as a synthetic user message in the context only.
            await turn.add(ChatMessage(role="user", content=f"[Image loaded by {tc.name}]",
                                       images=(outcome.metadata["base64"],), metadata={"synthetic": True}),
                           buffer="context")
        if outcome.metadata.get("switched_profile"):
            turn.profile_switched_to = str(outcome.metadata["switched_profile"])

    async def _stopped(self, turn: Turn, call: StreamedCall) -> AsyncIterator[AgentEvent]:
        turn.outcome = "stopped"
        partial = call.streamed_text.strip()
        if partial:
            turn.final_text = partial
            await turn.add(ChatMessage(role="assistant", content=partial, thinking=call.thinking or None,
                                       metadata={"stopped": True}))
        if turn.emit:
            yield StreamStopped()

    async def _max_iterations(self, turn: Turn) -> AsyncIterator[AgentEvent]:
        n = turn.profile.max_iterations
        turn.outcome = "max_iterations"
        turn.final_text = (
            f"I stopped after {n} steps: that is this profile's limit (max_iterations = {n}) and the task is not "
            "finished yet. Tell me to continue, or raise the limit for this profile in the admin."
        )
        await turn.add(ChatMessage(role="assistant", content=turn.final_text, metadata={"max_iterations": True}))
        if turn.emit:
            yield StreamDelta(delta=turn.final_text)
            yield StreamEnd(content=turn.final_text, context_tokens=turn.context_tokens,
                            max_context_tokens=_max_context(), finish_reason="max_iterations")

    async def _compress(self, turn: Turn) -> AsyncIterator[AgentEvent]:
        if not settings.CONTEXT_COMPRESSION_ENABLED or not turn.persistent:
            return
        state = await self.store.load(turn.session_id)
        split = split_turns(state.context, int(settings.CONTEXT_KEEP_RECENT))
        if not split.old:
            return
        text = format_old(split.old)
        profile = turn.profile
        summary = await summarise(get_backend(profile.llm_backend), model=_model(profile), text=text,
                                  temperature=float(settings.CONTEXT_SUMMARY_TEMPERATURE), num_ctx=_max_context())
        if not summary:
            return
        message = summary_message(summary)
        await self.store.compress(turn.session_id, removed=[m.seq for m in split.old], summary=message)
        turn.history[:] = [message, *repair_context([m.message for m in split.recent])]
        turn.context_tokens = 0
        yield ContextCompressed(messages_before=len(state.context), messages_after=1 + len(split.recent),
                                summary=summary, context_tokens=0, max_context_tokens=_max_context())


# ---------------------------------------------------------------------- helpers
def _asked_by_name(registry: ports.ToolSet, turn: Turn, state: LoopState, call: ToolCallRequest,
                   callable_: set[str]) -> ports.Doubt | None:
    """The user's words name another offered tool (``ToolSet.named``: "Hand facts.txt to a subagent"), none of
    whose calls has run in this turn, and the call does the job itself with a tool that changes nothing (both
    models read facts.txt themselves, and the user never got the helper asked for; rounds 26 and 27). The call is
    generated again as a call of the tool named, told why, once a turn: with a read of its own in context, the 0.5B
    wrote the read again whatever else the grammar offered. A mention that is no request ("Don't use a subagent,
    read it yourself") then costs a helper doing the read, which is what its tools are for. A call that changes
    something is left alone ("Remind me to check on the subagent" is the reminder), and so is a name the call's
    own arguments hold (a file the user named, "subagent.md")."""
    named = getattr(registry, "named", None)  # a ToolSet from before the port had it knows no names
    if named is None or _says(registry, "changes", call, otherwise=True):
        return None
    ran = {m.name for m in turn.history[state.start:] if m.role == "tool"}
    own = " ".join(str(v) for v in call.arguments.values() if isinstance(v, str)).lower()
    candidates = sorted(callable_ - {call.name} - state.withheld - state.named_told - ran)
    for tool, said in named(_said(turn, state), candidates):
        if said.lower() in own:
            continue
        state.named_told.add(tool)
        return ports.Doubt(reason=f"the user's words name {said.strip()!r}, which is the tool {tool}, so "
                                  f"{call.name} was not run: call {tool} with what they asked for.", needs=tool)
    return None


def _by_name(doubt: ports.Doubt | None, state: LoopState) -> TypeGuard[ports.Doubt]:
    """``doubt`` is ``_asked_by_name``'s: the user's words named the tool it needs."""
    return doubt is not None and not doubt.answer and doubt.needs in state.named_told


def _said(turn: Turn, state: LoopState) -> str:
    """The user's words: the request, and what they wrote while the turn ran ("make it 10 minutes")."""
    return "\n".join(asked(turn, state))


def _says(registry: ports.ToolSet, word: str, call: ToolCallRequest, *, otherwise: bool) -> bool:
    """What the tool set's ``word`` (looks, changes, records: the tool's own word on the call) says of the call;
    ``otherwise`` for a ToolSet from before the port had it."""
    port = getattr(registry, word, None)
    return otherwise if port is None else bool(port(call.name, call.arguments))


def _only_looks(registry: ports.ToolSet, call: ToolCallRequest) -> bool:
    """The call only looks (``ToolSet.looks``): where a file is, not what it says."""
    return _says(registry, "looks", call, otherwise=False)


def _only_records(registry: ports.ToolSet, call: ToolCallRequest) -> bool:
    """The call only keeps or finds words (``ToolSet.records``): a file its words name is not opened by it."""
    return _says(registry, "records", call, otherwise=False)


def _namings(turn: Turn, state: LoopState) -> list[ChatMessage]:
    """This turn's results of calls whose arguments name a file the message named and that did more than look
    at it (``ports.LOOKUP``), whether they succeeded or not."""
    this_turn = turn.history[state.start:]
    arguments = {c.id: json.dumps(c.arguments, ensure_ascii=False) for m in this_turn if m.role == "assistant"
                 for c in m.tool_calls}
    return [m for m in results(this_turn) if not (m.metadata or {}).get(ports.LOOKUP)
            and names_a_file(arguments.get(m.tool_call_id or "", ""), turn.named_files)]


def _did_more_than_look(turn: Turn, state: LoopState) -> bool:
    """A call of this turn opened a file the message named, whether it succeeded or not: its arguments name the
    file (a read, a write, a helper's task) and it did more than look (``ports.LOOKUP``) or keep words
    (``ports.RECORDS``). A call about something else has not read it: the 0.5B's helper, asked to read facts.txt,
    searched the notes (or got the time) and answered with that; nor has a todo step that names it: the 0.5B set
    "dig the magic number out of facts.txt" and answered "The magic number is 42." (round 24)."""
    return any(not (m.metadata or {}).get(ports.RECORDS) for m in _namings(turn, state))


def _only_recorded(turn: Turn, state: LoopState) -> bool:
    """Calls of this turn named a file the message named, and each only kept words (``ports.RECORDS``)."""
    named = _namings(turn, state)
    return bool(named) and all((m.metadata or {}).get(ports.RECORDS) for m in named)


def _still_unread(turn: Turn, state: LoopState) -> bool:
    """Told that the file the user named was not read, the model has not read it yet."""
    return state.unread_told and not _did_more_than_look(turn, state)


def _steering(turn: Turn, state: LoopState) -> tuple[str, ...]:
    """What a call's argument must not copy of Navi's own words: its fixed steering (``aids.steering``) and the
    notes it wrote to the model in this turn (the 0.5B set a todo step "Not run: the fact 'boreas' is nothing
    the user's words … say" for "Remind me every hour to drink water.", from the note of its doubted fact), and the
    instruction a constrained call's request ends with (``decide.CALL``: the 0.5B handed its helper "Write the one tool
    call the user's last message needs now, as {", round 22). Not for answers: a user may ask about that wording."""
    return (*steering(), CALL, *(QUOTED.sub(" … ", m.content or "") for m in notes(turn.history[state.start:])))


def _after_note(turn: Turn, state: LoopState) -> bool:
    """This step answers a doubt's note (the model may repeat it): held to its end, judged whole."""
    last = turn.history[-1] if len(turn.history) > state.start else None
    return state.doubted and last is not None and last.role == "user" and bool((last.metadata or {}).get("synthetic"))


def _refixed(call: ToolCallRequest, found: ports.Doubt, doubt: Callable[[ToolCallRequest], ports.Doubt | None],
             ) -> tuple[StepDecision, ports.Doubt | None]:
    """A constrained ``call`` with the arguments its doubt fixes, and what the tool still says against the fixed call
    (``_left_after_fix``): an argument the fix did not touch may still contradict the user's words (the 0.5B's hourly reminder, its time fixed, had "Atlas is called
    atlas." from the memory block as its instruction; round 21)."""
    fixed = _fixed([call], found)[0]
    return StepDecision(call=fixed), _left_after_fix(doubt(fixed))


def _left_after_fix(doubt: ports.Doubt | None) -> ports.Doubt | None:
    """What a tool still says against a call its doubt fixed: only an argument it contradicts; another fix or a
    guess does not outweigh the call as fixed (one fix a call, never a chain)."""
    return doubt if doubt is not None and doubt.fix is None and not doubt.answer else None


def _fixed(calls: Sequence[ToolCallRequest], doubt: ports.Doubt) -> list[ToolCallRequest]:
    """The calls with the first doubted one's arguments fixed as the user's words determine them (a key
    fixed to None is left out)."""
    fix = doubt.fix or {}
    log.info("call_fixed", reason=doubt.reason[:300], fix=fix)
    out = list(calls)
    for i, call in enumerate(out):
        if not call.arguments_error:
            arguments = {k: v for k, v in {**call.arguments, **fix}.items() if v is not None}
            out[i] = dataclasses.replace(call, arguments=arguments)
            break
    return out


def _model(profile: ProfileSpec) -> str:
    return profile.model or str(settings.OLLAMA_DEFAULT_MODEL)


def _session_model(profile: ProfileSpec, state: SessionState) -> ProfileSpec:
    """The profile with the model chosen for this session (the chat's model picker), if one was."""
    if not state.model:
        return profile
    return dataclasses.replace(profile, model=state.model, llm_backend=state.model_backend or profile.llm_backend)


def _capped(profile: ProfileSpec, rules: gate.RunRules | None) -> ProfileSpec:
    """The profile with an unattended run's iteration cap applied."""
    if rules is None or rules.max_iterations is None or rules.max_iterations >= profile.max_iterations:
        return profile
    return dataclasses.replace(profile, max_iterations=max(1, rules.max_iterations))


def _compression_due(tokens: int) -> bool:
    return bool(settings.CONTEXT_COMPRESSION_ENABLED) and should_compress(
        tokens, _max_context(), float(settings.CONTEXT_COMPRESSION_THRESHOLD))


def _with_files(text: str, files: Sequence[dict[str, Any]]) -> str:
    if not files:
        return text
    listing = "\n".join(f"- {f.get('name', '?')} ({f.get('path', '')})" for f in files)
    return f"{text}\n\n[Attached files, readable with the filesystem tool:]\n{listing}"


def _aids_on(profile: ProfileSpec) -> bool:
    """The local-model aids as a group: the profile's switch and the global one (single ones: LoopState.on)."""
    return bool(profile.local_model_aids_enabled and settings.LLM_LOCAL_MODEL_AIDS)


async def _named_files(turn: Turn, text: str) -> list[tuple[str, int]]:
    """The files of the working directory ``text`` names, for the ``named_files`` aid ([] when it is off)."""
    workspace = ports.workspace()
    if (workspace is None or not _aids_on(turn.profile)
            or "named_files" in turn.profile.local_model_aids_off):
        return []
    try:
        return list(await asyncio.to_thread(workspace.named_files, turn.session_id, text))
    except Exception:  # noqa: BLE001 - a context aid must never break the turn
        log.warning("named_files_failed", exc_info=True)
        return []


async def _memory(user_id: int | None) -> str | None:
    provider = ports.memory()
    if provider is None or user_id is None:
        return None
    try:
        return await provider.summary_for(user_id)
    except Exception:  # memory is a nicety: never fail a turn because of it
        log.exception("memory_summary_failed")
        return None


async def _profile_ids() -> list[str]:
    return await sync_to_async(ports.profiles().active_ids, thread_sensitive=False)()


def _read_todo(session_id: str) -> list[dict[str, Any]]:
    try:
        return ports.todo().read(session_id)
    except Exception:  # noqa: BLE001 - a broken todo file must not break the turn
        return []


def _advance_todo(session_id: str, tool: str) -> None:
    try:
        ports.todo().complete_next(session_id, f"{tool} succeeded")
    except Exception:  # noqa: BLE001
        log.warning("todo_advance_failed")


def _set_todo(session_id: str, steps: list[str]) -> None:
    try:
        ports.todo().replace(session_id, steps)
    except Exception:  # noqa: BLE001
        log.warning("todo_autopopulate_failed")


async def _queued(turn: Turn) -> list[ports.SteerNote]:
    """What the user sent to this live turn since the last step (nothing for subagents and when stopping)."""
    steering = ports.steering()
    if steering is None or turn.subagent or not turn.emit or not turn.persistent or turn.stop_event.is_set():
        return []
    run_id = turn.guard.run_id
    if not run_id:
        return []
    try:
        return list(await steering.take(turn.session_id, run_id))
    except Exception:  # a lost queue read must not fail the turn: the messages are read at the next step
        log.warning("steer_take_failed", exc_info=True)
        return []


def _forward(sink: asyncio.Queue[Any] | None, event: AgentEvent) -> None:
    if sink is not None:
        sink.put_nowait(event)


_agent: Agent | None = None


def get_agent() -> Agent:
    """The process-wide agent, on the session store and tools plugged into ``agent.ports``."""
    global _agent
    if _agent is None:
        _agent = Agent(store=ports.session_store())
        try:
            ports.tools().on_reload(_agent.builder.invalidate)
        except Exception:  # noqa: BLE001
            log.warning("context_cache_hook_failed")
    return _agent


__all__ = ["Agent", "AgentError", "get_agent"]
