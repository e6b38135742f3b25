// The chat page: wires the sidebar, the thread, the composer and the socket together.

import { Attachments } from "./attachments.js";
import { linkCitations, mayCite } from "./citations.js";
import { setUpCommandMenu } from "./commands.js";
import { announce, api, newClientId } from "./dom.js";
// The bell in the header keeps itself live; the page has one entry module, this one.
import "./notifications.js";
import { setUpShare } from "./share.js";
import { sidebar, state, tabs } from "./chat_sidebar.js";
import { setUpSuggestions } from "./suggestions.js";
import { ConversationSocket } from "./socket.js";
import { Thread } from "./thread.js";
import { setUpShortcuts } from "./shortcuts.js";
import "./user_menu.js";
import { gettext, interpolate, pageLanguage } from "./i18n.js";

const conversation = state.conversation;

const threadRoot = document.getElementById("thread");
const composer = document.getElementById("composer");
const input = document.getElementById("composer-input");
const sendButton = document.getElementById("send-button");
const stopButton = document.getElementById("stop-button");
const profileSelect = document.getElementById("profile-select");
const notice = document.getElementById("notice");
const connectionStatus = document.getElementById("connection-status");
const titleHeading = document.getElementById("conversation-title");
const charCount = document.getElementById("char-count");
const demoBanner = document.getElementById("demo-banner");
const maxChars = state.max_message_chars;

// ------------------------------------------------------------------ notices
//
// One line above the composer. An error stays until it is dismissed or the next send; an
// information fades after a while; a wait ("try again in 40 s") counts down and goes when
// the time is up.

const noticeText = document.getElementById("notice-text");
const noticeClose = document.getElementById("notice-close");
let noticeTimer = null;
function showNotice(text, { kind = "error", retryAfter = null } = {}) {
  window.clearInterval(noticeTimer);
  noticeTimer = null;
  notice.classList.toggle("info", kind === "info");
  noticeText.setAttribute("role", kind === "info" ? "status" : "alert");
  notice.hidden = false;
  if (retryAfter > 0) {
    const until = Date.now() + retryAfter * 1000;
    const tick = () => {
      const left = Math.ceil((until - Date.now()) / 1000);
      if (left <= 0) {
        hideNotice();
        return;
      }
      noticeText.textContent = `${text} ${interpolate(gettext("You can send again in %s s."), [left])}`;
    };
    tick();
    noticeTimer = window.setInterval(tick, 1000);
    return;
  }
  noticeText.textContent = text;
  if (kind === "info") noticeTimer = window.setInterval(hideNotice, 8000);
}
function hideNotice() {
  window.clearInterval(noticeTimer);
  noticeTimer = null;
  notice.hidden = true;
}
noticeClose.addEventListener("click", hideNotice);

// ------------------------------------------------------------------ sidebar and drawer

// The list itself (shown from the first paint) is chat_sidebar.js's.
// The header and the tab's title show the conversation's title (shown: "Conversation 12"
// when it has none).
function showTitle(id, shown) {
  if (!conversation || String(id) !== String(conversation.id)) return;
  titleHeading.textContent = shown;
  document.title = `${shown} · chatsite`;
}
// A rename here is said to the other tabs of this browser, whose sidebar and header follow.
function announceRename(id, title, shown) {
  tabs?.postMessage({ type: "conversation.renamed", id, title, shown });
}
document.addEventListener("sidebar:renamed", (event) => {
  showTitle(event.detail.id, event.detail.title);
  const row = sidebar.row(event.detail.id, "");
  announceRename(event.detail.id, row.title || "", event.detail.title);
});

// (The list follows in chat_sidebar.js, from the first paint.)
tabs?.addEventListener("message", (event) => {
  if (event.data?.type === "conversation.renamed") showTitle(event.data.id, event.data.shown);
});
// Renamed on another device: the sidebar's list, read again when the page is looked at
// (Sidebar.refresh), brings the new title, and the header follows it.
document.getElementById("conversation-list").addEventListener("sidebar:refreshed", () => {
  if (!conversation) return;
  const title = sidebar.row(conversation.id, "").title;
  if (title && title !== titleHeading.textContent.trim()) showTitle(conversation.id, title);
});
// Deleted elsewhere (another device): the sidebar reads the list again when the page is
// looked at (Sidebar.refresh).

