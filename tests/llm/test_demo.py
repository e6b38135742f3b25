"""The offline demo model behaves like a small ReAct agent, in text and native tool modes."""

from __future__ import annotations

import json

import pytest

from agents.llm.demo import DEMO_MODEL_NAME, demo_policy, ensure_demo_server, find_expression
from agents.llm.factory import demo_chat_model
from agents.llm.scripted import Reply, ToolCalls

TOOLS_EN = (
    "Answer the following questions as best you can. You have access to the following tools:\n\n"
    "calculator: evaluates arithmetic\ncurrent_time: the date and time now\n\n"
    "Use the following format:\n\nQuestion: the input question you must answer\n"
    "Thought: you should always think about what to do\n"
    "Action: the action to take, should be one of [calculator, current_time]\n"
    "Action Input: the input to the action\nObservation: the result of the action\n"
    "Thought: I now know the final answer\nFinal Answer: the final answer\n\nBegin!"
)
TOOLS_ZH = (
    "尽你所能回答问题。你可以使用以下工具：\n\ncalculator: 计算\ncurrent_time: 时间\n\n"
    "使用以下格式：\n\n问题：你必须回答的问题\n思考：你应该想想要做什么\n"
    "行动：要采取的行动，必须是 [calculator, current_time] 之一\n行动输入：行动的输入\n"
    "观察：行动的结果\n最终答案：最终答案\n\n开始！"
)
NATIVE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "current_time",
            "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
        },
    },
]


def react_messages(system: str, question_line: str, scratchpad: str = "") -> list[dict]:
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"{question_line}\n{scratchpad}"},
    ]


@pytest.fixture(scope="module")
def demo():
    return demo_chat_model()


def test_react_arithmetic_calls_the_calculator_then_answers(demo):
    first = demo.complete(
        react_messages(TOOLS_EN, "Question: what is (28+10)*3?"), stop=["\nObservation:"]
    )
    assert "Action: calculator" in first.text
    assert "Action Input: (28+10)*3" in first.text
    assert "Observation" not in first.text

    scratchpad = f"{first.text}\nObservation: 114\nThought:"
    deltas: list[str] = []
    second = demo.complete(
        react_messages(TOOLS_EN, "Question: what is (28+10)*3?", scratchpad),
        on_text=deltas.append,
    )
    assert "Final Answer: The answer is 114" in second.text
    assert len(deltas) > 1


def test_react_in_chinese_uses_chinese_labels(demo):
    first = demo.complete(react_messages(TOOLS_ZH, "问题：（28+10）×3 等于多少？"))
    assert "行动：calculator" in first.text
    assert "行动输入：(28+10)*3" in first.text

    scratchpad = f"{first.text}\n观察：114\n"
    second = demo.complete(react_messages(TOOLS_ZH, "问题：（28+10）×3 等于多少？", scratchpad))
    assert "最终答案：答案是 114" in second.text


def test_react_time_question_uses_current_time(demo):
    question = "Question: what time is it?"
    first = demo.complete(react_messages(TOOLS_EN, question))
    assert "Action: current_time" in first.text

    scratchpad = f"{first.text}\nObservation: Sunday 2026-11-22 08:00:00 UTC\n"
    second = demo.complete(react_messages(TOOLS_EN, question, scratchpad))
    assert "Final Answer: The current time is Sunday 2026-11-22 08:00:00 UTC" in second.text


def test_native_mode_calls_the_tool_with_schema_arguments(demo):
    messages = [{"role": "user", "content": "what is (28+10)*3?"}]
    first = demo.complete(messages, tools=NATIVE_TOOLS)
    (call,) = first.tool_calls
    assert call.name == "calculator"
    assert json.loads(call.arguments) == {"expression": "(28+10)*3"}

    messages += [
        {
            "role": "assistant",
            "content": first.text,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "114"},
    ]
    second = demo.complete(messages, tools=NATIVE_TOOLS)
    assert second.tool_calls == ()
    assert "114" in second.text


def test_anything_else_says_it_is_the_demo_and_how_to_configure(demo):
    completion = demo.complete(react_messages(TOOLS_EN, "Question: tell me a poem"))

    assert "Final Answer:" in completion.text
    assert "demo model" in completion.text
    assert "OPENAI_BASE_URL" in completion.text


def test_arithmetic_without_a_calculator_says_so():
    reply = demo_policy({"messages": react_messages("No tools.", "Question: what is 2+2?")})

    assert "calculator tool is not enabled" in reply.text


def test_summary_requests_get_an_extractive_summary():
    prompt = (
        "Write the updated memory in at most 50 words.\n\nMemory so far:\n(nothing yet)\n\n"
        "New lines:\nUser: My name is Ada.\nAssistant: Hello Ada.\n\nUpdated memory:"
    )
    reply = demo_policy({"messages": [{"role": "user", "content": prompt}]})

    assert reply.text == "The user said: My name is Ada. The assistant answered: Hello Ada."


def test_policy_replies_are_streamed_replies():
    assert isinstance(demo_policy({"messages": [{"role": "user", "content": "hi"}]}), Reply)
    native = demo_policy({"messages": [{"role": "user", "content": "2*3?"}], "tools": NATIVE_TOOLS})
    assert isinstance(native, ToolCalls)


def test_one_demo_server_per_process():
    assert ensure_demo_server() == ensure_demo_server()
    assert demo_chat_model().model_name == DEMO_MODEL_NAME


@pytest.mark.parametrize(
    ("question", "expression"),
    [
        ("what is (28+10)*3?", "(28+10)*3"),
        ("（28+10）×3 等于多少？", "(28+10)*3"),
        ("What is 7 times 6", "7 * 6"),
        ("compute 2^10.", "2**10"),
        ("what is -5*3", "-5*3"),
        ("tell me about 2024", None),
        ("hello", None),
    ],
)
def test_find_expression(question, expression):
    assert find_expression(question) == expression
