// Modal dialogs (native <dialog>): confirm and prompt. Keyboard: Esc cancels, focus is trapped by the browser.

import { el } from "./util.js";

function modal(build) {
  return new Promise((resolve) => {
    const dialog = el("dialog", { class: "modal" });
    const form = el("form", { method: "dialog" });
    const { content, confirmLabel, danger, getValue } = build();
    const cancel = el("button", { type: "button", class: "btn btn-ghost", value: "cancel" }, "Cancel");
    const ok = el("button", { type: "submit", class: `btn ${danger ? "btn-danger" : "btn-primary"}`, value: "ok" }, confirmLabel);
    form.append(...content, el("div", { class: "modal-actions" }, cancel, ok));
    dialog.append(form);
    document.body.append(dialog);
    let result = null;
    cancel.addEventListener("click", () => dialog.close());
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      result = getValue ? getValue() : true;
      dialog.close();
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(result);
    });
    dialog.showModal();
    (dialog.querySelector("input") || ok).focus();
  });
}

export function confirmDialog({ title, message, confirmLabel = "OK", danger = false }) {
  return modal(() => ({
    content: [el("h2", { class: "modal-title" }, title), el("p", { class: "modal-text" }, message)],
    confirmLabel, danger,
  })).then((r) => r === true);
}

export function promptDialog({ title, label, value = "", confirmLabel = "Save", maxLength = 200 }) {
  const input = el("input", { type: "text", class: "text-input", maxlength: String(maxLength), "aria-label": label });
  input.value = value;
  return modal(() => ({
    content: [el("h2", { class: "modal-title" }, title), el("label", { class: "modal-label" }, label, input)],
    confirmLabel, getValue: () => input.value.trim(),
  }));
}
