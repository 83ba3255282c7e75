// REST client: Django session cookie + X-CSRFToken on unsafe methods; errors carry the server's "detail".

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail || `Request failed (${status})`);
    this.status = status;
  }
}

export function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

function toLogin() {
  window.location.assign(`/login/?next=${encodeURIComponent(window.location.pathname + window.location.hash)}`);
}

export async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["X-CSRFToken"] = csrfToken();
  const form = typeof FormData !== "undefined" && body instanceof FormData; // multipart: the browser sets the type
  if (body !== undefined && !form) headers["Content-Type"] = "application/json";
  let resp;
  try {
    resp = await fetch(path, {
      method, headers, credentials: "same-origin", body: body === undefined || form || typeof body === "string" ? body : JSON.stringify(body), // a string: JSON already
    });
  } catch {
    throw new ApiError(0, "Cannot reach the Navi server. Check your connection.");
  }
  if (resp.status === 401) {
    toLogin();
    throw new ApiError(401, "Your login has expired.");
  }
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) throw new ApiError(resp.status, (data && data.detail) || `${method} ${path} failed (${resp.status})`);
  return data;
}

const enc = encodeURIComponent;

export const api = {
  profiles: () => request("GET", "/agents/profiles"),
  listSessions({ q = "", pendingOnly = false, limit = 100, offset = 0 } = {}) {
    const params = new URLSearchParams({ limit: String(limit), offset: String(offset) });
    if (q) params.set("q", q);
    if (pendingOnly) params.set("has_pending_recall", "true");
    return request("GET", `/sessions?${params}`);
  },
  search: (q, { limit = 30 } = {}) => request("GET", `/search?${new URLSearchParams({ q, limit: String(limit) })}`),
  /** A Navi JSON export file, sent as it is (the server checks it). */
  async importSession(file) {
    return request("POST", "/sessions/import", await file.text());
  },
  createSession: (profileId) => request("POST", "/sessions", profileId ? { profile_id: profileId } : {}),
  getSession(id, { limit = 200, before } = {}) {
    const params = new URLSearchParams({ limit: String(limit) });
    if (before) params.set("before", String(before));
    return request("GET", `/sessions/${enc(id)}?${params}`);
  },
  renameSession: (id, title) => request("PATCH", `/sessions/${enc(id)}`, { title }),
  pinSession: (id, pinned) => request("PATCH", `/sessions/${enc(id)}/pin`, { pinned }),
  deleteSession: (id) => request("DELETE", `/sessions/${enc(id)}`),
  stop: (id) => request("POST", `/sessions/${enc(id)}/stop`),
  steer: (id, content, ref) => request("POST", `/sessions/${enc(id)}/steer`, { content, ref }),
  withdrawSteer: (id, steerId) => request("DELETE", `/sessions/${enc(id)}/steer/${enc(steerId)}`),
  regenerate: (id) => request("POST", `/sessions/${enc(id)}/regenerate`),
  editMessage: (id, seq, content) => request("POST", `/sessions/${enc(id)}/messages/${enc(seq)}/edit`, { content }),
  getBranch: (id, group, index) => request("GET", `/sessions/${enc(id)}/branches/${enc(group)}?index=${enc(index)}`),
  getTodo: (id) => request("GET", `/sessions/${enc(id)}/todo`),
  getRecall: (id) => request("GET", `/sessions/${enc(id)}/recall`),
  cancelRecall: (id) => request("DELETE", `/sessions/${enc(id)}/recall`),
  skipRecall: (id) => request("POST", `/sessions/${enc(id)}/recall/skip`),
  listProposals: (sessionId) => request("GET", `/skill-proposals?session_id=${enc(sessionId)}`),
  acceptProposal: (id, content) => request("POST", `/skill-proposals/${enc(id)}/accept`, content === undefined ? {} : { content }),
  discardProposal: (id) => request("POST", `/skill-proposals/${enc(id)}/discard`),
  skills: () => request("GET", "/skills"),
  skill: (name) => request("GET", `/skills/${enc(name)}`),
  skillFile: (name, path) => request("GET", `/skills/${enc(name)}/file?path=${enc(path)}`),
  skillVersion: (name, number) => request("GET", `/skills/${enc(name)}/versions/${enc(number)}`),
  rollbackSkill: (name, version) => request("POST", `/skills/${enc(name)}/rollback`, { version }),
  enableSkill: (name, profileId, enabled) => request("PUT", `/skills/${enc(name)}/profiles/${enc(profileId)}`, { enabled }),
  removeSkill: (name) => request("DELETE", `/skills/${enc(name)}`),
  installSkill(file, { replace = false } = {}) {
    const form = new FormData();
    form.append("file", file, file.name);
    if (replace) form.append("replace", "true");
    return request("POST", "/skills", form);
  },
  notifySettings: () => request("GET", "/notifications/settings"),
  putNotifySettings: (body) => request("PUT", "/notifications/settings", body),
  notifyTest: () => request("POST", "/notifications/test"),
  pushSubscribe: (subscription) => request("POST", "/notifications/push/subscriptions", subscription),
  pushUnsubscribe: (endpoint) => request("DELETE", "/notifications/push/subscriptions", { endpoint }),
  telegramLinkCode: () => request("POST", "/telegram/link-code"),
  telegramUnlink: (id) => request("DELETE", `/telegram/links/${enc(id)}`),
  decideApproval: (id, approvalId, body) => request("POST", `/sessions/${enc(id)}/approvals/${enc(approvalId)}`, body),

  /** Upload with progress (fetch has no upload progress): resolves with the server's file object. */
  uploadFile(id, file, onProgress) {
    const xhr = new XMLHttpRequest();
    const promise = new Promise((resolve, reject) => {
      xhr.open("POST", `/sessions/${enc(id)}/files`);
      xhr.setRequestHeader("X-CSRFToken", csrfToken());
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.addEventListener("progress", (e) => {
        if (e.lengthComputable && onProgress) onProgress(e.loaded / e.total);
      });
      xhr.addEventListener("load", () => {
        let data = null;
        try {
          data = JSON.parse(xhr.responseText);
        } catch {
          data = null;
        }
        if (xhr.status >= 200 && xhr.status < 300) return resolve(data);
        if (xhr.status === 401) toLogin();
        const detail = xhr.status === 413
          ? (data && data.detail) || "The file is too large for this server."
          : (data && data.detail) || `Upload failed (${xhr.status})`;
        return reject(new ApiError(xhr.status, detail));
      });
      xhr.addEventListener("error", () => reject(new ApiError(0, "Upload failed: the connection was lost.")));
      xhr.addEventListener("abort", () => reject(new ApiError(0, "Upload cancelled.")));
      const form = new FormData();
      form.append("file", file, file.name);
      xhr.send(form);
    });
    promise.abort = () => xhr.abort();
    return promise;
  },
};
