// The open conversation: history from REST, live events from the socket, sending and stopping.

import { api } from "./api.js";
import { SessionSocket } from "./socket.js";
import { emit, set, store } from "./store.js";
import { el, icon, toast } from "./util.js";
import { branchSwitcher, errorCard, notice, pendingMessage, renderHistory, textBlock, assistantTurn, userMessage } from "./render/messages.js";
import { renderMarkdown } from "./render/markdown.js";
import { planCard } from "./render/plan.js";
import { appendThinking, finishThinking, thinkingBlock } from "./render/thinking.js";
import { completeToolCard, findPending, subagentScope, toolCard } from "./render/tools.js";
import { addSkillChip, proposalCard, skillOfCall } from "./render/skills.js";
import { abandonApprovalCard, approvalCard, approvalFailed, resolveApprovalCard } from "./render/approval.js";
import { applyTodoCall, renderTodo, resetTodo, setTodo } from "./todo.js";

const RUN_EVENTS = new Set(["stream_start", "thinking_delta", "thinking_end", "turn_thinking", "plan_ready",
  "tool_started", "tool_call", "stream_delta", "profile_switched", "approval_required", "approval_resolved", "steer_accepted"]);

let els = {};
let socket = null;
const proposals = new Map(); // skill proposals of the open session, by id
const s = {
  turn: null, text: null, textBuf: "", renderTimer: null, thinking: null,
  localPending: false, lastSent: null, pendingSync: false, runEventsSinceOpen: 0,
  lastRenderedSeq: 0, historyKey: "", firstSeq: null, stopTimer: null, openToken: 0, todoTimer: null,
  turnsBegun: 0, // counts turns started here (sent or seen): a history read older than one is stale
  turnsEnded: 0, // counts turns ended here: a read in flight while one ended may predate its saved answer
};

export function initChat(elements) {
  els = elements;
  els.scroller.addEventListener("scroll", () => {
    s.stick = els.scroller.scrollHeight - els.scroller.scrollTop - els.scroller.clientHeight < 120;
  });
  s.stick = true;
}

export function currentSocket() {
  return socket;
}

function scrollDown(force = false) {
  if (force || s.stick) requestAnimationFrame(() => { els.scroller.scrollTop = els.scroller.scrollHeight; });
}

function showEmpty(show) {
  els.empty.hidden = !show;
  els.messages.hidden = show;
}

// Messages waiting for the running turn (steering): node by steer id, and this tab's own by ref.
const steers = { byId: new Map(), byRef: new Map(), accepted: new Set() };

function resetSteers() {
  for (const node of els.messages.querySelectorAll(".pending-steer")) node.remove();
  steers.byId.clear();
  steers.byRef.clear();
  steers.accepted.clear();
}

function firstPending() {
  return els.messages.querySelector(".pending-steer");
}

function addPending(content, { id = null, ref = null } = {}) {
  const node = pendingMessage({ content, onWithdraw: withdrawSteer });
  if (id) {
    node.dataset.steerId = id;
    steers.byId.set(id, node);
  }
  if (ref) {
    node.dataset.ref = ref;
    steers.byRef.set(ref, node);
  }
  els.messages.append(node);
  showEmpty(false);
  scrollDown(true);
  return node;
}

function removePending(id) {
  const node = steers.byId.get(id);
  steers.byId.delete(id);
  if (!node) return null;
  if (node.dataset.ref) steers.byRef.delete(node.dataset.ref);
  node.remove();
  return node;
}

