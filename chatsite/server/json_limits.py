"""Parsing JSON from clients with a bound on nesting.

``json.loads`` recurses once per level: ``[`` repeated 50,000 times raises ``RecursionError``
(an unhandled 500, a socket closed with 1011), and a few hundred levels that do parse only
cost memory and time further on. Nothing chatsite accepts nests deeper than a few levels.
Pure Python, for the API's parser and the socket alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

MAX_JSON_DEPTH = 32


class JsonTooDeep(ValueError):
    """The document nests arrays or objects deeper than allowed."""


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, **options: Any) -> Any:
    """``json.loads(text, **options)`` that refuses documents nested deeper than ``max_depth``.

    Raises ``JsonTooDeep`` for those and ``json.JSONDecodeError`` for invalid JSON.
    """
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise JsonTooDeep(f"JSON nested deeper than {max_depth} levels") from None
    if _depth_exceeds(value, max_depth):
        raise JsonTooDeep(f"JSON nested deeper than {max_depth} levels")
    return value


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    # Iterative, so checking depth cannot itself hit the recursion limit.
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
