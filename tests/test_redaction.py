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


def test_a_secret_with_a_slash_and_a_space_is_blanked_fully_url_encoded():
    """``quote(value, safe="")`` is the only form that encodes both "/" (%2F) and " " (%20)."""
    secret = "my pass/word"
    query = "https://example.invalid/search?q=" + quote(secret, safe="")
    assert redact(query, [secret]) == f"https://example.invalid/search?q={REDACTED}"


@pytest.mark.parametrize("prefix", ["", "u:", "me:", "user:"])
@pytest.mark.parametrize("suffix", ["", ":", "::", ":x@host", "\nmore text after the secret"])
def test_a_secret_anywhere_in_a_base64_payload_is_blanked(prefix, suffix):
    """First, in the middle or last in what was encoded: the characters that only the
    secret decides are blanked, and those it shares with a neighbour are left."""
    secret = "sk-live/AbC+dEf=="
    payload = base64.b64encode(f"{prefix}{secret}{suffix}".encode()).decode()
    redacted = redact(f"Authorization: Basic {payload}", [secret])
    assert REDACTED in redacted
    before, after = redacted.removeprefix("Authorization: Basic ").split(REDACTED)
    # At most one character on each side mixes the secret's bits with a neighbour's.
    assert len(before) <= -(-len(prefix) * 4 // 3)
    assert len(after) <= len(payload) - (len(prefix) + len(secret)) * 4 // 3
    # Nothing the secret alone decides is left: the longest run of it is gone.
    alone = base64.b64encode(secret.encode()).decode()[:20]
    assert alone[1:-1] not in redacted


def test_a_secret_inside_url_safe_base64_is_blanked():
    secret = "a?b>c~d/e+f"  # bytes whose base64 holds "+" and "/", i.e. "-" and "_" url-safe
    payload = base64.urlsafe_b64encode(f"token:{secret}".encode()).decode()
    assert "-" in payload or "_" in payload
    assert REDACTED in redact(payload, [secret])
    assert redact(payload, [secret]) != redact(payload, ["something else entirely"])


def test_a_secret_of_exactly_the_minimum_length_is_blanked():
    assert redact("key=abcd; other=abc", ["abcd", "abc"]) == f"key={REDACTED}; other=abc"


@pytest.mark.parametrize("secret", ["pässwörd-ü", 'clé"秘密\\x', "пароль\n2"])
@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s,
        lambda s: json.dumps(s)[1:-1],
        lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
        # A JSON string inside a JSON document (an API quoting the request's body back).
        lambda s: json.dumps(json.dumps(s)[1:-1])[1:-1],
        lambda s: json.dumps(json.dumps(s, ensure_ascii=False)[1:-1], ensure_ascii=False)[1:-1],
        lambda s: quote(s, safe=""),
        lambda s: quote_plus(s),
        lambda s: html.escape(s),
    ],
    ids=[
        "literal",
        "json-ascii",
        "json-utf8",
        "json-twice-ascii",
        "json-twice-utf8",
        "url",
        "form",
        "html",
    ],
)
def test_a_non_ascii_secret_is_blanked_in_every_form(secret, encode):
    text = f'{{"before": 1, "value": "{encode(secret)}", "after": 2}}'
    assert redact(text, [secret]) == f'{{"before": 1, "value": "{REDACTED}", "after": 2}}'


@pytest.mark.parametrize("secret", ['ab"cd&ef', "it's&mine"])
def test_a_secret_html_escaped_with_or_without_its_quotes_is_blanked(secret):
    for escaped in (html.escape(secret), html.escape(secret, quote=False)):
        assert redact(f"<p>{escaped}</p>", [secret]) == f"<p>{REDACTED}</p>"


@pytest.mark.parametrize("prefix", ["", "u:", "me:"])
def test_a_five_character_secret_inside_base64_is_blanked(prefix):
    """Five bytes are the fewest whose own base64 characters are long enough to match."""
    secret = "hunt2"
    payload = base64.b64encode(f"{prefix}{secret}@example".encode()).decode()
    assert REDACTED in redact(payload, [secret])


def test_a_secret_too_short_to_redact_stays_even_where_its_encoding_is_long():
    text = "path=a%2F&q=%26lt%3B x=a/"
    assert redact(text, ["a/", "<;"]) == text


def test_a_secret_is_replaced_whole_when_another_matches_its_start_in_another_case():
    """Percent escapes match in either case, so "%2fabcd" (one secret, as written) matches
    the start of "%2Fabcde" (another, URL-encoded); the longer one still wins."""
    assert redact("x=%2fabcde;", ["%2fabcd", "/abcde"]) == f"x={REDACTED};"


def test_a_basic_password_holding_colons_is_blanked_whole_and_its_user_apart():
    """The user ends at the first colon; the password may hold more."""
    header = "Basic " + base64.b64encode(b"alice:pa:ss:word").decode()
    text = "user alice, password pa:ss:word"
    assert redact(text, [header]) == f"user {REDACTED}, password {REDACTED}"


def test_a_basic_value_that_is_not_base64_is_blanked_only_as_written():
    """Its characters are not decoded leniently into a user and password that would then
    blank ordinary words: ``dXNlcjpw*YXNz`` is not base64, though without its ``*`` it
    would read ``user:pass``."""
    header = "Basic dXNlcjpw*YXNz"
    text = f"the user field, {header}"
    assert redact(text, [header]) == f"the user field, {REDACTED}"
