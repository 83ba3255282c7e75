// The recall banner: when the agent will wake up in this session, with Cancel and (recurring) Skip.

import { api } from "./api.js";
import { emit, on, set, store } from "./store.js";
import { el, icon, localDateTime, relativeTime, toast } from "./util.js";

let banner = null;
let loadSeq = 0;

export function initRecall(node) {
  banner = node;
  on("change:recall", render);
  on("chat:opened", (id) => (id ? load(id) : set({ recall: null })));
  on("recall:changed", (ev) => {
    if (!ev || !ev.session_id || ev.session_id === store.currentId) load(store.currentId);
  });
  setInterval(render, 30000);
}

export async function load(id) {
  const mine = ++loadSeq;
  if (!id) return;
  try {
    const data = await api.getRecall(id);
    if (mine !== loadSeq || id !== store.currentId) return;
    const recall = data && data.id && ((data.status || "pending") === "pending" || data.waiting_approval) ? data : null;
    set({ recall });
  } catch (err) {
    if (mine === loadSeq && err.status !== 404) set({ recall: null });
  }
}

function headline(recall) {
  if (recall.waiting_approval) return "A scheduled run is waiting for your approval";
  if (recall.call_type === "immediate") return "Navi will continue on its own in a moment";
  return `Navi will check back ${relativeTime(new Date(recall.trigger_at))}`;
}

function details(recall) {
  const parts = [];
  const waiting = recall.waiting_approval;
  if (waiting) return `${waiting.tool}: ${waiting.reason}${waiting.touches ? ` (${waiting.touches})` : ""}`;
  if (recall.call_type !== "immediate") parts.push(localDateTime(new Date(recall.trigger_at)));
  if (recall.call_type === "recurring" && recall.interval_seconds) parts.push(`repeats every ${interval(recall.interval_seconds)}`);
  if (recall.internal_comment) parts.push(recall.internal_comment);
  return parts.join(" · ");
}

function interval(secs) {
  if (secs % 86400 === 0) return secs === 86400 ? "day" : `${secs / 86400} days`;
  if (secs % 3600 === 0) return secs === 3600 ? "hour" : `${secs / 3600} hours`;
  if (secs % 60 === 0) return secs === 60 ? "minute" : `${secs / 60} minutes`;
  return `${secs} s`;
}

function render() {
  if (!banner) return;
  const recall = store.recall;
  banner.hidden = !recall;
  if (!recall) {
    banner.replaceChildren();
    return;
  }
  const actions = el("div", { class: "recall-actions" });
  const waiting = recall.waiting_approval;
  banner.classList.toggle("waiting", Boolean(waiting));
  if (waiting) {
    const decide = (decision) => () => api.decideApproval(store.currentId, waiting.approval_id, { decision });
    actions.append(action("Approve", decide("approve"), "Approved: the run goes on."));
    actions.append(action("Deny", decide("deny"), "Denied: the run goes on without it."));
  }
  if (recall.call_type === "recurring") actions.append(action("Skip next", () => api.skipRecall(store.currentId), "Skipped the next run."));
  actions.append(action("Cancel", () => api.cancelRecall(store.currentId), "Recall cancelled."));
  banner.replaceChildren(
    el("span", { class: "recall-icon" }, icon("clock")),
    el("div", { class: "recall-text" },
      el("div", { class: "recall-when" }, headline(recall)),
      el("div", { class: "recall-comment", title: recall.internal_comment || "" }, details(recall))),
    actions);
}

function action(label, fn, done) {
  const b = el("button", { type: "button", class: "btn btn-small btn-ghost" }, label);
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      await fn();
      toast(done);
      await load(store.currentId);
      emit("sessions:refresh");
    } catch (err) {
      toast(err.message, "error");
      b.disabled = false;
    }
  });
  return b;
}
