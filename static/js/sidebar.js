// The conversation list: pinned first, then date buckets; a ⋯ menu per item (rename, pin,
// archive, delete, export) with Undo for archive and delete; search with highlighted snippets.
//
// Buckets follow the browser's own time zone and calendar days, by last activity
// (`updated_at`): Today, Yesterday, Previous 7 days, Previous 30 days, then one per month.
//
// Undo: archiving happens at once and Undo unarchives. Deleting only hides the item; the
// DELETE is sent when the toast runs out (or when another action replaces the toast), so
// closing the tab during the toast loses nothing: the conversation is still there.

import { api, el } from "./dom.js";
import { gettext, interpolate, ngettext, pageLanguage } from "./i18n.js";
import { icon } from "./icons.js";

const SEARCH_DELAY_MS = 250;
export const UNDO_MS = 6000;
const DAY_MS = 86400000;

function startOfDay(date) {
  return new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime();
}

export function dateBucket(date, now = new Date()) {
  const days = Math.round((startOfDay(now) - startOfDay(date)) / DAY_MS);
  if (days <= 0) return gettext("Today");
  if (days === 1) return gettext("Yesterday");
  if (days <= 7) return gettext("Previous 7 days");
  if (days <= 30) return gettext("Previous 30 days");
  return date.toLocaleDateString(pageLanguage(), { month: "long", year: "numeric" });
}

function conversationUrl(id) {
  return `/c/${encodeURIComponent(id)}/`;
}

function apiUrl(id, tail = "") {
  return `/api/conversations/${encodeURIComponent(id)}/${tail}`;
}

function titleOf(conversation) {
  return conversation.title || interpolate(gettext("Conversation %s"), [conversation.id]);
}

// Text nodes and <mark>s from the server's segments: user text never goes through HTML.
function snippetNode(segments, id) {
  const node = el("span", { className: "conversation-snippet", attrs: { id } });
  for (const segment of segments) {
    node.append(segment.match ? el("mark", { text: segment.text }) : document.createTextNode(segment.text));
  }
  return node;
}

