"""The admin's own pages: check a model endpoint, preview and try a profile, compare and
restore its versions, test a tool, and the usage table.

``agents/admin.py`` routes to these (each behind ``admin_site.admin_view``, so staff only) and
checks the model permission first; these functions do the work and render the page.

Secrets: whatever a page shows that a tool or a model produced passes through ``_redact``
with the values of the secrets involved, on top of the tools' own redaction, so a remote
server echoing a header back cannot put a secret on a page.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse

from agents.crypto import SecretUnreadable
from agents.forms import PreviewForm, TestToolForm, TryItForm, UsageRangeForm, VersionRestoreForm
from agents.llm.factory import chat_model_for, is_demo_model, model_name_for
from agents.memory.services import memory_for_run
from agents.models import (
    AgentProfile,
    AgentRun,
    Conversation,
    ModelCall,
    ModelConfig,
    PromptVersion,
    RunEvent,
    ToolConfig,
)
from agents.react.errors import (
    AgentError,
    ModelAuthError,
    ModelError,
    ModelQuotaError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
    PromptTemplateError,
)
from agents.react.prompt import render_preview
from agents.react.tools import ToolInputError
from agents.react.types import ModelCallRecord, Step, step_to_event
from agents.redaction import redact as _redact
from agents.runtime import build_executor, prompt_config, snapshot_tool_configs
from agents.services.profiles import (
    prompt_version_diff,
    prompt_version_ensure,
    prompt_version_restore,
)
from agents.services.usage import usage_by_user_day
from agents.tools.registry import build_tool

logger = logging.getLogger(__name__)

# A connection check should answer quickly and say what is wrong, not retry for minutes.
CHECK_TIMEOUT_SECONDS = 15.0
STEPS_MARKER = "<!--steps-->"


def _page_context(request: HttpRequest, model_admin: Any, obj: Any, title: str) -> dict:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "original": obj,
        "title": title,
        "has_view_permission": model_admin.has_view_permission(request, obj),
    }


def _change_url(obj: Any) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])


def _secret_values(tool_configs: Iterable[ToolConfig]) -> list[str]:
    values: list[str] = []
    for tool_config in tool_configs:
        try:
            values.extend(tool_config.get_secrets().values())
        except SecretUnreadable:
            continue
    return values


# --------------------------------------------------------------------------------------
# Model endpoints: "Check connection"
# --------------------------------------------------------------------------------------


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
            False, "The stored API key cannot be decrypted (SECRET_KEY changed); enter it again."
        )
    except ModelAuthError:
        return ConnectionCheck(False, f"Authentication failed: {where} rejected the API key.")
    except ModelTimeout:
        seconds = f"{probe.request_timeout_seconds:g}"
        return ConnectionCheck(False, f"Timed out: {where} did not answer within {seconds} s.")
    except ModelQuotaError:
        return ConnectionCheck(False, f"{where} says the account has no quota left.")
    except ModelRateLimited:
        return ConnectionCheck(False, f"{where} is rate limiting requests; try again later.")
    except ModelUnavailable as exc:
        if exc.status_code:
            return ConnectionCheck(
                False, f"{where} answered with HTTP {exc.status_code}: {_short(exc)}"
            )
        return ConnectionCheck(False, f"Could not connect to {where}: {_short(exc)}")
    except ModelError as exc:
        status = f" (HTTP {exc.status_code})" if exc.status_code else ""
        return ConnectionCheck(False, f"{where} answered with an error{status}: {_short(exc)}")
    latency_ms = round((time.monotonic() - started) * 1000)
    return ConnectionCheck(
        True, f"OK: {chat_model.model_name} at {where} answered in {latency_ms} ms."
    )


def _endpoint_description(model_config: ModelConfig) -> str:
    if model_config.base_url:
        return model_config.base_url
    if is_demo_model(model_config):
        return "the built-in demo model"
    return settings.OPENAI_BASE_URL or "the OpenAI API (OPENAI_* settings)"


def _short(exc: Exception, limit: int = 300) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"


def model_config_check(request: HttpRequest, model_admin: Any, model_config: ModelConfig):
    if request.method != "POST":
        return HttpResponseRedirect(_change_url(model_config))
    result = check_connection(model_config)
    level = messages.SUCCESS if result.ok else messages.ERROR
    model_admin.message_user(request, f"{model_config.name}: {result.message}", level)
    return HttpResponseRedirect(_change_url(model_config))


# --------------------------------------------------------------------------------------
# Profiles: preview, try it, versions
# --------------------------------------------------------------------------------------


def profile_preview(request: HttpRequest, model_admin: Any, profile: AgentProfile):
    form = PreviewForm(request.POST or None)
    preview = None
    if request.method == "POST" and form.is_valid():
        preview = _preview_messages(
            profile,
            user=request.user,
            question=form.cleaned_data["question"],
            memory_summary=form.cleaned_data["memory_summary"],
            history=form.cleaned_data["history"],
            conversation=form.cleaned_data["conversation"],
        )
    context = {
        **_page_context(request, model_admin, profile, f"Preview: {profile.name}"),
        "form": form,
        "preview": preview,
    }
    return TemplateResponse(request, "admin/agents/agentprofile/preview.html", context)


@dataclass(frozen=True)
class DisplayMessage:
    role: str
    content: str
    extra: str  # anything else in the message (tool calls, names) as JSON, or ""


@dataclass(frozen=True)
class Preview:
    messages: list[DisplayMessage]
    options: str  # stop sequences, tool schemas, temperature: as JSON
    problems: list[str]


def _preview_messages(
    profile: AgentProfile,
    *,
    user: Any,
    question: str,
    memory_summary: str,
    history: list[dict[str, Any]],
    conversation: Conversation | None = None,
) -> Preview:
    """The exact first request a run of the profile's current version would send.

    Built from the version snapshot by the same functions a run uses (``agents/runtime``).
    """
    snapshot = prompt_version_ensure(profile=profile, user=user).snapshot
    problems: list[str] = []
    if conversation is not None:
        model_config = ModelConfig.objects.filter(pk=snapshot.get("model_config_id")).first()
        memory = memory_for_run(
            conversation=conversation,
            snapshot=snapshot,
            model_name=model_name_for(model_config),  # token counting follows the model
            before_message=None,
        )
        memory_summary, history = memory.summary, memory.history
    problems += [
        f"Tool {tool_config.name} is disabled, so the model will not see it."
        for tool_config in profile.tools.filter(enabled=False).order_by("name")
    ]
    tool_configs = snapshot_tool_configs(snapshot)
    tools = []
    for tool_config in tool_configs:
        try:
            tools.append(build_tool(tool_config, user=user))
        except ValueError as exc:
            problems.append(f"{exc}; runs leave it out.")
    secrets = _secret_values(profile.tools.all())
    try:
        rendered = render_preview(
            prompt_config(snapshot),
            tools=tools,
            question=question,
            history=history,
            memory_summary=memory_summary,
            temperature=snapshot.get("temperature"),
        )
    except PromptTemplateError as exc:
        return Preview(messages=[], options="", problems=[*problems, *exc.problems])
    return Preview(
        messages=display_messages(rendered.messages, secrets),
        options=_redact(_pretty(rendered.options), secrets),
        problems=problems,
    )


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return json.dumps(content, indent=2, ensure_ascii=False)


def _extra_json(message: dict[str, Any]) -> str:
    extra = {key: value for key, value in message.items() if key not in ("role", "content")}
    return json.dumps(extra, indent=2, ensure_ascii=False) if extra else ""


def display_messages(
    messages: Iterable[dict[str, Any]], secrets: Iterable[str] = ()
) -> list[DisplayMessage]:
    """Chat messages as the pages show them: role, text, and any other keys as JSON."""
    secrets = list(secrets)
    return [
        DisplayMessage(
            role=str(message.get("role", "")),
            content=_redact(_content_text(message.get("content")), secrets),
            extra=_redact(_extra_json(message), secrets),
        )
        for message in messages
    ]


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def profile_try(request: HttpRequest, model_admin: Any, profile: AgentProfile):
    """GET: the question form. POST: the same page, streamed, one step as it happens.

    The run is in-process and not stored: nothing is written to any conversation. The page
    is plain HTML sent in pieces, so it needs no script to update.
    """
    form = TryItForm(request.POST or None)
    context = {
        **_page_context(request, model_admin, profile, f"Try it: {profile.name}"),
        "form": form,
        "steps_marker": STEPS_MARKER,
        "streaming": request.method == "POST" and form.is_valid(),
    }
    if not context["streaming"]:
        return TemplateResponse(request, "admin/agents/agentprofile/try_it.html", context)

    version = prompt_version_ensure(profile=profile, user=request.user)
    context["version"] = version
    page = render_to_string("admin/agents/agentprofile/try_it.html", context, request=request)
    head, _, tail = page.partition(STEPS_MARKER)
    secrets = _secret_values(profile.tools.all())
    question = form.cleaned_data["question"]

    def chunks() -> Iterator[str]:
        yield head
        for fragment in _run_fragments(version, user=request.user, question=question):
            yield _redact(fragment, secrets)
        yield tail

    response = StreamingHttpResponse(
        _async_chunks(chunks()) if isinstance(request, ASGIRequest) else chunks(),
        content_type="text/html; charset=utf-8",
    )
    # Tell nginx and browsers not to hold the pieces back.
    response["X-Accel-Buffering"] = "no"
    response["Cache-Control"] = "no-store"
    return response


def _run_fragments(version: PromptVersion, *, user: Any, question: str) -> Iterator[str]:
    started = time.monotonic()
    try:
        executor = build_executor(snapshot=version.snapshot, user=user)
        for step in executor.run(question):
            yield _step_fragment(step)
    except ModelError as exc:
        yield _error_fragment(f"The model failed ({exc.code}): {_short(exc, 1000)}")
    except AgentError as exc:
        yield _error_fragment(f"The run stopped ({exc.code}): {_short(exc, 1000)}")
    except Exception as exc:
        # The page is already streaming, so a bug cannot become an error page any more:
        # show it, and log the traceback for whoever fixes it.
        logger.exception("try-it run of %s failed", version)
        yield _error_fragment(f"Unexpected error: {type(exc).__name__}: {_short(exc, 1000)}")
    seconds = time.monotonic() - started
    yield render_to_string("admin/agents/agentprofile/try_done.html", {"seconds": seconds})


def _step_fragment(step: Step) -> str:
    payload = step_to_event(step)
    context: dict[str, Any] = {"step": payload, "kind": payload["kind"]}
    if isinstance(step, ModelCallRecord):
        context["messages"] = display_messages(step.messages)
        context["options"] = _pretty(step.options)
        context["tool_calls"] = _pretty(step.tool_calls) if step.tool_calls else ""
    elif payload["kind"] == "action":
        tool_input = payload["tool_input"]
        context["tool_input"] = tool_input if isinstance(tool_input, str) else _pretty(tool_input)
    return render_to_string("admin/agents/agentprofile/try_step.html", context)


def _error_fragment(message: str) -> str:
    return render_to_string(
        "admin/agents/agentprofile/try_step.html",
        {"kind": "failure", "step": {"message": message}},
    )


async def _async_chunks(chunks: Iterator[str]) -> AsyncIterator[str]:
    """Under ASGI Django would read a plain iterator to the end before sending anything;
    pulling each piece in the request's worker thread keeps the page live."""
    done = object()
    pull = sync_to_async(next, thread_sensitive=True)
    while True:
        chunk = await pull(chunks, done)
        if chunk is done:
            return
        yield chunk


