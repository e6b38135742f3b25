"""Native tool calling and the Chinese label set through the whole product: a real daphne
and worker, only the model scripted. The engine's own tests (tests/react) cover both modes
in depth; these check that a profile's mode and label set reach the engine, and that what
it does is stored, sent, resumed after a crash and exported like a ReAct run's."""

from __future__ import annotations

import json
import uuid

import pytest

from agents.llm.scripted import Hang, Reply, ToolCalls
from agents.models import AgentRun
from agents.services.conversations import conversation_create
from tests.faults.checks import (
    assert_log_sound,
    kill_while_waiting_on_the_model,
    step_kinds,
    stored,
)
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

NATIVE_CALL = ToolCalls([("calculator", {"expression": "6*7"})], text="I should multiply.")
NATIVE_ANSWER = "Six times seven is **42**."

ZH_ACTION = "思考：我需要把两个数相乘。\n行动：calculator\n行动输入：6*7"
ZH_ANSWER = "六乘以七等于 **42**。"
ZH_FINAL = f"思考：计算器说是 42。\n最终答案：{ZH_ANSWER}"


def _model_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _ask(live_stack, conversation, user, content: str = "What is 6*7?"):
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": content, "client_id": uuid.uuid4().hex})
    return sock


def _steps(frames: list[dict]) -> list[dict]:
    return [frame for frame in frames if frame["type"] == "step"]


def _assert_answered(frames: list[dict], conversation, answer: str) -> None:
    """The run finished with ``answer`` (its Markdown rendered), and its log is sound."""
    finished = frames[-1]
    assert finished["type"] == "run.finished"
    assert finished["message"]["content"] == answer
    assert "<strong>42</strong>" in finished["message"]["html"]
    assert_log_sound(conversation)


def _export(live_stack, conversation, user, fmt: str):
    status, body = live_stack.http(
        "GET", f"/api/conversations/{conversation.pk}/export/?format={fmt}", user
    )
    assert status == 200, body
    return body


def _tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_a_native_mode_run_calls_the_tool_answers_and_exports(live_stack, user):
    model = _model_name("native")
    live_stack.model.script(model, [NATIVE_CALL, Reply(NATIVE_ANSWER)])
    conversation = conversation_create(owner=user, profile=live_stack.profile(model, mode="tools"))

    frames = stored(_ask(live_stack, conversation, user).receive_until(run_ended))

    thought, action, observation = _steps(frames)
    assert (thought["kind"], thought["text"]) == ("thought", "I should multiply.")
    assert (action["kind"], action["tool"]) == ("action", "calculator")
    assert action["tool_input"] == {"expression": "6*7"}
    # The engine names the call; the model's own id only pairs the result sent back to it.
    assert action["call_id"] == "call-1"
    assert action["model_call_id"]
    assert (observation["kind"], observation["text"].strip()) == ("observation", "42")
    assert observation["call_id"] == action["call_id"]
    _assert_answered(frames, conversation, NATIVE_ANSWER)

    # The model was asked the native way: tools offered, no ReAct stop sequence, and the
    # tool's result sent back as a tool message answering the call.
    first, second = live_stack.model.requests(model)
    assert [tool["function"]["name"] for tool in first["tools"]] == ["calculator"]
    assert "Observation:" not in json.dumps(first.get("stop") or [])
    assert [m["tool_call_id"] for m in _tool_messages(second)] == [action["model_call_id"]]
    assert _tool_messages(second)[0]["content"].strip() == "42"

    exported = _export(live_stack, conversation, user, "json")
    question, answer = exported["messages"]
    assert (question["role"], question["content"]) == ("user", "What is 6*7?")
    assert answer["content"] == NATIVE_ANSWER
    assert [step["kind"] for step in answer["steps"]] == ["thought", "action", "observation"]
    assert answer["steps"][1]["tool_input"] == {"expression": "6*7"}
    markdown = _export(live_stack, conversation, user, "md")
    assert "**Thought:** I should multiply." in markdown
    assert '**Action:** `calculator` — {"expression": "6*7"}' in markdown
    assert "**Observation:** 42" in markdown
    assert markdown.rstrip().endswith(NATIVE_ANSWER)


def test_a_native_mode_run_resumes_after_a_worker_kill_without_calling_the_tool_twice(
    live_stack, user
):
    model = _model_name("native-kill")
    # The second call never answers: the worker dies waiting for it.
    live_stack.model.script(model, [NATIVE_CALL, Hang(), Reply(NATIVE_ANSWER)])
    conversation = conversation_create(owner=user, profile=live_stack.profile(model, mode="tools"))
    sock = _ask(live_stack, conversation, user)

    kill_while_waiting_on_the_model(live_stack.worker, live_stack.model, model, calls=2)
    run = AgentRun.objects.get(conversation=conversation)
    ended = live_stack.wait_for_run(run.pk)
    frames = stored(sock.receive_until(run_ended))

    assert ended.status == AgentRun.Status.SUCCEEDED
    assert ended.attempts == 2
    events = assert_log_sound(conversation)
    assert step_kinds(events) == ["thought", "action", "observation"]
    assert [e.payload["attempt"] for e in events if e.type == "run.started"] == [1, 2]
    # The resumed attempt went on from the stored call and result: the third request carries
    # them as the assistant's tool call and the tool's answer, and nothing ran again.
    requests = live_stack.model.requests(model)
    assert len(requests) == 3
    call_id = next(e.payload["model_call_id"] for e in events if e.payload.get("kind") == "action")
    resumed = requests[2]["messages"]
    calls = [m for m in resumed if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["id"] for m in calls for c in m["tool_calls"]] == [call_id]
    assert [m["tool_call_id"] for m in _tool_messages(requests[2])] == [call_id]
    assert ended.answer.content == NATIVE_ANSWER
    assert [f["seq"] for f in frames] == [e.seq for e in events]


def test_a_chinese_profile_runs_end_to_end(live_stack, user):
    model = _model_name("zh")
    live_stack.model.script(model, [Reply(ZH_ACTION), Reply(ZH_FINAL)])
    conversation = conversation_create(
        owner=user, profile=live_stack.profile(model, label_set="zh")
    )

    frames = stored(
        _ask(live_stack, conversation, user, "6 乘以 7 等于多少？").receive_until(run_ended)
    )

    steps = _steps(frames)
    assert [step["kind"] for step in steps] == ["thought", "action", "observation", "thought"]
    assert steps[0]["text"] == "我需要把两个数相乘。"
    assert (steps[1]["tool"], steps[1]["tool_input"]) == ("calculator", "6*7")
    assert steps[2]["text"].strip() == "42"
    assert steps[3]["text"] == "计算器说是 42。"
    _assert_answered(frames, conversation, ZH_ANSWER)

    # The prompt and the stop sequence were the Chinese ones, and the observation went back
    # under the Chinese label.
    first, second = live_stack.model.requests(model)
    prompt = json.dumps(first["messages"], ensure_ascii=False)
    assert "行动输入：" in prompt
    assert "问题：6 乘以 7 等于多少？" in prompt
    assert "\n观察：" in first["stop"]
    assert "观察：42" in json.dumps(second["messages"], ensure_ascii=False)

    markdown = _export(live_stack, conversation, user, "md")
    assert "**Action:** `calculator` — 6*7" in markdown
    assert markdown.rstrip().endswith(ZH_ANSWER)
