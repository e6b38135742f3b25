// The conversation list: grouped by day, searchable through /api/conversations/?q=.

import { el } from "./dom.js";

const SEARCH_DELAY_MS = 250;

function dayLabel(date, now = new Date()) {
  const startOf = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((startOf(now) - startOf(date)) / 86400000);
  if (days <= 0) return "Today";
  if (days === 1) return "Yesterday";
  const sameYear = date.getFullYear() === now.getFullYear();
  return date.toLocaleDateString(undefined, {
    weekday: days < 7 ? "long" : undefined,
    day: "numeric",
    month: "long",
    year: sameYear ? undefined : "numeric",
  });
}

function conversationUrl(id) {
  return `/c/${encodeURIComponent(id)}/`;
}

export class Sidebar {
  constructor({ list, search, status, currentId, conversations }) {
    this.list = list;
    this.search = search;
    this.status = status;
    this.currentId = currentId;
    this.conversations = conversations.slice();
    this.searchTimer = null;
    this.searchAbort = null;
    this.query = "";
    search.addEventListener("input", () => this.onSearchInput());
    search.form?.addEventListener("submit", (event) => {
      event.preventDefault();
      this.runSearch(search.value.trim());
    });
    this.render(this.conversations);
  }

  render(conversations, { flatLabel } = {}) {
    const groups = new Map();
    const sorted = conversations
      .slice()
      .sort((a, b) => new Date(b.updated_at) - new Date(a.updated_at));
    for (const conversation of sorted) {
      const label = flatLabel || dayLabel(new Date(conversation.updated_at));
      if (!groups.has(label)) groups.set(label, []);
      groups.get(label).push(conversation);
    }
    const sections = [];
    let index = 0;
    for (const [label, items] of groups) {
      const headingId = `conversation-group-${index++}`;
      const ul = el("ul", { attrs: { "aria-labelledby": headingId } });
      for (const conversation of items) {
        const link = el("a", {
          className: "conversation-link",
          text: conversation.title || `Conversation ${conversation.id}`,
          attrs: {
            href: conversationUrl(conversation.id),
            title: conversation.title || "",
            "aria-current": String(conversation.id) === String(this.currentId) ? "page" : null,
          },
          dataset: { conversationId: conversation.id },
        });
        ul.append(el("li", {}, link));
      }
      sections.push(
        el(
          "section",
          { className: "conversation-group" },
          el("h2", { text: label, attrs: { id: headingId } }),
          ul,
        ),
      );
    }
    this.list.replaceChildren(...sections);
    if (!conversations.length) {
      this.status.textContent = this.query ? "No conversations match." : "No conversations yet.";
    } else {
      this.status.textContent = this.query
        ? `${conversations.length} conversation${conversations.length === 1 ? "" : "s"} found.`
        : "";
    }
  }

  onSearchInput() {
    window.clearTimeout(this.searchTimer);
    this.searchTimer = window.setTimeout(
      () => this.runSearch(this.search.value.trim()),
      SEARCH_DELAY_MS,
    );
  }

  async runSearch(query) {
    this.query = query;
    this.searchAbort?.abort();
    if (!query) {
      this.render(this.conversations);
      return;
    }
    const controller = new AbortController();
    this.searchAbort = controller;
    this.status.textContent = "Searching…";
    try {
      const response = await fetch(`/api/conversations/?q=${encodeURIComponent(query)}`, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(String(response.status));
      const data = await response.json();
      if (controller.signal.aborted) return;
      const results = Array.isArray(data) ? data : data.results || [];
      this.render(results, { flatLabel: "Search results" });
    } catch (error) {
      if (error.name === "AbortError") return;
      this.status.textContent = "Search is not available right now.";
    }
  }

  // Deleted (in this tab, another one, or elsewhere): gone from the list.
  remove(id) {
    this.conversations = this.conversations.filter((c) => String(c.id) !== String(id));
    if (!this.query) this.render(this.conversations);
  }

  // The list as the server has it now.
  async refresh() {
    try {
      const response = await fetch("/api/conversations/", {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      if (!response.ok) return;
      const data = await response.json();
      this.conversations = Array.isArray(data) ? data : data.results || [];
      if (!this.query) this.render(this.conversations);
    } catch {
      // Offline: keep the list we have.
    }
  }

  // The current conversation moved to the top (a message was sent) or was renamed.
  touch(id, changes = {}) {
    const existing = this.conversations.find((c) => String(c.id) === String(id));
    if (existing) Object.assign(existing, changes);
    else this.conversations.push({ id, title: "", ...changes });
    if (!this.query) this.render(this.conversations);
  }
}
