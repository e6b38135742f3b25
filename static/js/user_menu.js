// The user menu at the foot of the sidebar: theme, language, custom instructions, change
// password, admin (staff), sign out. A menu button with a role=menu popup, keyboard-driven
// like the sidebar's ⋯ menus. Every choice but the instructions is a submit button of a real
// form (templates/agents/_sidebar.html); a theme choice is applied at once and stored with
// fetch, without leaving the page. "Custom instructions…" opens a dialog that reads and
// stores them (/preferences/instructions/); a refusal is shown there and the text stays.

import { announce, api } from "./dom.js";
import { gettext, interpolate } from "./i18n.js";

const root = document.getElementById("user-menu");
const button = document.getElementById("user-menu-button");
const menu = document.getElementById("user-menu-items");
const form = document.getElementById("preferences-form");

function items() {
  return Array.from(menu.querySelectorAll("[role=menuitem], [role=menuitemradio]"));
}

function open(focusIndex = 0) {
  menu.hidden = false;
  button.setAttribute("aria-expanded", "true");
  items().at(focusIndex)?.focus();
}

function close({ focus = true } = {}) {
  if (menu.hidden) return;
  menu.hidden = true;
  button.setAttribute("aria-expanded", "false");
  if (focus) button.focus();
}

function applyTheme(theme) {
  const html = document.documentElement;
  html.dataset.theme = theme;
  const scheme = document.querySelector('meta[name="color-scheme"]');
  if (scheme) scheme.content = theme === "system" ? "light dark" : theme;
  for (const choice of menu.querySelectorAll("[data-theme-choice]")) {
    choice.setAttribute("aria-checked", String(choice.dataset.themeChoice === theme));
  }
}

async function chooseTheme(theme) {
  const before = document.documentElement.dataset.theme || "system";
  applyTheme(theme);
  const body = new FormData();
  body.set("theme", theme);
  try {
    await api("POST", form.action, body);
  } catch {
    applyTheme(before);
    const status = document.getElementById("search-status");
    if (status) status.textContent = gettext("Could not save the theme. Try again.");
  }
}

// ---------------------------------------------------------------- custom instructions

const instructionsDialog = document.getElementById("instructions-dialog");
const instructionsForm = document.getElementById("instructions-form");
const instructionsInput = document.getElementById("instructions-input");
const instructionsCount = document.getElementById("instructions-count");
const instructionsError = document.getElementById("instructions-error");
let instructionsLimit = 0;

function countInstructions() {
  const length = instructionsInput.value.length;
  instructionsCount.textContent = instructionsLimit
    ? interpolate(gettext("%(count)s of %(limit)s characters"), { count: length, limit: instructionsLimit }, true)
    : "";
  instructionsCount.classList.toggle("over", Boolean(instructionsLimit) && length > instructionsLimit);
}

async function openInstructions() {
  instructionsError.textContent = "";
  instructionsDialog.showModal();
  instructionsInput.focus();
  try {
    const data = await api("GET", instructionsForm.action);
    instructionsLimit = data.limit || 0;
    instructionsInput.value = data.instructions || "";
  } catch (error) {
    instructionsError.textContent = interpolate(gettext("Could not read your instructions: %s"), [error.message]);
  }
  countInstructions();
  instructionsDialog.dataset.ready = "true";
}

if (instructionsDialog && instructionsForm) {
  instructionsInput.addEventListener("input", countInstructions);
  for (const closer of instructionsDialog.querySelectorAll("[data-close]")) {
    closer.addEventListener("click", () => instructionsDialog.close());
  }
  instructionsDialog.addEventListener("close", () => {
    delete instructionsDialog.dataset.ready;
    button?.focus();
  });
  instructionsForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const save = document.getElementById("instructions-save");
    const body = new FormData();
    body.set("instructions", instructionsInput.value);
    save.disabled = true;
    try {
      const data = await api("POST", instructionsForm.action, body);
      instructionsInput.value = data.instructions;
      instructionsError.textContent = "";
      instructionsDialog.close();
      announce(gettext("Custom instructions saved."));
    } catch (error) {
      // What was typed stays in the box, to be shortened and saved again.
      instructionsError.textContent = error.message;
      instructionsInput.focus();
    } finally {
      save.disabled = false;
    }
  });
}

if (root && button && menu && form) {
  button.addEventListener("click", () => (menu.hidden ? open() : close()));
  button.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      open(event.key === "ArrowUp" ? -1 : 0);
    }
  });
  menu.addEventListener("keydown", (event) => {
    const list = items();
    const at = list.indexOf(document.activeElement);
    const moves = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: list.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      list[(moves[event.key] + list.length) % list.length].focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation(); // the mobile drawer stays open
      close();
    } else if (event.key === "Tab") {
      close({ focus: false });
    }
  });
  menu.addEventListener("click", (event) => {
    if (event.target.closest("#instructions-open")) {
      close({ focus: false });
      if (instructionsDialog) openInstructions();
      return;
    }
    const choice = event.target.closest("[data-theme-choice]");
    if (!choice) return;
    event.preventDefault();
    chooseTheme(choice.dataset.themeChoice);
    close();
  });
  document.addEventListener("click", (event) => {
    if (!root.contains(event.target)) close({ focus: false });
  });
  root.dataset.ready = "true";
}
