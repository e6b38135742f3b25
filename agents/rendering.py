"""Markdown to HTML that is safe to insert into the chat page.

Text from a model, a tool or a user is untrusted. markdown-it turns it into HTML with raw HTML
switched off (so ``<script>`` stays text), then nh3 cleans the result against a short
allowlist. The sanitiser is the guarantee; the Markdown settings only keep the output tidy.
"""

from __future__ import annotations

import re

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote",
    "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6",
    "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "code": {"class"}}
SAFE_URL_SCHEMES = {"http", "https", "mailto"}
# Tags whose content is dropped along with the tag, rather than kept as text.
DROPPED_WITH_CONTENT = {"script", "style", "iframe", "object", "embed", "template", "noscript"}

_CODE_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")


def _keep_safe_attribute(tag: str, attribute: str, value: str) -> str | None:
    # The only class that survives is the code-block language hint the page's copy button and
    # styling read; everything else about classes is a way to borrow the page's own styles.
    if attribute == "class":
        return value if tag == "code" and _CODE_LANGUAGE_CLASS.fullmatch(value) else None
    return value


_cleaner = nh3.Cleaner(
    tags=ALLOWED_TAGS,
    clean_content_tags=DROPPED_WITH_CONTENT,
    attributes=ALLOWED_ATTRIBUTES,
    attribute_filter=_keep_safe_attribute,
    url_schemes=SAFE_URL_SCHEMES,
    link_rel="noopener noreferrer",
    set_tag_attribute_values={"a": {"target": "_blank"}},
    strip_comments=True,
)


def _image_as_link(
    self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A model could point an image at any host to learn who reads the chat; show a link."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or token.attrGet("src")
    link = Token("link_open", "a", 1, attrs={"href": token.attrGet("src") or ""})
    return self.renderToken([link], 0, options, env) + escapeHtml(str(alt)) + "</a>"


_WORD = re.compile(r"[A-Za-z0-9_]")


def _math_span_end(src: str, start: int) -> int:
    """Where the TeX that starts with the ``$`` at ``start`` ends (after its closing ``$``), or -1.

    The page typesets ``$$display$$`` and ``$inline$`` (static/js/math.js): inline math
    neither starts nor ends with a space and is not followed by a word character, so "$5 and
    $10" is money. The same rule is in static/js/markdown.js (mathSpanEnd).
    """
    if src.startswith("$$", start):
        close = src.find("$$", start + 2)
        if close <= start + 2 or "$" in src[start + 2 : close]:
            return -1
        return close + 2
    if start > 0 and (src[start - 1] in "\\$" or _WORD.match(src[start - 1])):
        return -1
    close = src.find("$", start + 1)
    if close <= start + 1 or "\n" in src[start + 1 : close]:
        return -1
    if src[start + 1].isspace() or src[close - 1].isspace() or src[close - 1] == "\\":
        return -1
    if close + 1 < len(src) and (src[close + 1] == "$" or _WORD.match(src[close + 1])):
        return -1
    return close + 1


def _math_as_text(state: StateInline, silent: bool) -> bool:
    """TeX passes through Markdown untouched: its ``\\,``, ``\\{`` and ``\\\\`` would
    otherwise be read as Markdown escapes (and ``_`` as emphasis) before KaTeX sees them."""
    if state.src[state.pos] != "$":
        return False
    end = _math_span_end(state.src[: state.posMax], state.pos)
    if end == -1:
        return False
    if not silent:
        state.push("text", "", 0).content = state.src[state.pos : end]
    state.pos = end
    return True


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("escape", "math_as_text", _math_as_text)
    md.add_render_rule("image", _image_as_link)
    return md


_md = _markdown()


def sanitize_html(html: str) -> str:
    """Clean HTML from any source down to the allowlist above."""
    return _cleaner.clean(html)


def render_markdown(text: str) -> str:
    """Markdown from an untrusted source as sanitised HTML."""
    if not text:
        return ""
    return sanitize_html(_md.render(text))
