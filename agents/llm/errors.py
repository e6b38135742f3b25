"""What a model endpoint's failure may say, and to whom.

A ``ModelError``'s own message is the technical detail: the endpoint, its status, the
server's words. That is for staff (the run inspector, "Check connection", "Try it"), and
even there without secrets: ``redacted_model_error`` blanks the API key and any
``user:password@`` of the base URL, in every encoding, since servers echo them in error
bodies. End users get ``public_failure_message``: a plain reason by error code and a
reference staff can look up, never the detail.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from agents.react.errors import ModelError
from agents.redaction import Redactor

_TRY_AGAIN = "Please try again in a little while."
_TELL_STAFF = "The site's staff can fix this."

PUBLIC_REASONS: dict[str, str] = {
    "model_auth": f"The AI model service did not accept this site's credentials. {_TELL_STAFF}",
    "model_misconfigured": f"The AI model is not set up correctly. {_TELL_STAFF}",
    "model_quota": f"The AI model service has used up this site's quota. {_TELL_STAFF}",
    "model_rate_limited": f"The AI model service is too busy right now. {_TRY_AGAIN}",
    "model_unavailable": f"The AI model's server could not be reached. {_TRY_AGAIN}",
    "model_server_error": f"The AI model's server reported an error. {_TRY_AGAIN}",
    "model_timeout": f"The AI model took too long to answer. {_TRY_AGAIN}",
    "model_bad_response": f"The AI model sent an answer that could not be used. {_TRY_AGAIN}",
}
DEFAULT_PUBLIC_REASON = f"The AI model could not answer. {_TRY_AGAIN}"


def public_failure_message(error: ModelError, *, reference: str) -> str:
    """The reason a user is shown for ``error``, with ``reference`` for staff to look up."""
    reason = PUBLIC_REASONS.get(error.code, DEFAULT_PUBLIC_REASON)
    return f"{reason} (Reference: {reference}.)"


def endpoint_secrets(*, base_url: str, api_key: str) -> list[str]:
    """The values an error about this endpoint must not show: the key and URL credentials."""
    parts = urlsplit(base_url)
    # The username alone is left: blanking a word like "admin" everywhere hides little.
    # urlsplit leaves percent-escapes in place; the client sends the decoded password.
    values = [api_key, parts.password or "", unquote(parts.password or "")]
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        values += [userinfo, unquote(userinfo)]
    return [value for value in values if value]


def redacted_model_error(error: ModelError, secret_values: Iterable[str] | Redactor) -> ModelError:
    """A copy of ``error`` (same class, code and status) whose message holds no secret."""
    redact = secret_values if isinstance(secret_values, Redactor) else Redactor(secret_values)
    return type(error)(redact(str(error)), status_code=error.status_code, code=error.code)
