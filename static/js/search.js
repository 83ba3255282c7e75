// Search across conversations (GET /search): ranked hits with highlighted snippets in the sidebar.
// A click opens the conversation at that message ("search:open" {id, seq}).

import { api } from "./api.js";
import { emit } from "./store.js";
import { el, relativeTime, shortTime } from "./util.js";

const ROLE = { user: "You", assistant: "Navi", tool: "Tool" };

/** The text with its [start, end) highlights wrapped in <mark> (text nodes only: never HTML). */
export function marked(text, highlights) {
  const out = [];
  let last = 0;
  for (const [start, end] of highlights || []) {
    if (start < last || end <= start) continue;
    out.push(text.slice(last, start), el("mark", {}, text.slice(start, end)));
    last = end;
  }
  out.push(text.slice(last));
  return out;
}

function when(iso) {
  return shortTime(iso) || relativeTime(iso);
}

function open(id, seq) {
  emit("search:open", { id, seq });
}

function titleHit(hit) {
  const a = el("a", { class: "search-hit title-hit", href: `#${hit.session_id}`, dataset: { sessionId: hit.session_id } },
    el("span", { class: "search-hit-title" }, ...marked(hit.title || "New chat", hit.highlights)),
    el("span", { class: "search-hit-meta" }, `Conversation · ${when(hit.last_active)}`));
  a.addEventListener("click", (e) => {
    e.preventDefault();
    open(hit.session_id, null);
  });
  return el("li", {}, a);
}

function messageHit(hit) {
  const who = hit.role === "tool" && hit.name ? `Tool ${hit.name}` : ROLE[hit.role] || hit.role;
  const a = el("a", { class: "search-hit", href: `#${hit.session_id}`, dataset: { sessionId: hit.session_id, seq: String(hit.seq) } },
    el("span", { class: "search-hit-title" }, hit.session_title || "New chat"),
    el("span", { class: "search-snippet" }, ...marked(hit.snippet, hit.highlights)),
    el("span", { class: "search-hit-meta" }, `${who} · ${when(hit.created_at)}`));
  a.addEventListener("click", (e) => {
    e.preventDefault();
    open(hit.session_id, hit.seq);
  });
  return el("li", {}, a);
}

let seq = 0;

/** Run the search for q and render into box; returns false when q is empty (the list shows instead). */
export async function showSearch(box, q) {
  const mine = ++seq;
  if (!q) {
    box.hidden = true;
    box.replaceChildren();
    return false;
  }
  box.hidden = false;
  box.setAttribute("aria-busy", "true");
  let body;
  try {
    body = await api.search(q);
  } catch (err) {
    if (mine !== seq) return true;
    box.removeAttribute("aria-busy");
    box.replaceChildren(el("p", { class: "sessions-empty search-error", role: "alert" }, err.message));
    return true;
  }
  if (mine !== seq) return true;
  box.removeAttribute("aria-busy");
  const parts = [];
  if (body.sessions.length) {
    parts.push(el("h2", { class: "search-heading" }, "Conversations"),
      el("ul", { class: "search-list", "aria-label": "Conversations whose title matches" }, ...body.sessions.map(titleHit)));
  }
  if (body.results.length) {
    parts.push(el("h2", { class: "search-heading" }, "Messages"),
      el("ul", { class: "search-list", "aria-label": "Matching messages" }, ...body.results.map(messageHit)));
  }
  if (!parts.length) parts.push(el("p", { class: "sessions-empty" }, `Nothing found for “${q}”.`));
  box.replaceChildren(...parts);
  return true;
}
