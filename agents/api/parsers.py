"""The API's JSON parser: DRF's, with a bound on nesting (``chatsite/server/json_limits.py``)."""

from __future__ import annotations

import codecs
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.settings import api_settings
from rest_framework.utils.json import strict_constant

from chatsite.server.json_limits import JsonTooDeep, loads_bounded


class DepthLimitedJSONParser(JSONParser):
    """A body nested too deeply is a 400 that says so, not a ``RecursionError`` and a 500."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            if api_settings.STRICT_JSON:  # as DRF's parser: NaN and Infinity are not JSON
                return loads_bounded(text, parse_constant=strict_constant)
            return loads_bounded(text)
        except JsonTooDeep as exc:
            raise ParseError(f"The request body is {exc}.", code="json_too_deep") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
