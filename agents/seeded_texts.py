"""Texts a fresh install seeds into rows that staff may edit, shown in the reader's language.

The default profile's description and suggested prompts are stored in English, like any
text staff write. While a row still holds the seeded text, a page shows it translated (the
texts are in the catalogue); once staff have edited it, it is shown as they wrote it. What
is stored, and so what a prompt version's snapshot holds, never changes with the language.
"""

from __future__ import annotations

from django.utils.translation import gettext, gettext_noop

DEFAULT_PROFILE_DESCRIPTION = gettext_noop(
    "A helpful assistant that can calculate and tell the time."
)

# What the offline demo model can do (agents/llm/demo.py): arithmetic with the calculator,
# the time and date with current_time. They are fine starters for a real model too.
DEFAULT_SUGGESTED_PROMPTS = (
    gettext_noop("What is (28 + 10) * 3?"),
    gettext_noop("What is 1234 divided by 8?"),
    gettext_noop("What time is it now?"),
    gettext_noop("What is today's date?"),
)

_SEEDED = frozenset((DEFAULT_PROFILE_DESCRIPTION, *DEFAULT_SUGGESTED_PROMPTS))


def in_reader_language(text: str) -> str:
    """``text`` in the active language if it is a seeded text, else as it was written."""
    return gettext(text) if text in _SEEDED else text
