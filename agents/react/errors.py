"""The engine's error family.

Every error carries a short ``code`` string: the run pipeline stores it on a failed run and the
browser shows it, so codes are stable API. Errors the model can recover from (a parse error,
an unknown tool, a failing tool) never leave the executor: they become an ``ErrorStep`` and an
observation. What does leave it is a ``ModelError`` (the endpoint failed) or ``RunCancelled``.
"""

from __future__ import annotations


class AgentError(Exception):
    """Base of every error the engine raises on purpose."""

    code: str = "agent_error"

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message or self.__class__.__doc__ or self.code)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class RunCancelled(AgentError):
    """The run was cancelled."""

    code = "cancelled"


class AwaitingApproval(AgentError):
    """The run paused before a tool call that needs a person's approval.

    Raised after the ``ApprovalRequestStep`` s of the pending calls were yielded; the run goes
    on from its stored steps once an ``ApprovalDecisionStep`` for each of them is among them.
    """

    code = "awaiting_approval"

    def __init__(self, call_ids: list[str]) -> None:
        super().__init__(f"waiting for approval of {', '.join(call_ids)}")
        self.call_ids = list(call_ids)


class RunSuspended(AgentError):
    """The run stopped until something outside it happens: a tool call raised
    ``SuspendRun`` (``agents/react/tools.py``) because its result will come from elsewhere.

    Raised once the batch's other calls have ended and their observations were yielded; the
    suspended calls have none. Run again from the stored steps, the engine runs those calls
    again (with the same ids), and they answer then, or suspend the run once more.
    """

    code = "suspended"

    def __init__(self, call_ids: list[str]) -> None:
        super().__init__(f"suspended at {', '.join(call_ids)}")
        self.call_ids = list(call_ids)


class BudgetExhausted(AgentError):
    """The run reached one of its budgets (``RunBudget``): steps, tokens, or calls of a tool.

    Nothing of the step that would have gone over was started; the run can go on from its
    stored steps with a larger budget.
    """

    code = "budget_exhausted"

    def __init__(self, limit: str, message: str, *, tool: str = "") -> None:
        super().__init__(message)
        self.limit = limit  # "steps" | "tokens" | "tool_calls"
        self.tool = tool


class ParseError(AgentError):
    """The model's text does not follow the ReAct format.

    The message says what is wrong in words the model is shown; ``text`` is what the model
    wrote (after cutting invented observations).
    """

    code = "parse_error"

    def __init__(self, message: str, *, text: str = "") -> None:
        super().__init__(message)
        self.text = text


class PromptTemplateError(AgentError):
    """A prompt template cannot be rendered (unknown variables, bad braces)."""

    code = "prompt_template"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


# -- raised by the model client (agents/llm) ---------------------------------------------


class ModelError(AgentError):
    """The model endpoint failed. ``status_code`` is the HTTP status when there was one."""

    code = "model_error"

    def __init__(
        self, message: str = "", *, status_code: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.status_code = status_code


class ModelAuthError(ModelError):
    """The endpoint rejected the API key."""

    code = "model_auth"


class ModelQuotaError(ModelError):
    """The account behind the API key has no quota left."""

    code = "model_quota"


class ModelRateLimited(ModelError):
    """The endpoint kept answering 429 after the allowed retries."""

    code = "model_rate_limited"


class ModelUnavailable(ModelError):
    """The endpoint could not be reached or kept failing with server errors."""

    code = "model_unavailable"


class ModelServerError(ModelUnavailable):
    """The endpoint was reached but kept answering with server errors (5xx, or an error
    inside the stream): it is up, something behind it is failing."""

    code = "model_server_error"


class ModelTimeout(ModelError):
    """The model did not finish within the call's deadline."""

    code = "model_timeout"


class ModelBadResponse(ModelError):
    """The endpoint answered with something that is not a usable chat completion."""

    code = "model_bad_response"
