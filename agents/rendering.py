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


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    md.enable(["table", "strikethrough"])
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
