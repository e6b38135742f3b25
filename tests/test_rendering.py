"""render_markdown: useful Markdown in, nothing that can run script out."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from agents.rendering import render_markdown, sanitize_html

SAFE_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


class _Markup(HTMLParser):
    """The tags and attributes a browser would build from the HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {name: value or "" for name, value in attrs}))


def assert_inert(html: str) -> None:
    """Only allowlisted tags, no event handlers, and links only to http(s)/mailto."""
    parser = _Markup()
    parser.feed(html)
    parser.close()
    for tag, attrs in parser.elements:
        assert tag in SAFE_TAGS, f"unexpected tag <{tag}> in {html!r}"
        for name, value in attrs.items():
            assert not name.startswith("on"), f"event handler {name} in {html!r}"
            assert name in {"href", "title", "target", "rel", "class", "start"}, name
            if name == "href":
                scheme = value.split(":", 1)[0].strip().lower() if ":" in value else ""
                assert scheme in {"", "http", "https", "mailto"}, f"unsafe href {value!r}"


def test_markdown_features_survive():
    html = render_markdown(
        "# Title\n\n**bold** and *em* and `code`\n\n- one\n- two\n\n3. three\n4. four\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint(1 < 2)\n```\n\n> quoted\n"
    )
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html
    assert "<em>em</em>" in html
    assert "<code>code</code>" in html
    assert "<ul>\n<li>one</li>" in html
    assert '<ol start="3">' in html
    assert "<table>" in html
    assert "<th>a</th>" in html
    assert "<td>2</td>" in html
    assert '<pre><code class="language-python">print(1 &lt; 2)\n</code></pre>' in html
    assert "<blockquote>" in html


def test_links_open_in_a_new_tab_without_opener_or_referrer():
    html = render_markdown("[docs](https://example.com/a?b=1&c=2)")
    assert html == (
        '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" '
        'rel="noopener noreferrer">docs</a></p>\n'
    )


def test_autolink_and_mailto_are_links():
    html = render_markdown("<https://example.com> and <mailto:a@example.com>")
    assert 'href="https://example.com"' in html
    assert 'href="mailto:a@example.com"' in html


def test_single_newlines_become_line_breaks():
    assert render_markdown("one\ntwo") == "<p>one<br>\ntwo</p>\n"


def test_empty_text_renders_nothing():
    assert render_markdown("") == ""


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
        "<img src=x onerror=alert(1)>",
        '<img src="x" onerror="alert(1)">',
        "<svg onload=alert(1)>",
        "<iframe src=javascript:alert(1)></iframe>",
        '<a href="javascript:alert(1)">x</a>',
        "<div onclick=alert(1)>click</div>",
        "<<script>script>alert(1)<</script>/script>",
        "<scr<script>ipt>alert(1)</script>",
        "<!--<script>alert(1)</script>-->",
        '<style>body{background:url("javascript:alert(1)")}</style>',
    ],
)
def test_raw_html_is_shown_as_text_not_markup(text):
    html = render_markdown(text)
    assert_inert(html)
    # The reader still sees what the model wrote, escaped.
    assert "&lt;" in html


@pytest.mark.parametrize(
    "text",
    [
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        "[click](  javascript:alert(1))",
        "[click](java\tscript:alert(1))",
        "[click](&#106;avascript:alert(1))",
        "[click](&#x6A;avascript:alert(1))",
        "[click](javascript&colon;alert(1))",
        "[click](vbscript:msgbox(1))",
        "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "[click][ref]\n\n[ref]: javascript:alert(1)",
        "<javascript:alert(1)>",
        "![x](javascript:alert(1))",
        "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    ],
)
def test_dangerous_urls_never_become_links(text):
    html = render_markdown(text)
    assert_inert(html)
    assert "href" not in html


def test_images_become_plain_links_so_nothing_loads_from_other_hosts():
    html = render_markdown("![a chart](https://example.com/chart.png)")
    assert "<img" not in html
    assert (
        '<a href="https://example.com/chart.png" target="_blank" rel="noopener noreferrer">'
        "a chart</a>"
    ) in html


def test_image_alt_text_cannot_inject_markup():
    html = render_markdown('![<img src=x onerror=alert(1)>"](https://example.com/x.png)')
    assert_inert(html)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_link_title_cannot_break_out_of_its_attribute():
    html = render_markdown('[x](https://example.com "a\\" onmouseover=\\"alert(1)")')
    assert_inert(html)
    assert 'title="a&quot; onmouseover=&quot;alert(1)"' in html


def test_code_block_language_cannot_inject_attributes_or_classes():
    html = render_markdown('```x" onclick="alert(1)\ncode\n```')
    assert_inert(html)
    assert html == "<pre><code>code\n</code></pre>\n"


def test_code_block_content_stays_text():
    html = render_markdown("```html\n<script>alert(1)</script>\n```")
    assert_inert(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        # <b> is not on the allowlist: its text stays, the tag goes; script goes with content.
        ("<b>hi</b><script>alert(1)</script>", "hi"),
        ('<p onclick="x()">hi</p>', "<p>hi</p>"),
        (
            '<a href="javascript:alert(1)">hi</a>',
            '<a target="_blank" rel="noopener noreferrer">hi</a>',
        ),
        (
            '<a href="https://e.com" target="_self" rel="opener">hi</a>',
            '<a href="https://e.com" target="_blank" rel="noopener noreferrer">hi</a>',
        ),
        ('<img src="x" onerror="alert(1)">', ""),
        ('<p class="banner" style="position:fixed" id="x">hi</p>', "<p>hi</p>"),
        ("<iframe srcdoc='<script>alert(1)</script>'></iframe>", ""),
        ("<form action=/x><input name=a></form>", ""),
    ],
)
def test_sanitizer_allowlist_on_raw_html(dirty, clean):
    assert sanitize_html(dirty) == clean


@pytest.mark.parametrize(
    ("text", "html"),
    [
        # TeX's backslash punctuation and underscores reach the page as written, for KaTeX.
        (r"$a\,b$", r"<p>$a\,b$</p>"),
        (r"$\{x\}$ and $\;y\!$", r"<p>$\{x\}$ and $\;y\!$</p>"),
        (r"$$\begin{matrix}a\\b\end{matrix}$$", r"<p>$$\begin{matrix}a\\b\end{matrix}$$</p>"),
        ("x $a_1 b_2$ y", "<p>x $a_1 b_2$ y</p>"),
        ("$a<b$", "<p>$a&lt;b$</p>"),
        # Not math: money, an escaped dollar, a dollar inside a word; Markdown reads them.
        (r"It costs $5 and $10, \_ok\_", "<p>It costs $5 and $10, _ok_</p>"),
        (r"\$x\_y$", "<p>$x_y$</p>"),
        (r"p$\{x\}$", r"<p>p${x}$</p>"),
    ],
)
def test_math_passes_through_markdown_untouched(text, html):
    assert render_markdown(text).strip() == html
