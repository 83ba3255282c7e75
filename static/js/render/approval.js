// The approval card: a tool call waits for the user's decision (approval_required). Every tab
// shows it; approval_resolved (sent to every tab by the running turn) settles it everywhere.

import { el, icon, localDateTime } from "../util.js";

const DONE_TEXT = {
  approved: (ev) => (ev.scope === "session" ? "Approved for this session" : "Approved once"),
  denied: () => "Denied",
  expired: () => "Expired: nobody decided in time, so it counted as denied",
  cancelled: () => "Cancelled: the turn was stopped",
};

function sentence(text) {
  const t = String(text || "").trim();
  return t ? t[0].toUpperCase() + t.slice(1) : "";
}

function pretty(args) {
  try {
    return JSON.stringify(args ?? {}, null, 2);
  } catch {
    return String(args);
  }
}

/**
 * @param {object} ev the approval_required event
 * @param {(decision: string, scope: string, reason: string) => void} onDecide
 */
export function approvalCard(ev, onDecide) {
  const note = el("input", {
    type: "text", class: "approval-note", maxlength: "2000", placeholder: "Reason (optional; Navi reads it)",
    "aria-label": "Reason for Navi (optional)",
  });
  const status = el("div", { class: "approval-status", role: "status", "aria-live": "polite" });
  const buttons = [
    el("button", { type: "button", class: "btn btn-small btn-primary", dataset: { decision: "approve", scope: "once" } }, "Approve once"),
    el("button", { type: "button", class: "btn btn-small btn-ghost", dataset: { decision: "approve", scope: "session" } }, "Approve for this session"),
    el("button", { type: "button", class: "btn btn-small btn-ghost approval-deny", dataset: { decision: "deny", scope: "once" } }, "Deny"),
  ];
  const actions = el("div", { class: "approval-actions" }, note, el("div", { class: "approval-buttons" }, ...buttons));
  const tainted = Array.isArray(ev.tainted_by) && ev.tainted_by.length
    ? el("div", { class: "approval-taint", role: "note" }, icon("alert"),
      el("span", {}, `This turn read ${ev.tainted_by.join(", ")}. Content from there may be steering this request.`))
    : null;
  const expires = ev.expires_at ? new Date(ev.expires_at) : null;
  const card = el("section", {
    class: `approval-card${ev.is_subagent ? " sub" : ""}`, "aria-label": `Approval needed: ${ev.tool}`,
    dataset: { approvalId: ev.approval_id, state: "pending", tool: ev.tool || "" },
  },
  el("div", { class: "approval-head" }, icon("alert"),
    el("span", {}, ev.is_subagent ? "A subagent wants to run " : "Navi wants to run "),
    el("code", { class: "tool-name" }, ev.tool || "a tool")),
  el("div", { class: "approval-reason" }, `${sentence(ev.reason)}.`),
  ev.touches ? el("div", { class: "approval-touches" }, el("span", { class: "tool-section-title" }, "Touches"), el("code", {}, ev.touches)) : null,
  tainted,
  el("details", { class: "approval-args" }, el("summary", {}, "Arguments"), el("pre", { class: "tool-pre" }, pretty(ev.args))),
  expires && !Number.isNaN(expires.getTime())
    ? el("div", { class: "approval-expiry" }, `Waits until ${localDateTime(expires)}; no answer counts as Deny.`) : null,
  actions, status);
  for (const button of buttons) {
    button.addEventListener("click", () => {
      if (card.dataset.state !== "pending") return;
      card.dataset.state = "sending";
      for (const b of buttons) b.disabled = true;
      status.textContent = "Sending your decision…";
      onDecide(button.dataset.decision, button.dataset.scope, note.value.trim());
    });
  }
  return card;
}

/** The decision did not go through (expired, already decided elsewhere, offline): say why. */
export function approvalFailed(card, message) {
  if (!card || !["pending", "sending"].includes(card.dataset.state)) return;
  card.dataset.state = "pending";
  for (const b of card.querySelectorAll(".approval-buttons button")) b.disabled = false;
  const status = card.querySelector(".approval-status");
  status.textContent = message;
  status.classList.add("error");
}

/** approval_resolved: show how it ended; no more buttons. */
export function resolveApprovalCard(card, ev) {
  if (!card) return;
  card.dataset.state = ev.decision || "cancelled";
  card.querySelector(".approval-actions")?.remove();
  const status = card.querySelector(".approval-status");
  status.classList.remove("error");
  const text = (DONE_TEXT[ev.decision] || DONE_TEXT.cancelled)(ev);
  const by = ev.decided_by && ["approved", "denied"].includes(ev.decision) ? ` by ${ev.decided_by}` : "";
  status.textContent = `${text}${by}${ev.reason && ev.decision === "denied" ? `: ${ev.reason}` : ""}.`;
}

/** The turn ended while a card still waited (the run died): it waits no more. */
export function abandonApprovalCard(card) {
  if (!card || !["pending", "sending"].includes(card.dataset.state)) return;
  resolveApprovalCard(card, { decision: "cancelled" });
  card.querySelector(".approval-status").textContent = "No longer waiting: the turn ended.";
}
