"""No English words reach the page from a script except through the catalogue (issue 42).

The scripts in static/js/ put text on the page in a few ways: an ``el()`` option ``text``,
an assignment to ``textContent``/``innerText``/``title``/``placeholder``, an ``aria-label``,
``title`` or ``placeholder`` attribute, and the notice and toast functions. A string literal
in one of those places is never translated; the words must come from ``gettext`` (or
``ngettext``/``interpolate`` around it). Symbols, numbers and the site's name are not words
to translate.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "static" / "js"

_LITERAL = r"""("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)"""
SHOWN_LITERALS = [
    re.compile(rf"\btext\s*:\s*{_LITERAL}"),
    re.compile(rf"\.(?:textContent|innerText|title|placeholder)\s*=\s*{_LITERAL}"),
    re.compile(rf"""["']?(?:aria-label|title|placeholder)["']?\s*:\s*{_LITERAL}"""),
    re.compile(rf"""setAttribute\(\s*["'](?:aria-label|title|placeholder)["']\s*,\s*{_LITERAL}"""),
    re.compile(rf"\b(?:showNotice|toast\.show)\(\s*{_LITERAL}"),
]
NOT_WORDS = {"chatsite"}
_PLACEHOLDER = re.compile(r"\$\{(?:[^{}]|\{[^{}]*\})*\}")
_WORD = re.compile(r"[A-Za-z]{2,}")


def untranslated(source: str) -> list[tuple[int, str]]:
    """(line, literal) for each literal in ``source`` that shows English words as they are."""
    found = []
    for pattern in SHOWN_LITERALS:
        for match in pattern.finditer(source):
            literal = match.group(1)
            shown = _PLACEHOLDER.sub("", literal[1:-1])
            words = {word.lower() for word in _WORD.findall(shown)} - NOT_WORDS
            if words:
                found.append((source.count("\n", 0, match.start()) + 1, literal))
    return sorted(found)


@pytest.mark.parametrize(
    "line",
    [
        'el("span", { className: "muted small", text: "edited and asked again" })',
        'el("span", { className: "visually-hidden", text: " (answering)" })',
        "status.textContent = `${count} conversations found.`;",
        'el("button", { attrs: { "aria-label": "Copy the code" } })',
        'button.setAttribute("title", "Close");',
        "showNotice('Could not send.');",
        'this.toast.show("Deleted.", { undo })',
    ],
)
def test_an_english_literal_shown_by_a_script_is_found(line):
    assert untranslated(line), line


@pytest.mark.parametrize(
    "line",
    [
        'el("span", { text: gettext("edited and asked again") })',
        'el("span", { text: ` ${gettext("(answering)")}` })',
        'el("span", { className: "branch-position", text: `${position} / ${count}` })',
        'el("button", { text: "‹", attrs: { "aria-label": gettext("Previous version") } })',
        "document.title = `${title} · chatsite`;",
        "node.textContent = label;",
    ],
)
def test_translated_text_symbols_and_the_sites_name_pass(line):
    assert untranslated(line) == [], line


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.js")), ids=lambda path: path.name)
def test_no_script_shows_an_untranslated_english_literal(script):
    found = untranslated(script.read_text(encoding="utf-8"))
    assert found == [], f"{script.name}: wrap these in gettext(): {found}"
