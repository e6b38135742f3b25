"""The chat page's scripts as two bundles made from the modules (chatsite/server/static_bundles.py),
and its HTML compressed on the way out (chatsite/server/compression.py)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.http import StreamingHttpResponse
from django.test import RequestFactory

from chatsite.server.compression import PageCompressionMiddleware
from chatsite.server.static_bundles import BUNDLES, BundleError, build_bundles

JS = Path(settings.BASE_DIR) / "static" / "js"
TWO = {"js/start.bundle.js": "js/start.js", "js/app.bundle.js": "js/app.js"}


def _modules(folder: Path, **sources: str) -> Path:
    for name, text in sources.items():
        (folder / f"{name}.js").write_text(text, encoding="utf-8")
    return folder


def test_the_first_bundle_holds_only_what_the_first_paint_needs():
    bundles = build_bundles(JS)
    start, app = bundles["js/chat_start.bundle.js"], bundles["js/chat.bundle.js"]
    start_modules = re.findall(r"^// ---- (\w+)\.js$", start, re.M)
    assert start_modules[-1] == "chat_start"
    assert {"sidebar", "chat_sidebar", "dom", "i18n"} <= set(start_modules)
    for later in ("chat", "thread", "notifications", "attachments", "commands", "shortcuts"):
        assert later not in start_modules
    # The rest takes the shared modules from the first bundle, by its plain URL: one copy.
    app_modules = re.findall(r"^// ---- (\w+)\.js$", app, re.M)
    assert not set(app_modules) & set(start_modules)
    shared = re.search(r'^import \{ ([\w, ]*) \} from "\./chat_start\.bundle\.js";$', app, re.M)
    assert shared is not None
    assert "__module_chat_sidebar" in shared.group(1)
    assert 'import("./chat.bundle.js")' in start
    # The renderers stay modules of their own, loaded when an answer needs them.
    assert 'import("./markdown.js")' in app
    assert "../vendor/" not in app
    assert "../vendor/" not in start


def test_modules_become_functions_run_in_import_order(tmp_path):
    folder = _modules(
        tmp_path,
        start='import { greet as hello } from "./words.js";\nexport const shown = hello("a");\n',
        words='import "./setup.js";\nexport function greet(name) {\n  return `hi ${name}`;\n}\n',
        setup="globalThis.order = [];\n",
        app=(
            'import { shown } from "./start.js";\nimport { greet } from "./words.js";\n'
            'export class App {}\nimport("./start.js");\n'
        ),
    )
    bundles = build_bundles(folder, TWO)
    start = bundles["js/start.bundle.js"]
    order = [start.index(f"// ---- {name}.js") for name in ("setup", "words", "start")]
    assert order == sorted(order)
    assert "const { greet: hello } = __module_words;" in start
    assert "return { greet };" in start
    assert "return { shown };" in start
    app = bundles["js/app.bundle.js"]
    assert 'import { __module_start, __module_words } from "./start.bundle.js";' in app
    assert 'import("./start.bundle.js")' in app
    assert "return { App };" in app


def test_a_bundle_leaves_out_comment_lines_but_never_text_that_looks_like_one(tmp_path):
    folder = _modules(
        tmp_path,
        start=(
            "// Why this module exists, at length.\n"
            "export function f() {\n"
            "  // why f does this\n"
            '  return "https://example.invalid/a"; // kept: code comes first on the line\n'
            "}\n"
        ),
        app=(
            'import { f } from "./start.js";\n'
            "export const page = `<p>\n// inside a template, this is text\n</p>`;\n"
        ),
    )
    bundles = build_bundles(folder, TWO)
    start = bundles["js/start.bundle.js"]
    assert "Why this module exists" not in start
    assert "why f does this" not in start
    assert 'return "https://example.invalid/a"; // kept' in start
    assert "// inside a template, this is text" in bundles["js/app.bundle.js"]


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ('import x from "./words.js";\n', "only `import { … }"),
        ('import { a } from "../vendor/x.js";\n', "only `import { … }"),
        ("export default 1;\n", "only `export function"),
        ("const a = 1;\nexport { a };\n", "only `export function"),
        ('import { a } from "./missing.js";\n', "missing.js is imported but is not in"),
        ('import { a } from "./app.js";\n', "imports go round"),
    ],
)
def test_a_form_the_bundler_does_not_know_is_an_error_naming_the_module(tmp_path, source, error):
    folder = _modules(tmp_path, start=source, app='import { start } from "./start.js";\n')
    with pytest.raises(BundleError, match=re.escape(error)):
        build_bundles(folder, TWO)


def test_collectstatic_finds_the_bundles_and_they_follow_the_modules():
    for bundle in BUNDLES:
        path = Path(finders.find(bundle))
        assert path.read_text(encoding="utf-8") == build_bundles(JS)[bundle]
    listed = [path for finder in finders.get_finders() for path, _ in finder.list([])]
    assert set(BUNDLES) <= set(listed)


@pytest.mark.django_db
def test_the_chat_page_is_compressed(client, user):
    client.force_login(user)
    response = client.get("/", HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    html = gzip.decompress(response.content).decode()
    assert "chat_start.bundle.js" in html
    assert len(response.content) < len(html) / 2


def test_a_stream_is_not_compressed():
    # gzip would hold a live event back until it had filled a block.
    response = StreamingHttpResponse(iter([b"data: 1\n\n" * 40]), content_type="text/event-stream")
    middleware = PageCompressionMiddleware(lambda request: response)
    request = RequestFactory().get("/", HTTP_ACCEPT_ENCODING="gzip")
    assert not middleware(request).has_header("Content-Encoding")
