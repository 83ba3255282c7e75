// The client state, with a tiny subscribe/emit so modules stay decoupled.

const listeners = new Map();

export const store = {
  user: "",
  profiles: [],
  sessions: [],
  sessionsTotal: 0,
  filter: { q: "", pendingOnly: false },
  currentId: null, // null: a new, not yet created chat
  current: null, // the session detail (without messages)
  draftProfileId: null,
  busy: false,
  connection: "idle", // idle | connecting | open | reconnecting | offline | closed
  reconnectIn: 0,
  recall: null,
  contextTokens: 0,
  maxContextTokens: 0,
};

export function on(name, fn) {
  if (!listeners.has(name)) listeners.set(name, new Set());
  listeners.get(name).add(fn);
  return () => listeners.get(name).delete(fn);
}

export function emit(name, detail) {
  for (const fn of listeners.get(name) || []) {
    try {
      fn(detail);
    } catch (err) {
      console.warn(`listener of ${name} failed`, err); // eslint-disable-line no-console
    }
  }
}

/** Merge a patch into the store and announce each changed key as "change:<key>". */
export function set(patch) {
  for (const [key, value] of Object.entries(patch)) {
    if (store[key] === value) continue;
    store[key] = value;
    emit(`change:${key}`, value);
  }
}
