// The bell in the chat's header: its unread badge kept live over /ws/notifications/
// (docs/protocol.md, "Notifications"). A notification about the conversation this page shows
// is marked read as it arrives: the person is looking at that run already. The same socket
// brings the monthly budget's notice when a run takes a budget past its warning share.
import { csrfToken, el } from "./dom.js";
import { gettext, interpolate, ngettext } from "./i18n.js";

const KIND_LABELS = {
  finished: gettext("Finished"),
  failed: gettext("Failed"),
  awaiting_approval: gettext("Waiting for approval"),
  budget_reached: gettext("Budget reached"),
  schedule_paused: gettext("Schedule paused"),
};
const RETRY_MAX_MS = 30000;

const bell = document.getElementById("notification-bell");
const badge = document.getElementById("notification-badge");
const announce = document.getElementById("notification-announce");
let attempt = 0;

function showUnread(count) {
  if (!badge) return;
  badge.hidden = count <= 0;
  badge.textContent = count > 99 ? "99+" : String(count);
  badge.dataset.count = String(count);
  const label = interpolate(ngettext("%s unread", "%s unread", count), [count]);
  badge.setAttribute("aria-label", label);
  if (bell) bell.dataset.unread = String(count);
}

function openConversationId() {
  const main = document.getElementById("main");
  return main ? Number(main.dataset.conversationId) || null : null;
}

async function markRead(id) {
  const body = new URLSearchParams({ id: String(id) });
  await fetch(bell.href, {
    method: "POST",
    headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    body,
    credentials: "same-origin",
  });
}

// The notice the chat page shows from when it loads (templates/agents/chat.html), drawn or
// updated live; an empty message takes it away (the budget was raised meanwhile).
function showBudgetWarning(message) {
  let banner = document.getElementById("budget-banner");
  if (!message) {
    if (banner) banner.hidden = true;
    return;
  }
  if (banner) {
    banner.querySelector("[data-budget-text]").textContent = message;
    banner.hidden = false;
    return;
  }
  const usage = document.getElementById("usage-link");
  banner = el(
    "p",
    { className: "banner budget-banner", attrs: { id: "budget-banner", role: "status" } },
    el("span", { text: message, dataset: { budgetText: "" } }),
    " ",
    usage ? el("a", { text: gettext("See your usage"), attrs: { href: usage.getAttribute("href") } }) : null,
  );
  const after = document.getElementById("demo-banner");
  if (after) after.after(banner);
  else document.getElementById("main")?.prepend(banner);
  // A live region that appears with its text is not read out: say it through the bell's.
  if (announce) announce.textContent = message;
}

function onFrame(frame) {
  if (frame.type === "budget.warning") {
    showBudgetWarning(frame.message || "");
  } else if (frame.type === "notifications.unread") {
    showUnread(frame.unread);
  } else if (frame.type === "notification") {
    const note = frame.notification;
    if (note.conversation_id && note.conversation_id === openConversationId()) {
      markRead(note.id).catch(() => {});
      return;
    }
    showUnread(frame.unread);
    if (announce) {
      announce.textContent = interpolate(gettext("New notification: %(kind)s"), {
        kind: KIND_LABELS[note.kind] || note.kind,
      }, true);
    }
  }
}

function connect() {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${window.location.host}/ws/notifications/`);
  ws.addEventListener("open", () => {
    attempt = 0;
  });
  ws.addEventListener("message", (event) => {
    try {
      onFrame(JSON.parse(event.data));
    } catch {
      // not a frame of ours
    }
  });
  ws.addEventListener("close", (event) => {
    if (event.code === 4401) return; // signed out
    attempt += 1;
    const wait = Math.min(RETRY_MAX_MS, 500 * 2 ** attempt);
    window.setTimeout(connect, wait);
  });
}

if (bell) connect();