const drawer = document.getElementById("sidebar");
const backdrop = document.getElementById("backdrop");
const drawerOpen = document.getElementById("drawer-open");
const drawerClose = document.getElementById("drawer-close");

const pageBehindDrawer = document.getElementById("main");

function setDrawer(open) {
  drawer.classList.toggle("open", open);
  backdrop.hidden = !open;
  drawerOpen.setAttribute("aria-expanded", String(open));
  // The open drawer is modal: what is behind it can be neither reached nor read.
  pageBehindDrawer.inert = open;
  if (open) drawer.querySelector("a, button, input")?.focus();
  else drawerOpen.focus();
}

function drawerControls() {
  return [...drawer.querySelectorAll("a[href], button, input, select, textarea")].filter(
    (control) => !control.disabled && control.getClientRects().length > 0,
  );
}

// Tab and Shift+Tab go round the open drawer's controls instead of leaving it.
function keepFocusInDrawer(event) {
  const controls = drawerControls();
  if (controls.length === 0) return;
  const first = controls[0];
  const last = controls[controls.length - 1];
  const outside = !drawer.contains(document.activeElement);
  if (event.shiftKey && (outside || document.activeElement === first)) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && (outside || document.activeElement === last)) {
    event.preventDefault();
    first.focus();
  }
}

drawerOpen.addEventListener("click", () => setDrawer(true));
drawerClose.addEventListener("click", () => setDrawer(false));
backdrop.addEventListener("click", () => setDrawer(false));
document.addEventListener("keydown", (event) => {
  if (!drawer.classList.contains("open")) return;
  if (event.key === "Escape") setDrawer(false);
  else if (event.key === "Tab") keepFocusInDrawer(event);
});
// Widened past the drawer's breakpoint, the sidebar is part of the page again.
matchMedia("(max-width: 800px)").addEventListener("change", (query) => {
  if (!query.matches && drawer.classList.contains("open")) setDrawer(false);
});

// ------------------------------------------------------------------ composer