/** Send a message to the running turn: it waits (shown pending) until the turn's next step. */
function steer(text) {
  const id = store.currentId;
  const ref = `r${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  addPending(text, { ref });
  if (socket && socket.send({ type: "message", content: text, ref })) return true;
  api.steer(id, text, ref).then((item) => onSteerQueued({ ...item, ref })).catch((err) => {
    const node = steers.byRef.get(ref);
    if (node) node.remove();
    steers.byRef.delete(ref);
    emit("composer:restore", text);
    toast(err.message, "error");
  });
  return true;
}

function withdrawSteer(node) {
  const id = node.dataset.steerId;
  if (!id) { // not confirmed yet: withdraw as soon as it is
    node.dataset.withdraw = "1";
    return;
  }
  if (socket && socket.send({ type: "steer_withdraw", id })) return;
  api.withdrawSteer(store.currentId, id).then(() => removePending(id)).catch((err) => toast(err.message, "error"));
}

function onSteerQueued(ev) {
  if (steers.accepted.has(ev.id) || steers.byId.has(ev.id)) return;
  const node = (ev.ref && steers.byRef.get(ev.ref)) || null;
  if (!node) {
    addPending(ev.content, { id: ev.id });
    return;
  }
  node.dataset.steerId = ev.id;
  steers.byId.set(ev.id, node);
  if (node.dataset.withdraw) withdrawSteer(node);
}

/** The turn read a queued message: it becomes a user message, and the answer goes on below it. */
function onSteerAccepted(ev) {
  steers.accepted.add(ev.id);
  removePending(ev.id);
  endThinking();
  closeText();
  if (s.turn) s.turn.node.classList.remove("live");
  const user = userMessage({ content: ev.content, createdAt: new Date().toISOString() });
  s.turnsBegun += 1;
  const turn = assistantTurn();
  turn.node.classList.add("live");
  const anchor = firstPending();
  if (anchor) anchor.before(user, turn.node);
  else els.messages.append(user, turn.node);
  s.turn = turn;
  s.userShown = true;
  set({ busy: true });
  scrollDown();
}

function onSteerDropped(ev) {
  const mine = [];
  for (const item of ev.items || []) {
    const node = removePending(item.id);
    if (node && node.dataset.ref) mine.push(item.content);
  }
  if (!mine.length) return;
  emit("composer:restore", mine.join("\n\n"));
  const why = ev.reason === "stopped" ? "the turn was stopped" : ev.reason === "error" ? "the turn failed" : "the turn ended first";
  toast(`Navi did not read your message (${why}): it is back in the message box.`, "info");
}

function resetTurnState() {
  clearTimeout(s.renderTimer);
  clearTimeout(s.stopTimer);
  Object.assign(s, {
    turn: null, text: null, textBuf: "", thinking: null, localPending: false, pendingSync: false, witnessed: false, turnClean: false,
  });
}

function disposeSocket() {
  if (socket) socket.dispose();
  socket = null;
}

/** Show the "new chat" state: nothing is created until the first message (or upload). */
export function draft() {
  disposeSocket();
  resetTurnState();
  s.openToken += 1;
  resetTodo();
  renderTodo(els.todo);
  proposals.clear();
  resetSteers();
  els.messages.replaceChildren();
  s.lastRenderedSeq = 0;
  s.historyKey = "";
  set({ currentId: null, current: null, busy: false, connection: "idle", recall: null, contextTokens: 0, maxContextTokens: 0 });
  showEmpty(true);
  if (window.location.hash) history.replaceState(null, "", window.location.pathname);
  emit("chat:opened", null);
}

export async function open(id) {
  if (!id) return draft();
  disposeSocket();
  resetTurnState();
  const token = ++s.openToken;
  proposals.clear();
  resetSteers();
  set({ currentId: id, busy: false, recall: null });
  if (window.location.hash !== `#${id}`) history.replaceState(null, "", `#${id}`);
  els.messages.replaceChildren(el("div", { class: "loading", role: "status" }, "Loading conversation…"));
  showEmpty(false);
  s.historyKey = "";
  let detail;
  try {
    detail = await api.getSession(id);
  } catch (err) {
    if (token !== s.openToken) return undefined;
    toast(err.status === 404 ? "That conversation no longer exists." : err.message, "error");
    return draft();
  }
  if (token !== s.openToken) return undefined;
  applyDetail(detail);
  renderMessages(detail, { trimRunning: Boolean(detail.busy) });
  connect(id);
  if (!store.sessions.some((x) => x.id === id)) emit("sessions:refresh");
  emit("chat:opened", id);
  return undefined;
}


function applyDetail(detail) {
  const { messages, ...meta } = detail;
  set({ current: meta, contextTokens: meta.context_token_count || 0, maxContextTokens: meta.max_context_tokens || 0 });
}

/** While a run is going, its messages after the user's come back as live events: don't show them twice. */
function trimRunning(messages) {
  for (let i = messages.length - 1; i >= 0; i -= 1) if (startsTurn(messages[i])) return messages.slice(0, i + 1);
  return messages;
}

/** A user message that began a turn (not one read mid-turn: those come back with steer_accepted). */
function startsTurn(m) {
  return m.role === "user" && !(m.metadata && m.metadata.steer_id);
}

