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

// Where the TeX that starts with the "$" at `start` ends (after its closing "$"), or -1: the
// rule math.js typesets by ("$5 and $10" is money). The same as agents/rendering.py's.
const WORD = /[A-Za-z0-9_]/;
function mathSpanEnd(src, start) {
  if (src.startsWith("$$", start)) {
    const close = src.indexOf("$$", start + 2);
    if (close <= start + 2 || src.slice(start + 2, close).includes("$")) return -1;
    return close + 2;
  }
  if (start > 0 && ("\\$".includes(src[start - 1]) || WORD.test(src[start - 1]))) return -1;
  const close = src.indexOf("$", start + 1);
  if (close <= start + 1 || src.slice(start + 1, close).includes("\n")) return -1;
  if (/\s/.test(src[start + 1]) || /[\s\\]/.test(src[close - 1])) return -1;
  if (close + 1 < src.length && (src[close + 1] === "$" || WORD.test(src[close + 1]))) return -1;
  return close + 1;
}

// TeX passes through Markdown untouched: its "\,", "\{" and "\\" would otherwise be read as
// Markdown escapes (and "_" as emphasis) before KaTeX sees them.
markdown.inline.ruler.before("escape", "math_as_text", (state, silent) => {
  if (state.src[state.pos] !== "$") return false;
  const end = mathSpanEnd(state.src.slice(0, state.posMax), state.pos);
  if (end === -1) return false;
  if (!silent) state.push("text", "", 0).content = state.src.slice(state.pos, end);
  state.pos = end;
  return true;
});

// Markdown text from the model, as a sanitised fragment ready to insert.
export function renderMarkdown(text) {
  return purifier.sanitize(markdown.render(text || ""), PURIFY_OPTIONS);
}
