"""JSON decoding with a nesting limit, for text a model wrote.

The standard decoder recurses once per nesting level, so a reply holding a thousand nested
brackets raises ``RecursionError``, which no caller expects. ``loads`` and ``raw_decode`` first
measure the nesting depth in one linear pass and refuse anything deeper than ``MAX_DEPTH``
with a ``json.JSONDecodeError`` (a ``ValueError``), like any other invalid JSON.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100

_DECODER = json.JSONDecoder()


def nesting_depth(text: str, start: int = 0) -> tuple[int, int]:
    """The deepest nesting of the JSON value starting at ``start``, and where it ends (or the
    end of the text). Brackets inside strings do not count; nothing is validated."""
    depth = deepest = 0
    in_string = False
    position = start
    length = len(text)
    while position < length:
        char = text[position]
        if in_string:
            if char == "\\":
                position += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
            if depth <= 0:
                return deepest, position + 1
        position += 1
    return deepest, length


def _check_depth(text: str, start: int) -> None:
    deepest, _ = nesting_depth(text, start)
    if deepest > MAX_DEPTH:
        raise json.JSONDecodeError(f"nested deeper than {MAX_DEPTH} levels", text, start)


def loads(text: str) -> Any:
    """``json.loads`` that refuses values nested deeper than ``MAX_DEPTH``."""
    stripped = text.lstrip()
    _check_depth(stripped, 0)
    return json.loads(stripped)


def raw_decode(text: str, start: int) -> tuple[Any, int]:
    """``JSONDecoder.raw_decode`` at ``start`` that refuses values nested too deep."""
    _check_depth(text, start)
    return _DECODER.raw_decode(text, start)