function historyKey(messages, detail) {
  const last = messages[messages.length - 1];
  return `${messages.length}:${last ? last.seq : 0}:${detail.has_more}`;
}

function renderMessages(detail, { trimRunning: trim = false, force = false } = {}) {
  const messages = trim ? trimRunning(detail.messages || []) : detail.messages || [];
  const last = messages[messages.length - 1];
  const key = historyKey(messages, detail);
  if (!force && key === s.historyKey) return;
  s.historyKey = key;
  const { nodes, todoCalls } = renderHistory(messages, historyActions);
  s.lastRenderedSeq = last ? last.seq : 0;
  s.firstSeq = messages.length ? messages[0].seq : null;
  const children = [];
  if (detail.has_more) children.push(loadEarlierButton());
  children.push(...nodes);
  const mine = [...steers.byRef.values()].filter((n) => !n.dataset.steerId); // sent, not confirmed yet
  steers.byId.clear();
  els.messages.replaceChildren(...children);
  for (const p of detail.pending_steers || []) {
    const node = [...steers.byRef.values()].find((n) => n.dataset.steerId === p.id);
    if (node) {
      els.messages.append(node);
      steers.byId.set(p.id, node);
    } else addPending(p.content, { id: p.id });
  }
  for (const node of mine) els.messages.append(node);
  showEmpty(messages.length === 0 && !s.turn);
  resetTodo();
  for (const call of todoCalls) applyTodoCall(call);
  renderTodo(els.todo);
  refreshTodo();
  s.stick = true;
  scrollDown(true);
  showProposals();
  loadProposals(store.currentId);
  decorateLast();
}

// -- skill proposals: cards at the end of the turn that proposed them -----------------------

function placeProposal(p) {
  if (String(p.session_id) !== String(store.currentId)) return;
  const existing = els.messages.querySelector(`.skill-proposal[data-proposal-id="${p.id}"]`);
  if (existing && existing.dataset.status === p.status) return; // keep a card being edited as it is
  const card = proposalCard(p, { onChange: (updated) => proposals.set(updated.id, updated) });
  if (existing) return existing.replaceWith(card);
  const slot = els.messages.querySelector(`.skill-proposal-slot[data-proposal-id="${p.id}"]`);
  const turns = els.messages.querySelectorAll(".msg.assistant > .turn-body");
  const target = slot || (turns.length ? turns[turns.length - 1] : els.messages);
  target.append(card);
  scrollDown();
  return undefined;
}

function showProposals() {
  for (const p of proposals.values()) placeProposal(p);
}

async function loadProposals(id) {
  if (!id) return;
  try {
    const list = await api.listProposals(id);
    if (id !== store.currentId) return;
    for (const p of list) proposals.set(p.id, p);
    showProposals();
  } catch {
    /* the cards are a convenience; the next open shows them */
  }
}

/** Read the todo list from the server (the plan and the loop write it without a todo tool call). */
function refreshTodo() {
  const id = store.currentId;
  if (!id || s.todoTimer) return;
  s.todoTimer = setTimeout(async () => {
    s.todoTimer = null;
    try {
      const todo = await api.getTodo(id);
      if (id !== store.currentId) return;
      setTodo(todo.steps);
      renderTodo(els.todo);
    } catch {
      /* the panel keeps what the tool calls showed */
    }
  }, 150);
}

/** Scroll to the message with ``seq`` and mark it, loading earlier pages until it is there (or the start). */
export async function revealMessage(seq) {
  const id = store.currentId;
  for (let pages = 0; pages < 50 && id === store.currentId; pages += 1) {
    const earlier = els.messages.querySelector(".load-earlier");
    const loaded = !earlier || (s.firstSeq !== null && s.firstSeq <= seq);
    // The message, or the turn that holds it (a turn's node carries the seq of its last message:
    // a search hit may be a tool result inside a turn).
    const node = loaded ? [...els.messages.querySelectorAll(".msg[data-seq]")].find((n) => Number(n.dataset.seq) >= Number(seq)) : null;
    if (node) {
      s.stick = false;
      // After the frame in which opening the conversation scrolls to its end.
      await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
      node.scrollIntoView({ block: "center" });
      node.classList.add("is-target");
      setTimeout(() => node.classList.remove("is-target"), 4000);
      return true;
    }
    if (loaded) break;
    await loadEarlier(earlier);
  }
  toast("That message is no longer in the conversation.", "error");
  return false;
}

