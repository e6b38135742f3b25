// Under each finished answer: Copy (the stored Markdown, as the model wrote it), thumbs up
// and down, and an optional comment once a thumb is chosen. The thread calls
// `decorateAnswer` when an answer is finished, live or replayed; the feedback endpoint and
// the reader's earlier feedback come with the page (`urls.feedback`, `feedback` in
// #chat-state; docs/protocol.md, "HTTP API").

import { announce, api, el } from "./dom.js";
import { gettext, interpolate } from "./i18n.js";
import { icon } from "./icons.js";

let pageConfig = null;

function config() {
  if (pageConfig) return pageConfig;
  const node = document.getElementById("chat-state");
  const state = node ? JSON.parse(node.textContent) : {};
  pageConfig = { url: (state.urls && state.urls.feedback) || "", given: state.feedback || {} };
  return pageConfig;
}

export function decorateAnswer(container, message) {
  if (!message || message.id === undefined || container.querySelector(".answer-tools")) return;
  const { url, given } = config();
  const tools = el("div", { className: "answer-tools" }, copyButton(message.content || ""));
  if (url) {
    const endpoint = url.replace("/0/", `/${message.id}/`);
    tools.append(...feedbackControls(endpoint, given[message.id] || null));
  }
  container.append(tools);
}

function copyButton(markdown) {
  const button = el("button", {
    className: "copy-answer",
    text: gettext("Copy"),
    attrs: { type: "button", "aria-label": gettext("Copy the answer as Markdown") },
  });
  button.addEventListener("click", () => copyAndSay(button, markdown));
  return button;
}

// Put `text` on the clipboard and say so on `button` for a moment, then restore its label.
export async function copyAndSay(button, text) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = gettext("Copied");
  } catch {
    button.textContent = gettext("Could not copy");
  }
  announce(button.textContent);
  window.setTimeout(() => {
    button.textContent = label;
  }, 1500);
}

function thumb(rating, label) {
  return el(
    "button",
    {
      className: `thumb thumb-${rating}`,
      attrs: { type: "button", "aria-label": label, "aria-pressed": "false", title: label },
    },
    icon("thumb", { flip: rating === "down" }),
  );
}

function feedbackControls(endpoint, initial) {
  let current = initial ? { ...initial } : null;
  const up = thumb("up", gettext("Good answer"));
  const down = thumb("down", gettext("Bad answer"));
  const status = el("span", { className: "muted small feedback-status", attrs: { role: "status" } });
  const comment = el("textarea", {
    className: "feedback-text",
    attrs: {
      rows: "2",
      maxlength: "2000",
      "aria-label": gettext("Comment on this answer (optional)"),
      placeholder: gettext("What was good or wrong? (optional)"),
    },
  });
  const save = el("button", { className: "button", text: gettext("Save comment"), attrs: { type: "submit" } });
  const form = el("form", { className: "feedback-comment" }, comment, save);

  function show() {
    up.setAttribute("aria-pressed", String(current?.rating === "up"));
    down.setAttribute("aria-pressed", String(current?.rating === "down"));
    form.hidden = !current;
    comment.value = current ? current.comment || "" : "";
  }

  async function send(rating, doneText = gettext("Thanks for the feedback.")) {
    try {
      if (rating === null) {
        await api("DELETE", endpoint);
        current = null;
        status.textContent = gettext("Feedback removed.");
      } else {
        const data = await api("PUT", endpoint, { rating, comment: comment.value.trim() });
        current = { rating: data.rating, comment: data.comment };
        status.textContent = doneText;
      }
    } catch (error) {
      status.textContent = interpolate(gettext("Could not save the feedback: %s"), [error.message]);
      return;
    }
    show();
  }

  // Pressing the chosen thumb again takes the feedback back.
  up.addEventListener("click", () => send(current?.rating === "up" ? null : "up"));
  down.addEventListener("click", () => send(current?.rating === "down" ? null : "down"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (current) send(current.rating, gettext("Comment saved."));
  });
  show();
  return [up, down, status, form];
}
