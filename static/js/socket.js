// One websocket per open conversation: pings, reconnects with backoff, resumes by seq.
//
// The server replays every stored event after the `after_seq` we connect with, then sends
// live ones (docs/protocol.md). We reconnect from the highest seq we have seen with nothing
// missing below it, and the thread drops any seq it already applied.

const PING_EVERY_MS = 20000;
// A socket can die without a close event (a laptop lid, a proxy): no answer to a ping within
// this long means the connection is gone, so drop it and reconnect.
const PONG_WITHIN_MS = 10000;
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 15000;
// Close codes after which retrying will not help (docs/protocol.md): this user may not have
// this conversation (or it was deleted), or the sign-in that opened the socket ended. The
// server's other codes (4408, 4429) mean "reconnect later", like a drop.
const FINAL_CLOSE_CODES = new Map([
  [4404, "refused"],
  [4401, "signed-out"],
]);

export class ConversationSocket {
  constructor({ conversationId, afterSeq, onFrame, onStatus }) {
    this.conversationId = conversationId;
    this.afterSeq = () => afterSeq();
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.ws = null;
    this.attempt = 0;
    this.outbox = [];
    this.pingTimer = null;
    this.pongTimer = null;
    this.retryTimer = null;
    this.closedForGood = false;
  }

  url() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    const after = encodeURIComponent(this.afterSeq());
    return `${scheme}//${window.location.host}/ws/conversations/${this.conversationId}/?after_seq=${after}`;
  }

  connect() {
    if (this.closedForGood) return;
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      if (this.ws !== ws) return;
      this.attempt = 0;
      this.onStatus("open");
      this.pingTimer = window.setInterval(() => this.ping(ws), PING_EVERY_MS);
      const pending = this.outbox.splice(0);
      for (const frame of pending) this.rawSend(frame);
    });
    ws.addEventListener("message", (event) => {
      window.clearTimeout(this.pongTimer);
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame && typeof frame === "object") this.onFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.forget(ws);
      if (FINAL_CLOSE_CODES.has(event.code)) {
        this.closedForGood = true;
        this.onStatus(FINAL_CLOSE_CODES.get(event.code));
        return;
      }
      this.scheduleReconnect();
    });
  }

  ping(ws) {
    if (this.ws !== ws || !this.rawSend({ type: "ping" })) return;
    window.clearTimeout(this.pongTimer);
    this.pongTimer = window.setTimeout(() => {
      if (this.ws !== ws) return;
      this.forget(ws);
      ws.close(4000, "no pong");
      this.scheduleReconnect();
    }, PONG_WITHIN_MS);
  }

  forget(ws) {
    if (this.ws === ws) this.ws = null;
    window.clearInterval(this.pingTimer);
    window.clearTimeout(this.pongTimer);
  }

  scheduleReconnect() {
    if (this.closedForGood || this.retryTimer) return;
    this.onStatus("reconnecting");
    // Full jitter: a random wait up to the exponential ceiling, so many tabs do not stampede.
    const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** this.attempt);
    const wait = Math.max(150, Math.random() * ceiling);
    this.attempt += 1;
    this.retryTimer = window.setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, wait);
  }

  rawSend(frame) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(frame));
      return true;
    }
    return false;
  }

  // Frames sent while disconnected wait for the next open socket.
  send(frame) {
    if (!this.rawSend(frame)) this.outbox.push(frame);
  }

  // Used when the page comes back from sleep or the network returns: try at once.
  nudge() {
    if (this.ws || this.closedForGood) return;
    window.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.attempt = 0;
    this.connect();
  }

  close() {
    this.closedForGood = true;
    window.clearTimeout(this.retryTimer);
    const ws = this.ws;
    if (ws) {
      this.forget(ws);
      ws.close(1000);
    }
  }
}
