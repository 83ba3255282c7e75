// The message box: Enter sends, Shift+Enter is a newline; locked during a turn; Stop (and Esc);
// images by button, paste and drag-and-drop; files uploaded with a progress bar.

import { api } from "./api.js";
import { ensureSession, send, stop } from "./chat.js";
import { on, store } from "./store.js";
import { el, formatBytes, icon, iconButton, toast } from "./util.js";

const MAX_IMAGE_BYTES = 10 * 1024 * 1024;
let els = {};
const images = []; // {b64, name, node}
const files = []; // {file, node, state: "uploading"|"done"|"error", result, req}

export function initComposer(elements) {
  els = elements;
  const { input, form, imageButton, fileButton, imageInput, fileInput, stopButton, dropZone } = els;
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    submit();
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit();
    }
  });
  input.addEventListener("input", () => {
    autosize();
    updateButtons();
  });
  input.addEventListener("paste", (e) => {
    const pasted = [...(e.clipboardData?.files || [])];
    if (!pasted.length) return;
    e.preventDefault();
    addFiles(pasted);
  });
  imageButton.addEventListener("click", () => imageInput.click());
  fileButton.addEventListener("click", () => fileInput.click());
  imageInput.addEventListener("change", () => {
    addFiles([...imageInput.files], { imagesOnly: true });
    imageInput.value = "";
  });
  fileInput.addEventListener("change", () => {
    addFiles([...fileInput.files]);
    fileInput.value = "";
  });
  stopButton.addEventListener("click", stop);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && store.busy && !document.querySelector("dialog[open]")) {
      e.preventDefault();
      stop();
    }
  });
  let depth = 0;
  dropZone.addEventListener("dragenter", (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth += 1;
    dropZone.classList.add("dragging");
  });
  dropZone.addEventListener("dragover", (e) => {
    if (hasFiles(e)) e.preventDefault();
  });
  dropZone.addEventListener("dragleave", () => {
    depth = Math.max(0, depth - 1);
    if (!depth) dropZone.classList.remove("dragging");
  });
  dropZone.addEventListener("drop", (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth = 0;
    dropZone.classList.remove("dragging");
    addFiles([...e.dataTransfer.files]);
  });
  on("change:busy", lock);
  on("turn:stopping", () => {
    els.stopButton.classList.add("stopping");
    els.stopButton.setAttribute("aria-label", "Stopping…");
  });
  on("chat:opened", () => clearAttachments());
  on("composer:restore", (text) => { // a queued message the turn never read comes back to the box
    els.input.value = els.input.value.trim() ? `${text}\n\n${els.input.value}` : text;
    autosize();
    updateButtons();
  });
  lock();
  autosize();
}

function hasFiles(e) {
  return [...(e.dataTransfer?.types || [])].includes("Files");
}

function autosize() {
  const { input } = els;
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

function lock() {
  // While a turn runs the box stays open: what is sent then joins the turn at its next step (steering).
  const busy = store.busy;
  els.input.placeholder = busy ? "Navi is working… add a message to this turn, or press Esc to stop" : "Message Navi";
  els.form.classList.toggle("busy", busy);
  els.sendButton.setAttribute("aria-label", busy ? "Add to the running turn" : "Send message");
  els.stopButton.hidden = !busy;
  els.stopButton.classList.remove("stopping");
  els.stopButton.setAttribute("aria-label", "Stop generating");
  if (!busy && document.activeElement === document.body) els.input.focus();
  updateButtons();
}

function uploading() {
  return files.some((f) => f.state === "uploading");
}

function updateButtons() {
  els.sendButton.disabled = !els.input.value.trim() || uploading();
}

async function submit() {
  const text = els.input.value;
  if (!text.trim()) return;
  if (uploading()) {
    toast("Wait for the upload to finish.", "info");
    return;
  }
  const payloadFiles = files.filter((f) => f.state === "done").map((f) => {
    const out = { id: f.result.id, name: f.result.name || f.file.name };
    if (f.result.path) out.path = f.result.path;
    return out;
  });
  const sent = await send({ text, images: images.map((i) => i.b64), files: payloadFiles });
  if (sent) {
    els.input.value = "";
    clearAttachments();
    autosize();
    updateButtons();
  }
}

function clearAttachments() {
  images.splice(0).forEach((i) => i.node.remove());
  files.splice(0).forEach((f) => {
    if (f.state === "uploading") f.req?.abort();
    f.node.remove();
  });
  renderTray();
}

function renderTray() {
  els.tray.hidden = !images.length && !files.length;
  updateButtons();
}

function addFiles(list, { imagesOnly = false } = {}) {
  for (const file of list) {
    if (file.type.startsWith("image/")) addImage(file);
    else if (imagesOnly) toast(`${file.name} is not an image.`, "error");
    else upload(file);
  }
}

function addImage(file) {
  if (file.size > MAX_IMAGE_BYTES) {
    toast(`${file.name || "The image"} is larger than ${formatBytes(MAX_IMAGE_BYTES)}.`, "error");
    return;
  }
  const reader = new FileReader();
  reader.addEventListener("load", () => {
    const url = String(reader.result);
    const b64 = url.slice(url.indexOf(",") + 1); // base64 without the data: prefix
    const entry = { b64, name: file.name || "pasted image" };
    const remove = iconButton("close", `Remove image ${entry.name}`, { class: "chip-remove" });
    entry.node = el("div", { class: "attachment image-attachment" }, el("img", { src: url, alt: entry.name }), remove);
    remove.addEventListener("click", () => {
      images.splice(images.indexOf(entry), 1);
      entry.node.remove();
      renderTray();
      els.input.focus();
    });
    images.push(entry);
    els.tray.append(entry.node);
    renderTray();
  });
  reader.addEventListener("error", () => toast(`Could not read ${file.name}.`, "error"));
  reader.readAsDataURL(file);
}

async function upload(file) {
  const bar = el("span", { class: "upload-fill" });
  const status = el("span", { class: "attachment-status" }, "Uploading…");
  const progress = el("span", { class: "upload-progress", role: "progressbar", "aria-label": `Uploading ${file.name}`, "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0" }, bar);
  const remove = iconButton("close", `Remove file ${file.name}`, { class: "chip-remove" });
  const entry = { file, state: "uploading" };
  entry.node = el("div", { class: "attachment file-attachment uploading" },
    icon("file"),
    el("span", { class: "attachment-info" }, el("span", { class: "attachment-name" }, file.name), status, progress),
    remove);
  remove.addEventListener("click", () => {
    if (entry.state === "uploading") entry.req?.abort();
    files.splice(files.indexOf(entry), 1);
    entry.node.remove();
    renderTray();
  });
  files.push(entry);
  els.tray.append(entry.node);
  renderTray();
  try {
    const id = await ensureSession();
    entry.req = api.uploadFile(id, file, (fraction) => {
      const pct = Math.round(fraction * 100);
      bar.style.width = `${pct}%`;
      progress.setAttribute("aria-valuenow", String(pct));
      status.textContent = `Uploading… ${pct}%`;
    });
    entry.result = await entry.req;
    entry.state = "done";
    entry.node.classList.remove("uploading");
    status.textContent = formatBytes(entry.result?.size ?? file.size);
    progress.remove();
  } catch (err) {
    if (!files.includes(entry)) return; // removed by the user
    entry.state = "error";
    entry.node.classList.remove("uploading");
    entry.node.classList.add("error");
    status.textContent = err.message;
    status.setAttribute("role", "alert");
    progress.remove();
  }
  renderTray();
}

export function focusInput() {
  els.input.focus();
}

