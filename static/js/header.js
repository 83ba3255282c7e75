// The chat header: title, profile, context meter, connection state.

import { on, store } from "./store.js";
import { el } from "./util.js";

let els = {};

const CONNECTION_TEXT = {
  idle: "", connecting: "Connecting…", open: "Live", reconnecting: "Reconnecting…", offline: "Offline", closed: "Disconnected",
};

export function initHeader(elements) {
  els = elements;
  on("change:current", render);
  on("change:currentId", render);
  on("change:draftProfileId", render);
  on("change:profiles", render);
  on("change:connection", renderConnection);
  on("change:reconnectIn", renderConnection);
  on("change:contextTokens", renderMeter);
  on("change:maxContextTokens", renderMeter);
  render();
  renderConnection();
  renderMeter();
}

function render() {
  const cur = store.current;
  els.title.textContent = cur ? cur.title || "New chat" : "New chat";
  const profileName = cur ? cur.profile_name || cur.profile_id
    : (store.profiles.find((p) => p.id === store.draftProfileId) || {}).name || "";
  els.profile.textContent = profileName || "";
  els.profile.hidden = !profileName;
  document.title = cur && cur.title ? `${cur.title} · Navi` : "Navi";
}

function renderConnection() {
  const state = store.currentId ? store.connection : "idle";
  els.conn.dataset.state = state;
  let text = CONNECTION_TEXT[state] ?? state;
  if (state === "reconnecting" && store.reconnectIn) text = `Reconnecting in ${Math.ceil(store.reconnectIn / 1000)}s…`;
  els.connText.textContent = text;
  els.conn.hidden = state === "idle";
  els.conn.setAttribute("aria-label", `Connection: ${text || "none"}`);
}

function renderMeter() {
  const used = store.contextTokens || 0;
  const max = store.maxContextTokens || 0;
  els.meter.hidden = !store.currentId || !max || !used;
  if (!max) return;
  const pct = Math.min(100, Math.round((used / max) * 100));
  els.meterFill.style.width = `${pct}%`;
  els.meter.dataset.level = pct >= 80 ? "high" : pct >= 50 ? "mid" : "low";
  els.meterText.textContent = `${pct}%`;
  const label = `Context: ${used.toLocaleString()} of ${max.toLocaleString()} tokens (${pct}%)`;
  els.meter.title = label;
  els.meter.setAttribute("aria-label", label);
  els.meter.setAttribute("aria-valuenow", String(pct));
}

export function profileChips(container, onPick) {
  container.replaceChildren(...store.profiles.map((p) => {
    const b = el("button", { type: "button", class: "profile-chip", "aria-pressed": String(p.id === store.draftProfileId) },
      el("span", { class: "profile-chip-name" }, p.name || p.id),
      p.planning_enabled ? el("span", { class: "profile-chip-tag" }, "plans") : null);
    b.addEventListener("click", () => onPick(p.id));
    return b;
  }));
}
