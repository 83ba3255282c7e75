// The notification settings page (a dialog): per event and channel choices, the e-mail address,
// this browser's push subscription, linked Telegram chats, and a test notification.
//
// Every change is saved at once (PUT /notifications/settings with just that pair); a refusal
// puts the control back and says why.

import { api } from "./api.js";
import { clear, el, toast as showToast } from "./util.js";

let dialog = null;
let state = null;

/** A message inside the dialog (toasts would sit under the modal's backdrop). */
function toast(message, kind = "info") {
  const line = dialog && dialog.querySelector(".settings-message");
  if (!line) return;
  line.textContent = message;
  line.className = `settings-message ${kind === "error" ? "error" : "ok"}`;
  line.setAttribute("role", kind === "error" ? "alert" : "status");
}

function b64ToBytes(value) {
  const padded = (value + "===".slice((value.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

async function pushRegistration() {
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) return null;
  return navigator.serviceWorker.register("/sw.js", { scope: "/" });
}

async function currentSubscription() {
  try {
    const reg = await pushRegistration();
    return reg ? await reg.pushManager.getSubscription() : null;
  } catch {
    return null;
  }
}

async function subscribePush() {
  if (!window.isSecureContext) throw new Error("Browser push needs HTTPS (or localhost).");
  const reg = await pushRegistration();
  if (!reg) throw new Error("This browser does not support push notifications.");
  const permission = await Notification.requestPermission();
  if (permission !== "granted") throw new Error("Notifications are blocked for this site: allow them in the browser's site settings.");
  await navigator.serviceWorker.ready;
  let sub = await reg.pushManager.getSubscription();
  if (!sub) {
    sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64ToBytes(state.push.public_key) });
  }
  await api.pushSubscribe({ ...sub.toJSON(), user_agent: navigator.userAgent.slice(0, 300) });
}

async function unsubscribePush() {
  const sub = await currentSubscription();
  if (!sub) return;
  await api.pushUnsubscribe(sub.endpoint);
  await sub.unsubscribe();
}

function section(title, ...children) {
  return el("section", { class: "settings-section" }, el("h3", { class: "settings-heading" }, title), ...children);
}

function choicesTable() {
  const head = el("tr", {}, el("th", { scope: "col" }, "When"),
    ...state.channels.map((c) => el("th", { scope: "col" }, c.label)));
  const rows = state.kinds.map((kind) => el("tr", {},
    el("th", { scope: "row", title: kind.help }, kind.label),
    ...state.channels.map((channel) => {
      const box = el("input", {
        type: "checkbox", "aria-label": `${kind.label}: ${channel.label}`,
        dataset: { kind: kind.name, channel: channel.name },
      });
      box.checked = Boolean(state.choices[kind.name][channel.name]);
      box.addEventListener("change", async () => {
        box.disabled = true;
        try {
          state = await api.putNotifySettings({ choices: { [kind.name]: { [channel.name]: box.checked } } });
        } catch (err) {
          box.checked = !box.checked;
          toast(err.message, "error");
        } finally {
          box.disabled = false;
        }
      });
      return el("td", {}, box);
    })));
  const notes = state.channels.map((c) => el("li", { class: c.available ? "ok" : "missing", dataset: { channel: c.name } },
    el("strong", {}, `${c.label}: `), c.detail));
  return [el("table", { class: "choices" }, el("thead", {}, head), el("tbody", {}, ...rows)),
    el("ul", { class: "channel-notes" }, ...notes)];
}

function emailForm() {
  const input = el("input", { type: "email", class: "text-input", id: "notify-email", value: state.email || "",
    placeholder: "you@example.org", autocomplete: "email" });
  const form = el("form", { class: "inline-form", novalidate: true },
    el("label", { for: "notify-email" }, "E-mail address"), input,
    el("button", { type: "submit", class: "btn btn-small" }, "Save"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      state = await api.putNotifySettings({ email: input.value });
      toast("E-mail address saved.");
      render();
    } catch (err) {
      toast(err.message, "error");
    }
  });
  return form;
}

function pushControls() {
  const status = el("p", { class: "settings-status", id: "push-status" }, "Checking this browser…");
  const button = el("button", { type: "button", class: "btn btn-small", id: "push-toggle", disabled: true }, "…");
  currentSubscription().then((sub) => {
    const on = Boolean(sub);
    status.textContent = on ? "This browser receives push notifications."
      : "This browser does not receive push notifications yet.";
    button.textContent = on ? "Turn off for this browser" : "Turn on for this browser";
    button.disabled = false;
    button.onclick = async () => {
      button.disabled = true;
      try {
        if (on) await unsubscribePush();
        else await subscribePush();
        state = await api.notifySettings();
        render();
      } catch (err) {
        toast(err.message, "error");
        button.disabled = false;
      }
    };
  });
  return [status, button];
}

function telegramControls() {
  const tg = state.telegram;
  if (!tg.configured) return [el("p", { class: "settings-status" }, tg.detail)];
  const list = el("ul", { class: "linked-chats" }, ...tg.links.map((link) => el("li", {},
    el("span", {}, link.chat_title),
    el("button", { type: "button", class: "btn btn-small btn-ghost", onclick: async () => {
      try {
        await api.telegramUnlink(link.id);
        state = await api.notifySettings();
        render();
      } catch (err) {
        toast(err.message, "error");
      }
    } }, "Unlink"))));
  const codeBox = el("p", { class: "link-code", id: "telegram-code", hidden: true });
  const button = el("button", { type: "button", class: "btn btn-small", id: "telegram-link" }, "Link a Telegram chat");
  button.addEventListener("click", async () => {
    try {
      const out = await api.telegramLinkCode();
      clear(codeBox).append("Send ", el("code", {}, `/link ${out.code}`), ` to ${out.bot} within ${Math.round(out.expires_in / 60)} minutes.`);
      codeBox.hidden = false;
    } catch (err) {
      toast(err.message, "error");
    }
  });
  return [tg.links.length ? list : el("p", { class: "settings-status" }, "No chat linked yet."), button, codeBox];
}

function render() {
  const body = dialog.querySelector(".settings-body");
  clear(body);
  body.append(section("Notify me", ...choicesTable()));
  body.append(section("E-mail", emailForm()));
  if (state.push) body.append(section("Browser push", ...pushControls()));
  if (state.telegram) body.append(section("Telegram", ...telegramControls()));
  const test = el("button", { type: "button", class: "btn btn-small", id: "notify-test" }, "Send a test notification");
  test.addEventListener("click", async () => {
    try {
      const out = await api.notifyTest();
      toast(out.channels.length ? `Sent to: ${out.channels.join(", ")}.` : "No channel can reach you yet.");
    } catch (err) {
      toast(err.message, "error");
    }
  });
  body.append(section("Check", test));
}

export async function openNotifySettings() {
  try {
    state = await api.notifySettings();
  } catch (err) {
    showToast(err.message, "error");
    return;
  }
  dialog = el("dialog", { class: "modal settings-modal", "aria-labelledby": "settings-title" },
    el("div", { class: "settings-head" }, el("h2", { class: "modal-title", id: "settings-title" }, "Notifications"),
      el("button", { type: "button", class: "btn btn-ghost btn-small", onclick: () => dialog.close() }, "Close")),
    el("p", { class: "settings-message", role: "status" }),
    el("div", { class: "settings-body" }));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  render();
  dialog.showModal();
}

export function initNotifySettings(button) {
  if (button) button.addEventListener("click", openNotifySettings);
}
