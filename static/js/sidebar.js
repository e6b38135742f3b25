// The conversation list: pinned first, then the user's folders (collapsible), then date
// buckets; a ⋯ menu per item (rename, pin, move to a folder, archive, delete, export) with
// Undo for archive and delete; a select mode that archives or deletes several at once, with
// the same Undo; search with highlighted snippets.
//
// Folders: a conversation moves from its ⋯ menu ("Move to folder…", the keyboard's way) or
// by dragging it onto a folder (or onto a date group, to take it out). A pinned conversation
// stays under Pinned wherever it is filed. Deleting a folder keeps its conversations.
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
const BULK_URL = "/api/conversations/bulk/";
const DRAG_TYPE = "application/x-chatsite-conversation";
// Which folders this browser shows folded (ids), kept across pages.
const COLLAPSED_KEY = "chatsite.sidebar.collapsedFolders";
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

function folderUrl(id = null) {
  return id === null ? "/api/folders/" : `/api/folders/${encodeURIComponent(id)}/`;
}

function byName(a, b) {
  return a.name.localeCompare(b.name, pageLanguage()) || a.id - b.id;
}

function readCollapsed() {
  try {
    return new Set(JSON.parse(window.localStorage.getItem(COLLAPSED_KEY) || "[]").map(String));
  } catch {
    return new Set();
  }
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

// A field edited in place: Enter keeps what was typed, Escape gives up (and closes nothing
// else, such as the drawer), each through ``finish(save)``.
function finishOnEnterOrEscape(input, finish) {
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
}

export class Sidebar {
  constructor({ list, search, status, currentId, conversations, folders = [], toast, onDeleted, onChanged, tools = {} }) {
    this.onDeleted = onDeleted || (() => {});
    // Folders created, renamed, deleted or a conversation moved: other tabs read the list again.
    this.onChanged = onChanged || (() => {});
    this.folders = folders.slice().sort(byName);
    this.collapsed = readCollapsed();
    this.selecting = false;
    this.selected = new Set();
    this.tools = tools;
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
      // A click that replaced the menu's items (Move to folder…) left its target detached.
      if (this.openMenu && event.target.isConnected && !this.openMenu.wrapper.contains(event.target)) this.closeMenu();
    });
    tools.newFolder?.addEventListener("click", () => this.startNewFolder());
    tools.selectToggle?.addEventListener("click", () => this.setSelecting(!this.selecting));
    tools.bulkCancel?.addEventListener("click", () => this.setSelecting(false, { focus: true }));
    tools.bulkArchive?.addEventListener("click", () => this.archiveSelected());
    tools.bulkDelete?.addEventListener("click", () => this.removeSelected());
    this.listenForDrops();
    // Coming back to the tab: runs may have ended or started elsewhere, so the markers
    // (and titles, pins) are fetched again.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.refresh();
    });
    this.render();
  }

  async refresh() {
    // Not while a search, a menu, a rename, a selection or an Undo is showing: they hold the old rows.
    const busy = () => this.results !== null || this.openMenu || this.toast.pending || this.selecting || this.list.querySelector(".rename-input");
    if (busy()) return;
    try {
      const [data, folders] = await Promise.all([api("GET", "/api/conversations/?page_size=200"), api("GET", folderUrl())]);
      if (busy()) return;
      this.folders = folders.results.sort(byName);
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
    const sections = [];
    let index = 0;
    const section = (label, items, { dropFolder } = {}) => {
      const headingId = `conversation-group-${index++}`;
      const ul = el("ul", { attrs: { "aria-labelledby": headingId } });
      for (const conversation of items) ul.append(this.item(conversation));
      sections.push(
        el("section", { className: "conversation-group", dataset: dropFolder === undefined ? {} : { dropFolder } },
          el("h2", { text: label, attrs: { id: headingId } }), ul),
      );
    };
    if (searching) section(gettext("Search results"), byActivity);
    else {
      const pinned = shown.filter((c) => c.pinned).sort((a, b) => new Date(b.pinned_at || 0) - new Date(a.pinned_at || 0));
      if (pinned.length) section(gettext("Pinned"), pinned);
      const known = new Set(this.folders.map((folder) => String(folder.id)));
      const filed = new Map(this.folders.map((folder) => [String(folder.id), []]));
      for (const conversation of byActivity) {
        if (conversation.pinned) continue;
        if (conversation.folder_id != null && known.has(String(conversation.folder_id))) {
          filed.get(String(conversation.folder_id)).push(conversation);
          continue;
        }
        const label = dateBucket(new Date(conversation.updated_at));
        if (!groups.has(label)) groups.set(label, []);
        groups.get(label).push(conversation);
      }
      for (const folder of this.folders) sections.push(this.folderSection(folder, filed.get(String(folder.id))));
      for (const [label, items] of groups) section(label, items, { dropFolder: "" });
    }
    this.list.replaceChildren(...sections);
    if (!shown.length && !(this.folders.length && !searching)) {
      this.status.textContent = this.query ? gettext("No conversations match.") : gettext("No conversations yet.");
    } else {
      this.status.textContent = this.query && shown.length
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
    const checkbox = this.selecting
      ? el("input", {
          className: "select-box",
          attrs: { type: "checkbox", "aria-label": interpolate(gettext("Select %s"), [title]), checked: this.selected.has(String(conversation.id)) ? "" : null },
        })
      : null;
    checkbox?.addEventListener("change", () => {
      if (checkbox.checked) this.selected.add(String(conversation.id));
      else this.selected.delete(String(conversation.id));
      this.showSelection();
    });
    const wrapper = el(
      "li",
      {
        className: "conversation-item",
        dataset: { conversationId: conversation.id },
        // Dragging onto a folder files it; the ⋯ menu's "Move to folder…" does the same from the keyboard.
        attrs: { draggable: this.results === null && !this.selecting ? "true" : null },
      },
      checkbox,
      main,
      button,
      menu,
    );
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
    if (this.folders.length || conversation.folder_id != null) {
      const node = el("button", { text: gettext("Move to folder…"), attrs: { role: "menuitem", tabindex: "-1", type: "button" } });
      node.addEventListener("click", () => this.showMoveChoices(conversation));
      menu.append(el("li", { attrs: { role: "none" } }, node));
    }
    entry(gettext("Archive"), () => this.archive(conversation), { keepsFocus: true });
    entry(gettext("Export as Markdown"), null, { href: `${apiUrl(conversation.id, "export/")}?format=md` });
    entry(gettext("Delete"), () => this.remove(conversation), { className: "danger", keepsFocus: true });

    this.menuOpener({ wrapper, button, menu });
    return wrapper;
  }

  // A folder: its heading folds it (remembered in this browser), its ⋯ menu renames or deletes it.
  folderSection(folder, items) {
    const id = String(folder.id);
    const collapsed = this.collapsed.has(id);
    const headingId = `folder-${id}`;
    const listId = `folder-list-${id}`;
    const toggle = el(
      "button",
      {
        className: "folder-toggle",
        attrs: { type: "button", "aria-expanded": collapsed ? "false" : "true", "aria-controls": listId },
      },
      el("span", { className: "folder-caret", attrs: { "aria-hidden": "true" } }),
      el("span", { className: "folder-name", text: folder.name }),
      el("span", { className: "folder-count", text: ` (${items.length})` }),
    );
    toggle.addEventListener("click", () => {
      if (this.collapsed.has(id)) this.collapsed.delete(id);
      else this.collapsed.add(id);
      this.saveCollapsed();
      const folded = this.collapsed.has(id);
      toggle.setAttribute("aria-expanded", folded ? "false" : "true");
      ul.hidden = folded;
    });
    const menuId = `folder-menu-${id}`;
    const button = el("button", {
      className: "icon-button item-menu-button folder-menu-button",
      attrs: {
        type: "button",
        "aria-label": interpolate(gettext("More actions for the folder %s"), [folder.name]),
        "aria-haspopup": "menu",
        "aria-expanded": "false",
        "aria-controls": menuId,
      },
    }, icon("more", { size: 18 }));
    const menu = el("ul", { className: "menu-items item-menu", attrs: { id: menuId, role: "menu", "aria-label": folder.name, hidden: "" } });
    const head = el("div", { className: "folder-head" }, el("h2", { attrs: { id: headingId } }, toggle), button, menu);
    const entry = (label, action, className = "") => {
      const node = el("button", { className, text: label, attrs: { role: "menuitem", tabindex: "-1", type: "button" } });
      node.addEventListener("click", () => {
        this.closeMenu({ focus: false });
        action();
      });
      menu.append(el("li", { attrs: { role: "none" } }, node));
    };
    entry(gettext("Rename folder"), () => this.startFolderRename(folder, head));
    entry(gettext("Delete folder"), () => this.deleteFolder(folder), "danger");
    this.menuOpener({ wrapper: head, button, menu });
    const ul = el("ul", { attrs: { id: listId, "aria-labelledby": headingId, hidden: collapsed ? "" : null } });
    for (const conversation of items) ul.append(this.item(conversation));
    if (!items.length) ul.append(el("li", { className: "folder-empty muted small", text: gettext("No conversations in this folder.") }));
    return el("section", { className: "conversation-group folder-group", dataset: { folderId: id, dropFolder: id } }, head, ul);
  }

  saveCollapsed() {
    try {
      window.localStorage.setItem(COLLAPSED_KEY, JSON.stringify([...this.collapsed]));
    } catch {
      // Private browsing may refuse storage: the folds then last as long as the page.
    }
  }

  menuOpener(opened) {
    const { button, menu } = opened;
    button.addEventListener("click", () => {
      if (this.openMenu?.button === button) this.closeMenu();
      else this.showMenu({ ...opened });
    });
    button.addEventListener("keydown", (event) => {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        this.showMenu({ ...opened }, event.key === "ArrowUp" ? -1 : 0);
      }
    });
    menu.addEventListener("keydown", (event) => this.onMenuKey(event));
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
    opened.restore?.();
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

  focusFolder(id, selector = ".folder-menu-button") {
    this.list.querySelector(`.folder-group[data-folder-id="${CSS.escape(String(id))}"] ${selector}`)?.focus();
  }

  // "Move to folder…": the open menu's items become the places it can go, for the keyboard
  // as for the mouse; closing the menu brings its own items back.
  showMoveChoices(conversation) {
    const opened = this.openMenu;
    if (!opened) return;
    const { menu } = opened;
    const original = Array.from(menu.children);
    const choices = [];
    if (conversation.folder_id != null) choices.push([gettext("Out of its folder"), null]);
    for (const folder of this.folders) {
      if (String(folder.id) !== String(conversation.folder_id)) {
        choices.push([interpolate(gettext("Into “%s”"), [folder.name]), folder.id]);
      }
    }
    menu.replaceChildren(
      ...choices.map(([label, folderId]) => {
        const node = el("button", { text: label, attrs: { role: "menuitem", tabindex: "-1", type: "button" } });
        node.addEventListener("click", () => {
          this.closeMenu({ focus: false });
          this.move(conversation, folderId);
        });
        return el("li", { attrs: { role: "none" } }, node);
      }),
    );
    opened.restore = () => menu.replaceChildren(...original);
    this.placeMenu(menu);
    this.menuItems()[0]?.focus();
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
    finishOnEnterOrEscape(input, finish);
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

  // Archive and delete behave the same from the list, the header and the select mode: at
  // once, with Undo; the conversation on screen is left for a new chat when the toast runs out.
  archive(conversation) {
    return this.archiveRows([conversation], {
      send: (archived) => api("PATCH", apiUrl(conversation.id), { archived }),
      text: interpolate(gettext("Archived “%s”."), [titleOf(conversation)]),
    });
  }

  remove(conversation) {
    this.removeRows([conversation], {
      send: () => api("DELETE", apiUrl(conversation.id)),
      text: interpolate(gettext("Deleted “%s”."), [titleOf(conversation)]),
    });
  }

  archiveSelected() {
    const rows = this.selectedRows();
    if (!rows.length) return;
    const ids = rows.map((row) => row.id);
    return this.archiveRows(rows, {
      send: (archived) => api("POST", BULK_URL, { action: archived ? "archive" : "unarchive", ids }),
      text: interpolate(ngettext("Archived %s conversation.", "Archived %s conversations.", rows.length), [rows.length]),
    });
  }

  removeSelected() {
    const rows = this.selectedRows();
    if (!rows.length) return;
    const ids = rows.map((row) => row.id);
    this.removeRows(rows, {
      send: () => api("POST", BULK_URL, { action: "delete", ids }),
      text: interpolate(ngettext("Deleted %s conversation.", "Deleted %s conversations.", rows.length), [rows.length]),
    });
  }

  // Archived at once; Undo brings them back.
  async archiveRows(rows, { send, text }) {
    this.toast.settle();
    try {
      await send(true);
    } catch (error) {
      this.status.textContent = interpolate(gettext("Could not archive: %s"), [error.message]);
      return;
    }
    const restores = rows.map((row) => this.take(row.id));
    this.leaveSelecting();
    this.render();
    this.toast.show(text, {
      undo: async () => {
        try {
          await send(false);
          for (const restore of restores) restore();
          this.render();
          this.focusMenuButton(rows[0].id);
        } catch (error) {
          this.status.textContent = interpolate(gettext("Could not undo: %s"), [error.message]);
        }
      },
      commit: () => {
        if (rows.some((row) => this.isCurrent(row.id))) window.location.assign("/");
      },
    });
  }

  // Only hidden until the toast runs out: Undo sends nothing, and a closed tab loses nothing.
  removeRows(rows, { send, text }) {
    this.toast.settle();
    const restores = rows.map((row) => this.take(row.id));
    this.leaveSelecting();
    this.render();
    const putBack = () => {
      for (const restore of restores) restore();
      this.render();
    };
    this.toast.show(text, {
      undo: () => {
        putBack();
        this.focusMenuButton(rows[0].id);
      },
      commit: async () => {
        try {
          await send();
        } catch (error) {
          putBack();
          this.status.textContent = interpolate(gettext("Could not delete: %s"), [error.message]);
          return;
        }
        for (const row of rows) this.onDeleted(row.id);
        if (rows.some((row) => this.isCurrent(row.id))) window.location.assign("/");
      },
    });
  }

  // ---------------------------------------------------------------- select mode

  setSelecting(on, { focus = false } = {}) {
    this.closeMenu({ focus: false });
    this.selecting = on;
    this.selected.clear();
    this.render();
    this.showSelection();
    if (on) this.list.querySelector(".select-box")?.focus();
    else if (focus) this.tools.selectToggle?.focus();
  }

  // After a bulk action: the rows are gone, the toast's Undo has the focus.
  leaveSelecting() {
    if (!this.selecting) return;
    this.selecting = false;
    this.selected.clear();
    this.showSelection();
  }

  showSelection() {
    const { selectToggle, bulkBar, bulkCount, bulkArchive, bulkDelete } = this.tools;
    selectToggle?.setAttribute("aria-pressed", this.selecting ? "true" : "false");
    if (bulkBar) bulkBar.hidden = !this.selecting;
    const count = this.selected.size;
    if (bulkCount) bulkCount.textContent = this.selecting ? interpolate(ngettext("%s selected", "%s selected", count), [count]) : "";
    for (const button of [bulkArchive, bulkDelete]) if (button) button.disabled = count === 0;
  }

  selectedRows() {
    const shown = this.results !== null ? this.results : this.conversations;
    return shown.filter((row) => this.selected.has(String(row.id)));
  }

  // ---------------------------------------------------------------- folders

  async move(conversation, folderId) {
    const title = titleOf(conversation);
    try {
      const data = await api("PATCH", apiUrl(conversation.id), { folder: folderId });
      this.update(conversation.id, { folder_id: data.folder_id });
    } catch (error) {
      this.status.textContent = interpolate(gettext("Could not move: %s"), [error.message]);
      return;
    }
    if (folderId !== null && this.collapsed.delete(String(folderId))) this.saveCollapsed();
    this.render();
    this.focusMenuButton(conversation.id);
    const folder = this.folders.find((f) => String(f.id) === String(folderId));
    this.status.textContent = folder
      ? interpolate(gettext("Moved “%(title)s” into “%(folder)s”."), { title, folder: folder.name }, true)
      : interpolate(gettext("Took “%s” out of its folder."), [title]);
    this.onChanged();
  }

  // A name field in place of a heading: Enter saves, Escape gives up, leaving it saves. A
  // refused name (empty, taken) stays in the field with the reason, so nothing typed is lost.
  nameField({ label, value, onSave, onCancel }) {
    const input = el("input", { className: "rename-input folder-name-input", attrs: { type: "text", maxlength: "80", "aria-label": label, value } });
    let busy = false;
    let done = false;
    const finish = async (save) => {
      if (done || busy) return;
      const name = input.value.trim();
      if (!save || name === value.trim() || (!name && !value)) {
        done = true;
        onCancel();
        return;
      }
      busy = true;
      try {
        await onSave(name);
        done = true;
      } catch (error) {
        this.status.textContent = error.message;
        input.setAttribute("aria-invalid", "true");
        input.focus();
      } finally {
        busy = false;
      }
    };
    finishOnEnterOrEscape(input, finish);
    input.addEventListener("blur", () => {
      if (!input.hasAttribute("aria-invalid")) finish(true);
    });
    input.addEventListener("input", () => input.removeAttribute("aria-invalid"));
    return input;
  }

  startNewFolder() {
    if (this.list.querySelector(".new-folder-row")) {
      this.list.querySelector(".new-folder-row input").focus();
      return;
    }
    if (this.results !== null) {
      this.search.value = "";
      this.runSearch("");
    }
    const input = this.nameField({
      label: gettext("Name of the new folder"),
      value: "",
      onSave: async (name) => {
        let folder;
        try {
          folder = await api("POST", folderUrl(), { name });
        } catch (error) {
          throw new Error(interpolate(gettext("Could not create the folder: %s"), [error.message]));
        }
        this.folders.push(folder);
        this.folders.sort(byName);
        this.render();
        this.focusFolder(folder.id, ".folder-toggle");
        this.status.textContent = interpolate(gettext("Created the folder “%s”."), [folder.name]);
        this.onChanged();
      },
      onCancel: () => {
        this.render();
        this.tools.newFolder?.focus();
      },
    });
    this.list.prepend(el("div", { className: "new-folder-row" }, input));
    input.focus();
  }

  startFolderRename(folder, head) {
    const heading = head.querySelector("h2");
    const input = this.nameField({
      label: interpolate(gettext("New name for the folder %s"), [folder.name]),
      value: folder.name,
      onSave: async (name) => {
        try {
          const data = await api("PATCH", folderUrl(folder.id), { name });
          folder.name = data.name;
        } catch (error) {
          throw new Error(interpolate(gettext("Could not rename the folder: %s"), [error.message]));
        }
        this.folders.sort(byName);
        this.render();
        this.focusFolder(folder.id);
        this.onChanged();
      },
      onCancel: () => {
        this.render();
        this.focusFolder(folder.id);
      },
    });
    heading.replaceWith(input);
    input.focus();
    input.select();
  }

  async deleteFolder(folder) {
    if (!(await this.confirmFolderDelete(folder))) {
      this.focusFolder(folder.id);
      return;
    }
    try {
      await api("DELETE", folderUrl(folder.id));
    } catch (error) {
      this.status.textContent = interpolate(gettext("Could not delete the folder: %s"), [error.message]);
      return;
    }
    this.folders = this.folders.filter((f) => f.id !== folder.id);
    for (const rows of [this.conversations, this.results || []]) {
      for (const row of rows) if (String(row.folder_id) === String(folder.id)) row.folder_id = null;
    }
    this.render();
    this.tools.newFolder?.focus();
    this.status.textContent = interpolate(gettext("Deleted the folder “%s”; its conversations are in the list."), [folder.name]);
    this.onChanged();
  }

  // The dialog says the conversations stay; Escape or Cancel keeps the folder.
  confirmFolderDelete(folder) {
    const dialog = this.tools.folderDeleteDialog;
    dialog.querySelector("h2").textContent = interpolate(gettext("Delete the folder “%s”?"), [folder.name]);
    dialog.returnValue = "";
    dialog.showModal();
    dialog.querySelector("button[value=cancel]").focus();
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "delete"), { once: true });
    });
  }

  // Drag a conversation onto a folder to file it, onto a date group to take it out.
  listenForDrops() {
    const target = (event) => {
      if (!event.dataTransfer?.types.includes(DRAG_TYPE)) return null;
      return event.target.closest?.("[data-drop-folder]") || null;
    };
    const unmark = () => {
      for (const node of this.list.querySelectorAll(".drop-target")) node.classList.remove("drop-target");
    };
    this.list.addEventListener("dragstart", (event) => {
      const item = event.target.closest?.(".conversation-item[draggable]");
      if (!item) return;
      event.dataTransfer.setData(DRAG_TYPE, item.dataset.conversationId);
      event.dataTransfer.effectAllowed = "move";
    });
    this.list.addEventListener("dragover", (event) => {
      const group = target(event);
      if (!group) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "move";
      if (!group.classList.contains("drop-target")) {
        unmark();
        group.classList.add("drop-target");
      }
    });
    this.list.addEventListener("dragend", unmark);
    this.list.addEventListener("drop", (event) => {
      const group = target(event);
      unmark();
      if (!group) return;
      event.preventDefault();
      const conversation = this.conversations.find((c) => String(c.id) === event.dataTransfer.getData(DRAG_TYPE));
      const folderId = group.dataset.dropFolder ? Number(group.dataset.dropFolder) : null;
      if (!conversation || String(conversation.folder_id ?? "") === String(folderId ?? "")) return;
      this.move(conversation, folderId);
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