function loadEarlierButton() {
  const button = el("button", { type: "button", class: "btn btn-ghost load-earlier" }, "Load earlier messages");
  button.addEventListener("click", () => loadEarlier(button));
  return button;
}

async function loadEarlier(button) {
  const id = store.currentId;
  button.disabled = true;
  try {
    const page = await api.getSession(id, { before: s.firstSeq });
    if (id !== store.currentId) return;
    const { nodes } = renderHistory(page.messages || []);
    const height = els.scroller.scrollHeight;
    if (page.messages && page.messages.length) s.firstSeq = page.messages[0].seq;
    button.after(...nodes);
    if (!page.has_more) button.remove();
    else button.disabled = false;
    els.scroller.scrollTop += els.scroller.scrollHeight - height;
  } catch (err) {
    button.disabled = false;
    toast(err.message, "error");
  }
}

async function reload({ force = false, keepWitnessed = false } = {}) {
  const id = store.currentId;
  if (!id) return;
  const begun = s.turnsBegun;
  const ended = s.turnsEnded;
  try {
    const detail = await api.getSession(id);
    if (id !== store.currentId) return;
    // A turn began or ended while this was read: the read may predate its saved answer, which is on
    // screen (a read begun after sending, before the turn's first event, came back after its end and
    // rendered a history without the answer). That turn's session_sync reloads again; this one is stale.
    if (s.turn || s.localPending || begun !== s.turnsBegun || ended !== s.turnsEnded) return;
    applyDetail(detail);
    if (keepWitnessed) {
      // This tab saw the whole turn live (richer than history: subagent nesting, timings):
      // keep it on screen and only take the history's bookkeeping.
      const messages = detail.messages || [];
      s.historyKey = historyKey(messages, detail);
      s.lastRenderedSeq = messages.length ? messages[messages.length - 1].seq : 0;
      markBranches(messages);
      decorateLast();
      return;
    }
    renderMessages(detail, { force });
  } catch (err) {
    toast(err.message, "error");
  }
}