def profile_versions(request: HttpRequest, model_admin: Any, profile: AgentProfile):
    versions = list(profile.versions.select_related("created_by").order_by("-number"))
    context = {
        **_page_context(request, model_admin, profile, f"Versions of {profile.name}"),
        "versions": versions,
        "can_restore": model_admin.has_change_permission(request, profile),
    }
    return TemplateResponse(request, "admin/agents/agentprofile/versions.html", context)


def profile_version_detail(
    request: HttpRequest, model_admin: Any, profile: AgentProfile, number: int
):
    version = get_object_or_404(PromptVersion, profile=profile, number=number)
    latest = profile.versions.order_by("-number").values_list("number", flat=True).first()
    context = {
        **_page_context(request, model_admin, profile, f"{profile.name}: version {number}"),
        "version": version,
        "diff": prompt_version_diff(version=version),
        "snapshot_json": _pretty(version.snapshot),
        "is_latest": number == latest,
        "can_restore": model_admin.has_change_permission(request, profile),
        "restore_form": VersionRestoreForm(),
    }
    return TemplateResponse(request, "admin/agents/agentprofile/version_detail.html", context)


def profile_version_restore(
    request: HttpRequest, model_admin: Any, profile: AgentProfile, number: int
):
    version = get_object_or_404(PromptVersion, profile=profile, number=number)
    if request.method != "POST":
        return HttpResponseRedirect(
            reverse("admin:agents_agentprofile_version", args=[profile.pk, number])
        )
    result = prompt_version_restore(version=version, user=request.user)
    profile.refresh_from_db()
    text = f"Restored version {number} as version {result.version.number}."
    model_admin.log_change(request, profile, [{"changed": {"fields": ["restored", text]}}])
    model_admin.message_user(request, text, messages.SUCCESS)
    if result.missing_tools:
        model_admin.message_user(
            request,
            "These tools no longer exist and were left out: " + ", ".join(result.missing_tools),
            messages.WARNING,
        )
    if result.missing_model_config:
        model_admin.message_user(
            request,
            "The model endpoint of that version no longer exists; the profile now uses the "
            "default model.",
            messages.WARNING,
        )
    return HttpResponseRedirect(_change_url(profile))


