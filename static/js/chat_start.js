// The chat page's first script: the conversation list for the first paint, then the rest of
// the page (chat.js: composer, commands, files, shortcuts, menus, the bell, the thread) when
// it is first needed (docs/performance.md#first-load). A conversation's page needs it at
// once; an empty chat needs it at the person's first move (a key, the pointer, a touch,
// focus), so a first load that nobody touches costs only what it shows.
//
// What the person does before chat.js has arrived is kept and done again once it has: a
// click on a control, a sent form, Enter in the box, a shortcut, typing (its input event),
// a changed picker. Links and typing work meanwhile as they always do.

import { state } from "./chat_sidebar.js";

const input = document.getElementById("composer-input");
const SHORTCUT_CODES = new Set(["KeyO", "KeyK", "KeyC", "KeyS", "Slash"]);
const FIRST_MOVES = ["pointerdown", "pointermove", "keydown", "touchstart", "wheel", "focusin", "dragenter"];

let loaded = false;
let loading = null;
const held = []; // what to do again once chat.js has wired the page

function loadPage() {
  loading ??= import("./chat.js")
    .catch(() => {}) // no page script: the forms still post as plain forms
    .then(() => {
      loaded = true;
      for (const again of held.splice(0)) again();
    });
  return loading;
}

function hold(event, again) {
  event.preventDefault();
  event.stopImmediatePropagation();
  held.push(again);
  loadPage();
}

// Controls whose click only a script answers (a real link or submit button works alone).
const SCRIPTED = "summary, button:not([type=submit]), [role=button], [role=menuitem], [role=menuitemradio]";

function holdEarlyMoves() {
  window.addEventListener(
    "click",
    (event) => {
      if (loaded) return;
      const control = event.target.closest?.(SCRIPTED);
      if (control && !control.closest("#conversation-list")) hold(event, () => control.click());
    },
    true,
  );
  window.addEventListener(
    "submit",
    (event) => {
      if (loaded) return;
      const form = event.target;
      const submitter = event.submitter;
      hold(event, () => form.requestSubmit(submitter?.form === form ? submitter : undefined));
    },
    true,
  );
  window.addEventListener(
    "keydown",
    (event) => {
      if (loaded || event.isComposing) return;
      const send = event.key === "Enter" && !event.shiftKey && event.target === input;
      // An open dialog is closed by the browser itself, and only by this Escape, not held:
      // a held key is cancelled, which keeps the dialog open, and the copy replayed later
      // is not the person's, which the browser does not close a dialog for.
      const escape = event.key === "Escape" && !document.querySelector("dialog[open]");
      const shortcut = escape || ((event.ctrlKey || event.metaKey) && SHORTCUT_CODES.has(event.code));
      // Arrows and the like on a scripted control (a menu's button); Enter and Space click it
      // (the click is held), Tab moves on by itself.
      const onControl =
        !["Tab", "Enter", " "].includes(event.key) && Boolean(event.target.closest?.(`${SCRIPTED}, [role=menu]`));
      if (!send && !shortcut && !onControl) return;
      const { key, code, ctrlKey, metaKey, shiftKey, altKey, target } = event;
      hold(event, () =>
        target.dispatchEvent(
          new KeyboardEvent("keydown", { key, code, ctrlKey, metaKey, shiftKey, altKey, bubbles: true, cancelable: true }),
        ),
      );
    },
    true,
  );
  for (const type of ["input", "change"]) {
    window.addEventListener(
      type,
      (event) => {
        if (loaded) return;
        const target = event.target;
        held.push(() => target.dispatchEvent(new Event(type, { bubbles: true })));
        loadPage();
      },
      true,
    );
  }
  // A file dropped before the page can take it must not replace the page.
  for (const type of ["dragover", "drop"]) {
    window.addEventListener(type, (event) => {
      if (!loaded) event.preventDefault();
    });
  }
}

// On a conversation's page too: a tap on the drawer's button while chat.js is on its way
// opens the drawer once it has arrived.
holdEarlyMoves();
if (state.conversation) {
  loadPage();
} else {
  input.focus(); // before listening: the page's own focus is not the person's first move
  const firstMove = () => {
    for (const type of FIRST_MOVES) window.removeEventListener(type, firstMove, true);
    loadPage();
  };
  for (const type of FIRST_MOVES) window.addEventListener(type, firstMove, { capture: true, passive: true });
  // Enter in the box sends from now on, and the user menu opens (chat.js is fetched then,
  // what was done meanwhile is done again): browser tests wait for these.
  document.documentElement.dataset.chatReady = "true";
  const userMenu = document.getElementById("user-menu");
  if (userMenu) userMenu.dataset.ready = "true";
}
