"""A run as a trace: OpenTelemetry spans following the GenAI semantic conventions.

Built from what the run stored, after it ended (``run_trace_export``, a Celery task queued
when a run's drive ends with the run ended, only while ``OTEL_EXPORTER_OTLP_ENDPOINT`` is
set): so the run's own path does no tracing work, and a run resumed after a crash is one
trace, like its log. The same spans are the admin's JSON lines download
(``runs_trace_lines``).

- ``invoke_agent {profile}``: the run, from its start to its end; the conversation's and the
  user's ids, the profile version, the model, the run's token totals.
- ``chat {model}``, one per model call, a child of the run: ``gen_ai.usage.input_tokens`` /
  ``output_tokens``, its time (stored when the reply was, with its duration).
- ``execute_tool {tool}``, one per tool call, a child of the run: the tool, the call's id,
  its arguments and result.

Every text is passed through ``Redactor`` (``agents/redaction.py``) with every configured
tool secret and MCP server header value, so no secret reaches an attribute. The SDK is
imported only when a trace is exported.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache

from agents.models import AgentRun, RunEvent
from agents.protocol import FrameType
from agents.redaction import Redactor
from agents.selectors import model_call_list, run_event_list, tool_secret_values

AttributeValue = str | int | bool


@dataclass
class SpanRecord:
    """One span, before it goes to the SDK or to a JSON line. ``parent`` is the index of
    the parent among the run's spans (None: the root)."""

    name: str
    start: datetime.datetime
    end: datetime.datetime
    parent: int | None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: str = ""


def run_spans(*, run: AgentRun, redact: Redactor | None = None) -> list[SpanRecord]:
    """The spans of one run, the root first, then its model and tool calls in time order."""
    redact = redact or Redactor(tool_secret_values())
    events = list(run_event_list(run=run))
    calls = list(model_call_list(run=run))
    start = run.started_at or run.created_at
    moments = [event.created_at for event in events] + [call.created_at for call in calls]
    end = run.finished_at or max(moments, default=start)
    profile = run.profile_version.profile if run.profile_version else None
    agent = profile.name if profile else "agent"
    root = SpanRecord(
        name=f"invoke_agent {agent}",
        start=start,
        end=max(end, start),
        parent=None,
        attributes=_without_empty(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": "openai",
                "gen_ai.agent.name": agent,
                "gen_ai.agent.id": str(profile.pk) if profile else "",
                "gen_ai.conversation.id": str(run.conversation_id),
                "gen_ai.request.model": run.model_name,
                "gen_ai.usage.input_tokens": run.prompt_tokens,
                "gen_ai.usage.output_tokens": run.completion_tokens,
                "user.id": str(run.conversation.owner_id),
                "chatsite.run.id": run.pk,
                "chatsite.run.status": run.status,
                "chatsite.run.attempts": run.attempts,
                "chatsite.prompt_version": run.profile_version.number if run.profile_version else 0,
                "chatsite.replay_of": run.replay_of_id or 0,
            }
        ),
        error=run.error_code,
    )
    children = [_chat_span(run, call, redact) for call in calls]
    children += _tool_spans(events, redact)
    children.sort(key=lambda span: span.start)
    # The run's span holds its calls, even where the clocks of the stored rows disagree.
    root.start = min([root.start, *(child.start for child in children)])
    root.end = max([root.end, *(child.end for child in children)])
    return [root, *children]


def _chat_span(run: AgentRun, call: Any, redact: Redactor) -> SpanRecord:
    end = call.created_at
    return SpanRecord(
        name=f"chat {run.model_name}",
        start=end - datetime.timedelta(milliseconds=call.duration_ms),
        end=end,
        parent=0,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": run.model_name,
            "gen_ai.usage.input_tokens": call.prompt_tokens,
            "gen_ai.usage.output_tokens": call.completion_tokens,
            "chatsite.model_call.index": call.index,
        },
        error=redact(call.error),
    )