export class Sidebar {
  constructor({ list, search, status, currentId, conversations, toast, onDeleted }) {
    this.onDeleted = onDeleted || (() => {});
    this.list = list;
    this.search = search;
    this.status = status;
    this.currentId = currentId;
    this.conversations = conversations.slice();
    this.results = null; // search results while a search is shown
    this.searchTimer = null;
    this.searchAbort = null;
    this.query = "";
    this.openMenu = null;
    this.toast = new UndoToast(toast, { refocus: search });
    search.addEventListener("input", () => this.onSearchInput());
    search.form?.addEventListener("submit", (event) => {
      event.preventDefault();
      this.runSearch(search.value.trim());
    });
    document.addEventListener("click", (event) => {
      if (this.openMenu && !this.openMenu.wrapper.contains(event.target)) this.closeMenu();
    });
    // Coming back to the tab: runs may have ended or started elsewhere, so the markers
    // (and titles, pins) are fetched again.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.refresh();
    });
    this.render();
  }

  async refresh() {
    // Not while a search, a menu, a rename or an Undo is showing: they hold the old rows.
    if (this.results !== null || this.openMenu || this.toast.pending || this.list.querySelector(".rename-input")) return;
    try {
      const data = await api("GET", "/api/conversations/?page_size=200");
      if (this.results !== null || this.openMenu || this.toast.pending) return;
      const focused = document.activeElement?.closest?.(".conversation-item");
      const focusedClass = document.activeElement?.className;
      this.conversations = data.results;
      this.render();
      if (focused) {
        const again = this.list.querySelector(`.conversation-item[data-conversation-id="${CSS.escape(focused.dataset.conversationId)}"]`);
        again?.querySelector(focusedClass?.includes("item-menu-button") ? ".item-menu-button" : ".conversation-link")?.focus();
      }
      this.list.dispatchEvent(new CustomEvent("sidebar:refreshed"));
    } catch {
      // The list on screen stays; the next visit to the tab tries again.
    }
  }

  isCurrent(id) {
    return String(id) === String(this.currentId);
  }

  // ---------------------------------------------------------------- rendering

  render() {
    this.closeMenu({ focus: false });
    const searching = this.results !== null;
    const shown = searching ? this.results : this.conversations;
    const groups = new Map();
    const byActivity = shown.slice().sort((a, b) => new Date(b.updated_at) - new Date(a.updated_at));
    if (searching) groups.set(gettext("Search results"), byActivity);
    else {
      const pinned = shown.filter((c) => c.pinned).sort((a, b) => new Date(b.pinned_at || 0) - new Date(a.pinned_at || 0));
      if (pinned.length) groups.set(gettext("Pinned"), pinned);
      for (const conversation of byActivity) {
        if (conversation.pinned) continue;
        const label = dateBucket(new Date(conversation.updated_at));
        if (!groups.has(label)) groups.set(label, []);
        groups.get(label).push(conversation);
      }
    }
    const sections = [];
    let index = 0;
    for (const [label, items] of groups) {
      const headingId = `conversation-group-${index++}`;
      const ul = el("ul", { attrs: { "aria-labelledby": headingId } });
      for (const conversation of items) ul.append(this.item(conversation));
      sections.push(
        el("section", { className: "conversation-group" }, el("h2", { text: label, attrs: { id: headingId } }), ul),
      );
    }
    this.list.replaceChildren(...sections);
    if (!shown.length) {
      this.status.textContent = this.query ? gettext("No conversations match.") : gettext("No conversations yet.");
    } else {
      this.status.textContent = this.query
        ? interpolate(ngettext("%s conversation found.", "%s conversations found.", shown.length), [shown.length])
        : "";
    }
  }

  item(conversation) {
    const title = titleOf(conversation);
    // The open conversation shows its own run in the thread; the marker is for the others.
    const running = conversation.has_active_run && !this.isCurrent(conversation.id);
    const link = el(
      "a",
      {
        className: "conversation-link",
        attrs: {
          href: conversationUrl(conversation.id),
          title: conversation.title || "",
          "aria-current": this.isCurrent(conversation.id) ? "page" : null,
          "aria-describedby": conversation.snippet ? `conversation-snippet-${conversation.id}` : null,
        },
        dataset: { conversationId: conversation.id },
      },
      el("span", { className: "conversation-link-title", text: title }),
      running
        ? el("span", { className: "running-marker", attrs: { title: gettext("An answer is being written") } },
            el("span", { className: "visually-hidden", text: ` ${gettext("(answering)")}` }))
        : null,
    );
    const main = el(
      "div",
      { className: "conversation-main" },
      link,
      conversation.snippet ? snippetNode(conversation.snippet, `conversation-snippet-${conversation.id}`) : null,
    );
    const menuId = `conversation-menu-${conversation.id}`;
    const button = el("button", {
      className: "icon-button item-menu-button",
      attrs: {
        type: "button",
        "aria-label": interpolate(gettext("More actions for %s"), [title]),
        "aria-haspopup": "menu",
        "aria-expanded": "false",
        "aria-controls": menuId,
      },
    }, icon("more", { size: 18 }));
    const menu = el("ul", { className: "menu-items item-menu", attrs: { id: menuId, role: "menu", "aria-label": title, hidden: "" } });
    const wrapper = el("li", { className: "conversation-item", dataset: { conversationId: conversation.id } }, main, button, menu);
    const entry = (label, action, extra = {}) => {
      const tag = extra.href ? "a" : "button";
      const node = el(tag, {
        className: extra.className || "",
        text: label,
        attrs: { role: "menuitem", tabindex: "-1", type: extra.href ? null : "button", href: extra.href || null, download: extra.href ? "" : null },
      });
      node.addEventListener("click", () => {
        this.closeMenu({ focus: !extra.keepsFocus });
        action?.();
      });
      menu.append(el("li", { attrs: { role: "none" } }, node));
    };
    entry(gettext("Rename"), () => this.startRename(conversation, wrapper), { keepsFocus: true });
    entry(conversation.pinned ? gettext("Unpin") : gettext("Pin"), () => this.setPinned(conversation, !conversation.pinned));
    entry(gettext("Archive"), () => this.archive(conversation), { keepsFocus: true });
    entry(gettext("Export as Markdown"), null, { href: `${apiUrl(conversation.id, "export/")}?format=md` });
    entry(gettext("Delete"), () => this.remove(conversation), { className: "danger", keepsFocus: true });

    button.addEventListener("click", () => {
      if (this.openMenu?.button === button) this.closeMenu();
      else this.showMenu({ wrapper, button, menu });
    });
    button.addEventListener("keydown", (event) => {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        this.showMenu({ wrapper, button, menu }, event.key === "ArrowUp" ? -1 : 0);
      }
    });
    menu.addEventListener("keydown", (event) => this.onMenuKey(event));
    return wrapper;
  }

  // ---------------------------------------------------------------- the ⋯ menu

  showMenu(opened, focusIndex = 0) {
    this.closeMenu({ focus: false });
    this.openMenu = opened;
    opened.menu.hidden = false;
    this.placeMenu(opened.menu);
    opened.button.setAttribute("aria-expanded", "true");
    const items = this.menuItems();
    items.at(focusIndex)?.focus();
  }

  // Below its button, or above it when the list (which clips it) has no room below.
  placeMenu(menu) {
    menu.classList.remove("opens-up");
    const list = this.list.closest(".conversation-nav") || this.list;
    const room = list.getBoundingClientRect();
    const below = Math.min(room.bottom, window.innerHeight);
    if (menu.getBoundingClientRect().bottom > below) {
      menu.classList.add("opens-up");
      // Room neither below nor above (a very short list): the list scrolls to show it.
      if (menu.getBoundingClientRect().top < Math.max(room.top, 0)) menu.classList.remove("opens-up");
    }
    menu.scrollIntoView({ block: "nearest" });
  }

  closeMenu({ focus = true } = {}) {
    const opened = this.openMenu;
    if (!opened) return;
    this.openMenu = null;
    opened.menu.hidden = true;
    opened.button.setAttribute("aria-expanded", "false");
    if (focus && opened.button.isConnected) opened.button.focus();
  }

  menuItems() {
    return this.openMenu ? Array.from(this.openMenu.menu.querySelectorAll("[role=menuitem]")) : [];
  }

  onMenuKey(event) {
    const items = this.menuItems();
    const at = items.indexOf(document.activeElement);
    const moves = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: items.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      items[(moves[event.key] + items.length) % items.length].focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation(); // the drawer's own Escape stays shut
      this.closeMenu();
    } else if (event.key === "Tab") {
      this.closeMenu({ focus: false });
    }
  }

  focusMenuButton(id) {
    this.list.querySelector(`.conversation-item[data-conversation-id="${CSS.escape(String(id))}"] .item-menu-button`)?.focus();
  }

  // ---------------------------------------------------------------- actions

  // Every copy of a conversation (the list and the search results) gets the same change.
  update(id, changes) {
    for (const rows of [this.conversations, this.results || []]) {
      const row = rows.find((c) => String(c.id) === String(id));
      if (row) Object.assign(row, changes);
    }
  }

  // Renamed elsewhere (another tab): the row shows the new title.
  retitle(id, title) {
    this.update(id, { title });
    if (this.results === null) this.render();
  }

  take(id) {
    const taken = [];
    for (const rows of [this.conversations, this.results || []]) {
      const at = rows.findIndex((c) => String(c.id) === String(id));
      if (at >= 0) taken.push([rows, rows.splice(at, 1)[0]]);
    }
    return () => {
      for (const [rows, row] of taken) rows.push(row);
    };
  }

  startRename(conversation, wrapper) {
    const link = wrapper.querySelector(".conversation-main");
    const input = el("input", {
      className: "rename-input",
      attrs: { type: "text", maxlength: "200", "aria-label": interpolate(gettext("New title for %s"), [titleOf(conversation)]), value: conversation.title || "" },
    });
    link.replaceWith(input);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title !== (conversation.title || "")) {
        try {
          const data = await api("PATCH", apiUrl(conversation.id), { title });
          this.update(conversation.id, { title: data.title });
          document.dispatchEvent(new CustomEvent("sidebar:renamed", { detail: { id: data.id, title: titleOf(data) } }));
        } catch (error) {
          this.status.textContent = interpolate(gettext("Could not rename: %s"), [error.message]);
        }
      }
      this.render();
      this.focusMenuButton(conversation.id);
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        finish(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
  }

  async setPinned(conversation, pinned) {
    try {
      const data = await api(pinned ? "POST" : "DELETE", apiUrl(conversation.id, "pin/"));
      this.update(conversation.id, { pinned: data.pinned, pinned_at: data.pinned_at });
      this.render();
      this.focusMenuButton(conversation.id);
    } catch (error) {
      this.status.textContent = interpolate(pinned ? gettext("Could not pin: %s") : gettext("Could not unpin: %s"), [error.message]);
    }
  }

  // The row of a conversation, for an action started outside the list (the page's header).
  row(id, title) {
    return this.conversations.find((c) => String(c.id) === String(id)) || { id, title };
  }

  // Archive and delete behave the same from the list and from the header: at once, with
  // Undo; the conversation on screen is left for a new chat when the toast runs out.
  async archive(conversation) {
    this.toast.settle();
    try {
      await api("PATCH", apiUrl(conversation.id), { archived: true });
    } catch (error) {
      this.status.textContent = interpolate(gettext("Could not archive: %s"), [error.message]);
      return;
    }
    const restore = this.take(conversation.id);
    this.render();
    this.toast.show(interpolate(gettext("Archived “%s”."), [titleOf(conversation)]), {
      undo: async () => {
        try {
          await api("PATCH", apiUrl(conversation.id), { archived: false });
          restore();
          this.render();
          this.focusMenuButton(conversation.id);
        } catch (error) {
          this.status.textContent = interpolate(gettext("Could not undo: %s"), [error.message]);
        }
      },
      commit: () => {
        if (this.isCurrent(conversation.id)) window.location.assign("/");
      },
    });
  }

  remove(conversation) {
    this.toast.settle();
    const restore = this.take(conversation.id);
    this.render();
    this.toast.show(interpolate(gettext("Deleted “%s”."), [titleOf(conversation)]), {
      undo: () => {
        restore();
        this.render();
        this.focusMenuButton(conversation.id);
      },
      commit: async () => {
        try {
          await api("DELETE", apiUrl(conversation.id));
        } catch (error) {
          restore();
          this.render();
          this.status.textContent = interpolate(gettext("Could not delete: %s"), [error.message]);
          return;
        }
        this.onDeleted(conversation.id);
        if (this.isCurrent(conversation.id)) window.location.assign("/");
      },
    });
  }

  // ---------------------------------------------------------------- search

  onSearchInput() {
    window.clearTimeout(this.searchTimer);
    this.searchTimer = window.setTimeout(() => this.runSearch(this.search.value.trim()), SEARCH_DELAY_MS);
  }

  async runSearch(query) {
    this.query = query;
    this.searchAbort?.abort();
    if (!query) {
      this.results = null;
      this.render();
      return;
    }
    const controller = new AbortController();
    this.searchAbort = controller;
    this.status.textContent = gettext("Searching…");
    try {
      const response = await fetch(`/api/conversations/?q=${encodeURIComponent(query)}`, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(String(response.status));
      const data = await response.json();
      if (controller.signal.aborted) return;
      this.results = Array.isArray(data) ? data : data.results || [];
      this.render();
    } catch (error) {
      if (error.name === "AbortError") return;
      this.status.textContent = gettext("Search is not available right now.");
    }
  }

  // Deleted in another tab or on another device: gone from the list, with no Undo to offer.
  forget(id) {
    this.conversations = this.conversations.filter((c) => String(c.id) !== String(id));
    if (this.results === null) this.render();
  }

  // The current conversation moved to the top (a message was sent) or was renamed.
  touch(id, changes = {}) {
    const existing = this.conversations.find((c) => String(c.id) === String(id));
    if (existing) Object.assign(existing, changes);
    else this.conversations.push({ id, title: "", ...changes });
    if (this.results === null) this.render();
  }
}

// One toast at a time: a new one settles the previous (its commit runs now).
class UndoToast {
  constructor(root, { refocus }) {
    this.root = root;
    this.refocus = refocus;
    this.text = root.querySelector("[data-toast-text]");
    this.undoButton = root.querySelector("[data-toast-undo]");
    this.pending = null;
    this.undoButton.addEventListener("click", () => {
      const pending = this.pending;
      if (!pending) return;
      this.clear();
      pending.undo();
    });
  }

  show(text, { undo, commit = null }) {
    this.settle();
    this.text.textContent = text;
    this.root.hidden = false;
    const pending = { undo, commit, timer: window.setTimeout(() => this.settle(), UNDO_MS) };
    this.pending = pending;
    // The item that had focus is gone; Undo is where a keyboard user's next step is.
    this.undoButton.focus();
  }

  clear() {
    if (this.pending) window.clearTimeout(this.pending.timer);
    this.pending = null;
    const hadFocus = this.root.contains(document.activeElement);
    this.root.hidden = true;
    if (hadFocus) this.refocus.focus();
  }

  settle() {
    const pending = this.pending;
    this.clear();
    pending?.commit?.();
  }
}