function connect(id) {
  socket = new SessionSocket(id, {
    onEvent: handleEvent,
    onState(state, delay = 0) {
      if (state === "open") s.runEventsSinceOpen = 0;
      set({ connection: state, reconnectIn: delay });
    },
    onGap() {
      s.turnClean = false;
    },
    onFatal(reason) {
      if (reason === "unauthenticated") {
        window.location.assign(`/login/?next=${encodeURIComponent(`/#${id}`)}`);
      } else if (reason === "not_found") {
        toast("This conversation was deleted.", "error");
        emit("sessions:refresh");
        draft();
      } else {
        set({ connection: "offline" });
        toast("The server refused the live connection (origin check).", "error");
      }
    },
    isTurnActive: () => Boolean(s.turn),
  });
  socket.connect();
}

// -- live events ------------------------------------------------------------------------

function ensureTurn() {
  if (s.turn) return s.turn;
  s.turnClean = false; // joined mid-turn: only stream_start makes a turn fully witnessed
  const turn = assistantTurn();
  turn.node.classList.add("live");
  const pending = firstPending(); // messages waiting for the turn stay below it
  if (pending) pending.before(turn.node);
  else els.messages.append(turn.node);
  showEmpty(false);
  s.turn = turn;
  set({ busy: true });
  s.userShown = s.localPending;
  if (!s.localPending) showOtherUserMessage(turn.node);
  s.localPending = false;
  return turn;
}

/** A run this tab did not start (another tab, a recall): show the user message that began it.
 * It may not be saved yet when stream_start arrives, so look a few times. */
async function showOtherUserMessage(turnNode) {
  const id = store.currentId;
  s.userShown = false;
  for (let attempt = 0; attempt < 5; attempt += 1) {
    try {
      const page = await api.getSession(id, { limit: 8 });
      if (id !== store.currentId || !turnNode.isConnected) return;
      const lastUser = [...(page.messages || [])].reverse().find(startsTurn);
      if (lastUser && lastUser.seq > s.lastRenderedSeq) {
        s.lastRenderedSeq = lastUser.seq;
        turnNode.before(userMessage({ content: lastUser.content, images: lastUser.images, isRecall: lastUser.is_recall, createdAt: lastUser.created_at, seq: lastUser.seq }));
        if (s.turn && s.turn.node === turnNode) s.userShown = true;
        scrollDown();
        return;
      }
    } catch {
      /* the reply still shows; history is reloaded after the turn */
    }
    await new Promise((resolve) => { setTimeout(resolve, 300); });
  }
}

function scopeFor(ev) {
  const body = ensureTurn().body;
  if (!ev.is_subagent) return body;
  return subagentScope(body) || body;
}

function closeText() {
  if (!s.text) return;
  flushText();
  s.text.classList.remove("streaming");
  s.text = null;
  s.textBuf = "";
}

function flushText() {
  clearTimeout(s.renderTimer);
  s.renderTimer = null;
  if (s.text) renderMarkdown(s.text, s.textBuf);
  scrollDown();
}

function scheduleText() {
  if (s.renderTimer) return;
  s.renderTimer = setTimeout(flushText, 60);
}

function endThinking() {
  finishThinking(s.thinking);
  s.thinking = null;
}

function endTurn(kind) {
  endThinking();
  closeText();
  clearTimeout(s.stopTimer);
  if (s.turn) {
    s.turn.node.classList.remove("live");
    for (const card of s.turn.body.querySelectorAll(".tool-card[data-state=pending]")) {
      completeToolCard(card, { result: kind === "stopped" ? "(stopped)" : "(no result)", success: false });
    }
    for (const card of s.turn.body.querySelectorAll(".approval-card")) abandonApprovalCard(card);
  }
  s.witnessed = Boolean(s.turn && s.turnClean && s.userShown && ["end", "stopped", "error"].includes(kind));
  s.turn = null;
  s.turnsEnded += 1;
  set({ busy: false });
  emit("turn:ended", kind);
  decorateLast();
  if (s.pendingSync) {
    s.pendingSync = false;
    syncReload();
  }
}

function handleEvent(ev) {
  if (RUN_EVENTS.has(ev.type)) s.runEventsSinceOpen += 1;
  switch (ev.type) {
    case "stream_start":
      if (s.turn) endTurn("replaced");
      ensureTurn();
      s.turnClean = true;
      break;
    case "thinking_delta": {
      const body = ensureTurn().body;
      if (!s.thinking) {
        closeText();
        s.thinking = thinkingBlock("", { live: true });
        body.append(s.thinking);
      }
      appendThinking(s.thinking, ev.delta || "");
      scrollDown();
      break;
    }
    case "thinking_end":
      endThinking();
      break;
    case "turn_thinking":
      if (!ev.thinking) break;
      endThinking();
      closeText();
      scopeFor(ev).append(thinkingBlock(ev.thinking, { subagent: ev.is_subagent }));
      scrollDown();
      break;
    case "plan_ready":
      endThinking();
      closeText();
      ensureTurn().body.append(planCard(ev.plan, { open: true }));
      refreshTodo(); // the plan's steps became the todo list
      scrollDown();
      break;
    case "tool_started": {
      endThinking();
      closeText();
      scopeFor(ev).append(toolCard({ tool: ev.tool, args: ev.args, subagent: ev.is_subagent }));
      scrollDown();
      break;
    }
    case "tool_call": {
      endThinking();
      closeText();
      const scope = scopeFor(ev);
      const card = findPending(scope, ev.tool) || scope.appendChild(toolCard({ tool: ev.tool, args: ev.args, subagent: ev.is_subagent }));
      completeToolCard(card, { args: ev.args, result: ev.result, success: ev.success });
      const skill = skillOfCall(ev.tool, ev.args, ev.success);
      if (skill) addSkillChip(s.turn.body, skill);
      if (ev.tool === "todo") {
        applyTodoCall({ args: ev.args || {}, result: ev.result, success: ev.success });
        renderTodo(els.todo);
      }
      if (!ev.is_subagent) refreshTodo(); // the loop may have ticked a step off

      scrollDown();
      break;
    }
    case "approval_required": {
      endThinking();
      closeText();
      if (findApproval(ev.approval_id)) break; // already on screen (a replay overlapping what we saw)
      const scope = scopeFor(ev);
      const card = approvalCard(ev, (decision, scope_, reason) => decide(ev.approval_id, decision, scope_, reason));
      const toolNode = findPending(scope, ev.tool);
      if (toolNode) toolNode.after(card);
      else scope.append(card);
      emit("approval:waiting", ev);
      scrollDown(true);
      break;
    }
    case "approval_resolved":
      resolveApprovalCard(findApproval(ev.approval_id), ev);
      emit("approval:resolved", ev);
      break;
    case "stream_delta": {
      const body = ensureTurn().body;
      endThinking();
      if (!s.text) {
        s.text = textBlock();
        s.text.classList.add("streaming");
        s.textBuf = "";
        body.append(s.text);
      }
      s.textBuf += ev.delta || "";
      scheduleText();
      break;
    }
    case "stream_end": {
      const body = ensureTurn().body;
      endThinking();
      if (typeof ev.content === "string" && ev.content.trim()) {
        if (!s.text) {
          s.text = textBlock();
          body.append(s.text);
        }
        s.textBuf = ev.content;
      }
      if (Number.isFinite(ev.context_tokens)) set({ contextTokens: ev.context_tokens });
      if (Number.isFinite(ev.max_context_tokens) && ev.max_context_tokens > 0) set({ maxContextTokens: ev.max_context_tokens });
      endTurn("end");
      emit("sessions:refresh");
      break;
    }
    case "stream_stopped":
      if (s.turn) s.turn.body.append(notice("Stopped. The partial reply was kept.", "muted"));
      endTurn("stopped");
      break;
    case "context_compressed": {
      const text = `Context compressed: ${ev.messages_before ?? "?"} → ${ev.messages_after ?? "?"} messages.`;
      els.messages.append(notice(text, "info", ev.summary || ""));
      if (Number.isFinite(ev.context_tokens)) set({ contextTokens: ev.context_tokens });
      if (Number.isFinite(ev.max_context_tokens) && ev.max_context_tokens > 0) set({ maxContextTokens: ev.max_context_tokens });
      scrollDown();
      break;
    }
    case "profile_switched":
      set({ current: { ...(store.current || {}), profile_id: ev.profile_id, profile_name: ev.profile_name || ev.profile_id } });
      (s.turn ? s.turn.body : els.messages).append(notice(`Switched to ${ev.profile_name || ev.profile_id}.`, "muted"));
      emit("sessions:refresh");
      break;
    case "error": {
      if (ev.frame) { // a frame of ours was refused (an approval decision): not the turn's error
        if (ev.frame === "approval") approvalFailed(findApproval(ev.ref), ev.message);
        if (ev.frame === "steer_withdraw") removePending(ev.ref);
        toast(ev.message, "error");
        break;
      }
      // A turn's error is saved with its partial answer: Retry answers the message again in place.
      const card = errorCard(ev.message, s.turn ? { onRetry: () => regenerate() } : {});
      (s.turn ? s.turn.body : els.messages).append(card);
      endTurn("error");
      scrollDown(true);
      break;
    }
    case "steer_queued":
      onSteerQueued(ev);
      break;
    case "steer_withdrawn":
      removePending(ev.id);
      break;
    case "steer_accepted":
      onSteerAccepted(ev);
      break;
    case "steer_dropped":
      onSteerDropped(ev);
      break;
    case "recall_update":
      emit("recall:changed", ev);
      break;
    case "skill_proposal":
      if (ev.proposal) {
        proposals.set(ev.proposal.id, ev.proposal);
        placeProposal(ev.proposal);
      }
      break;
    case "session_sync":
      onSync();
      break;
    default:
      break; // heartbeat and anything newer
  }
}

function findApproval(id) {
  if (!id) return null;
  return [...els.messages.querySelectorAll(".approval-card")].find((c) => c.dataset.approvalId === id) || null;
}

/** Send a decision: a frame on the socket (REST when the socket is down, or when nothing settled the
 * card a few seconds later: a frame lost in a reconnect). approval_resolved then settles every tab. */
async function decide(approvalId, decision, scope, reason) {
  const body = { decision, scope };
  if (reason) body.reason = reason;
  const viaRest = async () => {
    try {
      const a = await api.decideApproval(store.currentId, approvalId, body);
      resolveApprovalCard(findApproval(approvalId), { decision: a.status, scope: a.scope, decided_by: a.decided_by, reason: a.decision_reason });
    } catch (err) {
      approvalFailed(findApproval(approvalId), err.message);
      toast(err.message, "error");
    }
  };
  if (socket && socket.send({ type: "approval", approval_id: approvalId, ref: approvalId, ...body })) {
    setTimeout(() => {
      if (findApproval(approvalId)?.dataset.state === "sending") viaRest();
    }, 6000);
    return;
  }
  await viaRest();
}

async function onSync() {
  if (s.turn) {
    let busy = false;
    try {
      busy = Boolean((await api.getSession(store.currentId, { limit: 1 })).busy);
    } catch {
      busy = true;
    }
    if (s.turn && (busy || s.runEventsSinceOpen > 0)) {
      s.pendingSync = true; // reload when this turn ends
      return;
    }
    if (s.turn) endTurn("sync");
  }
  if (!s.turn && !s.localPending) set({ busy: false });
  syncReload();
}

function syncReload() {
  const keepWitnessed = s.witnessed;
  s.witnessed = false;
  reload({ keepWitnessed });
}

// -- sending ------------------------------------------------------------------------------

function waitOpen(sock, ms) {
  return new Promise((resolve) => {
    const start = Date.now();
    const tick = () => {
      if (sock.isOpen) return resolve(true);
      if (Date.now() - start > ms || sock.disposed) return resolve(false);
      return setTimeout(tick, 50);
    };
    tick();
  });
}

/** The current session, created (with the chosen profile) on first use. */
export async function ensureSession() {
  if (store.currentId) return store.currentId;
  const created = await api.createSession(store.draftProfileId);
  const id = created.session_id;
  s.openToken += 1;
  set({ currentId: id, current: { id, profile_id: created.profile_id, profile_name: profileName(created.profile_id), title: "" } });
  history.replaceState(null, "", `#${id}`);
  s.lastRenderedSeq = 0;
  connect(id);
  emit("sessions:refresh");
  emit("chat:opened", id);
  return id;
}

function profileName(id) {
  return (store.profiles.find((p) => p.id === id) || {}).name || id;
}

/** Send a message. Resolves true when it went out. */
export async function send({ text, images = [], files = [] }) {
  if (!text.trim()) return false;
  if (store.busy && store.currentId) {
    if (images.length || files.length) {
      toast("Images and files cannot be added to a running turn: wait for it to finish (or press Stop), then send them.", "error");
      return false;
    }
    return steer(text);
  }
  try {
    await ensureSession();
  } catch (err) {
    toast(err.message, "error");
    return false;
  }
  if (!(await waitOpen(socket, 8000))) {
    toast("Not connected to Navi yet. Your message was not sent; try again in a moment.", "error");
    return false;
  }
  const frame = { type: "message", content: text };
  if (images.length) frame.images = images;
  if (files.length) frame.files = files;
  showEmpty(false);
  els.messages.append(userMessage({ content: text, images, files, createdAt: new Date().toISOString() }));
  s.lastSent = { text, images, files };
  s.localPending = true;
  s.turnsBegun += 1;
  s.stick = true;
  scrollDown(true);
  set({ busy: true });
  socket.send(frame);
  return true;
}

const CONTINUE_TEXT = "Continue where you left off.";

/** "Continue" under an unfinished turn: the model sees its partial answer and goes on from there. */
function continueTurn() {
  send({ text: CONTINUE_TEXT });
}

const historyActions = { onContinue: continueTurn, onRegenerate: regenerate, onBranch: showBranch };

/** Drop the last exchange from the screen (its new version arrives live) and ask the server for it. */
async function newVersion(call) {
  const id = store.currentId;
  if (!id || store.busy) return;
  const users = els.messages.querySelectorAll("article.msg.user");
  const lastUser = users[users.length - 1];
  const removed = [];
  for (let node = lastUser; node; node = node.nextElementSibling) removed.push(node);
  for (const node of removed) node.remove(); // the new copy and answer arrive live
  s.historyKey = "";
  set({ busy: true });
  try {
    await call(id);
  } catch (err) {
    set({ busy: false });
    toast(err.message, "error");
    reload({ force: true });
  }
}

/** "Regenerate": the server archives the last exchange (kept as a branch) and answers the last message again. */
function regenerate() {
  return newVersion((id) => api.regenerate(id));
}

/** Edit the last message in place; saving archives the old version (kept as a branch) and answers the new text. */
function editLast(node) {
  const bubble = node.querySelector(".bubble");
  const textNode = bubble && bubble.querySelector(".user-text");
  if (!bubble || bubble.querySelector(".edit-box") || store.busy) return;
  const seq = Number(node.dataset.seq);
  const box = el("textarea", { class: "edit-box", "aria-label": "Edit your message", rows: "3" });
  box.value = textNode ? textNode.textContent : "";
  const save = el("button", { type: "button", class: "btn btn-small" }, "Save & send");
  const cancel = el("button", { type: "button", class: "btn btn-small btn-ghost" }, "Cancel");
  const form = el("div", { class: "edit-form" }, box, el("div", { class: "edit-actions" }, cancel, save));
  if (textNode) textNode.hidden = true;
  bubble.append(form);
  node.classList.add("editing");
  box.focus();
  const close = () => {
    form.remove();
    node.classList.remove("editing");
    if (textNode) textNode.hidden = false;
  };
  cancel.addEventListener("click", close);
  box.addEventListener("keydown", (e) => {
    if (e.key === "Escape") close();
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); save.click(); }
  });
  save.addEventListener("click", () => {
    const text = box.value;
    if (!text.trim()) {
      toast("The edited message is empty: type the new text.", "error");
      return;
    }
    if (text === (textNode ? textNode.textContent : "")) return close();
    return newVersion((id) => api.editMessage(id, seq, text));
  });
}

