"""Blanking out secret values, in every form they are commonly sent in.

A secret rarely comes back verbatim: a tool puts it into a URL percent-encoded, into a JSON
body escaped, into a Basic ``Authorization`` header base64-encoded, and a server that echoes
the request (or an error page that quotes it) returns it in that form. ``Redactor`` matches
each of those forms, so whatever text reaches the model, a page or a log loses all of them.
A secret that is a whole ``Authorization`` value (``Bearer <token>``, ``Token <token>``,
``Basic <base64>``) is also matched without its scheme, and Basic's decoded user and
password each on their own: a server quotes the credential, rarely the header.
Pure Python: the engine-facing tools, the model client and the admin all use it.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable, Iterable
from urllib.parse import quote, quote_plus

REDACTED = "[secret]"

# Secret values shorter than this are not redacted: replacing "a" everywhere would mangle
# every text and hide nothing worth hiding.
MIN_REDACTED_LENGTH = 4
# A base64 run this short would match by chance inside unrelated base64 text.
_MIN_BASE64_FRAGMENT = 6
_PERCENT_ESCAPE = re.compile(r"%([0-9A-F])([0-9A-F])")
# An Authorization-style value: a scheme whose credential a server may quote on its own.
_CREDENTIAL = re.compile(r"\s*(bearer|token|basic)\s+(\S+)\s*", re.IGNORECASE)


class Redactor:
    """Replaces every known encoding of the given secret values with ``[secret]``."""

    def __init__(self, secret_values: Iterable[str]) -> None:
        forms: set[str] = set()
        for value in secret_values:
            for part in secret_parts(value):
                if len(part) >= MIN_REDACTED_LENGTH:
                    forms.update(encoded_forms(part))
        # Longest first, so a form that contains another is replaced whole.
        patterns = [_pattern(form) for form in sorted(forms, key=len, reverse=True)]
        self.longest_form = max((len(form.encode()) for form in forms), default=0)
        self._pattern = re.compile("|".join(patterns)) if patterns else None

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)


def redact(text: str, secret_values: Iterable[str]) -> str:
    return Redactor(secret_values)(text)


def secret_parts(value: str) -> set[str]:
    """``value``, and for an ``Authorization`` value its credential without the scheme
    (and, for Basic, the decoded ``user:password``, the user and the password)."""
    parts = {value}
    match = _CREDENTIAL.fullmatch(value)
    if match is None:
        return parts
    scheme, credential = match.group(1).lower(), match.group(2)
    parts.add(credential)
    if scheme == "basic":
        try:
            decoded = base64.b64decode(credential, validate=True).decode()
        except ValueError:  # not base64, or not UTF-8: the credential alone is the secret
            return parts
        user, colon, password = decoded.partition(":")
        parts.update({decoded, user, password} if colon else {decoded})
    return parts


def encoded_forms(value: str) -> set[str]:
    """``value`` as written, URL-, form-, JSON- and HTML-encoded, and inside base64."""
    forms = {
        value,
        quote(value, safe=""),
        quote(value),  # "/" left as is, the default of most clients
        quote_plus(value),
        quote(quote(value, safe=""), safe=""),  # encoded twice, as a URL inside a query
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        # Escaped twice: a JSON string inside a JSON document an API quotes back.
        json.dumps(json.dumps(value)[1:-1])[1:-1],
        json.dumps(json.dumps(value, ensure_ascii=False)[1:-1], ensure_ascii=False)[1:-1],
        html.escape(value),
        html.escape(value, quote=False),
    }
    for alphabet in (base64.b64encode, base64.urlsafe_b64encode):
        forms.update(_base64_fragments(value.encode(), alphabet))
    return {form for form in forms if len(form) >= MIN_REDACTED_LENGTH}


def _base64_fragments(raw: bytes, encode: Callable[[bytes], bytes]) -> set[str]:
    """The base64 characters that only ``raw`` decides, at each of the three alignments.

    Inside ``base64("user:" + secret)`` the secret starts at some byte offset; the
    characters that encode only its bytes are the same whatever surrounds it.
    """
    fragments = set()
    for offset in range(3):
        encoded = encode(b"\0" * offset + raw).decode()
        # Characters mixing the padding prefix or whatever follows are left out.
        start = -(-offset * 4 // 3)  # ceil(offset * 4 / 3)
        end = ((offset + len(raw)) * 4) // 3
        fragment = encoded[start:end]
        if len(fragment) >= _MIN_BASE64_FRAGMENT:
            fragments.add(fragment)
    return fragments


def _pattern(form: str) -> str:
    """A regex for ``form`` whose percent escapes match in either case (%2F and %2f)."""
    escaped = re.escape(form)
    return _PERCENT_ESCAPE.sub(
        lambda match: "%" + "".join(_either_case(digit) for digit in match.groups()), escaped
    )


def _either_case(digit: str) -> str:
    return f"[{digit}{digit.lower()}]" if digit.isalpha() else digit
