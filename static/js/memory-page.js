// The memory page: the user's facts grouped by category, each with the message it was stated in
// (a link into that conversation), edit and forget; and the summary Navi reads in every conversation.

import { request } from "./api.js";
import { confirmDialog } from "./dialogs.js";
import { el, localDateTime, relativeTime, toast } from "./util.js";

const $ = (id) => document.getElementById(id);
// memory_app.models.CATEGORIES, in the order the page shows them.
const CATEGORIES = ["preferences", "projects", "environment", "people", "personal", "work", "health", "other"];
const PAGE = 200;
let facts = [];

async function loadFacts() {
  const all = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await request("GET", `/memory/facts?limit=${PAGE}&offset=${offset}`);
    all.push(...page.items);
    if (all.length >= page.total || !page.items.length) return all;
  }
}

async function refresh() {
  try {
    const [items, summary] = await Promise.all([loadFacts(), request("GET", "/memory/summary")]);
    facts = items;
    renderSummary(summary);
    renderFacts();
  } catch (err) {
    toast(err.message, "error");
  }
  document.body.classList.add("ready");
}

function renderSummary(summary) {
  $("memory-summary").textContent = summary.summary || "No summary yet.";
  $("memory-summary").classList.toggle("is-empty", !summary.summary);
  $("memory-summary-meta").textContent = summary.updated_at ? `Written ${localDateTime(summary.updated_at)} from ${summary.fact_count} fact${summary.fact_count === 1 ? "" : "s"}.` : "";
}

const human = (key) => key.replace(/_/g, " ");

function renderFacts() {
  const groups = new Map();
  for (const f of facts) {
    if (!groups.has(f.category)) groups.set(f.category, []);
    groups.get(f.category).push(f);
  }
  const order = [...CATEGORIES, ...[...groups.keys()].filter((c) => !CATEGORIES.includes(c)).sort()];
  const sections = order.filter((c) => groups.has(c)).map((category) => {
    const items = groups.get(category).sort((a, b) => a.key.localeCompare(b.key));
    const id = `memory-cat-${category}`;
    return el("section", { class: "memory-group", dataset: { category }, "aria-labelledby": id },
      el("h3", { id }, category, el("span", { class: "memory-count" }, String(items.length))),
      el("ul", { class: "memory-list" }, items.map(factItem)));
  });
  $("memory-groups").replaceChildren(...sections);
  $("memory-count").textContent = facts.length ? `(${facts.length})` : "";
  $("memory-empty").hidden = facts.length > 0;
}

function provenance(f) {
  const src = f.source;
  if (!src) return el("p", { class: "memory-source is-unknown" }, "Where this was said is not known (an older fact, or its conversation was deleted).");
  const title = src.session_title || "Untitled conversation";
  const where = src.message_seq ? `#${src.session_id}/m${src.message_seq}` : `#${src.session_id}`;
  const link = el("a", { class: "memory-source-link", href: `/${where}`, title: "Open the conversation at this message" },
    src.message_seq ? `“${title}”` : `“${title}” (the message is not known)`);
  const when = src.stated_at ? el("time", { datetime: src.stated_at, title: localDateTime(src.stated_at) }, relativeTime(src.stated_at)) : null;
  return el("p", { class: "memory-source" }, "Said in ", link, when ? ", " : "", when,
    src.excerpt ? el("q", { class: "memory-excerpt" }, src.excerpt) : null);
}

function factItem(f) {
  const value = el("p", { class: "memory-value" }, f.value);
  const edit = el("button", { type: "button", class: "btn btn-small", dataset: { action: "edit" } }, "Edit");
  const forget = el("button", { type: "button", class: "btn btn-small btn-ghost danger-text", dataset: { action: "forget" } }, "Forget");
  const item = el("li", { class: "memory-fact", dataset: { factId: String(f.id), key: f.key } },
    el("div", { class: "memory-fact-head" }, el("strong", { class: "memory-key" }, human(f.key)),
      el("span", { class: "memory-actions" }, edit, forget)),
    value,
    f.expires_at ? el("p", { class: "memory-hint" }, `Forgotten on its own ${localDateTime(f.expires_at)}.`) : null,
    provenance(f));
  edit.addEventListener("click", () => openEditor(item, f));
  forget.addEventListener("click", () => forgetFact(f));
  return item;
}

function openEditor(item, f) {
  if (item.querySelector(".memory-edit")) return;
  const value = el("textarea", { class: "text-input", rows: "2", maxlength: "500", "aria-label": `Value of ${human(f.key)}` });
  value.value = f.value;
  const category = el("select", { class: "text-input", "aria-label": "Category" },
    [...new Set([...CATEGORIES, f.category])].map((c) => el("option", { value: c, selected: c === f.category ? "" : undefined }, c)));
  const error = el("div", { class: "memory-error", role: "alert", hidden: "" });
  const save = el("button", { type: "submit", class: "btn btn-primary btn-small", dataset: { action: "save" } }, "Save");
  const cancel = el("button", { type: "button", class: "btn btn-ghost btn-small", dataset: { action: "cancel" } }, "Cancel");
  const form = el("form", { class: "memory-edit" },
    el("label", { class: "memory-label" }, "Value", value),
    el("label", { class: "memory-label" }, "Category", category),
    error, el("div", { class: "memory-edit-actions" }, save, cancel));
  cancel.addEventListener("click", () => form.remove());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    save.disabled = true;
    error.hidden = true;
    try {
      const updated = await request("PATCH", `/memory/facts/${f.id}`, { value: value.value, category: category.value });
      facts = facts.map((x) => (x.id === f.id ? updated : x));
      renderFacts();
      toast(`Saved: ${human(updated.key)}`, "success");
      document.querySelector(`.memory-fact[data-fact-id="${updated.id}"] [data-action=edit]`)?.focus();
    } catch (err) {
      // Nothing was changed: the text stays in the box to be fixed.
      error.textContent = `Not saved: ${err.message}`;
      error.hidden = false;
      save.disabled = false;
    }
  });
  item.append(form);
  value.focus();
}

async function forgetFact(f) {
  const ok = await confirmDialog({
    title: "Forget this fact?", message: `Navi will no longer know “${human(f.key)}: ${f.value}”.`,
    confirmLabel: "Forget", danger: true,
  });
  if (!ok) return;
  try {
    await request("DELETE", `/memory/facts/${f.id}`);
  } catch (err) {
    toast(err.message, "error");
    if (err.status !== 404) return; // already gone elsewhere: drop it here too
  }
  facts = facts.filter((x) => x.id !== f.id);
  renderFacts();
  toast(`Forgot ${human(f.key)}`, "success");
}

refresh();
