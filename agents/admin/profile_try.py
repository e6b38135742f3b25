""" "Try it": run a profile's current version in the request and stream each step as HTML.

The run is in-process and not stored: nothing is written to any conversation. The page is
plain HTML sent in pieces, so it needs no script to update. Whatever a tool or the model
produced passes through the tools' secrets redaction again before it is sent, so a remote
server echoing a header back cannot put a secret on the page.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils.translation import gettext

from agents.admin.forms import TryItForm
from agents.admin.pages import ExtraPagesAdmin, display_messages, pretty
from agents.llm.check import short_error
from agents.models import AgentProfile, PromptVersion
from agents.permissions import signed_in_user
from agents.profile_snapshot import ProfileSnapshot
from agents.react.errors import AgentError, AwaitingApproval, BudgetExhausted, ModelError
from agents.react.types import ApprovalRequestStep, ModelCallRecord, Step, step_to_event
from agents.redaction import redact
from agents.runtime import build_executor
from agents.services.prompt_versions import prompt_version_ensure
from agents.services.tools import tool_config_secret_values
from agents.tools.registry import tool_kinds

logger = logging.getLogger(__name__)

STEPS_MARKER = "<!--steps-->"
TEMPLATE = "admin/agents/agentprofile/try_it.html"


def page(
    request: HttpRequest, model_admin: ExtraPagesAdmin, profile: AgentProfile
) -> HttpResponseBase:
    """GET: the question form. POST: the same page, streamed, one step as it happens."""
    form = TryItForm(request.POST or None)
    context = {
        **model_admin.page_context(
            request, profile, gettext("Try it: %(name)s") % {"name": profile.name}
        ),
        "form": form,
        "steps_marker": STEPS_MARKER,
        "streaming": request.method == "POST" and form.is_valid(),
        "unavailable_tools": _unavailable_tools(profile),
    }
    if not context["streaming"]:
        return TemplateResponse(request, TEMPLATE, context)

    user = signed_in_user(request.user)
    version = prompt_version_ensure(profile=profile, user=user)
    context["version"] = version
    head, _, tail = render_to_string(TEMPLATE, context, request=request).partition(STEPS_MARKER)
    secrets = tool_config_secret_values(profile.tools.all())
    question = form.cleaned_data["question"]

    def chunks() -> Iterator[str]:
        yield head
        for fragment in _run_fragments(version, user=user, question=question):
            yield redact(fragment, secrets)
        yield tail

    response = StreamingHttpResponse(
        _async_chunks(chunks()) if isinstance(request, ASGIRequest) else chunks(),
        content_type="text/html; charset=utf-8",
    )
    # Tell nginx and browsers not to hold the pieces back.
    response["X-Accel-Buffering"] = "no"
    response["Cache-Control"] = "no-store"
    return response


def _unavailable_tools(profile: AgentProfile) -> list[dict[str, str]]:
    """The profile's enabled tools that cannot run on this server, with why (the python
    tool without bubblewrap): the page says so before anyone runs a question."""
    kinds = tool_kinds()
    unavailable = []
    for tool in profile.tools.filter(enabled=True):
        kind = kinds.get(tool.kind)
        reason = kind.unavailable_reason() if kind else ""
        if reason:
            unavailable.append({"name": tool.name, "reason": reason})
    return unavailable


def _run_fragments(version: PromptVersion, *, user: Any, question: str) -> Iterator[str]:
    started = time.monotonic()
    waiting: list[ApprovalRequestStep] = []
    try:
        executor = build_executor(snapshot=ProfileSnapshot.from_version(version), user=user)
        for step in executor.run(question):
            if isinstance(step, ApprovalRequestStep):
                waiting.append(step)
            else:
                yield _step_fragment(step)
    except AwaitingApproval as exc:
        # Nobody can approve here (the run is not stored), so the page stops and says so.
        for request in waiting:
            if request.call_id in exc.call_ids:
                yield _paused_fragment(request)
    except BudgetExhausted as exc:
        yield _budget_fragment(
            gettext("%(reason)s In a chat its owner can press Continue; Try it stops here.")
            % {"reason": exc}
        )
    except ModelError as exc:
        yield _error_fragment(f"The model failed ({exc.code}): {short_error(exc, 1000)}")
    except AgentError as exc:
        yield _error_fragment(f"The run stopped ({exc.code}): {short_error(exc, 1000)}")
    except Exception as exc:
        # The page is already streaming, so a bug cannot become an error page any more:
        # show it, and log the traceback for whoever fixes it.
        logger.exception("try-it run of %s failed", version)
        yield _error_fragment(f"Unexpected error: {type(exc).__name__}: {short_error(exc, 1000)}")
    seconds = time.monotonic() - started
    yield render_to_string("admin/agents/agentprofile/try_done.html", {"seconds": seconds})


def _step_fragment(step: Step) -> str:
    payload = step_to_event(step)
    context: dict[str, Any] = {"step": payload, "kind": payload["kind"]}
    if isinstance(step, ModelCallRecord):
        context["messages"] = display_messages(step.messages)
        context["options"] = pretty(step.options)
        context["tool_calls"] = pretty(step.tool_calls) if step.tool_calls else ""
    elif payload["kind"] == "action":
        tool_input = payload["tool_input"]
        context["tool_input"] = tool_input if isinstance(tool_input, str) else pretty(tool_input)
    return render_to_string("admin/agents/agentprofile/try_step.html", context)


def _paused_fragment(request: ApprovalRequestStep) -> str:
    tool_input = request.tool_input
    return render_to_string(
        "admin/agents/agentprofile/try_step.html",
        {
            "kind": "approval_request",
            "step": {
                "message": gettext(
                    "The agent wants to call %(tool)s, which needs approval. Try it does not "
                    "run such calls; in a chat with this profile its owner approves or "
                    "denies it."
                )
                % {"tool": request.tool},
            },
            "tool_input": tool_input if isinstance(tool_input, str) else pretty(tool_input),
        },
    )


def _budget_fragment(message: str) -> str:
    return render_to_string(
        "admin/agents/agentprofile/try_step.html", {"kind": "budget", "step": {"message": message}}
    )


def _error_fragment(message: str) -> str:
    return render_to_string(
        "admin/agents/agentprofile/try_step.html",
        {"kind": "failure", "step": {"message": message}},
    )


async def _async_chunks(chunks: Iterator[str]) -> AsyncIterator[str]:
    """Under ASGI Django would read a plain iterator to the end before sending anything;
    pulling each piece in the request's worker thread keeps the page live."""

    def pull() -> str | None:
        return next(chunks, None)

    pull_in_thread = sync_to_async(pull, thread_sensitive=True)
    while True:
        chunk = await pull_in_thread()
        if chunk is None:
            return
        yield chunk
