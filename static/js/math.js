// Math in an answer: `$…$` inline and `$$…$$` on its own, typeset by KaTeX (vendored). Loaded
// only when an answer holds a dollar sign (thread.js), with its stylesheet.
//
// It works on the rendered answer's text, outside code: what Markdown left of the TeX. KaTeX
// builds the formula as elements (no HTML string, no inline style attribute, which the
// Content-Security-Policy would refuse), with MathML beside it for screen readers. A formula
// KaTeX cannot read stays as its text.

import katex from "../vendor/katex/katex.js";

const STYLESHEET = new URL("../vendor/katex/katex.css", import.meta.url).href;

// $$display$$, or $inline$ that neither starts nor ends with a space and is not followed by a
// digit: "$5 and $10" is money, not math.
const MATH = /\$\$([^$]+?)\$\$|(?<![\\$\w])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$(?![\w$])/g;
const SKIP = "code, pre, .katex, a";

function addStylesheet() {
  if (document.querySelector(`link[href="${STYLESHEET}"]`)) return;
  document.head.append(Object.assign(document.createElement("link"), { rel: "stylesheet", href: STYLESHEET }));
}

function formula(tex, displayMode) {
  const holder = document.createElement("span");
  holder.className = displayMode ? "math math-display" : "math";
  try {
    katex.render(tex, holder, { displayMode, throwOnError: true, output: "htmlAndMathml" });
  } catch {
    return null;
  }
  return holder;
}

function typesetText(node) {
  const text = node.nodeValue;
  MATH.lastIndex = 0;
  if (!MATH.test(text)) return;
  MATH.lastIndex = 0;
  const pieces = document.createDocumentFragment();
  let at = 0;
  for (const match of text.matchAll(MATH)) {
    const display = match[1] !== undefined;
    const typeset = formula((display ? match[1] : match[2]).trim(), display);
    if (!typeset) continue;
    pieces.append(text.slice(at, match.index), typeset);
    at = match.index + match[0].length;
  }
  if (at === 0) return;
  addStylesheet();
  pieces.append(text.slice(at));
  node.replaceWith(pieces);
}

export function typesetMath(container) {
  const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) =>
      node.nodeValue.includes("$") && !node.parentElement.closest(SKIP)
        ? NodeFilter.FILTER_ACCEPT
        : NodeFilter.FILTER_REJECT,
  });
  const found = [];
  while (walker.nextNode()) found.push(walker.currentNode);
  for (const node of found) typesetText(node);
}
