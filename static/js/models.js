// The model picker in the chat header: the models of the Ollama and OpenAI-compatible servers with size
// and capabilities, the choice for this conversation (PUT /sessions/{id}/model; "profile default" undoes
// it), and for staff a pull with a progress bar (bytes and percent) that Cancel stops.

import { csrfToken, request } from "./api.js";
import { on, set, store } from "./store.js";
import { el, toast } from "./util.js";

let els = {};
let listing = null; // GET /models
let pulling = null; // the running pull's AbortController
let pullNode = null; // the last pull's status (kept across re-renders of the menu)

const CAPS = { tools: "tools", vision: "vision", thinking: "thinking" };
const SERVER_NAMES = { ollama: "Ollama", openai: "OpenAI-compatible" };

/** Bytes as Ollama shows them (decimal units). */
export function sizeText(n) {
  if (!Number.isFinite(n) || n < 0) return "";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
  return `${i ? v.toFixed(v < 10 ? 2 : 1) : v} ${units[i]}`;
}

export function initModels(elements) {
  els = elements;
  els.button.addEventListener("click", () => (els.menu.hidden ? openMenu() : closeMenu()));
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !els.menu.hidden) { closeMenu(); els.button.focus(); } });
  document.addEventListener("click", (e) => {
    // The path as dispatched: a button the click removed (Cancel, a re-rendered list) still counts as inside.
    const path = e.composedPath();
    if (!els.menu.hidden && !path.includes(els.menu) && !path.includes(els.button)) closeMenu();
  });
  on("change:current", renderButton);
  on("change:currentId", () => { renderButton(); closeMenu(); });
  renderButton();
}

function renderButton() {
  const cur = store.current;
  els.button.hidden = !store.currentId || !cur || !cur.model;
  if (els.button.hidden) return;
  els.label.textContent = cur.model;
  const from = cur.model_source === "session" ? "chosen for this chat" : "the profile's model";
  els.button.title = `Model: ${cur.model} (${SERVER_NAMES[cur.model_backend] || cur.model_backend}, ${from}). Change it`;
  els.button.setAttribute("aria-label", els.button.title);
  els.button.dataset.source = cur.model_source;
}

async function openMenu() {
  els.menu.hidden = false;
  els.button.setAttribute("aria-expanded", "true");
  if (!listing) els.menu.replaceChildren(el("p", { class: "model-hint", role: "status" }, "Asking the model servers…"));
  await refresh();
}

function closeMenu() {
  els.menu.hidden = true;
  els.button.setAttribute("aria-expanded", "false");
}

async function refresh() {
  try {
    listing = await request("GET", "/models");
  } catch (err) {
    els.menu.replaceChildren(el("p", { class: "model-error", role: "alert" }, err.message));
    return;
  }
  renderMenu();
}

function capBadges(m) {
  if (m.capabilities === null) return [el("span", { class: "model-cap is-unknown" }, "capabilities not reported")];
  return Object.keys(CAPS).map((c) => el("span", { class: `model-cap${m.capabilities.includes(c) ? "" : " is-off"}`, dataset: { cap: c },
    title: m.capabilities.includes(c) ? `Supports ${CAPS[c]}` : `No ${CAPS[c]}` }, CAPS[c]));
}

function modelRow(m) {
  const cur = store.current || {};
  const chosen = cur.model === m.name && cur.model_backend === m.backend;
  const details = [m.parameter_size, m.quantization].filter(Boolean).join(" · ");
  const row = el("button", { type: "button", class: "model-option", role: "menuitemradio", "aria-checked": String(chosen),
    dataset: { model: m.name, backend: m.backend } },
    el("span", { class: "model-name" }, m.name),
    el("span", { class: "model-meta" }, m.size !== null ? el("span", { class: "model-size" }, sizeText(m.size)) : null,
      details ? el("span", {}, details) : null),
    el("span", { class: "model-caps" }, capBadges(m)));
  row.addEventListener("click", () => choose(m.name, m.backend));
  return row;
}

function renderMenu() {
  const cur = store.current || {};
  const parts = [el("div", { class: "model-menu-head" }, el("strong", {}, "Model for this chat"),
    cur.model_source === "session"
      ? el("button", { type: "button", class: "btn btn-ghost btn-small", dataset: { action: "profile-default" } }, "Use the profile's model")
      : el("span", { class: "model-hint" }, "Now: the profile's model"))];
  const reset = parts[0].querySelector("[data-action=profile-default]");
  if (reset) reset.addEventListener("click", () => choose("", ""));
  for (const server of listing.servers) {
    const group = el("section", { class: "model-server", dataset: { backend: server.backend }, "aria-label": `${SERVER_NAMES[server.backend]} models` },
      el("h3", {}, `${SERVER_NAMES[server.backend] || server.backend}`, el("span", { class: "model-url" }, server.url)));
    if (!server.reachable) group.append(el("p", { class: "model-error", role: "alert" }, server.error));
    else if (!server.models.length) group.append(el("p", { class: "model-hint" }, "No models on this server yet."));
    else group.append(el("div", { class: "model-options", role: "menu" }, server.models.map(modelRow)));
    parts.push(group);
  }
  if (listing.can_pull) parts.push(pullForm());
  els.menu.replaceChildren(...parts);
}