def _tool_spans(events: Iterable[RunEvent], redact: Redactor) -> list[SpanRecord]:
    """One span per tool call that got an observation (its action paired on the call id)."""
    actions: dict[str, dict[str, Any]] = {}
    spans = []
    for event in events:
        payload = event.payload if event.type == FrameType.STEP else {}
        kind = payload.get("kind")
        if kind == "action":
            actions[payload["call_id"]] = payload
        elif kind == "observation" and payload.get("call_id") in actions:
            action = actions.pop(payload["call_id"])
            tool_input = action.get("tool_input", "")
            arguments = tool_input if isinstance(tool_input, str) else json.dumps(tool_input)
            end = event.created_at
            spans.append(
                SpanRecord(
                    name=f"execute_tool {action['tool']}",
                    start=end - datetime.timedelta(milliseconds=payload.get("duration_ms", 0)),
                    end=end,
                    parent=0,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": action["tool"],
                        "gen_ai.tool.call.id": payload["call_id"],
                        "gen_ai.tool.type": "function",
                        "gen_ai.tool.call.arguments": redact(arguments),
                        "gen_ai.tool.call.result": redact(payload.get("text", "")),
                    },
                    error="tool_error" if payload.get("is_error") else "",
                )
            )
    return spans


def _without_empty(attributes: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
    return {key: value for key, value in attributes.items() if value not in ("", None)}


# --------------------------------------------------------------------------------------
# Through the OpenTelemetry SDK
# --------------------------------------------------------------------------------------


def tracing_enabled() -> bool:
    return bool(settings.OTEL_EXPORTER_OTLP_ENDPOINT)


def run_trace_export(*, run_id: int, tracer_provider: Any = None) -> bool:
    """Send the trace of an ended run through ``tracer_provider`` (by default the process's
    OTLP exporter); once per run, however often it is asked. False if nothing was sent."""
    run = (
        AgentRun.objects.select_related("profile_version__profile", "conversation")
        .filter(pk=run_id)
        .first()
    )
    if run is None or not run.is_terminal:
        return False
    if tracer_provider is None:
        if not tracing_enabled():
            return False
        tracer_provider = _otlp_provider()
    # A redelivered task sends nothing twice (a week covers any redelivery).
    if not cache.add(f"chat:trace-exported:{run_id}", 1, timeout=7 * 24 * 3600):
        return False
    spans_emit(run_spans(run=run), tracer_provider)
    tracer_provider.force_flush()
    return True


def spans_emit(spans: list[SpanRecord], tracer_provider: Any) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

    tracer = tracer_provider.get_tracer("chatsite.agents")
    started: list[Any] = []
    for record in spans:
        context = None
        if record.parent is not None:
            context = trace.set_span_in_context(started[record.parent])
        kind = SpanKind.INTERNAL if record.parent is None else SpanKind.CLIENT
        span = tracer.start_span(
            record.name,
            context=context,
            kind=kind,
            attributes=record.attributes,
            start_time=_nanoseconds(record.start),
        )
        if record.error:
            span.set_attribute("error.type", record.error)
            span.set_status(Status(StatusCode.ERROR))
        started.append(span)
    # Children end before their parent.
    for span, record in reversed(list(zip(started, spans, strict=True))):
        span.end(end_time=_nanoseconds(record.end))


@functools.cache
def _otlp_provider() -> Any:
    """The process's tracer provider, exporting over OTLP/HTTP (made on first use)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT.rstrip("/") + "/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": "chatsite"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _nanoseconds(moment: datetime.datetime) -> int:
    # In whole microseconds, as stored: a float timestamp would round them.
    return (moment - _EPOCH) // datetime.timedelta(microseconds=1) * 1000


# --------------------------------------------------------------------------------------
# As JSON lines (the admin's download)
# --------------------------------------------------------------------------------------


def runs_trace_lines(runs: Iterable[AgentRun]) -> Iterator[str]:
    """One JSON object per span of each run, a line each: the run's id, the span's index
    among the run's spans, its parent's, name, times (ISO 8601), attributes and error."""
    redact = Redactor(tool_secret_values())
    for run in runs:
        for index, span in enumerate(run_spans(run=run, redact=redact)):
            line = {
                "run_id": run.pk,
                "span": index,
                "parent": span.parent,
                "name": span.name,
                "start": span.start.isoformat(),
                "end": span.end.isoformat(),
                "attributes": span.attributes,
                "error": span.error,
            }
            yield json.dumps(line, ensure_ascii=False) + "\n"
