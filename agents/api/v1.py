"""The API an API key calls, under /v1/ (docs/protocol.md, "API keys and /v1/").

OpenAI's chat completions and model list, so an OpenAI client pointed here talks to an
agent, and the run as a resource (read, events by SSE, cancel, approve or deny, continue).
Runs start through ``api_run_start``, the web chat's send, as the key's owner; every read is
scoped to that owner (another user's id is a 404, as in /api/).

Streaming responses (and the non-streamed completion, which waits for its run) are
``StreamingHttpResponse`` over async iterators: daphne sends them from its event loop, and
the view's own work (authentication, checks, the send) runs on a shared thread pool
(``unthreaded``), so a client waiting on a run holds no thread.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors
from agents.api import v1_serializers as shapes
from agents.api.keys import ApiKeyAuthentication, ApiKeyRateThrottle, KeyScope
from agents.api.streams import SSE_KEEPALIVE, in_shared_thread, run_frames, sse_event
from agents.models import AgentProfile, AgentRun, ApiKey, Message, ToolApproval
from agents.permissions import signed_in_user
from agents.protocol import (
    TERMINAL_FRAME_TYPES,
    FrameType,
    RefusalCode,
    RequestRefused,
    approval_decided_payload,
    approval_requested_payload,
)
from agents.runs.reads import run_stored_steps
from agents.services.api_runs import api_run_start
from agents.services.approvals import approval_decide, run_continue
from agents.services.conversations import run_cancel

# Where a completion stops: the run's end, or a pause that waits for its owner.
PAUSE_FRAME_TYPES = frozenset({FrameType.APPROVAL_REQUESTED, FrameType.RUN_BUDGET_REACHED})
COMPLETION_ENDS = TERMINAL_FRAME_TYPES | PAUSE_FRAME_TYPES

# The frame a completion stops at: its finish_reason, and the run's status it stands for.
# Read from the frame, not the run's row: by the time the row is read, another tab may
# already have approved the call and the run gone on.
ENDINGS: dict[str, tuple[str, str]] = {
    FrameType.RUN_FINISHED: ("stop", AgentRun.Status.SUCCEEDED),
    FrameType.APPROVAL_REQUESTED: ("approval_required", AgentRun.Status.AWAITING_APPROVAL),
    FrameType.RUN_BUDGET_REACHED: ("budget_reached", AgentRun.Status.OUT_OF_BUDGET),
    FrameType.RUN_CANCELLED: ("cancelled", AgentRun.Status.CANCELLED),
    FrameType.RUN_FAILED: ("error", AgentRun.Status.FAILED),
}

ERRORS = {
    400: shapes.ErrorSerializer,
    401: shapes.ErrorSerializer,
    403: shapes.ErrorSerializer,
    404: shapes.ErrorSerializer,
    429: shapes.ErrorSerializer,
}


def only_key_endpoints(endpoints: list[tuple[Any, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    """drf-spectacular's preprocessing hook: the schema holds the /v1/ endpoints."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith("/v1/")]


