"""A run's trace leaves a real worker over OTLP/HTTP once the run has ended, when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set: received here by a collector on loopback."""

from __future__ import annotations

import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agents.llm.scripted import Reply
from agents.models import AgentRun
from agents.services.conversations import conversation_create, message_send

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


class Collector:
    """Takes OTLP/HTTP trace exports (protobuf) and keeps their spans."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.received = threading.Event()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()
                collector.received.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _attributes(span) -> dict[str, Any]:
    return {
        item.key: getattr(item.value, item.value.WhichOneof("value")) for item in span.attributes
    }


def test_an_ended_run_is_exported_as_one_trace(live_stack, spawn_worker, user):
    collector = Collector()
    model = f"traced-{uuid.uuid4().hex[:8]}"
    live_stack.model.script(
        model,
        [
            Reply("Thought: add\nAction: calculator\nAction Input: 2 + 2"),
            Reply("Thought: it is 4\nFinal Answer: 4"),
        ],
    )
    profile = live_stack.profile(model)
    live_stack.worker.stop()  # the session worker comes back for the next test
    spawn_worker(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
    try:
        sent = message_send(
            conversation=conversation_create(owner=user, profile=profile), user=user, content="2+2?"
        )
        run = live_stack.wait_for_run(sent.run.pk)
        assert run.status == AgentRun.Status.SUCCEEDED
        assert collector.received.wait(60), "no trace arrived"
    finally:
        collector.close()

    names = sorted(span.name for span in collector.spans)
    assert names == [
        "chat " + model,
        "chat " + model,
        "execute_tool calculator",
        f"invoke_agent {profile.name}",
    ]
    root = next(span for span in collector.spans if span.name.startswith("invoke_agent"))
    assert {span.trace_id for span in collector.spans} == {root.trace_id}
    children = [span for span in collector.spans if span is not root]
    assert {span.parent_span_id for span in children} == {root.span_id}
    attributes = _attributes(root)
    assert attributes["gen_ai.conversation.id"] == str(run.conversation_id)
    assert attributes["user.id"] == str(user.pk)
    assert attributes["gen_ai.usage.input_tokens"] == run.prompt_tokens
    chats = [_attributes(span) for span in children if span.name.startswith("chat")]
    assert sum(chat["gen_ai.usage.input_tokens"] for chat in chats) == run.prompt_tokens
    assert sum(chat["gen_ai.usage.output_tokens"] for chat in chats) == run.completion_tokens
    tool = next(span for span in children if span.name.startswith("execute_tool"))
    assert _attributes(tool)["gen_ai.tool.call.result"] == "4"