async function choose(model, backend) {
  const id = store.currentId;
  try {
    const chosen = await request("PUT", `/sessions/${encodeURIComponent(id)}/model`, { model, backend });
    if (id !== store.currentId) return;
    set({ current: { ...store.current, ...chosen } });
    closeMenu();
    toast(chosen.model_source === "session" ? `This chat now uses ${chosen.model}.` : `This chat uses the profile's model again (${chosen.model}).`);
  } catch (err) {
    toast(err.message, "error");
  }
}

// -- pull (staff) ------------------------------------------------------------------------------------

function pullForm() {
  const input = el("input", { type: "text", class: "text-input", id: "pull-name", placeholder: "e.g. qwen3:4b", maxlength: "200",
    autocomplete: "off", spellcheck: "false", "aria-label": "Model to pull" });
  const go = el("button", { type: "submit", class: "btn btn-primary btn-small", dataset: { action: "pull" } }, "Pull");
  const form = el("form", { class: "model-pull" }, el("label", { class: "model-pull-label", for: "pull-name" }, "Pull a model onto the Ollama server"),
    el("div", { class: "model-pull-row" }, input, go), el("div", { class: "pull-status", id: "pull-status" }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!pulling) pull(input.value.trim(), form);
  });
  if (pullNode) form.querySelector(".pull-status").replaceWith(pullNode);
  return form;
}

function pullStatus(model) {
  const bar = el("div", { class: "pull-bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0",
    "aria-label": `Pulling ${model}` }, el("span", { class: "pull-fill" }));
  const text = el("span", { class: "pull-text" }, "Starting…");
  const cancel = el("button", { type: "button", class: "btn btn-ghost btn-small", dataset: { action: "cancel-pull" } }, "Cancel");
  const node = el("div", { class: "pull-status", id: "pull-status", dataset: { state: "running" } },
    el("div", { class: "pull-head" }, el("strong", {}, model), cancel), bar, text);
  return { node, bar, text, cancel };
}

function showPullEnd(ui, state, message) {
  ui.node.dataset.state = state;
  ui.cancel.remove();
  ui.text.textContent = message;
  ui.text.setAttribute("role", state === "error" ? "alert" : "status");
}

function applyEvent(ui, ev) {
  if (ev.type === "progress") {
    ui.bar.querySelector(".pull-fill").style.width = `${ev.percent}%`;
    ui.bar.setAttribute("aria-valuenow", String(Math.round(ev.percent)));
    ui.text.textContent = `${sizeText(ev.completed)} of ${sizeText(ev.total)} (${ev.percent.toFixed(1)}%)`;
  } else if (ev.type === "status") {
    if (!/^pulling [0-9a-f]/.test(ev.status)) ui.text.textContent = ev.status.charAt(0).toUpperCase() + ev.status.slice(1) + "…";
  }
}

async function pull(model, form) {
  if (!model) {
    toast("Type the name of the model to pull, e.g. qwen3:4b.", "error");
    return;
  }
  const ui = pullStatus(model);
  form.querySelector(".pull-status").replaceWith(ui.node);
  const controller = new AbortController();
  pulling = controller;
  pullNode = ui.node;
  ui.cancel.addEventListener("click", () => controller.abort());
  let end = null;
  try {
    const resp = await fetch("/models/pull", {
      method: "POST", credentials: "same-origin", signal: controller.signal,
      headers: { "Content-Type": "application/json", Accept: "application/x-ndjson", "X-CSRFToken": csrfToken() },
      body: JSON.stringify({ model }),
    });
    if (!resp.ok) {
      let detail = `The pull was refused (${resp.status}).`;
      try { detail = (await resp.json()).detail || detail; } catch { /* not JSON */ }
      end = { type: "error", message: detail };
    } else {
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          const ev = JSON.parse(line);
          if (ev.type === "done" || ev.type === "error") end = ev;
          else applyEvent(ui, ev);
        }
      }
      if (!end) end = { type: "error", message: "The connection to Navi ended before the pull finished. Pull again: it resumes." };
    }
  } catch (err) {
    end = controller.signal.aborted
      ? { type: "cancelled" }
      : { type: "error", message: "Cannot reach the Navi server. Check your connection and pull again." };
  }
  pulling = null;
  if (end.type === "done") {
    showPullEnd(ui, "done", `Pulled ${model}. It is in the list now.`);
    await refresh();
  } else if (end.type === "cancelled") {
    showPullEnd(ui, "cancelled", `Cancelled. What was downloaded of ${model} stays on the server; pulling again resumes.`);
  } else {
    showPullEnd(ui, "error", end.message);
  }
}
