// The agent's todo list with live progress, derived from `todo` tool calls (result text, else args).

import { el, clear } from "./util.js";

const MARK = { " ": "pending", "…": "in_progress", "✓": "done", "✗": "failed" };
const MARK_STATUS = new Set(Object.values(MARK));
let steps = [];

/** Parse the todo tool's rendering: "1. [✓] title (in progress) — evidence: … — note: …". */
export function parseTodo(text) {
  if (typeof text !== "string" || !/Todo list/i.test(text)) return null;
  const out = [];
  for (const line of text.split("\n")) {
    const m = line.match(/^\s*\d+\.\s*\[(.)\]\s*(.*)$/u);
    if (!m) continue;
    let title = m[2].split(" — ")[0];
    const inProgress = / \(in progress\)$/.test(title);
    title = title.replace(/ \(in progress\)$/, "");
    out.push({ title, status: inProgress ? "in_progress" : MARK[m[1]] || "pending" });
  }
  return out;
}

/** Apply one todo call ({args, result, success}) to the current list. */
export function applyTodoCall({ args = {}, result = "", success = true }) {
  const parsed = success !== false ? parseTodo(result) : null;
  if (parsed) steps = parsed;
  else if (success !== false && args.action === "set" && Array.isArray(args.steps)) {
    steps = args.steps.map((title) => ({ title: String(title), status: "pending" }));
  } else if (success !== false && args.action === "update" && steps[args.step - 1] && args.status) {
    steps[args.step - 1] = { ...steps[args.step - 1], status: args.status };
  }
}

/** Take the server's list (GET /sessions/{id}/todo): it also holds what the plan and the loop wrote. */
export function setTodo(list) {
  steps = (list || []).map((s) => ({ title: String(s.title || ""), status: MARK_STATUS.has(s.status) ? s.status : "pending" }));
}

export function resetTodo() {
  steps = [];
}

export function renderTodo(panel) {
  if (!panel) return;
  panel.hidden = steps.length === 0;
  if (!steps.length) return;
  const done = steps.filter((s) => s.status === "done").length;
  const pct = Math.round((done / steps.length) * 100);
  const list = el("ol", { class: "todo-list" }, steps.map((s) => el("li", { class: `todo-item ${s.status}` },
    el("span", { class: "todo-check", "aria-hidden": "true" }, s.status === "done" ? "✓" : s.status === "failed" ? "✗" : s.status === "in_progress" ? "•" : ""),
    el("span", { class: "todo-title" }, s.title),
    el("span", { class: "sr-only" }, ` (${s.status.replace("_", " ")})`))));
  const wasOpen = panel.querySelector("details")?.open ?? false;
  const details = el("details", { class: "todo" },
    el("summary", {},
      el("span", { class: "todo-heading" }, "Tasks"),
      el("span", { class: "todo-count" }, `${done}/${steps.length}`),
      el("span", { class: "progress", role: "progressbar", "aria-label": "Task progress", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(pct) },
        el("span", { class: "progress-fill", style: null }))),
    list);
  details.open = wasOpen;
  clear(panel).append(details);
  panel.querySelector(".progress-fill").style.width = `${pct}%`;
}
