// Reasoning blocks: streamed (thinking_delta → collapses at thinking_end) or whole (turn_thinking, history).

import { el } from "../util.js";

export function thinkingBlock(text = "", { live = false, subagent = false } = {}) {
  const body = el("div", { class: "thinking-body" }, text);
  const label = el("span", { class: "thinking-label" }, live ? "Thinking…" : subagent ? "Subagent reasoning" : "Reasoning");
  const node = el("details", { class: `thinking${live ? " live" : ""}` },
    el("summary", {}, el("span", { class: "thinking-dot", "aria-hidden": "true" }), label), body);
  node.open = live;
  node.dataset.started = String(Date.now());
  return node;
}

export function appendThinking(node, delta) {
  node.querySelector(".thinking-body").append(document.createTextNode(delta));
}

/** Collapse a streamed block and say how long it took. */
export function finishThinking(node) {
  if (!node || !node.classList.contains("live")) return;
  node.classList.remove("live");
  node.open = false;
  const secs = Math.max(1, Math.round((Date.now() - Number(node.dataset.started || Date.now())) / 1000));
  node.querySelector(".thinking-label").textContent = `Thought for ${secs}s`;
}