function autosize() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, window.innerHeight * 0.4)}px`;
}
input.addEventListener("input", () => {
  autosize();
  updateCharCount();
});

// The server refuses a message over the limit (too_long); say so while typing, and refuse
// before sending, leaving the text where it is. Counted as the server counts: characters
// (code points), not UTF-16 units.
function messageLength(text) {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}
function updateCharCount() {
  const length = messageLength(input.value.trim());
  const near = length >= maxChars * 0.9;
  charCount.hidden = !near;
  charCount.textContent = `${length.toLocaleString(pageLanguage())} / ${maxChars.toLocaleString(pageLanguage())}`;
  charCount.classList.toggle("over", length > maxChars);
}
function tooLong(content) {
  const length = messageLength(content);
  if (length <= maxChars) return false;
  showNotice(
    interpolate(
      gettext("Your message is %(length)s characters; the limit is %(limit)s. Shorten it, then send it again."),
      { length: length.toLocaleString(pageLanguage()), limit: maxChars.toLocaleString(pageLanguage()) },
      true,
    ),
  );
  input.focus();
  return true;
}
updateCharCount();

// The demo banner follows the agent picker: only a profile without a real model endpoint
// is answered by the offline stand-in.
function updateDemoBanner() {
  if (!demoBanner || !profileSelect) return;
  demoBanner.hidden = !(state.demo_profiles || []).includes(profileSelect.value);
}
profileSelect?.addEventListener("change", updateDemoBanner);
updateDemoBanner();
// Registered before the Enter that sends: Enter in the open "/" menu takes a command instead.
setUpCommandMenu(input, document.getElementById("command-menu"), { hasConversation: Boolean(conversation) });
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

// "/compact" folds the earlier turns instead of asking the model; typed in any case.
function isCompactCommand(content) {
  return content.toLowerCase() === "/compact";
}

// ------------------------------------------------------------------ files

// The conversation's files by name: citations of them become links (static/js/citations.js).
// Asked for when an answer seems to cite one, not with every page.
let files = null;
function conversationFiles() {
  if (!files) {
    files = api("GET", state.attachment_api.upload.replace("/0/", `/${conversation.id}/`))
      .then((data) => new Map(data.attachments.map((file) => [file.name, file])))
      .catch(() => {
        files = null;
        return new Map();
      });
  }
  return files;
}
// A new chat gets its conversation when the first file is attached (files belong to one).
let createdConversationId = null;
async function conversationForFiles() {
  if (conversation) return conversation.id;
  if (createdConversationId === null) {
    createdConversationId = (async () => {
      const created = await api("POST", state.attachment_api.conversations, {
        profile: profileSelect ? profileSelect.value : null,
      });
      return created.id;
    })();
    createdConversationId.catch(() => {
      createdConversationId = null;
    });
  }
  return createdConversationId;
}
const attachments = new Attachments({
  list: document.getElementById("attachment-chips"),
  fileInput: document.getElementById("attachment-input"),
  button: document.getElementById("attach-button"),
  dropTarget: composer,
  input,
  api: state.attachment_api,
  conversationId: conversationForFiles,
  onReady: () => {
    files = null; // a new file: ask again at the next citation
  },
});
if (state.attachment_api.accept) {
  document.getElementById("attachment-input").accept = state.attachment_api.accept;
}
// A message sent while a file is still being read would be answered without it.
function filesStillReading() {
  if (!attachments.busy()) return false;
  showNotice(gettext("Wait until your files are read (their chips say Ready), then send."), { kind: "info" });
  return true;
}

// The composer's other commands (commands.js lists them all): true when `content` was one.
function ranPageCommand(content) {
  const command = content.toLowerCase();
  if (command === "/new") {
    window.location.assign(document.getElementById("new-chat").href);
  } else if (command === "/shortcuts") {
    input.value = "";
    autosize();
    shortcuts.help();
  } else {
    return false;
  }
  return true;
}

// ------------------------------------------------------------------ keyboard shortcuts

const appRoot = document.querySelector(".app");
const narrow = matchMedia("(max-width: 800px)");
const shortcuts = setUpShortcuts(
  {
    newChat: () => window.location.assign(document.getElementById("new-chat").href),
    focusSearch: () => {
      if (narrow.matches && !drawer.classList.contains("open")) setDrawer(true);
      document.getElementById("search").focus();
    },
    copyLastAnswer: () => {
      const copies = threadRoot.querySelectorAll(".copy-answer");
      if (copies.length) copies[copies.length - 1].click();
      else announce(gettext("There is no answer to copy yet."));
    },
    // True when a run was being written (Escape did something).
    stop: () => {
      if (stopButton.hidden || stopButton.disabled) return false;
      stopButton.click();
      return true;
    },
    toggleSidebar: () => {
      if (narrow.matches) setDrawer(!drawer.classList.contains("open"));
      else appRoot.classList.toggle("sidebar-hidden");
    },
  },
  document.getElementById("shortcuts-dialog"),
);

// ------------------------------------------------------------------ no conversation yet

setUpSuggestions();

if (!conversation) {
  // The form posts to /c/new/, which creates the conversation, sends the first message and
  // redirects to it. Only guard against a double submit and empty text. With files attached
  // the conversation exists already: the message goes to it through the API instead.
  composer.addEventListener("submit", async (event) => {
    const content = input.value.trim();
    if (!content || tooLong(content)) {
      event.preventDefault();
      return;
    }
    if (ranPageCommand(content)) {
      event.preventDefault();
      return;
    }
    if (createdConversationId !== null) {
      event.preventDefault();
      if (filesStillReading()) return;
      sendButton.disabled = true;
      try {
        const id = await createdConversationId;
        await api("POST", state.attachment_api.messages.replace("/0/", `/${id}/`), {
          content,
          client_id: newClientId(),
          profile: profileSelect ? profileSelect.value : undefined,
        });
        window.location.assign(`/c/${id}/`);
      } catch (error) {
        sendButton.disabled = false;
        showNotice(error.message);
      }
      return;
    }
    if (isCompactCommand(content)) {
      // A command, not a question: there is nothing to summarise before the first message.
      event.preventDefault();
      showNotice(gettext("Nothing to summarise yet: /compact folds earlier turns of a chat."), {
        kind: "info",
      });
      return;
    }
    sendButton.disabled = true;
  });
  // The box has the focus already (chat_start.js): this may run after the person moved it.
} else {
  startConversation();
}

function startConversation() {
  const urls = state.urls;
  let socket = null;

  const thread = new Thread(threadRoot, {
    latestButton: document.getElementById("jump-latest"),
    onChange: () => updateComposer(),
    onDecide: (approvalId, approve, reason) => {
      socket.send({ type: "approval.decide", approval_id: approvalId, approve, reason });
    },
    onContinue: (runId) => {
      socket.send({ type: "run.continue", run_id: runId });
    },
    onContinueAnswer: async (messageId, stoppedRunId) => {
      try {
        const result = await api("POST", urls.continue_answer.replace("/0/", `/${messageId}/`));
        thread.expectContinuation(result.run.id, result.run.trigger_message_id, stoppedRunId);
      } catch (error) {
        showNotice(interpolate(gettext("Could not continue the answer: %s"), [error.message]));
      }
    },
    onRegenerate: async () => {
      try {
        const result = await api("POST", urls.regenerate);
        thread.expectRun(result.run.id, result.run.trigger_message_id);
      } catch (error) {
        showNotice(interpolate(gettext("Could not regenerate: %s"), [error.message]));
      }
    },
    onFork: async (runId, stepSeq) => {
      try {
        const result = await api("POST", urls.fork_run.replace("/0/", `/${runId}/`), { step_seq: stepSeq });
        thread.expectRun(result.run.id, result.run.trigger_message_id);
      } catch (error) {
        showNotice(interpolate(gettext("Could not retry from that step: %s"), [error.message]));
      }
    },
    onSwitch: async (messageId) => {
      try {
        const result = await api("POST", urls.branch, { message_id: messageId });
        thread.setSummary(result.summary);
        return result.active_leaf_id;
      } catch (error) {
        showNotice(interpolate(gettext("Could not switch to that version: %s"), [error.message]));
        throw error;
      }
    },
    onAnswerShown: (answer) => {
      if (mayCite(answer)) conversationFiles().then((byName) => linkCitations(answer, byName));
    },
    onEdit: async (messageId, content) => {
      try {
        await api("POST", urls.edit_message.replace("/0/", `/${messageId}/`), {
          content,
          client_id: newClientId(),
        });
        sidebar.touch(conversation.id, { updated_at: new Date().toISOString() });
      } catch (error) {
        showNotice(interpolate(gettext("Could not send the edit: %s"), [error.message]));
        throw error;
      }
    },
  });

  function updateComposer() {
    const active = thread.activeRunIds();
    stopButton.hidden = active.length === 0;
  }

  thread.loadTree(state.tree);
  for (const frame of state.events || []) thread.apply(frame);
  thread.startLive();
  thread.setSummary(state.summary);
  thread.scrollToEnd();
  updateComposer();

  // A question asked while the agent is still answering waits here, shown as pending, until
  // the run ends: the server would refuse it (one run at a time), and it continues the answer
  // being written, whose message the page only learns when the run ends. A paused run does
  // not hold it back: the server then says why it cannot start.
  const heldSends = [];
  function releaseHeldSends() {
    if (gone) return;
    while (heldSends.length && !thread.workingRunIds().length) {
      const { clientId, content, profile } = heldSends.shift();
      thread.markSent(clientId);
      socket.send({
        type: "message.send",
        content,
        client_id: clientId,
        profile,
        // The branch shown is the one the question continues (docs/protocol.md).
        parent_id: thread.leaf ?? undefined,
      });
    }
  }

  function holdSend(clientId, content) {
    heldSends.push({ clientId, content, profile: profileSelect ? profileSelect.value : undefined });
    releaseHeldSends();
    if (heldSends.some((held) => held.clientId === clientId)) thread.markQueued(clientId, cancelHeldSend);
  }

  // Cancel on a queued message: it never goes, and its words come back to the box.
  function cancelHeldSend(clientId) {
    const index = heldSends.findIndex((held) => held.clientId === clientId);
    if (index === -1) return;
    heldSends.splice(index, 1);
    const text = thread.dropPending(clientId);
    // Nothing typed since is overwritten: the message goes above it.
    input.value = input.value ? `${text}\n${input.value}` : text;
    autosize();
    updateCharCount();
    input.focus();
  }

  let lastFrameAt = Date.now(); // of the last frame other than a pong; see watchForSilence
  function onFrame(frame) {
    if (frame.type === "pong") return;
    lastFrameAt = Date.now();
    if (frame.type === "error") {
      if (frame.code === "not_found" && !frame.client_id) {
        conversationGone();
        return;
      }
      // Refusals of a send name its client_id (docs/protocol.md).
      const returned = frame.client_id ? thread.dropPending(frame.client_id) : null;
      giveBack(returned);
      showNotice(frame.message || gettext("The server could not do that."), {
        retryAfter: Number(frame.retry_after) || null,
      });
      return;
    }
    thread.apply(frame);
    if (frame.type === "message.created" && conversation.untitled) refreshTitle();
    if (heldSends.length) releaseHeldSends();
  }

  // The first message names an untitled conversation on the server; show the name it got.
  async function refreshTitle() {
    conversation.untitled = false;
    try {
      const data = await api("GET", urls.conversation);
      if (!data.title) return;
      titleHeading.textContent = data.title;
      document.title = `${data.title} · chatsite`;
      sidebar.touch(conversation.id, { title: data.title });
    } catch {
      conversation.untitled = true;
    }
  }

  // Text the server did not take goes back into the box, unless the user typed anew.
  function giveBack(text) {
    if (!text) return;
    if (!input.value) input.value = text;
    autosize();
    updateCharCount();
  }

  // The conversation was deleted (here, in another tab, or on another device): nothing can
  // be sent to it any more. Unsent messages go back into the box.
  let gone = false;
  function conversationGone() {
    if (gone) return;
    gone = true;
    socket?.close();
    for (const text of thread.dropAllPending()) giveBack(text);
    sidebar.forget(conversation.id);
    connectionStatus.textContent = gettext("This conversation was deleted.");
    connectionStatus.classList.add("reconnecting");
    showNotice(gettext("This conversation was deleted. Start a new chat to ask again."));
    sendButton.disabled = true;
    stopButton.hidden = true;
  }
  tabs?.addEventListener("message", (event) => {
    if (event.data?.type === "conversation.deleted" && event.data.id === conversation.id) {
      conversationGone();
    }
  });

  const statusText = {
    open: "",
    reconnecting: gettext("Reconnecting…"),
    refused: gettext("This conversation is not available."),
    "signed-out": gettext("You have signed out. Sign in again to go on."),
  };
  function onStatus(status) {
    if (status === "refused") {
      conversationGone();
      return;
    }
    connectionStatus.textContent = statusText[status] ?? "";
    connectionStatus.classList.toggle("reconnecting", status !== "open");
  }

  socket = new ConversationSocket({
    conversationId: conversation.id,
    afterSeq: () => thread.lastSeq(),
    onFrame,
    onStatus,
  });
  socket.connect();
  watchForSilence(state.resume_after_silent_ms);
  window.addEventListener("online", () => socket.nudge());
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") socket.nudge();
  });

  // The channel layer may drop a live frame while the socket itself stays healthy (pings
  // still get pongs), and a run's last frames would then never come. While a run is in
  // progress, a silence this long asks the server to replay from the last seq we hold: the
  // stored log has whatever was lost, and seqs we already have are dropped.
  function watchForSilence(silentMs) {
    if (!(silentMs > 0)) return;
    window.setInterval(() => {
      const now = Date.now();
      if (!thread.workingRunIds().length) {
        lastFrameAt = now; // measure the silence from when a run is in progress (not paused)
        return;
      }
      if (now - lastFrameAt < silentMs) return;
      lastFrameAt = now; // at most one resume per silence
      socket.rawSend({ type: "resume", after_seq: thread.lastSeq() });
    }, Math.min(1000, silentMs / 2));
  }

  async function compact() {
    try {
      const result = await api("POST", urls.compact);
      showNotice(result.message, { kind: "info" });
    } catch (error) {
      showNotice(interpolate(gettext("Could not summarise: %s"), [error.message]));
    }
  }
  document.getElementById("compact-button")?.addEventListener("click", () => {
    document.getElementById("more-menu").open = false;
    compact();
  });

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (!content || gone) return;
    if (tooLong(content)) return;
    if (ranPageCommand(content)) return;
    if (isCompactCommand(content)) {
      input.value = "";
      autosize();
      compact();
      return;
    }
    if (filesStillReading()) return;
    const clientId = newClientId();
    thread.addPending(clientId, content);
    attachments.clearSent();
    holdSend(clientId, content);
    input.value = "";
    autosize();
    updateCharCount();
    if (!noticeTimer) hideNotice(); // an error was about an earlier send
    sidebar.touch(conversation.id, { updated_at: new Date().toISOString() });
  });

  stopButton.addEventListener("click", () => {
    for (const runId of thread.activeRunIds()) {
      thread.markStopping(runId);
      // Over the socket when it is up; otherwise the API, so Stop never waits on a reconnect.
      if (!socket.rawSend({ type: "run.cancel", run_id: runId })) {
        api("POST", urls.cancel_run.replace("/0/", `/${runId}/`)).catch((error) => {
          showNotice(interpolate(gettext("Could not stop the run: %s"), [error.message]));
        });
      }
    }
    stopButton.disabled = true;
    window.setTimeout(() => {
      stopButton.disabled = false;
    }, 1500);
    input.focus();
  });

  setUpConversationActions(urls);
  setUpShare(urls);
  // The box takes the focus the page starts with, not one the person has already moved
  // (to the drawer's button, say) while this script was on its way.
  if (!document.activeElement || document.activeElement === document.body) input.focus();
}

// ------------------------------------------------------------------ rename and delete

function wireDialog(dialog, opener) {
  for (const closer of dialog.querySelectorAll("[data-close]")) {
    closer.addEventListener("click", () => dialog.close());
  }
  dialog.addEventListener("close", () => opener.focus());
}

function setUpConversationActions(urls) {
  const renameButton = document.getElementById("rename-button");
  const renameDialog = document.getElementById("rename-dialog");
  const renameForm = document.getElementById("rename-form");
  const renameInput = document.getElementById("rename-input");
  const deleteButton = document.getElementById("delete-button");
  const archiveForm = document.getElementById("archive-form");
  const moreMenu = document.getElementById("more-menu");
  if (!renameButton || !deleteButton) return;

  wireDialog(renameDialog, renameButton);

  renameButton.addEventListener("click", () => {
    renameInput.value = titleHeading.textContent.trim();
    renameDialog.showModal();
    renameInput.select();
  });
  renameForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const data = await api("PATCH", urls.conversation, { title: renameInput.value.trim() });
      const title = data.title || interpolate(gettext("Conversation %s"), [data.id]);
      showTitle(conversation.id, title);
      sidebar.touch(conversation.id, { title: data.title });
      announceRename(conversation.id, data.title, title);
      renameDialog.close();
    } catch (error) {
      showNotice(interpolate(gettext("Could not rename: %s"), [error.message]));
    }
  });

  // The same as the list's ⋯ menu (Sidebar.archive, Sidebar.remove): at once, with Undo.
  // Restoring an archived conversation stays a plain form post (it comes back here).
  const current = () => sidebar.row(conversation.id, titleHeading.textContent.trim());
  deleteButton.addEventListener("click", () => {
    moreMenu.open = false;
    sidebar.remove(current());
  });
  archiveForm?.addEventListener("submit", (event) => {
    if (archiveForm.elements.archived.value !== "1") return;
    event.preventDefault();
    moreMenu.open = false;
    sidebar.archive(current());
  });

  // The menu closes when something in it is chosen, on a click elsewhere, and on Escape.
  for (const item of moreMenu.querySelectorAll(".menu-items a")) {
    item.addEventListener("click", () => {
      moreMenu.open = false;
    });
  }
  document.addEventListener("click", (event) => {
    if (moreMenu.open && !moreMenu.contains(event.target)) moreMenu.open = false;
  });
  moreMenu.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && moreMenu.open) {
      moreMenu.open = false;
      moreMenu.querySelector("summary").focus();
    }
  });
}

// Everything above is wired up: the composer sends on Enter from now on. (Browser tests wait
// for this before they type; before it, Enter only adds a line to the box.)
document.documentElement.dataset.chatReady = "true";
