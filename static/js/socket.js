// One WebSocket per open session, with reconnect (exponential backoff) and resume by seq.
//
// Every server event carries a growing `seq`; we remember the last one and reconnect with
// `?after=<seq>` so a running turn continues without gaps, and drop anything we have already
// seen (seq <= last) so a replay never duplicates text.

const CLOSE_UNAUTHENTICATED = 4401;
const CLOSE_NOT_FOUND = 4004;
const CLOSE_BAD_ORIGIN = 4403;
const MAX_DELAY = 15000;

export class SessionSocket {
  /**
   * @param {string} sessionId
   * @param {{onEvent: Function, onState: Function, onFatal: Function, isTurnActive: Function}} handlers
   */
  constructor(sessionId, handlers) {
    this.sessionId = sessionId;
    this.handlers = handlers;
    this.ws = null;
    this.lastSeq = 0;
    this.attempt = 0;
    this.timer = null;
    this.disposed = false;
    this.onlineHandler = () => this.reconnectNow();
    window.addEventListener("online", this.onlineHandler);
    // The server notifies (push, Telegram) about what a hidden or closed tab would miss.
    this.visibilityHandler = () => this.sendVisibility();
    document.addEventListener("visibilitychange", this.visibilityHandler);
  }

  sendVisibility() {
    this.send({ type: "visibility", visible: document.visibilityState === "visible" });
  }

  url() {
    const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    const base = `${proto}//${window.location.host}/ws/sessions/${encodeURIComponent(this.sessionId)}`;
    return this.lastSeq > 0 ? `${base}?after=${this.lastSeq}` : base;
  }

  get isOpen() {
    return Boolean(this.ws && this.ws.readyState === WebSocket.OPEN);
  }

  connect() {
    if (this.disposed) return;
    clearTimeout(this.timer);
    this.timer = null;
    this.handlers.onState(this.attempt === 0 ? "connecting" : "reconnecting");
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      if (ws !== this.ws) return;
      this.attempt = 0;
      if (document.visibilityState !== "visible") this.sendVisibility();
      this.handlers.onState("open");
    });
    ws.addEventListener("message", (e) => {
      if (ws !== this.ws) return;
      let event;
      try {
        event = JSON.parse(e.data);
      } catch {
        return;
      }
      this.accept(event);
    });
    ws.addEventListener("close", (e) => {
      if (ws !== this.ws) return;
      this.ws = null;
      if (this.disposed) return;
      if (e.code === CLOSE_UNAUTHENTICATED) {
        this.handlers.onFatal("unauthenticated");
        return;
      }
      if (e.code === CLOSE_NOT_FOUND || e.code === CLOSE_BAD_ORIGIN) {
        this.handlers.onState("closed");
        this.handlers.onFatal(e.code === CLOSE_NOT_FOUND ? "not_found" : "bad_origin");
        return;
      }
      this.scheduleReconnect();
    });
    // Errors are followed by a close event: reconnecting happens there.
  }

  /** Filter replayed/duplicate events by seq, then hand the rest on. */
  accept(event) {
    if (!event || typeof event.type !== "string") return;
    const seq = Number(event.seq);
    if (Number.isFinite(seq) && seq > 0) {
      if (seq <= this.lastSeq) {
        // A new run whose numbering restarted (a server that numbers per run): accept its
        // stream_start when no turn is on screen; anything else at or below the mark is a replay.
        const restart = event.type === "stream_start" && !this.handlers.isTurnActive();
        if (!restart) return;
      } else if (this.lastSeq > 0 && seq > this.lastSeq + 1) {
        this.handlers.onGap?.(); // something was missed: history must be reloaded, not trusted
      }
      this.lastSeq = seq;
    }
    this.handlers.onEvent(event);
  }

  scheduleReconnect() {
    this.attempt += 1;
    const base = Math.min(MAX_DELAY, 500 * 2 ** (this.attempt - 1));
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.handlers.onState("reconnecting", delay);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  reconnectNow() {
    if (this.disposed || this.ws) return;
    this.connect();
  }

  send(frame) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
    window.removeEventListener("online", this.onlineHandler);
    document.removeEventListener("visibilitychange", this.visibilityHandler);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      try {
        ws.close(1000, "client closed");
      } catch {
        /* already closed */
      }
    }
  }
}
