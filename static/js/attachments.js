// Files in the composer: the paperclip, drag and drop and paste. Each file becomes a chip
// (name, size, type, upload progress, then the server's reading state: reading, ready, or
// failed with the reason), removable until the message is sent. Uploads go as multipart
// POSTs (docs/protocol.md, "Attachments") through XMLHttpRequest, whose upload progress
// fetch cannot report; a chip then polls its file until the worker has read it.

import { announce, csrfToken, el } from "./dom.js";
import { gettext, interpolate, pageLanguage } from "./i18n.js";

const POLL_MS = 700;

export function humanSize(bytes) {
  const units = ["B", "KB", "MB", "GB"];
  let value = Number(bytes) || 0;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const digits = unit === 0 ? 0 : 1;
  return `${value.toLocaleString(pageLanguage(), { maximumFractionDigits: digits })} ${units[unit]}`;
}

function typeOf(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toUpperCase() : gettext("file");
}

export class Attachments {
  // `api`: state.attachment_api. `conversationId()`: a promise of the conversation's id,
  // created when the first file is attached to a new chat. `onReady(file)`: a file was read.
  constructor({ list, fileInput, button, dropTarget, input, api, conversationId, onReady }) {
    this.list = list;
    this.fileInput = fileInput;
    this.api = api;
    this.conversationId = conversationId;
    this.onReady = onReady || (() => {});
    this.chips = new Set();
    button.addEventListener("click", () => fileInput.click());
    fileInput.addEventListener("change", () => {
      this.add([...fileInput.files]);
      fileInput.value = "";
    });
    dropTarget.addEventListener("dragover", (event) => {
      if (![...(event.dataTransfer?.types || [])].includes("Files")) return;
      event.preventDefault();
      dropTarget.classList.add("dropping");
    });
    dropTarget.addEventListener("dragleave", () => dropTarget.classList.remove("dropping"));
    dropTarget.addEventListener("drop", (event) => {
      dropTarget.classList.remove("dropping");
      const files = [...(event.dataTransfer?.files || [])];
      if (!files.length) return;
      event.preventDefault();
      this.add(files);
    });
    input.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files || [])];
      if (!files.length) return; // text pastes as text
      event.preventDefault();
      this.add(files);
    });
  }

  add(files) {
    for (const file of files) this.upload(file);
  }

  // Files still on their way: a message sent now would be answered without them.
  busy() {
    return [...this.chips].some((chip) => chip.state === "uploading" || chip.state === "reading");
  }

  // The message went: its files stay in the conversation, their chips leave the composer.
  clearSent() {
    for (const chip of [...this.chips]) {
      if (chip.state === "ready" || chip.state === "failed") this.drop(chip);
    }
  }

  chipFor(file) {
    const name = el("span", { className: "chip-name", text: file.name });
    const meta = el("span", { className: "chip-meta", text: `${typeOf(file.name)} · ${humanSize(file.size)}` });
    const status = el("span", { className: "chip-status", attrs: { role: "status" } });
    const progress = el("progress", { attrs: { max: "100", value: "0", "aria-label": interpolate(gettext("Uploading %s"), [file.name]) } });
    const remove = el("button", {
      className: "chip-remove",
      text: "×",
      attrs: { type: "button", "aria-label": interpolate(gettext("Remove %s"), [file.name]) },
    });
    const node = el("li", { className: "chip", dataset: { state: "uploading" } }, name, meta, progress, status, remove);
    const chip = { node, status, progress, state: "uploading", id: null, xhr: null, timer: null, name: file.name };
    remove.addEventListener("click", () => this.remove(chip));
    this.chips.add(chip);
    this.list.append(node);
    this.list.hidden = false;
    return chip;
  }

  setState(chip, state, text) {
    chip.state = state;
    chip.node.dataset.state = state;
    chip.status.textContent = text;
    chip.progress.hidden = state !== "uploading";
  }

  async upload(file) {
    const chip = this.chipFor(file);
    this.setState(chip, "uploading", gettext("Uploading…"));
    if (file.size > this.api.max_bytes) {
      this.fail(chip, interpolate(gettext("%(name)s is %(size)s; files can be at most %(limit)s."), {
        name: file.name, size: humanSize(file.size), limit: humanSize(this.api.max_bytes),
      }, true));
      return;
    }
    let conversationId;
    try {
      conversationId = await this.conversationId();
    } catch (error) {
      this.fail(chip, error.message);
      return;
    }
    if (!this.chips.has(chip)) return; // removed meanwhile
    const form = new FormData();
    form.append("file", file, file.name);
    const xhr = new XMLHttpRequest();
    chip.xhr = xhr;
    xhr.open("POST", this.api.upload.replace("/0/", `/${conversationId}/`));
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.setRequestHeader("Accept", "application/json");
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) chip.progress.value = Math.round((event.loaded / event.total) * 100);
    });
    xhr.addEventListener("load", () => {
      chip.xhr = null;
      const body = xhr.response || {};
      if (xhr.status !== 201) {
        this.fail(chip, body.message || interpolate(gettext("The server answered %s."), [xhr.status]));
        return;
      }
      chip.id = body.id;
      this.follow(chip, body);
    });
    xhr.addEventListener("error", () => {
      chip.xhr = null;
      this.fail(chip, gettext("The upload failed: the connection broke."));
    });
    xhr.send(form);
  }

  follow(chip, body) {
    if (!this.chips.has(chip)) return;
    if (body.state === "ready") {
      this.setState(chip, "ready", gettext("Ready"));
      announce(interpolate(gettext("%s is ready."), [chip.name]));
      this.onReady(body);
      return;
    }
    if (body.state === "failed") {
      this.fail(chip, body.error || gettext("It could not be read."));
      return;
    }
    this.setState(chip, "reading", gettext("Reading…"));
    chip.timer = window.setTimeout(async () => {
      try {
        const response = await fetch(this.api.item.replace("/0/", `/${chip.id}/`), {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        });
        this.follow(chip, response.ok ? await response.json() : { state: "reading" });
      } catch {
        this.follow(chip, { state: "reading" });
      }
    }, POLL_MS);
  }

  fail(chip, reason) {
    this.setState(chip, "failed", interpolate(gettext("Failed: %s"), [reason]));
  }

  remove(chip) {
    chip.xhr?.abort();
    if (chip.id !== null) {
      fetch(this.api.item.replace("/0/", `/${chip.id}/`), {
        method: "DELETE",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken() },
      });
    }
    this.drop(chip);
  }

  drop(chip) {
    window.clearTimeout(chip.timer);
    chip.node.remove();
    this.chips.delete(chip);
    this.list.hidden = this.chips.size === 0;
  }
}
