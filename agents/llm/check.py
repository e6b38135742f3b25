""" "Check connection": one short completion against an endpoint, described in plain words.

The admin's model endpoint page and its list action call ``check_connection``; the answer
names what went wrong (the key, the address, a timeout, the quota) rather than a traceback.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.translation import gettext

from agents.crypto import SecretUnreadable
from agents.llm.factory import chat_model_for, is_demo_model
from agents.react.errors import (
    ModelAuthError,
    ModelError,
    ModelQuotaError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)

if TYPE_CHECKING:
    from agents.models import ModelConfig

# A connection check should answer quickly and say what is wrong, not retry for minutes.
CHECK_TIMEOUT_SECONDS = 15.0


@dataclass(frozen=True)
class ConnectionCheck:
    ok: bool
    message: str


def check_connection(model_config: ModelConfig) -> ConnectionCheck:
    """One short completion against the endpoint, described in plain words."""
    # An unsaved copy, so the probe neither retries nor waits the full run timeout.
    probe = copy.copy(model_config)
    probe.max_retries = 0
    probe.request_timeout_seconds = min(model_config.request_timeout_seconds, CHECK_TIMEOUT_SECONDS)
    where = _endpoint_description(model_config)
    started = time.monotonic()
    try:
        chat_model = chat_model_for(probe)
        chat_model.complete(
            [{"role": "user", "content": "Reply with the single word OK."}], temperature=0.0
        )
    except SecretUnreadable:
        return ConnectionCheck(
            False,
            gettext("The stored API key cannot be decrypted (SECRET_KEY changed); enter it again."),
        )
    except ModelAuthError:
        return ConnectionCheck(
            False,
            gettext("Authentication failed: %(where)s rejected the API key.") % {"where": where},
        )
    except ModelTimeout:
        seconds = f"{probe.request_timeout_seconds:g}"
        return ConnectionCheck(
            False,
            gettext("Timed out: %(where)s did not answer within %(seconds)s s.")
            % {"where": where, "seconds": seconds},
        )
    except ModelQuotaError:
        return ConnectionCheck(
            False, gettext("%(where)s says the account has no quota left.") % {"where": where}
        )
    except ModelRateLimited:
        return ConnectionCheck(
            False,
            gettext("%(where)s is rate limiting requests; try again later.") % {"where": where},
        )
    except ModelUnavailable as exc:
        if exc.status_code:
            return ConnectionCheck(
                False,
                gettext("%(where)s answered with HTTP %(status)s: %(error)s")
                % {"where": where, "status": exc.status_code, "error": short_error(exc)},
            )
        return ConnectionCheck(
            False,
            gettext("Could not connect to %(where)s: %(error)s")
            % {"where": where, "error": short_error(exc)},
        )
    except ModelError as exc:
        if exc.status_code:
            return ConnectionCheck(
                False,
                gettext("%(where)s answered with an error (HTTP %(status)s): %(error)s")
                % {"where": where, "status": exc.status_code, "error": short_error(exc)},
            )
        return ConnectionCheck(
            False,
            gettext("%(where)s answered with an error: %(error)s")
            % {"where": where, "error": short_error(exc)},
        )
    latency_ms = round((time.monotonic() - started) * 1000)
    return ConnectionCheck(
        True,
        gettext("OK: %(model)s at %(where)s answered in %(ms)s ms.")
        % {"model": chat_model.model_name, "where": where, "ms": latency_ms},
    )


def _endpoint_description(model_config: ModelConfig) -> str:
    if model_config.base_url:
        return model_config.base_url
    if is_demo_model(model_config):
        return gettext("the built-in demo model")
    return settings.OPENAI_BASE_URL or gettext("the OpenAI API (OPENAI_* settings)")


def short_error(exc: Exception, limit: int = 300) -> str:
    """An exception's message on one page line: its type if it has none, cut at ``limit``."""
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"