/** Edit on the last user message and Regenerate under the last answer, when nothing runs and no old branch is shown. */
function decorateLast() {
  for (const n of els.messages.querySelectorAll(".msg-tools")) n.remove();
  if (store.busy || s.turn || els.messages.querySelector(".branch-viewing")) return;
  const users = els.messages.querySelectorAll("article.msg.user");
  const lastUser = users[users.length - 1];
  if (!lastUser || !lastUser.dataset.seq) return;
  const edit = el("button", { type: "button", class: "btn btn-small btn-ghost", "data-action": "edit", title: "Edit this message" }, icon("edit"), "Edit");
  edit.addEventListener("click", () => editLast(lastUser));
  lastUser.querySelector(".bubble").append(el("div", { class: "msg-tools" }, edit));
  const answer = lastUser.nextElementSibling;
  if (answer && answer.matches("article.msg.assistant") && !answer.querySelector(".turn-actions")) {
    const again = el("button", { type: "button", class: "btn btn-small btn-ghost", "data-action": "regenerate", title: "Answer again" }, icon("retry"), "Regenerate");
    again.addEventListener("click", () => regenerate());
    answer.querySelector(".turn-body").append(el("div", { class: "msg-tools" }, again));
  }
}

/** A user message a witnessed turn put on screen learns its seq and versions from the reloaded history. */
function markBranches(messages) {
  const users = [...els.messages.querySelectorAll("article.msg.user")];
  const saved = messages.filter((m) => m.role === "user");
  const last = users[users.length - 1];
  const lastSaved = saved[saved.length - 1];
  if (!last || !lastSaved) return;
  last.dataset.seq = String(lastSaved.seq);
  if (lastSaved.branch && !last.querySelector(".branch-switch")) {
    last.dataset.branchGroup = String(lastSaved.branch.group);
    last.querySelector(".bubble").append(branchSwitcher(lastSaved.branch, showBranch));
  }
}

