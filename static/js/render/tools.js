// Tool cards: a spinner on tool_started, then args/result/success on tool_call. Subagent
// events nest inside the running spawn_agent card.

import { el, icon } from "../util.js";

const FOLD_CHARS = 700;
const FOLD_LINES = 12;

function pretty(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") {
    try {
      const parsed = JSON.parse(value);
      if (parsed && typeof parsed === "object") return JSON.stringify(parsed, null, 2);
    } catch {
      /* plain text */
    }
    return value;
  }
  return JSON.stringify(value, null, 2);
}

function summarize(args) {
  if (!args || typeof args !== "object") return typeof args === "string" ? args.slice(0, 90) : "";
  const preferred = ["command", "query", "url", "path", "action", "task", "code", "name", "profile_id"];
  const key = preferred.find((k) => typeof args[k] === "string" && args[k]) || Object.keys(args).find((k) => typeof args[k] === "string");
  const text = key ? String(args[key]) : JSON.stringify(args);
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > 90 ? `${oneLine.slice(0, 89)}…` : oneLine;
}

function section(title, text, { fold = false } = {}) {
  const pre = el("pre", { class: "tool-pre" }, text);
  const wrap = el("div", { class: "tool-section" }, el("div", { class: "tool-section-title" }, title), pre);
  const lines = text.split("\n").length;
  if (fold && (text.length > FOLD_CHARS || lines > FOLD_LINES)) {
    pre.classList.add("folded");
    const toggle = el("button", { type: "button", class: "link-btn fold-toggle", "aria-expanded": "false" }, `Show all (${lines} lines)`);
    toggle.addEventListener("click", () => {
      const folded = pre.classList.toggle("folded");
      toggle.setAttribute("aria-expanded", String(!folded));
      toggle.textContent = folded ? `Show all (${lines} lines)` : "Show less";
    });
    wrap.append(toggle);
  }
  return wrap;
}

function statusIcon(state) {
  if (state === "pending") return el("span", { class: "spinner", role: "img", "aria-label": "Running" });
  return el("span", { class: `tool-status ${state}`, role: "img", "aria-label": state === "ok" ? "Succeeded" : "Failed" }, icon(state === "ok" ? "check" : "close"));
}

export function toolCard({ tool, args, callId = "", subagent = false }) {
  const summary = el("summary", {},
    statusIcon("pending"),
    el("span", { class: "tool-name" }, tool || "tool"),
    el("span", { class: "tool-args-summary" }, summarize(args)));
  const body = el("div", { class: "tool-body" }, section("Arguments", pretty(args)));
  const node = el("details", { class: `tool-card${subagent ? " sub" : ""}`, dataset: { tool: tool || "", state: "pending", callId } }, summary, body);
  node.naviArgs = args || {};
  if (tool === "spawn_agent") {
    body.append(el("div", { class: "subagent-log", "aria-label": "Subagent activity" }));
    node.open = true;
  }
  return node;
}

export function completeToolCard(card, { args, result, success }) {
  const state = success === false ? "fail" : "ok";
  card.dataset.state = state;
  card.querySelector("summary > .spinner, summary > .tool-status")?.replaceWith(statusIcon(state));
  const body = card.querySelector(".tool-body");
  if (args !== undefined && args !== null && Object.keys(args || {}).length) {
    card.naviArgs = args;
    body.firstElementChild.replaceWith(section("Arguments", pretty(args)));
    card.querySelector(".tool-args-summary").textContent = summarize(args);
  }
  body.querySelector(".tool-section.result")?.remove();
  const res = section(success === false ? "Error" : "Result", pretty(result ?? ""), { fold: true });
  res.classList.add("result");
  body.append(res);
  if (card.dataset.tool === "spawn_agent") card.open = false;
  return card;
}

/** The last card of `tool` still pending directly inside `scope`. */
export function findPending(scope, tool) {
  const cards = scope.querySelectorAll(":scope > .tool-card[data-state=pending], :scope > .tool-group > .tool-card[data-state=pending]");
  for (let i = cards.length - 1; i >= 0; i -= 1) if (cards[i].dataset.tool === tool) return cards[i];
  return null;
}

/** Where subagent events go: the log of the running (else the last) spawn_agent card in `scope`. */
export function subagentScope(scope) {
  const spawns = scope.querySelectorAll(":scope > .tool-card[data-tool=spawn_agent]");
  if (!spawns.length) return null;
  const running = [...spawns].reverse().find((c) => c.dataset.state === "pending");
  return (running || spawns[spawns.length - 1]).querySelector(".subagent-log");
}