def unthreaded(view: Callable[..., HttpResponseBase]) -> Callable[..., Any]:
    """An async entry to a DRF view: the view runs on a shared pool's thread (with Django's
    connection cleanup) and its response is rendered there; a streamed body is then sent
    from the event loop. Django would otherwise keep a thread of the request's own for as
    long as the response streams."""

    def render(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        if isinstance(response, Response):
            response.render()
        return response

    call = in_shared_thread(render)

    @functools.wraps(view)
    async def dispatch(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return await call(request, *args, **kwargs)

    return dispatch


class KeyView(GenericAPIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [KeyScope]
    throttle_classes = [ApiKeyRateThrottle]
    required_scope: str | None = ApiKey.Scope.READ

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # Streaming clients ask for text/event-stream: the stream answers them, and any
        # refusal before it is JSON, whatever Accept says.
        renderer = self.get_renderers()[0]
        return renderer, renderer.media_type

    def input(self, serializer_class: type, data: Any = None) -> dict[str, Any]:
        serializer = serializer_class(data=self.request.data if data is None else data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def owner(self) -> Any:
        return signed_in_user(self.request.user)

    def profile_or_refuse(self, slug: str) -> AgentProfile:
        profile = selectors.profile_get(user=self.request.user, slug=slug)
        if profile is None:
            raise RequestRefused(
                RefusalCode.PROFILE_NOT_ALLOWED,
                _("No agent %(model)r is available to this key (GET /v1/models lists them).")
                % {"model": slug},
            )
        return profile

    def run_or_404(self, run_id: int) -> AgentRun:
        run = selectors.run_get(user=self.request.user, run_id=run_id)
        if run is None:
            raise NotFound(_("No such run."))
        return run

    def run_data(self, run: AgentRun) -> dict[str, Any]:
        return run_resource(run, request=self.request)


# ---- reads of a run, as the API shows them ------------------------------------------------


def _absolute(request: Request, name: str, **kwargs: Any) -> str:
    return request.build_absolute_uri(reverse(f"v1:{name}", kwargs=kwargs))


def _pending_approvals(run: AgentRun, request: Request) -> list[dict[str, Any]]:
    pending = run.approvals.filter(decision=ToolApproval.Decision.PENDING).order_by("pk")
    return [
        {
            **{
                name: value
                for name, value in approval_requested_payload(approval).items()
                if name != "kind"
            },
            "decide_url": _absolute(request, "approval-decide", approval_id=approval.pk),
        }
        for approval in pending
    ]


def _answer(run: AgentRun) -> str | None:
    answer = (
        Message.objects.filter(run=run, role=Message.Role.ASSISTANT)
        .order_by("-pk")
        .values_list("content", flat=True)
        .first()
    )
    return answer


def _profile_slug(run: AgentRun) -> str:
    version = run.profile_version
    return version.profile.slug if version is not None else ""


def _usage(run: AgentRun) -> dict[str, int]:
    return {
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "total_tokens": run.total_tokens,
    }


def _error(run: AgentRun) -> dict[str, str] | None:
    if run.status != AgentRun.Status.FAILED:
        return None
    return {"code": run.error_code or "failed", "message": run.error_message}


def run_resource(run: AgentRun, *, request: Request) -> dict[str, Any]:
    run = AgentRun.objects.select_related(
        "conversation", "trigger_message", "profile_version__profile"
    ).get(pk=run.pk)
    return {
        "id": run.pk,
        "object": "run",
        "conversation_id": run.conversation_id,
        "model": _profile_slug(run),
        "status": run.status,
        "question": run.trigger_message.content,
        "answer": _answer(run) if run.status == AgentRun.Status.SUCCEEDED else None,
        "steps": run_stored_steps(run=run),
        "pending_approvals": _pending_approvals(run, request),
        "usage": _usage(run),
        "error": _error(run),
        "last_seq": run.conversation.last_seq,
        "events_url": _absolute(request, "run-events", run_id=run.pk),
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


# ---- /v1/models ----------------------------------------------------------------------------


class ModelListView(KeyView):
    required_scope = ApiKey.Scope.READ

    @extend_schema(
        summary="The agents this key's owner may use, one model each",
        responses={200: shapes.ModelListSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        profiles = selectors.profiles_for_user(user=request.user)
        created = int(time.time())
        return Response(
            {
                "object": "list",
                "data": [
                    {
                        "id": profile.slug,
                        "object": "model",
                        "created": created,
                        "owned_by": "chatsite",
                        "name": profile.name,
                        "description": profile.description,
                    }
                    for profile in profiles
                ],
            }
        )


# ---- /v1/chat/completions ------------------------------------------------------------------


def _question(messages: list[dict[str, Any]], *, continuing: bool) -> str:
    """The new question: the last message, a user's. Earlier ones: see docs/protocol.md —
    system and developer messages are ignored (the profile's prompt governs); user,
    assistant and tool turns are the conversation's own when continuing, and are refused
    when not, rather than silently answering a question out of its context."""
    last = messages[-1]
    if last["role"] != "user":
        raise RequestRefused(
            RefusalCode.INVALID_FIELD, _("The last message must be the user's question.")
        )
    text = shapes.message_text(last.get("content"))
    if text is None:
        raise RequestRefused(RefusalCode.INVALID_FIELD, shapes.unsupported_part())
    earlier_turns = [m for m in messages[:-1] if m["role"] in ("user", "assistant", "tool")]
    if earlier_turns and not continuing:
        raise RequestRefused(
            RefusalCode.HISTORY_NOT_SUPPORTED,
            _(
                "Earlier turns cannot be sent in messages: the agent keeps the conversation. "
                "Pass the conversation_id of an earlier answer to continue it."
            ),
        )
    return text


class ChatCompletionsView(KeyView):
    required_scope = ApiKey.Scope.CHAT

    @extend_schema(
        summary="Ask an agent (OpenAI's chat completions; stream for server-sent events)",
        request=shapes.ChatCompletionInput,
        responses={
            (200, "application/json"): shapes.ChatCompletionSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="chat.completion.chunk events, then [DONE]"
            ),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> HttpResponseBase:
        data = self.input(shapes.ChatCompletionInput)
        profile = self.profile_or_refuse(data["model"])
        conversation_id = data.get("conversation_id")
        content = _question(data["messages"], continuing=conversation_id is not None)
        sent = api_run_start(
            user=self.owner(),
            profile=profile,
            content=content,
            conversation_id=conversation_id,
        )
        run = sent.run
        completion = _Completion(
            run_id=run.pk,
            conversation_id=run.conversation_id,
            model=profile.slug,
            run_url=_absolute(request, "run", run_id=run.pk),
            request=request,
        )
        # From the send's own message.created: the frames of this run only.
        after_seq = max(run.conversation.last_seq - 1, 0)
        if data["stream"]:
            response = StreamingHttpResponse(
                completion.chunks(after_seq), content_type="text/event-stream"
            )
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"
        else:
            response = StreamingHttpResponse(
                completion.whole(after_seq), content_type="application/json"
            )
        response["X-Chatsite-Conversation-Id"] = str(run.conversation_id)
        response["X-Chatsite-Run-Id"] = str(run.pk)
        return response


class _Completion:
    """One completion's body, built from its run's stored frames as they come."""

    def __init__(
        self, *, run_id: int, conversation_id: int, model: str, run_url: str, request: Request
    ) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.model = model
        self.run_url = run_url
        self.request = request
        self.id = f"chatcmpl-run-{run_id}"
        self.created = int(time.time())

    def _frames(self, after_seq: int) -> AsyncIterator[dict[str, Any] | None]:
        return run_frames(
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            after_seq=after_seq,
            until=COMPLETION_ENDS,
        )

    def _extension(self, **more: Any) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "run_id": self.run_id,
            "run_url": self.run_url,
            **more,
        }

    async def _ending(self, last: dict[str, Any]) -> tuple[str, dict[str, int], dict[str, Any]]:
        """What the frame the run stopped at means: the finish reason, the run's usage, and
        the extension's part (status, and the pending calls or the error)."""
        finish, status_ = ENDINGS[last["type"]]

        @in_shared_thread
        def read() -> tuple[dict[str, int], list[dict[str, Any]]]:
            run = AgentRun.objects.get(pk=self.run_id)
            pending = []
            if status_ in AgentRun.PAUSED_STATUSES:
                pending = _pending_approvals(run, self.request)
            return _usage(run), pending

        usage, pending = await read()
        more: dict[str, Any] = {"status": status_}
        if status_ in AgentRun.PAUSED_STATUSES:
            more["pending_approvals"] = pending
        if status_ == AgentRun.Status.FAILED:
            more["error"] = {
                "code": last.get("code") or "failed",
                "message": last.get("message", ""),
            }
        return finish, usage, more

    def _chunk(self, delta: dict[str, Any], *, finish: str | None = None, **extra: Any) -> str:
        chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return sse_event(chunk)

    async def chunks(self, after_seq: int) -> AsyncIterator[str]:
        yield self._chunk(
            {"role": "assistant", "content": ""},
            conversation_id=self.conversation_id,
            chatsite=self._extension(status=AgentRun.Status.QUEUED),
        )
        last: dict[str, Any] | None = None
        async for frame in self._frames(after_seq):
            if frame is None:
                yield SSE_KEEPALIVE
                continue
            last = frame
            delta: dict[str, Any] = {}
            if frame["type"] == FrameType.RUN_FINISHED:
                delta = {"content": frame["message"]["content"]}
            elif frame["type"] == FrameType.RUN_CANCELLED and frame.get("partial_answer"):
                delta = {"content": frame["partial_answer"]}
            yield self._chunk(
                delta, chatsite=self._extension(status=AgentRun.Status.RUNNING, event=frame)
            )
        if last is None:
            return  # the stream was cut short (the client left)
        finish, usage, more = await self._ending(last)
        yield self._chunk(
            {},
            finish=finish,
            usage=usage,
            conversation_id=self.conversation_id,
            chatsite=self._extension(**more),
        )
        yield sse_event("[DONE]")

    async def whole(self, after_seq: int) -> AsyncIterator[str]:
        steps: list[dict[str, Any]] = []
        content = ""
        last: dict[str, Any] | None = None
        async for frame in self._frames(after_seq):
            if frame is None:
                yield "\n"  # whitespace before JSON is JSON: keeps a quiet connection open
                continue
            last = frame
            if frame["type"] == FrameType.STEP:
                steps.append(frame)
            elif frame["type"] == FrameType.RUN_FINISHED:
                content = frame["message"]["content"]
            elif frame["type"] == FrameType.RUN_CANCELLED:
                content = frame.get("partial_answer") or ""
        if last is None:
            return
        finish, usage, more = await self._ending(last)
        body = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
            "conversation_id": self.conversation_id,
            "chatsite": self._extension(steps=steps, **more),
        }
        yield json.dumps(body, ensure_ascii=False)


# ---- runs as resources ---------------------------------------------------------------------


class RunCollectionView(KeyView):
    required_scope = ApiKey.Scope.CHAT

    @extend_schema(
        summary="Start a run: the question is sent as the web chat sends it",
        request=shapes.RunStartInput,
        responses={200: shapes.RunSerializer, 201: shapes.RunSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = self.input(shapes.RunStartInput)
        profile = self.profile_or_refuse(data["model"])
        sent = api_run_start(
            user=self.owner(),
            profile=profile,
            content=data["input"],
            conversation_id=data.get("conversation_id"),
            client_id=data.get("client_id"),
        )
        return Response(
            self.run_data(sent.run),
            status=status.HTTP_201_CREATED if sent.created else status.HTTP_200_OK,
        )


class RunItemView(KeyView):
    required_scope: str | None = ApiKey.Scope.READ

    @extend_schema(
        summary="A run: its state, steps, answer and what it waits for",
        responses={200: shapes.RunSerializer, **ERRORS},
    )
    def get(self, request: Request, run_id: int) -> Response:
        return Response(self.run_data(self.run_or_404(run_id)))


class RunCancelView(KeyView):
    required_scope = ApiKey.Scope.CHAT

    @extend_schema(
        summary="Stop a run (a no-op if it already ended)",
        request=None,
        responses={200: shapes.RunSerializer, **ERRORS},
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = run_cancel(run=self.run_or_404(run_id), user=self.owner())
        return Response(self.run_data(run))


class RunContinueView(KeyView):
    required_scope = ApiKey.Scope.CHAT

    @extend_schema(
        summary="Continue a run stopped at a budget",
        request=None,
        responses={200: shapes.RunSerializer, **ERRORS},
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = run_continue(run=self.run_or_404(run_id), user=self.owner())
        return Response(self.run_data(run))


class ApprovalDecideView(KeyView):
    required_scope = ApiKey.Scope.CHAT

    @extend_schema(
        summary="Approve or deny a tool call a run paused for",
        request=shapes.ApprovalDecideInput,
        responses={200: shapes.DecisionSerializer, **ERRORS},
    )
    def post(self, request: Request, approval_id: int) -> Response:
        data = self.input(shapes.ApprovalDecideInput)
        approval = approval_decide(
            approval_id=approval_id,
            user=self.owner(),
            approve=data["approve"],
            reason=data["reason"],
        )
        return Response(
            {
                "approval": approval_decided_payload(approval),
                "run": self.run_data(approval.run),
            }
        )


class RunEventsView(KeyView):
    required_scope: str | None = ApiKey.Scope.READ

    @extend_schema(
        summary="A run's stored events as server-sent events, from any seq, to its end",
        parameters=[
            OpenApiParameter(
                "after_seq",
                int,
                description="Send events with a greater seq (default 0; Last-Event-ID too).",
            )
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="One event per stored frame; id is its seq."
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, run_id: int) -> HttpResponseBase:
        run = self.run_or_404(run_id)
        query = dict(request.query_params.items())
        resumed = request.headers.get("Last-Event-ID")
        if "after_seq" not in query and resumed is not None:
            query["after_seq"] = resumed
        after_seq = self.input(shapes.EventsQuery, data=query)["after_seq"]
        response = StreamingHttpResponse(
            _run_events(run, after_seq=after_seq), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


@extend_schema(exclude=True)
class NoSuchEndpointView(KeyView):
    """Any other path under /v1/: a JSON 404 (after the key is checked, like every path)
    rather than the site's HTML page, which needs a session this handler does not have."""

    required_scope = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        raise NotFound(_("No such endpoint."))


async def _run_events(run: AgentRun, *, after_seq: int) -> AsyncIterator[str]:
    # A run that has ended has stored all it will: send that and end, even from past its end.
    frames = run_frames(
        conversation_id=run.conversation_id,
        run_id=run.pk,
        after_seq=after_seq,
        follow=not run.is_terminal,
    )
    async for frame in frames:
        if frame is None:
            yield SSE_KEEPALIVE
            continue
        yield sse_event(frame, event=str(frame["type"]), id=frame["seq"])
