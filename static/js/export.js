// Download the open conversation (GET /sessions/{id}/export) and import a Navi JSON export
// (POST /sessions/import), which opens as a new conversation.

import { api } from "./api.js";
import { emit, on, store } from "./store.js";
import { toast } from "./util.js";

export function initExport({ menu, importButton, importInput }) {
  const render = () => {
    const id = store.currentId;
    menu.hidden = !id;
    if (!id) menu.open = false;
    for (const a of menu.querySelectorAll("a[data-format]")) {
      a.href = id ? `/sessions/${encodeURIComponent(id)}/export?format=${a.dataset.format}` : "#";
    }
  };
  on("change:currentId", render);
  render();
  menu.addEventListener("click", (e) => {
    if (e.target.closest("a[data-format]")) menu.open = false;
  });
  document.addEventListener("click", (e) => {
    if (menu.open && !menu.contains(e.target)) menu.open = false;
  });
  importButton.addEventListener("click", () => importInput.click());
  importInput.addEventListener("change", async () => {
    const file = importInput.files && importInput.files[0];
    importInput.value = "";
    if (!file) return;
    const maxMb = Number(importInput.dataset.maxMb) || 0;
    if (maxMb && file.size > maxMb * 1024 * 1024) {
      // Refused here, before the upload: the server would read the whole body before refusing it.
      toast(`“${file.name}” is too large to import (${(file.size / 1048576).toFixed(1)} MB; at most ${maxMb} MB): `
        + "split the conversation or ask your administrator to raise SESSION_IMPORT_MAX_MB.", "error");
      return;
    }
    try {
      const created = await api.importSession(file);
      emit("sessions:refresh");
      window.location.hash = `#${created.session_id}`;
      toast(`Imported “${created.title || "conversation"}” (${created.messages} messages).`);
    } catch (err) {
      toast(err.message, "error");
    }
  });
}
