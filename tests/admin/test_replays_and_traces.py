"""The admin's side of replays and traces: starting a replay, the side-by-side page, the
JSON lines download, staff-only access; and the OpenTelemetry spans of a run, read with the
SDK's in-memory exporter."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents.models import AgentProfile, AgentRun, McpServer, ModelCall, RunEvent, ToolConfig
from agents.services.prompt_versions import prompt_version_ensure
from agents.traces import run_trace_export
from tests.admin.conftest import page_text

pytestmark = pytest.mark.django_db

TOOL_SECRET = "tool-header-secret-5f1c"
MCP_BEARER = "mcp-bearer-token-9a7e"


@pytest.fixture
def version():
    profile = AgentProfile.objects.create(name="Geographer", slug="geographer")
    return prompt_version_ensure(profile=profile)


@pytest.fixture
def secrets():
    """A tool header secret and an MCP server's bearer token, configured as the admin would."""
    tool = ToolConfig.objects.create(name="capitals", kind="http_request", description="x")
    tool.set_secrets({"API_KEY": TOOL_SECRET})
    tool.save()
    server = McpServer.objects.create(name="maps", url="http://127.0.0.1:9/mcp")
    server.set_headers({"Authorization": f"Bearer {MCP_BEARER}"})
    server.save()


def _leaked_into_the_log(run):
    """A secret that slipped into a stored step (a tool that did not redact it)."""
    event = RunEvent.objects.get(run=run, payload__kind="observation")
    event.payload["text"] = f"Paris (key {TOOL_SECRET}, auth Bearer {MCP_BEARER})"
    event.save()
    action = RunEvent.objects.get(run=run, payload__kind="action")
    action.payload["tool_input"] = {"country": "France", "token": MCP_BEARER}
    action.save()
    ModelCall.objects.filter(run=run).update(error=f"refused {TOOL_SECRET}")


def test_a_run_is_one_trace_of_genai_spans_with_no_secret(
    user, version, make_finished_run, secrets
):
    run = make_finished_run(owner=user, profile_version=version)
    _leaked_into_the_log(run)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    assert run_trace_export(run_id=run.pk, tracer_provider=provider)
    assert not run_trace_export(run_id=run.pk, tracer_provider=provider)  # once per run

    spans = exporter.get_finished_spans()
    by_name = {span.name: span for span in spans}
    assert sorted(by_name) == ["chat demo", "execute_tool capitals", "invoke_agent Geographer"]
    root = by_name["invoke_agent Geographer"]
    chat, tool = by_name["chat demo"], by_name["execute_tool capitals"]
    assert root.parent is None
    assert {span.context.trace_id for span in spans} == {root.context.trace_id}
    assert chat.parent.span_id == root.context.span_id
    assert tool.parent.span_id == root.context.span_id
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == str(run.conversation_id)
    assert root.attributes["user.id"] == str(user.pk)
    assert root.attributes["gen_ai.usage.input_tokens"] == 120
    assert root.attributes["gen_ai.usage.output_tokens"] == 30
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 120
    assert chat.attributes["gen_ai.usage.output_tokens"] == 30
    assert chat.end_time - chat.start_time == 420 * 1_000_000
    assert tool.attributes["gen_ai.tool.name"] == "capitals"
    assert tool.attributes["gen_ai.tool.call.id"] == "call-1"
    assert "[secret]" in tool.attributes["gen_ai.tool.call.result"]
    assert root.start_time <= chat.start_time
    assert tool.end_time <= root.end_time
    everything = json.dumps(
        [{**dict(span.attributes), "status": span.status.description} for span in spans]
    )
    assert TOOL_SECRET not in everything
    assert MCP_BEARER not in everything
    assert chat.attributes["error.type"] == "refused [secret]"


def test_traces_download_as_json_lines_for_staff_only(
    client, staff_client, user, version, make_finished_run, secrets
):
    first = make_finished_run(owner=user, profile_version=version)
    second = make_finished_run(owner=user, profile_version=version)
    _leaked_into_the_log(second)
    changelist = reverse("admin:agents_agentrun_changelist")
    action = {"action": "download_traces", "_selected_action": [first.pk, second.pk]}

    response = staff_client.post(changelist, action)

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="run-traces.jsonl"'
    body = page_text(response)
    lines = [json.loads(line) for line in body.splitlines()]
    # Each run's span first, then its calls (in time order: the test's rows share a clock).
    assert [(line["run_id"], line["span"], line["parent"]) for line in lines] == [
        (first.pk, 0, None),
        (first.pk, 1, 0),
        (first.pk, 2, 0),
        (second.pk, 0, None),
        (second.pk, 1, 0),
        (second.pk, 2, 0),
    ]
    assert lines[0]["name"] == lines[3]["name"] == "invoke_agent Geographer"
    of_first = {line["name"]: line for line in lines[1:3]}
    assert sorted(of_first) == ["chat demo", "execute_tool capitals"]
    assert of_first["chat demo"]["attributes"]["gen_ai.usage.input_tokens"] == 120
    assert of_first["execute_tool capitals"]["attributes"]["gen_ai.tool.call.result"] == "Paris"
    assert TOOL_SECRET not in body
    assert MCP_BEARER not in body

    client.force_login(user)  # not staff
    refused = client.post(changelist, action)
    assert refused.status_code == 302
    assert "/login/" in refused["Location"]
    assert "run-traces" not in refused.get("Content-Disposition", "")


