// "Share…" in the conversation's menu: create, copy and revoke the read-only link
// (docs/protocol.md, "HTTP API": /api/conversations/<id>/share/). chat.js calls
// `setUpShare` once; it needs only the dialog's markup in chat.html and `urls.share`.

import { copyAndSay } from "./answer_tools.js";
import { api } from "./dom.js";
import { gettext, interpolate } from "./i18n.js";

export function setUpShare(urls) {
  const url = urls && urls.share;
  const opener = document.getElementById("share-button");
  const dialog = document.getElementById("share-dialog");
  if (!url || !opener || !dialog) return;

  const linkRow = document.getElementById("share-link");
  const linkInput = document.getElementById("share-url");
  const copy = document.getElementById("share-copy");
  const create = document.getElementById("share-create");
  const revoke = document.getElementById("share-revoke");
  const status = document.getElementById("share-status");

  const show = (share) => {
    linkRow.hidden = !share;
    linkInput.value = share ? share.url : "";
    revoke.hidden = !share;
    create.hidden = Boolean(share);
  };

  const call = async (method, doneText) => {
    try {
      const data = await api(method, url);
      show(data ? data.share : null);
      status.textContent = doneText;
    } catch (error) {
      status.textContent = interpolate(gettext("Could not do that: %s"), [error.message]);
    }
  };

  opener.addEventListener("click", async () => {
    const menu = opener.closest("details");
    if (menu) menu.open = false;
    status.textContent = "";
    dialog.showModal();
    await call("GET", "");
  });
  create.addEventListener("click", () => call("POST", gettext("Link created. Anyone you give it to can read this conversation.")));
  revoke.addEventListener("click", () => call("DELETE", gettext("Link revoked. It no longer opens.")));
  copy.addEventListener("click", () => copyAndSay(copy, linkInput.value));
  for (const closer of dialog.querySelectorAll("[data-close]")) {
    closer.addEventListener("click", () => dialog.close());
  }
  dialog.addEventListener("close", () => opener.closest("details")?.querySelector("summary")?.focus());
}
