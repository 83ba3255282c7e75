// Entry point: wire the modules to the page, load profiles and sessions, follow #<session id>.

import { api } from "./api.js";
import * as chat from "./chat.js";
import { initComposer, focusInput } from "./composer.js";
import { initExport } from "./export.js";
import { initHeader, profileChips } from "./header.js";
import { initModels } from "./models.js";
import { initNotifySettings } from "./notify_settings.js";
import { initRecall } from "./recall.js";
import { initSidebar, refresh as refreshSessions, toggleDrawer } from "./sidebar.js";
import { on, set, store } from "./store.js";
import { toast } from "./util.js";

const $ = (id) => document.getElementById(id);

// #<session id>, or #<session id>/m<seq>: that conversation at that message (links from the memory page).
function parseHash() {
  const m = window.location.hash.match(/^#([0-9a-f-]{32,36})(?:\/m(\d{1,18}))?$/i);
  return m ? { id: m[1], seq: m[2] ? Number(m[2]) : null } : { id: null, seq: null };
}

function sessionFromHash() {
  return parseHash().id;
}

async function openFromHash() {
  const { id, seq } = parseHash();
  if (!id) return false;
  if (id !== store.currentId) await chat.open(id);
  if (seq) await chat.revealMessage(seq);
  return true;
}

function renderProfilePicker() {
  profileChips($("profile-picker"), (id) => {
    set({ draftProfileId: id });
    renderProfilePicker();
    focusInput();
  });
}

async function loadProfiles() {
  try {
    const profiles = await api.profiles();
    const preferred = profiles.find((p) => p.id === "secretary") || profiles[0];
    set({ profiles, draftProfileId: store.draftProfileId || (preferred && preferred.id) || null });
  } catch (err) {
    toast(err.message, "error");
  }
  renderProfilePicker();
}

function newChat() {
  chat.draft();
  renderProfilePicker();
  if (window.matchMedia("(max-width: 760px)").matches) toggleDrawer(false);
  focusInput();
}

async function main() {
  const root = $("app");
  store.user = root.dataset.user || "";
  chat.initChat({ messages: $("messages"), scroller: $("scroller"), empty: $("empty-state"), todo: $("todo-panel") });
  initHeader({
    title: $("chat-title"), profile: $("chat-profile"), conn: $("conn"), connText: $("conn-text"),
    meter: $("context-meter"), meterFill: $("context-fill"), meterText: $("context-text"),
  });
  initModels({ button: $("model-button"), label: $("model-label"), menu: $("model-menu") });
  initSidebar({
    list: $("session-list"), emptyNote: $("sessions-empty"), search: $("session-search"),
    filter: $("recall-filter"), menuButton: $("menu-button"), scrim: $("scrim"), results: $("search-results"),
  });
  initRecall($("recall-banner"));
  initExport({ menu: $("export-menu"), importButton: $("import-button"), importInput: $("import-input") });
  initNotifySettings($("notify-settings"));
  initComposer({
    form: $("composer"), input: $("composer-input"), sendButton: $("send-button"), stopButton: $("stop-button"),
    imageButton: $("image-button"), fileButton: $("file-button"), imageInput: $("image-input"),
    fileInput: $("file-input"), tray: $("attachments"), dropZone: $("chat"),
  });
  $("new-chat").addEventListener("click", newChat);
  on("chat:deleted-current", newChat);
  on("search:open", ({ id, seq }) => { // a search hit: that conversation at that message
    if (window.matchMedia("(max-width: 760px)").matches) toggleDrawer(false);
    const hash = seq ? `#${id}/m${seq}` : `#${id}`;
    if (window.location.hash === hash) openFromHash();
    else window.location.hash = hash;
  });
  window.addEventListener("hashchange", () => { openFromHash(); });

  // A small debug handle for tests and the console.
  window.__navi = {
    store,
    get socket() { return chat.currentSocket(); },
    open: chat.open,
  };

  await Promise.all([loadProfiles(), refreshSessions()]);
  if (!(await openFromHash())) newChat();
  document.body.classList.add("ready");
}

main();