# --------------------------------------------------------------------------------------
# Tools: "Test tool"
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolTestResult:
    ok: bool
    output: str
    duration_ms: int


def run_tool_once(tool_config: ToolConfig, tool_input: str | dict, *, user: Any) -> ToolTestResult:
    """Run a configured tool (even a disabled one) once, in this thread."""
    secrets = _secret_values([tool_config])
    started = time.monotonic()
    try:
        tool = build_tool(tool_config, user=user)
        arguments = tool.coerce_input(tool_input)
        output = tool.run(**arguments)
        ok = True
    except ToolInputError as exc:
        output, ok = f"The input does not fit this tool: {exc}", False
    except ValueError as exc:
        output, ok = str(exc), False
    except Exception as exc:
        # Tool kinds raise ToolError for expected failures; anything else is still the
        # answer to "what happens when I call it", so it is shown, not turned into a 500.
        output, ok = f"{type(exc).__name__}: {exc}", False
    duration_ms = round((time.monotonic() - started) * 1000)
    return ToolTestResult(ok=ok, output=_redact(str(output), secrets), duration_ms=duration_ms)


def tool_test(request: HttpRequest, model_admin: Any, tool_config: ToolConfig):
    form = TestToolForm(request.POST or None)
    result = None
    if request.method == "POST" and form.is_valid():
        result = run_tool_once(tool_config, form.cleaned_data["sample_input"], user=request.user)
    context = {
        **_page_context(request, model_admin, tool_config, f"Test tool: {tool_config.name}"),
        "form": form,
        "result": result,
    }
    return TemplateResponse(request, "admin/agents/toolconfig/test_tool.html", context)


