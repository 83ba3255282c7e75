// Messages: user bubbles, assistant turns (thinking, plan, tools, text), notices, history.

import { el, icon, imageSrc, shortTime, localDateTime } from "../util.js";
import { renderMarkdown } from "./markdown.js";
import { planCard } from "./plan.js";
import { thinkingBlock } from "./thinking.js";
import { completeToolCard, findPending, toolCard } from "./tools.js";
import { addSkillChip, skillOfCall } from "./skills.js";

/** "‹ 2/3 ›" on a user message whose exchange was edited or regenerated: view the other versions. */
export function branchSwitcher(branch, onBranch) {
  const { group, index, count } = branch;
  const prev = el("button", { type: "button", class: "branch-prev", "aria-label": "Previous version", title: "Previous version" }, "‹");
  const next = el("button", { type: "button", class: "branch-next", "aria-label": "Next version", title: "Next version" }, "›");
  prev.disabled = index <= 1 || !onBranch;
  next.disabled = index >= count || !onBranch;
  if (onBranch) {
    prev.addEventListener("click", () => onBranch(group, index - 1));
    next.addEventListener("click", () => onBranch(group, index + 1));
  }
  return el("nav", { class: "branch-switch", "aria-label": "Versions of this message", dataset: { group: String(group) } },
    prev, el("span", { class: "branch-pos" }, `${index}/${count}`), next);
}

export function userMessage({ content = "", images = [], files = [], isRecall = false, createdAt = null, seq = null, branch = null, onBranch = null }) {
  const bubble = el("div", { class: "bubble" });
  if (isRecall) bubble.append(el("div", { class: "recall-badge" }, icon("clock"), el("span", {}, "Scheduled recall")));
  if (images && images.length) {
    bubble.append(el("div", { class: "msg-images" }, images.map((b64, i) => el("img", { src: imageSrc(b64), alt: `Attached image ${i + 1}` }))));
  }
  if (files && files.length) {
    bubble.append(el("div", { class: "msg-files" }, files.map((f) => el("span", { class: "file-chip" }, icon("file"), f.name || "file"))));
  }
  if (content) bubble.append(el("div", { class: "user-text" }, content));
  const node = el("article", { class: `msg user${isRecall ? " recall" : ""}`, "aria-label": isRecall ? "Recall message" : "Your message" }, bubble);
  if (createdAt) bubble.append(el("time", { class: "msg-time", datetime: createdAt, title: localDateTime(createdAt) }, shortTime(createdAt)));
  if (seq) node.dataset.seq = String(seq);
  if (branch && branch.count > 1) {
    node.dataset.branchGroup = String(branch.group);
    bubble.append(branchSwitcher(branch, onBranch));
  }
  return node;
}

/** A message waiting for the running turn's next step, with "Withdraw". */
export function pendingMessage({ content, onWithdraw }) {
  const node = userMessage({ content });
  node.classList.add("pending-steer");
  node.setAttribute("aria-label", "Your message, waiting for the next step");
  const withdraw = el("button", { type: "button", class: "btn btn-small btn-ghost", "data-action": "withdraw" }, "Withdraw");
  withdraw.addEventListener("click", () => {
    withdraw.disabled = true;
    onWithdraw(node);
  });
  node.querySelector(".bubble").append(el("div", { class: "steer-state", role: "status" },
    el("span", {}, "Waiting — Navi reads it at its next step"), withdraw));
  return node;
}

export function assistantTurn() {
  const body = el("div", { class: "turn-body" });
  const node = el("article", { class: "msg assistant", "aria-label": "Navi" }, el("div", { class: "avatar", "aria-hidden": "true" }, "N"), body);
  return { node, body };
}

export function textBlock(text = "") {
  const node = el("div", { class: "answer" });
  if (text) renderMarkdown(node, text);
  return node;
}

export function notice(text, kind = "info", details = "") {
  const node = el("div", { class: `notice notice-${kind}`, role: "status" }, el("span", {}, text));
  if (details) {
    node.append(el("details", { class: "notice-details" }, el("summary", {}, "Summary"), el("div", { class: "notice-summary" }, details)));
  }
  return node;
}

/** An error the user can act on: retry the last message, or dismiss. */
export function errorCard(message, { onRetry } = {}) {
  const actions = el("div", { class: "error-actions" });
  const node = el("div", { class: "error-card", role: "alert" },
    el("div", { class: "error-head" }, icon("alert"), el("strong", {}, "Something went wrong")),
    el("div", { class: "error-text" }, message || "Unknown error"),
    actions);
  if (onRetry) {
    const retry = el("button", { type: "button", class: "btn btn-small" }, icon("retry"), "Retry");
    retry.addEventListener("click", () => {
      node.remove();
      onRetry();
    });
    actions.append(retry);
  }
  const dismiss = el("button", { type: "button", class: "btn btn-small btn-ghost" }, "Dismiss");
  dismiss.addEventListener("click", () => node.remove());
  actions.append(dismiss);
  return node;
}

