// Markdown in the browser, for an answer while it streams: the same rules as the server's
// agents/rendering.py (markdown-it "commonmark" with tables and strikethrough, line breaks
// kept, raw HTML off, images shown as links), cleaned by DOMPurify against the same
// allowlist as the server's nh3. When the run ends, the server's HTML replaces this one and
// must look the same; both get code highlighting and copy buttons from code_blocks.js.

import MarkdownIt from "../vendor/markdown-it/markdown-it.js";
import DOMPurify from "../vendor/dompurify/purify.js";

// agents/rendering.py: ALLOWED_TAGS, ALLOWED_ATTRIBUTES, SAFE_URL_SCHEMES, the class filter.
const ALLOWED_TAGS = [
  "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote",
  "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6",
  "table", "thead", "tbody", "tr", "th", "td",
];
const ALLOWED_ATTRIBUTES = { a: ["href", "title"], ol: ["start"], code: ["class"] };
const CODE_LANGUAGE_CLASS = /^language-[A-Za-z0-9_+#.-]{1,40}$/;
// http, https and mailto, or a URL without a scheme (DOMPurify's own default, narrowed).
const SAFE_URL = /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i;

const purifier = DOMPurify(window);
purifier.addHook("uponSanitizeAttribute", (node, data) => {
  const allowed = ALLOWED_ATTRIBUTES[node.nodeName.toLowerCase()] || [];
  if (!allowed.includes(data.attrName)) data.keepAttr = false;
  else if (data.attrName === "class" && !CODE_LANGUAGE_CLASS.test(data.attrValue)) {
    data.keepAttr = false;
  }
});
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A") {
    node.setAttribute("rel", "noopener noreferrer");
    node.setAttribute("target", "_blank");
  }
});
const PURIFY_OPTIONS = {
  ALLOWED_TAGS,
  ALLOWED_ATTR: ["href", "title", "start", "class"],
  ALLOWED_URI_REGEXP: SAFE_URL,
  RETURN_DOM_FRAGMENT: true,
};

const markdown = new MarkdownIt("commonmark", { html: false, breaks: true });
markdown.enable(["table", "strikethrough"]);
// A model could point an image at any host to learn who reads the chat; show a link.
markdown.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const src = token.attrGet("src") || "";
  const alt = self.renderInlineAsText(token.children || [], options, env) || src;
  return `<a href="${markdown.utils.escapeHtml(src)}">${markdown.utils.escapeHtml(alt)}</a>`;
};

// Markdown text from the model, as a sanitised fragment ready to insert.
export function renderMarkdown(text) {
  return purifier.sanitize(markdown.render(text || ""), PURIFY_OPTIONS);
}
