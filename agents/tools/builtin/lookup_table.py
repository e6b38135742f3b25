"""``lookup_table``: a key-to-value table the admin defines; a miss says which keys are near."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from agents.react.tools import ToolInputError
from agents.tools.base import ConfiguredTool

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "table": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "maxProperties": 10000,
        },
        "case_sensitive": {"type": "boolean", "default": False},
    },
    "required": ["table"],
    "additionalProperties": False,
}

_MAX_SUGGESTIONS = 5
_MAX_LISTED_KEYS = 20


class LookupTable(ConfiguredTool):
    """Looks a key up in a table the admin defines."""

    read_only = True

    name = "lookup_table"
    description = "Looks up a value by its key. Input: the key."

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> dict[str, str]:
        table: Mapping[str, str] = config["table"]
        if not table:
            return {"table": "add at least one key"}
        if not config["case_sensitive"]:
            seen: dict[str, str] = {}
            for key in table:
                folded = _fold(key)
                if folded in seen:
                    return {
                        "table": f"keys {seen[folded]!r} and {key!r} differ only in case; "
                        "rename one or make the table case sensitive"
                    }
                seen[folded] = key
        return {}

    def run(self, key: str) -> str:
        table: Mapping[str, str] = self.config["table"]
        wanted = key.strip()
        if not wanted:
            raise ToolInputError("give the key to look up")
        case_sensitive = bool(self.config.get("case_sensitive", False))
        if case_sensitive:
            if wanted in table:
                return table[wanted]
        else:
            by_folded = {_fold(name): value for name, value in table.items()}
            if _fold(wanted) in by_folded:
                return by_folded[_fold(wanted)]
        # A miss is an answer, not a failure: the model reads it and may try a nearby key.
        return self._miss(wanted, list(table), case_sensitive)

    def _miss(self, wanted: str, keys: list[str], case_sensitive: bool) -> str:
        normalise = (lambda text: text) if case_sensitive else _fold
        by_normalised = {normalise(name): name for name in keys}
        near = difflib.get_close_matches(
            normalise(wanted), list(by_normalised), n=_MAX_SUGGESTIONS, cutoff=0.6
        )
        near += [
            folded
            for folded in by_normalised
            if folded not in near and (normalise(wanted) in folded or folded in normalise(wanted))
        ][: _MAX_SUGGESTIONS - len(near)]
        message = f"No entry for {wanted!r}."
        if near:
            return f"{message} Nearby keys: {', '.join(by_normalised[n] for n in near)}"
        if len(keys) <= _MAX_LISTED_KEYS:
            return f"{message} Known keys: {', '.join(keys)}"
        return f"{message} The table has {len(keys)} keys; none is close to it."


def _fold(text: str) -> str:
    return text.strip().casefold()
