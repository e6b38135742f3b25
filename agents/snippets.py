"""Search-result snippets as plain segments, so the page can mark matches without HTML.

A snippet is a list of ``{"text": str, "match": bool}``: the browser turns each into a
text node or a ``<mark>``, and never parses user text (offsets would not do: Python counts
code points, JavaScript counts UTF-16 units).
"""

from __future__ import annotations

import re

SNIPPET_BEFORE = 40
SNIPPET_CHARS = 160


def snippet_segments(text: str | None, q: str) -> list[dict[str, object]] | None:
    """``text`` cut to a short window around the first match of ``q``, split into segments.

    None when there is no text or ``q`` does not occur in it (case ignored).
    """
    q = q.strip()
    if not text or not q:
        return None
    flat = " ".join(text.split())
    pattern = re.compile(re.escape(" ".join(q.split())), re.IGNORECASE)
    first = pattern.search(flat)
    if first is None:
        return None
    start = max(0, first.start() - SNIPPET_BEFORE)
    if start > 0 and " " in flat[start : first.start()]:
        start = flat.index(" ", start) + 1  # begin on a whole word
    end = min(len(flat), start + SNIPPET_CHARS)
    end = max(end, first.end())
    window = flat[start:end]
    prefix = "…" if start > 0 and not window.startswith("…") else ""
    suffix = "…" if end < len(flat) else ""
    segments: list[dict[str, object]] = []
    cursor = 0
    for match in pattern.finditer(window):
        if match.start() > cursor:
            segments.append({"text": window[cursor : match.start()], "match": False})
        segments.append({"text": match.group(), "match": True})
        cursor = match.end()
    if cursor < len(window):
        segments.append({"text": window[cursor:], "match": False})
    if prefix:
        segments.insert(0, {"text": prefix, "match": False})
    if suffix:
        segments.append({"text": suffix, "match": False})
    return segments