def test_staff_start_a_replay_and_see_it_beside_its_original(
    client, staff_client, staff, user, version, make_finished_run
):
    original = make_finished_run(owner=user, profile_version=version)
    profile = version.profile
    profile.system_prompt = "Answer in one word."
    profile.save()
    second = prompt_version_ensure(profile=profile)
    page = page_text(staff_client.get(reverse("admin:agents_agentrun_change", args=[original.pk])))
    assert "Replay this run" in page

    response = staff_client.post(
        reverse("admin:agents_agentrun_replay", args=[original.pk]),
        {"version": second.pk, "model_config": "", "unrecorded": "run_read_only"},
    )

    replay = AgentRun.objects.get(replay_of=original)
    compare = reverse("admin:agents_agentrun_compare", args=[replay.pk])
    assert response["Location"] == compare
    assert replay.status == AgentRun.Status.QUEUED  # a worker takes it like any run
    assert (replay.profile_version, replay.replay_unrecorded) == (second, "run_read_only")
    assert replay.conversation.owner == staff
    assert replay.conversation.for_replay
    # The copy opens in no chat page, not even its owner's.
    assert staff_client.get(f"/c/{replay.conversation_id}/").status_code == 404
    page = page_text(staff_client.get(compare))
    assert "The capital of France is Paris." in page  # the original's steps
    assert 'http-equiv="refresh"' in page  # reloads while the replay runs
    assert str(second) in page

    client.force_login(user)  # not staff: neither the page nor a replay
    assert client.get(compare).status_code == 302
    client.post(
        reverse("admin:agents_agentrun_replay", args=[original.pk]),
        {"version": second.pk, "unrecorded": "answer"},
    )
    assert AgentRun.objects.filter(replay_of=original).count() == 1


def test_a_bad_replay_request_starts_nothing_and_says_why(
    staff_client, user, version, make_finished_run
):
    original = make_finished_run(owner=user, profile_version=version)
    response = staff_client.post(
        reverse("admin:agents_agentrun_replay", args=[original.pk]),
        {"version": 999999, "unrecorded": "answer"},
        follow=True,
    )
    assert "The replay was not started" in page_text(response)
    assert not AgentRun.objects.filter(replay_of=original).exists()


def test_a_replay_whose_original_was_deleted_still_runs_no_tool(
    staff_client, user, version, make_finished_run
):
    from agents.react.tools import Tool
    from agents.services.replays import replay_tool_policy

    class Filer(Tool):
        name = "capitals"

        def run(self, *, text: str) -> str:
            raise AssertionError("a replay ran a tool")

    original = make_finished_run(owner=user, profile_version=version)
    staff_client.post(
        reverse("admin:agents_agentrun_replay", args=[original.pk]),
        {"version": version.pk, "unrecorded": "run_read_only"},
    )
    replay = AgentRun.objects.get(replay_of=original)
    assert replay_tool_policy(run=replay).answer(Filer(), {"text": "France"}).text == "Paris"

    original.conversation.delete()  # the user deletes the conversation the run was in
    replay.refresh_from_db()

    assert replay.replay_of is None
    answer = replay_tool_policy(run=replay).answer(Filer(), {"text": "France"})
    assert answer.not_recorded


def test_a_replay_counts_against_its_starter_like_a_send(
    settings, staff_client, staff, user, version, make_finished_run
):
    settings.CHAT_DAILY_TOKEN_QUOTA = 100
    original = make_finished_run(owner=user, profile_version=version)  # the user's tokens
    make_finished_run(owner=staff, profile_version=version)  # 150 of the staff member's

    response = staff_client.post(
        reverse("admin:agents_agentrun_replay", args=[original.pk]),
        {"version": version.pk, "unrecorded": "answer"},
        follow=True,
    )

    assert "used today" in page_text(response)
    assert not AgentRun.objects.filter(replay_of=original).exists()
