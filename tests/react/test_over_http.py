"""The engine through the real openai client and the scripted HTTP server on loopback.

The pure tests use ``ScriptedChatModel``; these check that the same behaviour holds when the
requests really go over a socket (stop sequences, streaming, tool calls, failures).
"""

from __future__ import annotations

import itertools

import pytest

from agents.llm.client import OpenAIChatModel
from agents.llm.scripted import Fail, Reply, ScriptedServer, ToolCalls
from agents.react.errors import ModelAuthError, RunCancelled
from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.types import ErrorStep, ModelCallRecord, ObservationStep
from tests.react.conftest import drain, final, kinds, without_records
from tests.react.tools import Adder

_names = itertools.count(1)


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def model_name() -> str:
    return f"engine-http-{next(_names)}"


def executor(server, model_name, *, mode="react", label_set="en", deltas=None, **options):
    model = OpenAIChatModel(
        base_url=server.base_url, api_key="k", model=model_name, deadline_seconds=10, max_retries=0
    )
    return AgentExecutor(
        model=model,
        tools=[Adder()],
        prompt=PromptConfig(mode=mode, label_set=label_set),
        config=AgentConfig(),
        on_answer_delta=deltas.append if deltas is not None else None,
        **options,
    )


def test_react_run_over_http(server, model_name):
    server.script(
        model_name,
        [
            Reply('Thought: add\nAction: adder\nAction Input: {"a": 2, "b": 3}', chunk_size=3),
            Reply("Thought: done\nFinal Answer: The sum\nis 5.", chunk_size=2),
        ],
    )
    deltas: list[str] = []
    steps = list(executor(server, model_name, deltas=deltas).run("2+3?"))
    assert kinds(without_records(steps)) == [
        "thought",
        "action",
        "observation",
        "thought",
        "final_answer",
    ]
    assert final(steps).text == "The sum\nis 5." == "".join(deltas)
    assert len(deltas) > 1
    requests = server.requests(model_name)
    records = [s for s in steps if isinstance(s, ModelCallRecord)]
    assert [r["stop"] for r in requests] == [["\nObservation:"], ["\nObservation:"]]
    assert [r["messages"] for r in requests] == [record.messages for record in records]
    assert all(record.prompt_tokens > 0 for record in records)


def test_server_that_ignores_stop(server, model_name):
    server.script(
        model_name,
        [
            Reply(
                'Action: adder\nAction Input: {"a": 1, "b": 1}\nObservation: 3\nFinal Answer: 3',
                ignore_stop=True,
            ),
            Reply("Final Answer: 2"),
        ],
    )
    steps = list(executor(server, model_name).run("1+1?"))
    assert [s.text for s in steps if isinstance(s, ObservationStep)] == ["2"]
    assert final(steps).text == "2"


def test_chinese_run_over_http(server, model_name):
    server.script(
        model_name,
        [
            Reply('思考：相加\n行动：adder\n行动输入：{"a": 4, "b": 5}'),
            Reply("思考：好了\n最终答案：九"),
        ],
    )
    deltas: list[str] = []
    steps = list(executor(server, model_name, label_set="zh", deltas=deltas).run("4 加 5？"))
    assert final(steps).text == "九" == "".join(deltas)
    assert server.requests(model_name)[0]["stop"][0] == "\n观察："
    assert "观察：9\n思考：" in server.requests(model_name)[1]["messages"][0]["content"]


def test_native_parallel_calls_and_bad_arguments_over_http(server, model_name):
    server.script(
        model_name,
        [
            ToolCalls(
                [("adder", {"a": 1, "b": 2}), ("adder", '{"a": 1,'), ("adder", {"a": "x", "b": 1})],
                text="Three at once.",
            ),
            Reply("Only the first worked: 3."),
        ],
    )
    steps = list(executor(server, model_name, mode="tools").run("sums"))
    observations = [s for s in steps if isinstance(s, ObservationStep)]
    assert observations[0].text == "3"
    assert [o.is_error for o in observations] == [False, True, True]
    assert [s.code for s in steps if isinstance(s, ErrorStep)] == ["invalid_arguments"] * 2
    second = server.requests(model_name)[1]
    assert [m["role"] for m in second["messages"][-4:]] == ["assistant", "tool", "tool", "tool"]
    assert second["tools"][0]["function"]["name"] == "adder"
    assert final(steps).text == "Only the first worked: 3."


def test_cancelled_while_the_answer_trickles_in(server, model_name):
    server.script(
        model_name, [Reply("Final Answer: " + "word " * 200, chunk_size=5, chunk_interval=0.01)]
    )
    deltas: list[str] = []
    run = executor(server, model_name, deltas=deltas, should_cancel=lambda: bool(deltas))
    steps = []
    with pytest.raises(RunCancelled):
        drain(run.run("q"), steps)
    assert steps == []
    assert 0 < len("".join(deltas)) < len("word " * 200)


def test_auth_failure_is_raised_after_its_record(server, model_name):
    server.script(model_name, [Fail(401)])
    steps = []
    with pytest.raises(ModelAuthError):
        drain(executor(server, model_name).run("q"), steps)
    assert len(steps) == 1
    assert steps[0].error.startswith("ModelAuthError")
