// Code blocks in an answer: colours for the language it names (only their look: the text
// stays as it is) and a Copy button. For the chat page's answers, live and stored, and for
// the shared page's.

import hljs from "../vendor/highlight.js/highlight.js";
import { announce, el } from "./dom.js";
import { gettext } from "./i18n.js";

hljs.configure({ ignoreUnescapedHTML: true });

// The colours' stylesheet comes with the code that uses it, not with every chat page.
const STYLESHEET = new URL("../vendor/highlight.js/github.css", import.meta.url).href;
function addStylesheet() {
  if (document.querySelector(`link[href="${STYLESHEET}"]`)) return;
  document.head.append(Object.assign(document.createElement("link"), { rel: "stylesheet", href: STYLESHEET }));
}

export function decorateCode(container) {
  if (container.querySelector("pre > code")) addStylesheet();
  for (const code of container.querySelectorAll("pre > code")) {
    const language = (code.className.match(/language-([\w+#.-]+)/) || [])[1];
    if (language && hljs.getLanguage(language)) hljs.highlightElement(code);
  }
  for (const pre of container.querySelectorAll("pre")) {
    if (pre.querySelector(".copy-code")) continue;
    labelLanguage(pre);
    const button = el("button", {
      className: "copy-code",
      text: gettext("Copy"),
      attrs: { type: "button", "aria-label": gettext("Copy the code") },
    });
    button.addEventListener("click", async () => {
      const code = pre.querySelector("code") || pre;
      try {
        await navigator.clipboard.writeText(code.textContent);
        button.textContent = gettext("Copied");
      } catch {
        button.textContent = gettext("Select and copy");
      }
      announce(button.textContent);
      window.setTimeout(() => {
        button.textContent = gettext("Copy");
      }, 1500);
    });
    pre.append(button);
  }
}

// The language a block names, as a small label in its corner (the name as written: a
// language's name is not translated).
function labelLanguage(pre) {
  const language = (pre.querySelector("code")?.className.match(/language-([\w+#.-]+)/) || [])[1];
  if (!language) return;
  pre.classList.add("has-language");
  pre.prepend(el("span", { className: "code-language", attrs: { "aria-hidden": "true" } }, language));
}
