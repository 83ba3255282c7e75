// The 🗺️ plan card (plan_ready, or a history message with is_plan).

import { el } from "../util.js";
import { renderMarkdown } from "./markdown.js";

export function planCard(plan, { open = true } = {}) {
  const steps = String(plan || "").split("\n").filter((l) => /^\s*(\d+[.)]|[-*])\s+/.test(l)).length;
  const body = el("div", { class: "plan-body" });
  renderMarkdown(body, plan);
  const node = el("details", { class: "plan-card" },
    el("summary", {}, el("span", { class: "plan-emoji", "aria-hidden": "true" }, "🗺️"),
      el("span", { class: "plan-title" }, "Plan"),
      steps ? el("span", { class: "plan-count" }, `${steps} step${steps === 1 ? "" : "s"}`) : null),
    body);
  node.open = open;
  return node;
}