# --------------------------------------------------------------------------------------
# Run inspector
# --------------------------------------------------------------------------------------


def run_inspector_context(run: AgentRun) -> dict[str, Any]:
    """The step timeline and every model call of a run, for its admin page."""
    events = [
        {
            "seq": event.seq,
            "type": event.type,
            "created_at": event.created_at,
            "kind": event.payload.get("kind", "") if isinstance(event.payload, dict) else "",
            "payload": _pretty(event.payload),
        }
        for event in RunEvent.objects.filter(run=run).order_by("seq")
    ]
    calls = [
        {
            "call": call,
            "messages": display_messages(call.request_messages or []),
            "options": _pretty(call.request_options) if call.request_options else "",
            "tool_calls": _pretty(call.response_tool_calls) if call.response_tool_calls else "",
        }
        for call in ModelCall.objects.filter(run=run).order_by("index")
    ]
    return {"run_events": events, "model_calls": calls}


# --------------------------------------------------------------------------------------
# Usage
# --------------------------------------------------------------------------------------


def usage_view(request: HttpRequest, model_admin: Any) -> HttpResponse:
    form = UsageRangeForm(request.GET or None)
    since, until = form.date_range()
    rows = usage_by_user_day(since=since, until=until)
    totals = {
        "runs": sum(row.runs for row in rows),
        "prompt_tokens": sum(row.prompt_tokens for row in rows),
        "completion_tokens": sum(row.completion_tokens for row in rows),
        "cost": sum((row.cost for row in rows), start=0),
    }
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": "Usage per user and day",
        "form": form,
        "rows": rows,
        "totals": totals,
        "since": since,
        "until_exclusive": until,
    }
    return TemplateResponse(request, "admin/agents/usage.html", context)
