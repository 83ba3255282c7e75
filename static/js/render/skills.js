// Skills in the chat: a chip on the turn for each skill it read (skill_view), and the card of a
// skill the agent proposed (skill_write) with Accept / Edit / Discard.

import { api } from "../api.js";
import { el, icon } from "../util.js";
import { renderMarkdown } from "./markdown.js";

/** Add a chip for `name` to the turn whose body is `body` (once per skill). */
export function addSkillChip(body, name) {
  if (!body || !name) return;
  let row = body.querySelector(":scope > .turn-skills");
  if (!row) {
    row = el("div", { class: "turn-skills", "aria-label": "Skills used in this turn" });
    body.prepend(row);
  }
  if ([...row.children].some((chip) => chip.dataset.skill === name)) return;
  row.append(el("a", { class: "skill-chip", href: `/skills/#${encodeURIComponent(name)}`, title: `Used the skill ${name}`, dataset: { skill: name } },
    icon("book"), el("span", {}, name)));
}

/** The skill a finished tool call used, if any (skill_view, live event or history row). */
export function skillOfCall(tool, args, success, metadata) {
  if (tool !== "skill_view" || success === false) return null;
  if (metadata && typeof metadata.skill === "string") return metadata.skill;
  return args && typeof args.name === "string" ? args.name : null;
}

function frontMatterless(content) {
  const match = /^\uFEFF?---[ \t]*\r?\n[\s\S]*?^---[ \t]*(?:\r?\n|$)/m.exec(content || "");
  return match && match.index === 0 ? content.slice(match[0].length) : content || "";
}

function statusText(p) {
  if (p.status === "accepted") return `Saved as skill ${p.name}, version ${p.version}. Navi will use it for similar requests.`;
  if (p.status === "discarded") return "Discarded. Nothing was saved.";
  return "";
}

function whatItIs(p) {
  if (p.updates === "bundled") return "an edited copy of the bundled skill";
  if (p.updates === "edited") return "a new version of this skill (it was edited by hand)";
  if (p.updates) return `a new version of this skill (now version ${p.updates})`;
  return "a new skill";
}

/** The card of one proposal; `onChange(p)` is told the proposal after a decision. */
export function proposalCard(p, { onChange } = {}) {
  const node = el("section", { class: "skill-proposal", role: "region", "aria-label": `Proposed skill ${p.name}`, dataset: { proposalId: String(p.id), status: p.status } });
  render(node, p, onChange);
  return node;
}

function render(node, p, onChange) {
  node.dataset.status = p.status;
  const preview = el("div", { class: "skill-preview answer" });
  renderMarkdown(preview, frontMatterless(p.content));
  const head = el("div", { class: "skill-proposal-head" }, icon("book"),
    el("div", {},
      el("strong", {}, p.status === "pending" ? "Save this as a skill?" : `Skill ${p.name}`),
      el("div", { class: "skill-proposal-sub" }, el("code", {}, p.name), ` — ${whatItIs(p)}`)));
  const parts = [head, el("p", { class: "skill-description" }, p.description)];
  if (p.note) parts.push(el("p", { class: "skill-note" }, p.note));
  const details = el("details", { class: "skill-body", open: p.status === "pending" ? true : undefined },
    el("summary", {}, "Instructions"), preview);
  parts.push(details);
  const error = el("div", { class: "skill-error", role: "alert", hidden: true });
  parts.push(error);
  if (p.status === "pending") parts.push(actions(node, p, error, onChange));
  else parts.push(el("p", { class: "skill-status", role: "status" }, statusText(p)));
  node.replaceChildren(...parts);
}

function actions(node, p, error, onChange) {
  const accept = el("button", { type: "button", class: "btn btn-primary btn-small", dataset: { action: "accept" } }, icon("check"), "Accept");
  const edit = el("button", { type: "button", class: "btn btn-small", dataset: { action: "edit" } }, icon("edit"), "Edit");
  const discard = el("button", { type: "button", class: "btn btn-small btn-ghost", dataset: { action: "discard" } }, "Discard");
  const row = el("div", { class: "skill-actions" }, accept, edit, discard);
  const busy = (on) => { for (const b of row.querySelectorAll("button")) b.disabled = on; };
  const decide = async (call) => {
    error.hidden = true;
    busy(true);
    try {
      const updated = await call();
      render(node, updated, onChange);
      if (onChange) onChange(updated);
    } catch (err) {
      busy(false);
      error.textContent = err.message;
      error.hidden = false;
    }
  };
  accept.addEventListener("click", () => decide(() => api.acceptProposal(p.id)));
  discard.addEventListener("click", () => decide(() => api.discardProposal(p.id)));
  edit.addEventListener("click", () => openEditor(node, p, error, onChange));
  return row;
}

function openEditor(node, p, error, onChange) {
  const area = el("textarea", { class: "skill-editor", rows: "14", spellcheck: "false", "aria-label": "SKILL.md of the proposed skill" });
  area.value = p.content;
  const save = el("button", { type: "button", class: "btn btn-primary btn-small", dataset: { action: "save" } }, icon("check"), "Save and accept");
  const cancel = el("button", { type: "button", class: "btn btn-small btn-ghost", dataset: { action: "cancel" } }, "Cancel");
  const editError = el("div", { class: "skill-error", role: "alert", hidden: true });
  const editor = el("div", { class: "skill-edit" }, el("label", { class: "skill-edit-label" }, "Edit the Markdown (front matter first), then save:"), area, editError,
    el("div", { class: "skill-actions" }, save, cancel));
  node.querySelector(".skill-actions")?.replaceWith(editor);
  error.hidden = true;
  area.focus();
  cancel.addEventListener("click", () => render(node, p, onChange));
  save.addEventListener("click", async () => {
    save.disabled = true;
    cancel.disabled = true;
    editError.hidden = true;
    try {
      const updated = await api.acceptProposal(p.id, area.value);
      render(node, updated, onChange);
      if (onChange) onChange(updated);
    } catch (err) {
      save.disabled = false;
      cancel.disabled = false;
      editError.textContent = err.message;
      editError.hidden = false;
      area.focus();
    }
  });
}