function toolSuccess(m) {
  const meta = m.metadata || {};
  if (typeof meta.success === "boolean") return meta.success;
  if (meta.error) return false;
  return !/^(error|tool error)\b/i.test(String(m.content || "").trim());
}

/** "Continue" / "Regenerate" under a turn that did not finish (a crash, a model error). */
export function turnActions({ onContinue, onRegenerate }) {
  const bar = el("div", { class: "turn-actions" });
  if (onContinue) {
    const btn = el("button", { type: "button", class: "btn btn-small", "data-action": "continue" }, "Continue");
    btn.addEventListener("click", () => { bar.remove(); onContinue(); });
    bar.append(btn);
  }
  if (onRegenerate) {
    const btn = el("button", { type: "button", class: "btn btn-small btn-ghost", "data-action": "regenerate" }, icon("retry"), "Regenerate");
    btn.addEventListener("click", () => { bar.remove(); onRegenerate(); });
    bar.append(btn);
  }
  return bar;
}

function unfinished(m) {
  return m && m.role === "assistant" && (m.interrupted || (m.metadata && m.metadata.error));
}

/**
 * Render the display history into DOM nodes. Consecutive non-user messages form one assistant turn.
 * Returns the nodes and the todo-relevant tool calls (for the todo panel). ``actions``
 * ({onContinue, onRegenerate}) go under the last turn when it did not finish.
 */
export function renderHistory(messages, actions = null) {
  const nodes = [];
  const todoCalls = [];
  let turn = null;
  const cardsById = new Map();
  const proposalSlots = [];
  const ensureTurn = () => {
    if (!turn) {
      turn = assistantTurn();
      nodes.push(turn.node);
    }
    return turn;
  };
  for (const m of messages) {
    if (m.role === "system") continue;
    if (m.is_summary || m.is_compression) {
      nodes.push(notice(m.is_summary ? "Earlier messages were summarised to save context." : (m.content || "Context compressed."), "info", m.is_summary ? m.content : ""));
      continue;
    }
    if (m.role === "user") {
      turn = null;
      nodes.push(userMessage({ content: m.content, images: m.images, isRecall: m.is_recall, createdAt: m.created_at, seq: m.seq,
        branch: m.branch || null, onBranch: actions && actions.onBranch }));
      continue;
    }
    const t = ensureTurn();
    t.node.dataset.seq = String(m.seq);
    if (m.role === "assistant") {
      if (m.thinking) t.body.append(thinkingBlock(m.thinking));
      if (m.is_plan) {
        t.body.append(planCard(m.content, { open: false }));
        continue;
      }
      if (m.content) t.body.append(textBlock(m.content));
      for (const call of m.tool_calls || []) {
        const name = call.name || call.function?.name || "tool";
        const args = call.arguments ?? call.function?.arguments ?? {};
        const card = toolCard({ tool: name, args, callId: call.id || "" });
        if (call.id) cardsById.set(call.id, card);
        t.body.append(card);
      }
      if (m.metadata && m.metadata.error) t.body.append(errorCard(m.metadata.error));
      if (m.interrupted) t.body.append(el("div", { class: "interrupted", role: "status" }, "Interrupted: Navi stopped before this answer was finished."));
      if (m.images && m.images.length) t.body.append(el("div", { class: "msg-images" }, m.images.map((b64) => el("img", { src: imageSrc(b64), alt: "Image" }))));
    } else if (m.role === "tool") {
      const card = (m.tool_call_id && cardsById.get(m.tool_call_id)) || findPending(t.body, m.name || "")
        || t.body.appendChild(toolCard({ tool: m.name || "tool", args: {} }));
      const args = card.naviArgs || {};
      completeToolCard(card, { result: m.content, success: toolSuccess(m) });
      if (card.dataset.tool === "todo") todoCalls.push({ args, result: m.content });
      const skill = skillOfCall(m.name, args, toolSuccess(m), m.metadata);
      if (skill) addSkillChip(t.body, skill);
      if (m.metadata && m.metadata.skill_proposal) proposalSlots.push([t.body, m.metadata.skill_proposal]);
    }
  }
  // A proposed skill's card goes at the end of its turn, after the answer (chat.js fills the slot).
  for (const [body, id] of proposalSlots) body.append(el("div", { class: "skill-proposal-slot", dataset: { proposalId: String(id) } }));
  const last = messages[messages.length - 1];
  if (actions && turn && unfinished(last)) {
    turn.body.append(turnActions(actions));
  }
  // Calls whose result never came (a turn cut short) should not spin forever.
  for (const n of nodes) {
    for (const card of n.querySelectorAll?.(".tool-card[data-state=pending]") || []) {
      completeToolCard(card, { result: "(no result: the turn was interrupted)", success: false });
    }
  }
  return { nodes, todoCalls };
}
