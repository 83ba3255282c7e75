"""The approvals port of the agent core (``agent.ports.ApprovalDesk``): the policy point's decisions.

For each call: classify it (``policy``), then

* allow → run (an ask-class call allowed by a rule or pattern is audited with its result);
* deny → not run; the model reads why;
* ask → a session grant for this exact call runs it (unless the turn is tainted); an unattended
  run whose rules say "deny" does not run it; otherwise an ``Approval`` is opened, the turn
  yields ``approval_required`` and waits — for a decision (any process: the row is polled, a
  decision in this process wakes it at once), Stop (cancelled) or its expiry (denied) — then
  yields ``approval_resolved``.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import structlog
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from agent.events import AgentEvent, ApprovalRequired, ApprovalResolved
from agent.gate import OPEN, CallCheck, Passage
from approvals_app import policy, selectors, services, waiters
from approvals_app.models import Approval, AuditEntry

log = structlog.get_logger(__name__)

POLL_SECONDS = 0.5  # how soon a decision made in another process is seen
_UUID = re.compile(r"^[0-9a-fA-F-]{32,36}$")

STOPPED = "Error: stopped by the user before this tool ran."


def wait_seconds(check: CallCheck) -> float:
    if check.rules is not None and check.rules.unattended:
        return float(getattr(settings, "RECALL_APPROVAL_WAIT_SECONDS", 1800))
    return float(getattr(settings, "APPROVAL_TIMEOUT_SECONDS", 600))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 120 else f"{seconds:g} seconds"


def refusal_for(approval: Approval | None, tool: str, waited: float) -> str:
    """What the model reads when an asked call did not run."""
    if approval is None:
        return f"Not run: the approval for {tool} is gone (the conversation was deleted)."
    if approval.status == Approval.Status.DENIED:
        why = f" Their reason: {approval.decision_reason}" if approval.decision_reason else ""
        return (f"Not run: the user denied this {tool} call.{why} Do not try it again in another way; "
                "tell the user what you wanted to do, or ask them how to go on.")
    if approval.status == Approval.Status.EXPIRED:
        return (f"Not run: nobody approved this {tool} call within {_minutes(waited)}, so it counts as denied. "
                "Do not retry it now; tell the user what you wanted to do and why, so they can approve it "
                "when they are back.")
    return STOPPED


class PolicyDesk:
    async def guard(self, check: CallCheck, *, stop_event: asyncio.Event) -> AsyncIterator[AgentEvent | Passage]:
        verdict = policy.classify(check, await selectors.arules(), session_dir=_session_dir(check.session_id))
        if verdict.decision == "allow":
            yield self._audited(check, verdict, AuditEntry.Kind.ALLOWED_RULE) if verdict.audited else OPEN
            return
        if verdict.decision == "deny":
            await self._record(check, verdict, AuditEntry.Kind.DENIED_POLICY)
            yield Passage(run=False, refusal=f"Not run: {verdict.reason}. Do not retry; tell the user.")
            return
        if not verdict.tainted_by and await _granted(check):
            yield self._audited(check, verdict, AuditEntry.Kind.ALLOWED_GRANT)
            return
        rules = check.rules
        if rules is not None and rules.unattended and rules.on_approval != "park":
            await self._record(check, verdict, AuditEntry.Kind.DENIED_UNATTENDED)
            yield Passage(run=False, refusal=(
                f"Not run: this is an unattended run ({rules.label}) and this {check.tool} call needs the "
                f"user's approval ({verdict.reason}); this recall's rules deny such calls instead of waiting. "
                "Do not retry it; finish with a report that says which step needs the user's approval."))
            return
        if not _UUID.match(check.session_id) or check.user_id is None:
            yield Passage(run=False, refusal=f"Not run: this {check.tool} call needs the user's approval "
                                             f"({verdict.reason}), and there is no conversation to ask in.")
            return
        async for item in self._ask(check, verdict, stop_event):
            yield item

    async def _ask(self, check: CallCheck, verdict: policy.Verdict,
                   stop_event: asyncio.Event) -> AsyncIterator[AgentEvent | Passage]:
        waited = wait_seconds(check)
        approval = await sync_to_async(services.approval_open, thread_sensitive=False)(
            session_id=check.session_id, user_id=check.user_id, run_id=check.run_id, tool=check.tool,
            args=check.args, reason=verdict.reason, touches=verdict.touches, tainted_by=verdict.tainted_by,
            origin=Approval.Origin.RECALL if check.rules is not None else Approval.Origin.LIVE,
            is_subagent=check.is_subagent, wait_seconds=waited)
        yield ApprovalRequired(approval_id=str(approval.pk), tool=check.tool, args=check.args, reason=verdict.reason,
                               touches=verdict.touches, tainted_by=list(verdict.tainted_by),
                               expires_at=approval.expires_at.isoformat())
        final = await _wait(approval, stop_event)
        yield ApprovalResolved(
            approval_id=str(approval.pk), decision=final.status if final else Approval.Status.CANCELLED,
            scope=final.scope if final else "once",
            decided_by=final.decided_by.get_username() if final and final.decided_by else "",
            reason=final.decision_reason if final else "")
        if final is not None and final.status == Approval.Status.APPROVED:
            record = partial(_attach, approval.pk)
            yield Passage(run=True, record=record)
        else:
            yield Passage(run=False, refusal=refusal_for(final, check.tool, waited))

    def _audited(self, check: CallCheck, verdict: policy.Verdict, kind: str) -> Passage:
        async def record(success: bool, text: str) -> None:
            await self._record(check, verdict, kind, ran=True, success=success, result=text)

        return Passage(run=True, record=record)

    @staticmethod
    async def _record(check: CallCheck, verdict: policy.Verdict, kind: str, *, ran: bool = False,
                      success: bool | None = None, result: str = "") -> None:
        try:
            await sync_to_async(services.audit_record, thread_sensitive=False)(
                user_id=check.user_id, session_id=check.session_id, run_id=check.run_id, tool=check.tool,
                args=check.args, decision=kind, reason=verdict.reason, tainted_by=verdict.tainted_by,
                origin="recall" if check.rules is not None else "live", ran=ran, success=success, result=result)
        except Exception:  # the audit log must not break the turn; the failure is logged loudly
            log.exception("audit_record_failed", tool=check.tool, session_id=check.session_id)


async def _attach(approval_id: Any, success: bool, text: str) -> None:
    try:
        await sync_to_async(services.audit_attach_result, thread_sensitive=False)(
            approval_id=approval_id, success=success, result=text)
    except Exception:
        log.exception("audit_attach_failed", approval_id=str(approval_id))


def _session_dir(session_id: str) -> Path | None:
    if not session_id or "/" in session_id or session_id in {".", ".."}:
        return None
    return Path(settings.SESSION_FILES_DIR) / session_id


async def _granted(check: CallCheck) -> bool:
    if not _UUID.match(check.session_id):
        return False
    return await sync_to_async(selectors.grant_exists, thread_sensitive=False)(
        session_id=check.session_id, tool=check.tool, digest=services.digest_of(check.args))


def _load(approval_id: Any) -> Approval | None:
    return Approval.objects.select_related("decided_by").filter(pk=approval_id).first()


async def _wait(approval: Approval, stop_event: asyncio.Event) -> Approval | None:
    """Wait until the approval is no longer pending (deciding it ourselves on Stop or expiry)."""
    load = sync_to_async(_load, thread_sensitive=False)
    close = sync_to_async(services.approval_close, thread_sensitive=False)
    woken = waiters.register(str(approval.pk))
    try:
        while True:
            row = await load(approval.pk)
            if row is None or row.status != Approval.Status.PENDING:
                return row
            if stop_event.is_set():
                await close(approval_id=approval.pk, status=Approval.Status.CANCELLED, reason="stopped by the user")
                continue
            left = (row.expires_at - timezone.now()).total_seconds()
            if left <= 0:
                await close(approval_id=approval.pk, status=Approval.Status.EXPIRED,
                            reason="nobody decided in time: counts as denied")
                continue
            await _first_of(woken, stop_event, timeout=min(POLL_SECONDS, left))
            woken.clear()
    finally:
        waiters.unregister(str(approval.pk), woken)


async def _first_of(*events: asyncio.Event, timeout: float) -> None:
    tasks = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
