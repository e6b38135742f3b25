"""The base of every configurable tool kind.

A configured tool is an ``agents.react.tools.Tool`` that also carries its admin-set config and
its decrypted secrets. Secrets reach only the code that needs them (``secret()``); every
value a tool returns or raises is passed through ``redact`` first, so a secret cannot leak
into an observation, an error message, the description or ``repr`` even if a remote server
echoes it back, URL-, form-, JSON- or base64-encoded (``agents/redaction.py``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from agents.react.tools import SuspendRun, Tool, ToolInputError
from agents.redaction import MIN_REDACTED_LENGTH, REDACTED, Redactor, redact

# redact and the constants are re-exported: pages that show a tool's output redact with them.
__all__ = ["MIN_REDACTED_LENGTH", "REDACTED", "ConfiguredTool", "ToolError", "redact"]

SECRET_NAME_PATTERN = r"[A-Z][A-Z0-9_]{0,63}"  # noqa: S105 (a pattern, not a password)
_SECRET_REFERENCE = re.compile(r"\{secret:(" + SECRET_NAME_PATTERN + r")\}")


class ToolError(RuntimeError):
    """The tool ran but could not produce a result; the message is shown to the model."""


class ConfiguredTool(Tool):
    """Subclass, set ``name``/``description`` defaults and implement typed ``run``.

    ``check_config`` may add checks the JSON schema cannot express (for example that a
    time zone exists); it returns field -> error like ``validate_tool_config``.
    """

    # Tools that query the database set this: the engine runs each call in a fresh thread,
    # whose connection would otherwise stay open after the thread ends.
    uses_database: ClassVar[bool] = False
    # What it returns comes from the user's own private data beyond the conversation it runs
    # in (their other conversations): a shared page does not show its observations.
    reads_private_data: ClassVar[bool] = False
    # A new tool of this kind starts marked "needs approval" (staff may switch it off).
    needs_approval_by_default: ClassVar[bool] = False

    def __init__(
        self,
        *,
        name: str = "",
        description: str = "",
        config: Mapping[str, Any] | None = None,
        secrets: Mapping[str, str] | None = None,
        timeout_seconds: float | None = None,
        return_direct: bool = False,
        needs_approval: bool = False,
        read_only: bool = False,
        user: Any = None,
        conversation: Any = None,
    ) -> None:
        self._secrets = dict(secrets or {})
        self._redactor = Redactor(self._secrets.values())
        self.name = name or type(self).name
        self.description = self.redact(description or type(self).description)
        self.config: dict[str, Any] = dict(config or {})
        if timeout_seconds is not None:
            self.timeout_seconds = float(timeout_seconds)
        self.return_direct = return_direct
        self.needs_approval = needs_approval
        # A kind that only ever reads says so on its class; staff mark other tools.
        self.read_only = read_only or type(self).read_only
        self.user = user
        self.conversation = conversation

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "run" in cls.__dict__:
            cls.run = _redacting(cls.__dict__["run"])  # type: ignore[method-assign]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> dict[str, str]:
        return {}

    @classmethod
    def unavailable_reason(cls) -> str:
        """Why no tool of this kind can run on this server (something it needs is not
        installed), or "" when it can; the admin lists it beside the tool."""
        return ""

    @classmethod
    def linked_secret_values(cls, config: Mapping[str, Any]) -> list[str]:
        """Secret values kept outside the tool's row that it uses (an MCP server's headers)."""
        return []

    # -- secrets -----------------------------------------------------------------------
    def secret(self, name: str) -> str:
        try:
            return self._secrets[name]
        except KeyError:
            raise ToolError(
                f"the secret {name} is not set for tool {self.name}; ask an administrator"
            ) from None

    def fill_secrets(self, template: str) -> str:
        """Replace ``{secret:NAME}`` references with the secret values."""
        return _SECRET_REFERENCE.sub(lambda match: self.secret(match.group(1)), template)

    def longest_secret_form(self) -> int:
        """The length of the longest text a secret of this tool can be redacted from: a
        tool that cuts what it read must read that much past the cut (``redact`` first)."""
        return self._redactor.longest_form

    def redact(self, text: str) -> str:
        """``text`` without any secret value, in any encoding a request could carry it."""
        return self._redactor(text)


def _release_connection() -> None:
    """Close this thread's connection unless a transaction (a request's, a test's) owns it."""
    from django.db import connection

    if not connection.in_atomic_block:
        connection.close()


def _redacting(run: Any) -> Any:
    """Wrap ``run`` so its result and its error messages never carry a secret value."""

    @functools.wraps(run)  # keeps the signature and hints the argument schema comes from
    def wrapper(self: ConfiguredTool, *args: Any, **kwargs: Any) -> str:
        failure: Exception | None = None
        try:
            result = run(self, *args, **kwargs)
        except (ToolInputError, ToolError, SuspendRun) as exc:
            # Same class (subclasses take a single message), so callers can still tell
            # bad input from a failed call, and the engine a suspension from either.
            failure = type(exc)(self.redact(str(exc)))
        except Exception as exc:
            # Unexpected failures still reach the model as a readable, redacted message.
            failure = ToolError(self.redact(f"{type(exc).__name__}: {exc}"))
        finally:
            if self.uses_database:
                _release_connection()
        if failure is not None:
            # Raised outside the except block: the original exception, which may hold a
            # secret value, is not kept as __context__ or in the traceback.
            raise failure
        return self.redact(str(result))

    return wrapper
