// Markdown → sanitised DOM. marked parses, DOMPurify sanitises (HTML profile only: no SVG/MathML),
// highlight.js colours code. Images from other origins are never loaded until the user clicks:
// a reply must not be able to leak data through an image URL.

import { marked } from "../../vendor/marked/marked.esm.js";
import DOMPurify from "../../vendor/dompurify/purify.es.mjs";
import hljs from "../../vendor/highlight/highlight.min.js";
import { el, icon } from "../util.js";

marked.setOptions({ gfm: true, breaks: false });

const PURIFY_CONFIG = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option", "video", "audio",
    "source", "picture", "track", "iframe", "object", "embed", "link", "meta", "base", "dialog", "template"],
  FORBID_ATTR: ["style", "srcset", "background", "poster", "action", "formaction", "ping", "id", "name"],
  RETURN_DOM_FRAGMENT: true,
};

/** Only inline images load by themselves; any URL (even this origin's) waits for a click. */
function mustBlock(url) {
  return !/^data:image\/(png|jpe?g|gif|webp);base64,/i.test(url.trim());
}

let hooksInstalled = false;
function installHooks() {
  if (hooksInstalled) return;
  hooksInstalled = true;
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
    if (node.tagName === "IMG") {
      const src = node.getAttribute("src") || "";
      if (!src || mustBlock(src)) {
        node.removeAttribute("src");
        if (src) node.setAttribute("data-blocked-src", src);
        node.setAttribute("data-blocked", "1");
      }
      node.setAttribute("loading", "lazy");
      node.setAttribute("referrerpolicy", "no-referrer");
    }
  });
}

function hostOf(url) {
  try {
    return new URL(url, window.location.href).host;
  } catch {
    return "another site";
  }
}

/** Replace blocked images by a button that loads the image only when clicked. */
function placeholders(root) {
  for (const img of root.querySelectorAll("img[data-blocked]")) {
    const src = img.getAttribute("data-blocked-src");
    const alt = img.getAttribute("alt") || "";
    if (!src) {
      img.remove();
      continue;
    }
    const host = hostOf(src);
    const button = el("button", {
      type: "button", class: "img-placeholder", "data-src": src,
      "aria-label": `Load external image from ${host}${alt ? `: ${alt}` : ""}`,
    }, icon("image"), el("span", {}, `Image from ${host}${alt ? ` — ${alt}` : ""}`), el("span", { class: "hint" }, "Click to load"));
    button.addEventListener("click", () => {
      const real = el("img", { alt, referrerpolicy: "no-referrer", class: "external-img" });
      real.src = src;
      button.replaceWith(real);
    }, { once: true });
    img.replaceWith(button);
  }
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = el("textarea", { class: "sr-only", "aria-hidden": "true" });
  area.value = text;
  document.body.append(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

/** A copy button for a code block. */
export function copyButton(getText, label = "Copy code") {
  const button = el("button", { type: "button", class: "copy-btn", "aria-label": label, title: label }, icon("copy"), el("span", {}, "Copy"));
  button.addEventListener("click", async () => {
    try {
      await copyText(getText());
      button.classList.add("copied");
      button.lastChild.textContent = "Copied";
      setTimeout(() => {
        button.classList.remove("copied");
        button.lastChild.textContent = "Copy";
      }, 1500);
    } catch {
      button.lastChild.textContent = "Copy failed";
    }
  });
  return button;
}

function decorateCode(root, { highlight }) {
  for (const code of root.querySelectorAll("pre > code")) {
    const pre = code.parentElement;
    const lang = [...code.classList].find((c) => c.startsWith("language-"))?.slice(9) || "";
    if (highlight) {
      try {
        const source = code.textContent;
        code.innerHTML = lang && hljs.getLanguage(lang)
          ? hljs.highlight(source, { language: lang, ignoreIllegals: true }).value
          : hljs.highlightAuto(source).value; // highlight.js escapes the text it returns
      } catch {
        /* leave it plain */
      }
      code.classList.add("hljs");
    }
    const bar = el("div", { class: "code-bar" }, el("span", { class: "code-lang" }, lang || "code"), copyButton(() => code.textContent));
    const wrap = el("div", { class: "code-block" });
    pre.replaceWith(wrap);
    wrap.append(bar, pre);
  }
}

/** Render markdown into `target` (replacing its content). Safe for untrusted text. */
export function renderMarkdown(target, text, { highlight = true } = {}) {
  installHooks();
  const html = marked.parse(String(text ?? ""), { async: false });
  const fragment = DOMPurify.sanitize(html, PURIFY_CONFIG);
  placeholders(fragment);
  decorateCode(fragment, { highlight });
  target.replaceChildren(fragment);
  target.classList.add("md");
  return target;
}
