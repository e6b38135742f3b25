// Small DOM helpers. Text always goes in as textContent: nothing here parses HTML.

import { gettext, interpolate } from "./i18n.js";

export function el(tag, options = {}, ...children) {
  const node = document.createElement(tag);
  const { className, text, attrs, dataset } = options;
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  for (const [name, value] of Object.entries(dataset || {})) node.dataset[name] = value;
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

export function csrfToken() {
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

// Call the JSON API (agents/api/) with the session cookie and CSRF token. Resolves to the
// parsed body (null for 204); rejects with the server's own message when it refuses. A
// FormData body goes as a form, for the views that also take the page's own form.
export async function api(method, url, body) {
  const headers = { Accept: "application/json", "X-CSRFToken": csrfToken() };
  const form = body instanceof FormData;
  if (body !== undefined && !form) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method,
    credentials: "same-origin",
    headers,
    body: body === undefined || form ? body : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = (data && (data.message || data.detail)) || interpolate(gettext("The server answered %s."), [response.status]);
    throw new Error(message);
  }
  return data;
}

export function newClientId() {
  if (window.crypto && typeof window.crypto.randomUUID === "function") {
    return window.crypto.randomUUID();
  }
  const bytes = new Uint8Array(16);
  window.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// Say `text` to screen readers through the page's polite live region (#announcer), even
// when it is the same as last time: the region is emptied first, and filled a moment later.
export function announce(text) {
  const region = document.getElementById("announcer");
  if (!region) return;
  region.textContent = "";
  window.setTimeout(() => {
    region.textContent = text;
  }, 60);
}
