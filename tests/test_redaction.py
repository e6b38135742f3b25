"""agents/redaction.py: a secret is blanked out in every form a request can carry it."""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import quote, quote_plus

import pytest

from agents.redaction import REDACTED, Redactor, redact

SECRETS = ['k+y/9=z&w%41"q', "sk-live/AbC+dEf==", "pa ss&wo=rd%"]


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s,
        lambda s: quote(s, safe=""),
        lambda s: re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(s, safe="")),
        lambda s: quote(s),
        lambda s: quote_plus(s),
        lambda s: quote(quote(s, safe=""), safe=""),
        lambda s: json.dumps(s)[1:-1],
        lambda s: html.escape(s),
    ],
    ids=["literal", "url", "url-lower", "url-path", "form", "url-twice", "json", "html"],
)
def test_every_encoding_of_a_secret_is_blanked(secret, encode):
    text = f"before {encode(secret)} after"
    assert redact(text, [secret]) == f"before {REDACTED} after"


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("prefix", ["", "u:", "me:", "user:"])
def test_a_secret_inside_base64_is_blanked_at_any_offset(secret, prefix):
    """Basic auth: base64("user:" + secret); the secret's characters depend on the offset."""
    header = "Basic " + base64.b64encode(f"{prefix}{secret}".encode()).decode()
    redacted = redact(header, [secret])
    assert REDACTED in redacted
    # What is left cannot be decoded back to the secret.
    leftover = redacted.replace("Basic ", "").replace(REDACTED, "")
    assert len(leftover) <= len(prefix) * 4 // 3 + 6


def test_text_without_the_secret_is_left_alone():
    text = 'HTTP 200 OK\n\n{"weather": "sunny", "token": "[none]", "b64": "aGVsbG8gd29ybGQ="}'
    assert Redactor(["sk-live/AbC+dEf=="])(text) == text


def test_short_or_empty_secrets_are_not_redacted():
    assert redact("a b c abc", ["a", "", "abc"]) == "a b c abc"
    assert Redactor([])("anything") == "anything"


def test_the_longest_form_wins_when_one_contains_another():
    assert redact("x=abcd1234efgh", ["abcd1234", "abcd1234efgh"]) == f"x={REDACTED}"


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "bearer"])
def test_an_authorization_credential_is_blanked_without_its_scheme(scheme):
    blank = Redactor([f"{scheme} tok_abc123xyz"])

    assert blank("token tok_abc123xyz is expired") == f"token {REDACTED} is expired"
    assert blank('{"detail": "bad tok_abc123xyz"}') == f'{{"detail": "bad {REDACTED}"}}'


def test_basic_credentials_are_blanked_encoded_decoded_and_part_by_part():
    encoded = base64.b64encode(b"svc-robot:pa55-w0rd-long").decode()
    blank = Redactor([f"Basic {encoded}"])

    said = blank(f"got {encoded}; user svc-robot:pa55-w0rd-long, password pa55-w0rd-long")

    assert "pa55-w0rd-long" not in said
    assert "svc-robot" not in said
    assert encoded not in said
    # A Basic value that is not base64 is blanked whole and as the credential alone.
    assert Redactor(["Basic not-base64!"])("Basic not-base64! then not-base64!") == (
        f"{REDACTED} then {REDACTED}"
    )


def test_a_secret_escaped_twice_as_json_is_blanked():
    secret = 'pa"ss\\word-123'
    quoted = json.dumps({"quoted": json.dumps({"k": secret})})

    blanked = Redactor([secret])(quoted)

    assert json.loads(json.loads(blanked)["quoted"]) == {"k": REDACTED}
