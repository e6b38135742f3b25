// The "/" menu of the composer: typing "/" at the start of an empty box lists the commands
// the box understands, narrowed as the user types. Up and Down choose, Enter or Tab take the
// chosen one into the box, Escape closes the list. The composer runs a command when it is
// sent (chat.js).

import { announce, el } from "./dom.js";
import { gettext, interpolate, ngettext } from "./i18n.js";

// Each command the composer runs: its name, what it does, and whether it needs a conversation.
export function commandList() {
  return [
    { name: "/compact", about: gettext("Summarise the earlier turns for the agent now"), needsConversation: true },
    { name: "/new", about: gettext("Start a new chat") },
    { name: "/shortcuts", about: gettext("Show the keyboard shortcuts") },
  ];
}

export function setUpCommandMenu(input, menu, { hasConversation }) {
  const commands = commandList().filter((command) => hasConversation || !command.needsConversation);
  let shown = [];
  let chosen = 0;

  function close() {
    menu.hidden = true;
    shown = [];
  }

  function choose(index) {
    chosen = (index + shown.length) % shown.length;
    menu.querySelectorAll("[role=option]").forEach((option, i) => {
      option.setAttribute("aria-selected", String(i === chosen));
    });
    announce(`${shown[chosen].name}: ${shown[chosen].about}`);
  }

  function take(command) {
    input.value = command.name;
    close();
    input.focus();
    input.dispatchEvent(new Event("input"));
  }

  function update() {
    const typed = input.value;
    if (!/^\/\S*$/.test(typed)) {
      close();
      return;
    }
    shown = commands.filter((command) => command.name.startsWith(typed.toLowerCase()) && command.name !== typed.toLowerCase());
    if (!shown.length) {
      close();
      return;
    }
    menu.replaceChildren(
      ...shown.map((command) => {
        const option = el(
          "li",
          { attrs: { role: "option", "aria-selected": "false" } },
          el("span", { className: "command-name", text: command.name }),
          el("span", { className: "command-about", text: command.about }),
        );
        // mousedown, not click: the box keeps its focus.
        option.addEventListener("mousedown", (event) => {
          event.preventDefault();
          take(command);
        });
        return option;
      }),
    );
    const wasHidden = menu.hidden;
    menu.hidden = false;
    chosen = 0;
    menu.querySelector("[role=option]").setAttribute("aria-selected", "true");
    if (wasHidden) {
      const count = shown.length;
      announce(interpolate(ngettext("%s command: Enter takes it.", "%s commands: Up and Down choose, Enter takes one.", count), [count]));
    }
  }

  input.addEventListener("input", update);
  input.addEventListener("blur", close);
  // Before the composer's own Enter (it sends): registered first, it stops the send.
  input.addEventListener("keydown", (event) => {
    if (menu.hidden || event.isComposing) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      choose(chosen + (event.key === "ArrowDown" ? 1 : -1));
    } else if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
      event.preventDefault();
      event.stopImmediatePropagation();
      take(shown[chosen]);
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });
}
