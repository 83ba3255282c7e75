// Sidebar: sessions (pinned first, then by last activity), search, "pending recalls" filter,
// pin / rename / delete, and the drawer behaviour on narrow screens.

import { api } from "./api.js";
import { showSearch } from "./search.js";
import { confirmDialog, promptDialog } from "./dialogs.js";
import { emit, on, set, store } from "./store.js";
import { debounce, el, icon, iconButton, relativeTime, shortTime, toast } from "./util.js";

let els = {};
let openMenu = null;

export function initSidebar(elements) {
  els = elements;
  // The box searches every message (search.js); the list comes back when it is emptied.
  els.search.addEventListener("input", debounce(async () => {
    const q = els.search.value.trim();
    const searching = await showSearch(els.results, q);
    if (q !== els.search.value.trim()) return;
    els.list.hidden = searching;
    if (searching) els.emptyNote.hidden = true;
    else renderList();
  }, 250));
  els.filter.addEventListener("click", () => {
    const pendingOnly = !store.filter.pendingOnly;
    els.filter.setAttribute("aria-pressed", String(pendingOnly));
    set({ filter: { ...store.filter, pendingOnly } });
    refresh();
  });
  els.menuButton.addEventListener("click", () => toggleDrawer(true));
  els.scrim.addEventListener("click", () => toggleDrawer(false));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.body.classList.contains("drawer-open") && !store.busy) toggleDrawer(false);
  });
  document.addEventListener("click", (e) => {
    if (openMenu && !openMenu.contains(e.target)) closeMenu();
  });
  on("change:currentId", renderList);
  on("change:busy", renderList);
  on("sessions:refresh", refresh);
  on("recall:changed", refresh);
  setInterval(renderList, 60000); // keep "5 min ago" fresh
}

export function toggleDrawer(open) {
  document.body.classList.toggle("drawer-open", open);
  els.menuButton.setAttribute("aria-expanded", String(open));
  if (open) els.search.focus();
}

let refreshSeq = 0;
export async function refresh() {
  const mine = ++refreshSeq;
  try {
    const page = await api.listSessions({ q: store.filter.q, pendingOnly: store.filter.pendingOnly });
    if (mine !== refreshSeq) return;
    set({ sessions: page.items || [], sessionsTotal: page.total || 0 });
    const cur = store.sessions.find((x) => x.id === store.currentId);
    if (cur && store.current) set({ current: { ...store.current, title: cur.title, pinned: cur.pinned, profile_id: cur.profile_id, profile_name: cur.profile_name } });
    renderList();
  } catch (err) {
    toast(err.message, "error");
  }
}

function sorted(items) {
  return [...items].sort((a, b) => (Number(b.pinned) - Number(a.pinned)) || (new Date(b.last_active) - new Date(a.last_active)));
}

function renderList() {
  if (!els.list) return;
  const items = sorted(store.sessions);
  const filtered = store.filter.q || store.filter.pendingOnly;
  els.emptyNote.hidden = els.list.hidden || items.length > 0; // hidden list: search results show instead
  els.emptyNote.textContent = filtered ? "No matching conversations." : "No conversations yet.";
  els.list.replaceChildren(...items.map(item));
}

function item(sess) {
  const title = sess.title || "New chat";
  const current = sess.id === store.currentId;
  const busy = sess.busy || (current && store.busy);
  const open = el("a", { class: "session-link", href: `#${sess.id}`, "aria-current": current ? "page" : null },
    el("span", { class: "session-title" }, title),
    el("span", { class: "session-meta" },
      sess.pinned ? el("span", { class: "badge-icon pin", title: "Pinned", role: "img", "aria-label": "Pinned" }, icon("pin")) : null,
      sess.has_pending_recall ? el("span", { class: "badge-icon recall", title: "Recall scheduled", role: "img", "aria-label": "Recall scheduled" }, icon("clock")) : null,
      busy ? el("span", { class: "busy-dot", title: "Working", role: "img", "aria-label": "Working" }) : null,
      el("span", { class: "session-profile" }, sess.profile_name || sess.profile_id),
      el("span", { class: "session-time", title: new Date(sess.last_active).toLocaleString() }, shortTime(sess.last_active) || relativeTime(sess.last_active))));
  open.addEventListener("click", () => {
    if (window.matchMedia("(max-width: 760px)").matches) toggleDrawer(false);
  });
  const more = iconButton("more", `Actions for ${title}`, { class: "session-more", "aria-haspopup": "menu", "aria-expanded": "false" });
  more.addEventListener("click", (e) => {
    e.stopPropagation();
    if (openMenu && openMenu.parentElement === li) return closeMenu();
    showMenu(li, more, sess);
  });
  const li = el("li", { class: `session${current ? " current" : ""}${sess.pinned ? " pinned" : ""}`, dataset: { id: sess.id } }, open, more);
  return li;
}

function closeMenu() {
  if (!openMenu) return;
  openMenu.previousElementSibling?.setAttribute("aria-expanded", "false");
  openMenu.remove();
  openMenu = null;
}

function showMenu(li, button, sess) {
  closeMenu();
  const entry = (label, iconName, fn, cls = "") => {
    const b = el("button", { type: "button", role: "menuitem", class: `menu-item ${cls}` }, icon(iconName), label);
    b.addEventListener("click", (e) => {
      e.stopPropagation();
      closeMenu();
      fn();
    });
    return b;
  };
  const menu = el("div", { class: "menu", role: "menu", "aria-label": `Actions for ${sess.title || "New chat"}` },
    entry(sess.pinned ? "Unpin" : "Pin", "pin", () => pin(sess)),
    entry("Rename", "edit", () => rename(sess)),
    entry("Delete", "trash", () => remove(sess), "danger"));
  menu.addEventListener("keydown", (e) => {
    const items = [...menu.querySelectorAll("[role=menuitem]")];
    const i = items.indexOf(document.activeElement);
    if (e.key === "ArrowDown") items[(i + 1) % items.length].focus();
    else if (e.key === "ArrowUp") items[(i - 1 + items.length) % items.length].focus();
    else if (e.key === "Escape") {
      e.stopPropagation();
      closeMenu();
      button.focus();
      return;
    } else return;
    e.preventDefault();
  });
  li.append(menu);
  button.setAttribute("aria-expanded", "true");
  openMenu = menu;
  menu.querySelector("[role=menuitem]").focus();
}

async function pin(sess) {
  try {
    await api.pinSession(sess.id, !sess.pinned);
    await refresh();
  } catch (err) {
    toast(err.message, "error");
  }
}

async function rename(sess) {
  const title = await promptDialog({ title: "Rename conversation", label: "Title", value: sess.title || "" });
  if (title === null || title === undefined) return;
  try {
    await api.renameSession(sess.id, title);
    await refresh();
  } catch (err) {
    toast(err.message, "error");
  }
}

async function remove(sess) {
  const ok = await confirmDialog({
    title: "Delete conversation?",
    message: `“${sess.title || "New chat"}” and its uploaded files will be deleted. This cannot be undone.`,
    confirmLabel: "Delete", danger: true,
  });
  if (!ok) return;
  try {
    await api.deleteSession(sess.id);
    if (sess.id === store.currentId) emit("chat:deleted-current");
    await refresh();
    toast("Conversation deleted.");
  } catch (err) {
    toast(err.message, "error");
  }
}
