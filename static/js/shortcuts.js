// Keyboard shortcuts of the chat page, and the sheet that lists them (Ctrl+/ or ?).
//
// The keys are the ones people know from other chat sites; Cmd stands for Ctrl on a Mac.
// Each action is the page's own (chat.js passes them in): a shortcut only reaches it.

import { gettext } from "./i18n.js";

const MAC = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);

// [id, keys as shown, test of a keydown]
const KEYS = [
  ["newChat", "Ctrl+Shift+O", (e) => primary(e) && e.shiftKey && e.code === "KeyO"],
  ["focusSearch", "Ctrl+K", (e) => primary(e) && !e.shiftKey && e.code === "KeyK"],
  ["copyLastAnswer", "Ctrl+Shift+C", (e) => primary(e) && e.shiftKey && e.code === "KeyC"],
  ["stop", "Esc", (e) => e.key === "Escape" && !e.shiftKey && !primary(e)],
  ["toggleSidebar", "Ctrl+Shift+S", (e) => primary(e) && e.shiftKey && e.code === "KeyS"],
  ["help", "Ctrl+/", (e) => primary(e) && (e.key === "/" || e.code === "Slash")],
];

function primary(event) {
  return MAC ? event.metaKey : event.ctrlKey;
}

function shownKeys(keys) {
  return MAC ? keys.replace("Ctrl+", "⌘").replace("Shift+", "⇧") : keys;
}

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

// Something that Escape closes first (a dialog, an open menu, the drawer) is open.
function somethingToClose() {
  return Boolean(
    document.querySelector("dialog[open], details.menu[open], .sidebar.open, .item-menu:not([hidden]), .command-menu:not([hidden])"),
  );
}

function labels() {
  return {
    newChat: gettext("New chat"),
    focusSearch: gettext("Search conversations"),
    copyLastAnswer: gettext("Copy the last answer"),
    stop: gettext("Stop the answer being written"),
    toggleSidebar: gettext("Show or hide the conversation list"),
    help: gettext("Show these shortcuts"),
  };
}

// Fills the sheet's list (a <dl> in the template) and opens it.
function openHelp(dialog) {
  const list = dialog.querySelector("[data-shortcut-list]");
  if (!list.childElementCount) {
    const names = labels();
    for (const [id, keys] of KEYS) {
      const term = document.createElement("dt");
      term.textContent = names[id];
      const key = document.createElement("dd");
      const kbd = document.createElement("kbd");
      kbd.textContent = shownKeys(keys);
      key.append(kbd);
      list.append(term, key);
    }
  }
  if (!dialog.open) dialog.showModal();
}

// Returns the sheet's opener, for the "/shortcuts" command.
export function setUpShortcuts(actions, dialog) {
  const act = { ...actions, help: () => openHelp(dialog) };
  for (const closer of dialog.querySelectorAll("[data-close]")) {
    closer.addEventListener("click", () => dialog.close());
  }
  document.getElementById("shortcuts-button")?.addEventListener("click", () => openHelp(dialog));
  // Whether Escape had something to close is read before any handler closes it.
  let escapeCloses = false;
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") escapeCloses = somethingToClose();
  }, true);
  document.addEventListener("keydown", (event) => {
    if (event.isComposing || event.defaultPrevented) return;
    // "?" outside a text field opens the sheet too.
    if (event.key === "?" && !typing(event.target) && !primary(event)) {
      event.preventDefault();
      act.help();
      return;
    }
    for (const [id, , matches] of KEYS) {
      if (!matches(event)) continue;
      if (id === "stop") {
        // Escape closes what is open first; it stops only a run that is being written.
        if (!escapeCloses && act.stop?.()) event.preventDefault();
        return;
      }
      if (!act[id]) return;
      event.preventDefault();
      act[id]();
      return;
    }
  });
  return { help: act.help };
}