/** Show version ``index`` of an exchange in place of what follows its user message (read-only when old). */
async function showBranch(group, index) {
  const id = store.currentId;
  if (!id) return;
  let version;
  try {
    version = await api.getBranch(id, group, index);
  } catch (err) {
    toast(err.message, "error");
    return;
  }
  if (id !== store.currentId || s.turn) return;
  const anchor = [...els.messages.querySelectorAll("article.msg.user")].find((n) => n.dataset.branchGroup === String(group));
  if (!anchor) return;
  const { nodes } = renderHistory(version.messages, historyActions);
  if (!version.current) {
    nodes.push(el("div", { class: "notice notice-info branch-viewing", role: "status" },
      el("span", {}, `You are viewing version ${version.index} of ${version.count}. New messages continue from version ${version.count}.`)));
  }
  const old = [];
  for (let node = anchor; node; node = node.nextElementSibling) old.push(node);
  anchor.before(...nodes);
  for (const node of old) node.remove();
  decorateLast();
  scrollDown();
}

/** Stop the running turn: the stop frame, and POST /stop if the socket is down or nothing happens. */
export function stop() {
  if (!store.busy || !store.currentId) return;
  const id = store.currentId;
  const sent = socket && socket.send({ type: "stop" });
  emit("turn:stopping");
  clearTimeout(s.stopTimer);
  s.stopTimer = setTimeout(() => {
    if (store.busy && store.currentId === id) api.stop(id).catch((err) => toast(err.message, "error"));
  }, sent ? 2500 : 0);
}
