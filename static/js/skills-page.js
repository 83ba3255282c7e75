// The skills page: every skill (and every broken folder with its reason), one skill's rendered
// instructions and files, which profiles list it, its versions with one-click rollback, install
// from an archive, export and removal. Staff manage; everybody reads. #<name> selects a skill.

import { api } from "./api.js";
import { confirmDialog } from "./dialogs.js";
import { renderMarkdown } from "./render/markdown.js";
import { el, icon, localDateTime, toast } from "./util.js";

const $ = (id) => document.getElementById(id);
let overview = { skills: [], broken: [], removed: [], profiles: [], can_manage: false };
let current = null;

function selected() {
  return decodeURIComponent(window.location.hash.replace(/^#/, ""));
}

async function refresh(select = selected()) {
  try {
    overview = await api.skills();
  } catch (err) {
    toast(err.message, "error");
    return;
  }
  renderList(select);
  $("skills-install").hidden = !overview.can_manage;
  const name = overview.skills.some((s) => s.name === select) ? select : (overview.skills[0] || {}).name;
  if (name) await show(name);
  else $("skill-detail").replaceChildren(el("p", { class: "skills-hint" }, "No skills yet."));
}

function renderList(active) {
  const items = overview.skills.map((s) => {
    const link = el("a", { href: `#${encodeURIComponent(s.name)}`, class: "skills-item", "aria-current": s.name === active ? "page" : undefined, dataset: { skill: s.name } },
      el("span", { class: "skills-item-name" }, icon("book"), s.name),
      el("span", { class: "skills-item-meta" }, s.source === "bundled" ? "bundled" : s.replaces_bundled ? "yours, replaces the bundled one" : "yours",
        s.enabled_in.length ? ` · ${s.enabled_in.length} profile${s.enabled_in.length > 1 ? "s" : ""}` : " · not enabled"),
      el("span", { class: "skills-item-desc" }, s.description));
    return el("li", {}, link);
  });
  $("skills-list").replaceChildren(...items);
  const broken = $("skills-broken");
  broken.hidden = !overview.broken.length;
  broken.replaceChildren(el("h3", {}, "Skipped (not valid)"), el("ul", {}, overview.broken.map((b) => el("li", { dataset: { folder: b.folder } },
    el("code", {}, b.folder), ` (${b.source}): ${b.error}`))));
  renderRemoved();
}

// Removed skills keep their versions: one click saves the latest again and the skill is back.
function renderRemoved() {
  const box = $("skills-removed");
  const removed = overview.removed || [];
  box.hidden = !removed.length;
  box.replaceChildren(el("h3", {}, "Removed (versions kept)"), el("ul", {}, removed.map((r) => {
    const item = el("li", { dataset: { skill: r.name } }, el("code", {}, r.name),
      el("span", { class: "skills-hint" }, ` ${r.versions} version${r.versions > 1 ? "s" : ""}${r.description ? ` — ${r.description}` : ""} `));
    if (overview.can_manage) {
      const restore = el("button", { type: "button", class: "btn btn-small", dataset: { action: "restore" } }, icon("retry"), `Restore version ${r.latest}`);
      restore.addEventListener("click", async () => {
        restore.disabled = true;
        try {
          const result = await api.rollbackSkill(r.name, r.latest);
          toast(`${r.name} is back (saved as version ${result.version}).`);
          window.location.hash = encodeURIComponent(r.name);
          await refresh(r.name);
        } catch (err) {
          restore.disabled = false;
          toast(err.message, "error");
        }
      });
      item.append(restore);
    }
    return item;
  })));
}

async function show(name) {
  let detail;
  try {
    detail = await api.skill(name);
  } catch (err) {
    toast(err.message, "error");
    return;
  }
  current = detail;
  for (const a of document.querySelectorAll(".skills-item")) {
    if (a.dataset.skill === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const body = el("div", { class: "answer skill-rendered" });
  renderMarkdown(body, detail.body);
  const parts = [
    el("div", { class: "skill-detail-head" },
      el("h2", {}, detail.name),
      el("a", { class: "btn btn-small", href: `/skills/${encodeURIComponent(detail.name)}/export`, download: `${detail.name}.zip` }, "Export .zip")),
    el("p", { class: "skill-description" }, detail.description),
    meta(detail),
    profilesBlock(detail),
    el("section", { class: "skill-section", "aria-label": "Instructions" }, el("h3", {}, "Instructions"), body),
  ];
  if (detail.files.length) parts.push(filesBlock(detail));
  parts.push(versionsBlock(detail));
  if (overview.can_manage && detail.source === "user") {
    const remove = el("button", { type: "button", class: "btn btn-small btn-ghost", dataset: { action: "remove" } }, icon("trash"), "Remove");
    remove.addEventListener("click", () => removeSkill(detail));
    parts.push(el("div", { class: "skill-actions" }, remove));
  }
  $("skill-detail").replaceChildren(...parts);
}

function meta(detail) {
  const facts = [detail.source === "bundled" ? "Bundled with Navi" : "In your skills directory"];
  if (detail.current_version) facts.push(`version ${detail.current_version}`);
  if (detail.license) facts.push(`license: ${detail.license}`);
  if (detail.compatibility) facts.push(detail.compatibility);
  if (detail.allowed_tools.length) facts.push(`suggested tools: ${detail.allowed_tools.join(", ")}`);
  const node = el("p", { class: "skills-hint" }, facts.join(" · "));
  for (const w of detail.warnings) node.append(el("span", { class: "skill-warning" }, ` · ${w}`));
  return node;
}

function profilesBlock(detail) {
  const rows = overview.profiles.map((p) => {
    const all = p.enabled_skills.includes("*");
    const box = el("input", { type: "checkbox", checked: detail.enabled_in.includes(p.id) || undefined,
      disabled: !overview.can_manage || all || undefined, dataset: { profile: p.id } });
    box.addEventListener("change", async () => {
      box.disabled = true;
      try {
        await api.enableSkill(detail.name, p.id, box.checked);
        toast(box.checked ? `${detail.name} is now listed for ${p.name}.` : `${detail.name} is no longer listed for ${p.name}.`);
        const fresh = await api.skills();
        overview = fresh;
        renderList(detail.name);
      } catch (err) {
        box.checked = !box.checked;
        toast(err.message, "error");
      } finally {
        box.disabled = !overview.can_manage || all;
      }
    });
    const note = all ? " (lists every skill)" : p.has_skill_view ? "" : " (needs the skill_view tool)";
    return el("label", { class: "skills-check" }, box, ` ${p.name}`, el("span", { class: "skills-hint" }, note));
  });
  return el("section", { class: "skill-section" }, el("h3", {}, "Enabled for"), el("div", { class: "skill-profiles" }, rows));
}

function filesBlock(detail) {
  const viewer = el("pre", { class: "skill-file", hidden: true });
  const list = el("ul", { class: "skill-files" }, detail.files.map((path) => {
    const open = el("button", { type: "button", class: "link-btn" }, path);
    open.addEventListener("click", async () => {
      try {
        viewer.textContent = (await api.skillFile(detail.name, path)).text;
      } catch (err) {
        viewer.textContent = err.message;
      }
      viewer.hidden = false;
    });
    return el("li", {}, open);
  }));
  return el("section", { class: "skill-section" }, el("h3", {}, "Files"),
    el("p", { class: "skills-hint" }, "Navi reads these when the instructions need them. Scripts never run by themselves: Navi runs them only through its normal tools, under the same permissions."),
    list, viewer);
}

function versionsBlock(detail) {
  if (!detail.versions.length) {
    return el("section", { class: "skill-section" }, el("h3", {}, "Versions"),
      el("p", { class: "skills-hint" }, detail.source === "bundled" ? "A bundled skill; accepting an improved version from a chat saves your own copy." : "No saved versions yet."));
  }
  const rows = detail.versions.map((v) => {
    const current = v.number === detail.current_version;
    const view = el("button", { type: "button", class: "link-btn" }, `Version ${v.number}`);
    const preview = el("div", { class: "answer skill-version-preview", hidden: true });
    view.addEventListener("click", async () => {
      if (!preview.hidden) {
        preview.hidden = true;
        return;
      }
      try {
        renderMarkdown(preview, (await api.skillVersion(detail.name, v.number)).body);
        preview.hidden = false;
      } catch (err) {
        toast(err.message, "error");
      }
    });
    const cells = [view, el("span", { class: "skills-hint" }, ` ${v.source}${v.by ? ` by ${v.by}` : ""}, ${localDateTime(v.created_at)}${v.note ? ` — ${v.note}` : ""}`)];
    if (current) cells.push(el("span", { class: "skill-current" }, "current"));
    else if (overview.can_manage) {
      const back = el("button", { type: "button", class: "btn btn-small", dataset: { action: "rollback", version: String(v.number) } }, icon("retry"), "Roll back to this");
      back.addEventListener("click", () => rollback(detail, v.number));
      cells.push(back);
    }
    return el("li", { class: "skill-version", dataset: { version: String(v.number) } }, ...cells, preview);
  });
  return el("section", { class: "skill-section" }, el("h3", {}, "Versions"), el("ol", { class: "skill-versions", reversed: true }, rows));
}

async function rollback(detail, number) {
  try {
    const result = await api.rollbackSkill(detail.name, number);
    toast(`${detail.name} is back to version ${number} (saved as version ${result.version}).`);
    await refresh(detail.name);
  } catch (err) {
    toast(err.message, "error");
  }
}

async function removeSkill(detail) {
  const ok = await confirmDialog({ title: `Remove ${detail.name}?`, message: "Its folder is deleted; its versions are kept, so you can restore it later (under “Removed” below the list).", confirmLabel: "Remove", danger: true });
  if (!ok) return;
  try {
    await api.removeSkill(detail.name);
    toast(`${detail.name} was removed.`);
    window.location.hash = "";
    await refresh("");
  } catch (err) {
    toast(err.message, "error");
  }
}

function initInstall() {
  const form = $("skills-install");
  const error = $("skills-install-error");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.hidden = true;
    const file = $("skills-file").files[0];
    if (!file) {
      error.textContent = "Choose a .zip or .skill file first.";
      error.hidden = false;
      return;
    }
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const result = await api.installSkill(file, { replace: $("skills-replace").checked });
      toast(`Installed ${result.name} (version ${result.version}). Enable it for a profile below.`);
      form.reset();
      window.location.hash = encodeURIComponent(result.name);
      await refresh(result.name);
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    } finally {
      button.disabled = false;
    }
  });
}

window.addEventListener("hashchange", () => {
  const name = selected();
  if (name && (!current || current.name !== name)) show(name);
});
initInstall();
refresh().then(() => document.body.classList.add("ready"));
