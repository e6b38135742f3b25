"""Prompt templates: defaults as data files, validation, rendering, the preview."""

from __future__ import annotations

import pytest

from agents.react.errors import PromptTemplateError
from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.prompt import (
    PromptConfig,
    default_template,
    render_preview,
    render_template,
    template_variables,
    validate_template,
)
from agents.react.testing import ScriptedChatModel
from tests.react.tools import Adder, Echo

MODES_AND_SETS = [("react", "en"), ("react", "zh"), ("tools", "en"), ("tools", "zh")]


@pytest.mark.parametrize(("mode", "label_set"), MODES_AND_SETS)
def test_default_templates_are_valid(mode, label_set):
    template = default_template(mode, label_set)
    assert validate_template(template, mode, label_set_code=label_set) == []


def test_react_template_has_the_zero_shot_shape():
    template = default_template("react", "en")
    assert template_variables(template) == [
        "tools",
        "tool_names",
        "few_shot_examples",
        "history",
        "input",
        "agent_scratchpad",
    ]
    assert "should be one of [{tool_names}]" in template
    for label in ("Question:", "Thought:", "Action:", "Action Input:", "Observation:"):
        assert label in template
    assert "Final Answer:" in template
    assert template.rstrip().endswith("Question: {input}\nThought:{agent_scratchpad}")


def test_chinese_template_uses_the_chinese_labels():
    template = default_template("react", "zh")
    for label in ("问题：", "思考：", "行动：", "行动输入：", "观察：", "最终答案："):
        assert label in template
    assert "[{tool_names}]" in template


def test_empty_template_is_valid_and_means_the_default():
    assert validate_template("", "react") == []
    assert PromptConfig().template_text() == default_template("react", "en")


def test_unknown_and_missing_variables_are_named():
    problems = validate_template("Hi {user_name}. Q: {input} {agent_scratchpad}", "react")
    assert problems[0].startswith("Unknown variable {user_name} in react mode")
    assert "Missing variable {tools}: the react mode needs it." in problems
    assert "Missing variable {tool_names}: the react mode needs it." in problems
    assert "Missing variable {history}: the react mode needs it." in problems
    assert not any("{input}" in p or "{agent_scratchpad}" in p for p in problems)


def test_tools_mode_explains_why_react_variables_do_not_fit():
    problems = validate_template("Answer {input} with {history}", "tools")
    assert problems == [
        "Unknown variable {input} in tools mode (the question is sent as its own message).",
        "Unknown variable {history} in tools mode (the conversation is sent as messages).",
    ]


def test_unknown_mode_is_a_problem():
    assert validate_template("x", "chain") == ["Unknown mode 'chain': use one of react, tools."]


def test_spaces_inside_braces_are_reported():
    assert "Variable { input } has spaces inside the braces." in validate_template(
        "{ input }", "tools"
    )


def test_few_shot_examples_need_a_place():
    problems = validate_template("Just answer.", "tools", few_shot_examples="Q: a\nA: b")
    assert problems == [
        "Few-shot examples are set, but the template has no {few_shot_examples} to put them in."
    ]


def test_label_check_catches_a_template_in_the_wrong_language():
    chinese = default_template("react", "zh")
    problems = validate_template(chinese, "react", label_set_code="en")
    assert "The template never writes 'Final Answer:'" in problems[-1]


def test_braces_that_are_not_variables_are_literal():
    template = 'Reply as JSON: {"action": "x", "action_input": "y"} {{literal}} {input}'
    assert validate_template(template, "tools") == [
        "Unknown variable {input} in tools mode (the question is sent as its own message)."
    ]
    rendered = render_template(template, {"input": "Q"})
    assert rendered == 'Reply as JSON: {"action": "x", "action_input": "y"} {literal} Q'


def test_rendering_an_unknown_variable_fails_clearly():
    with pytest.raises(PromptTemplateError, match=r"Unknown variable \{nope\}"):
        render_template("{nope}", {})


def test_preview_of_the_default_react_prompt():
    preview = render_preview(PromptConfig(), tools=[Adder(), Echo()], question="2+3?")
    (message,) = preview.messages
    assert message["role"] == "user"
    content = message["content"]
    assert (
        'adder: Adds two integers. (input: a JSON object {"a": integer, "b": integer})' in content
    )
    assert "echo: Repeats its input back." in content
    assert "should be one of [adder, echo]" in content
    assert content.endswith("Question: 2+3?\nThought:")
    assert preview.options == {"stop": ["\nObservation:"]}


def test_preview_with_a_custom_template_history_summary_and_examples():
    prompt = PromptConfig(
        template=(
            "Tools: {tools} ({tool_names})\n{memory_summary}\n{history}\n{few_shot_examples}\n"
            "Action: / Action Input: / Observation: / Final Answer:\nQ: {input}\n{agent_scratchpad}"
        ),
        few_shot_examples="Q: 1+1\nFinal Answer: 2",
    )
    preview = render_preview(
        prompt,
        tools=[Echo()],
        question="hi",
        history=[{"role": "user", "content": "earlier"}, {"role": "tool", "content": "skip"}],
        memory_summary="a summary",
    )
    content = preview.messages[0]["content"]
    assert "Tools: echo: Repeats its input back. (echo)" in content
    assert "Summary of the earlier conversation:\n\na summary" in content
    assert "The conversation so far:\n\nUser: earlier\n" in content
    assert "skip" not in content
    assert "Examples:\n\nQ: 1+1\nFinal Answer: 2" in content
    assert content.count("a summary") == 1


def test_preview_of_native_mode():
    preview = render_preview(
        PromptConfig(mode="tools", few_shot_examples="Example."),
        tools=[Adder()],
        history=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi there"},
        ],
        memory_summary="They greeted.",
        temperature=0.2,
    )
    roles = [m["role"] for m in preview.messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert "Example." in preview.messages[0]["content"]
    assert "They greeted." in preview.messages[0]["content"]
    assert preview.messages[-1]["content"] == "What is (28+10)*3?"
    assert preview.options == {"tools": [Adder().openai_schema()], "temperature": 0.2}


def test_preview_of_chinese_react_prompt():
    preview = render_preview(PromptConfig(label_set="zh"), tools=[Echo()])
    content = preview.messages[0]["content"]
    assert content.endswith("问题：(28+10)*3 等于多少？\n思考：")
    assert preview.options["stop"][0] == "\n观察："


@pytest.mark.parametrize(("mode", "label_set"), MODES_AND_SETS)
def test_preview_is_exactly_the_first_request_of_a_run(mode, label_set):
    prompt = PromptConfig(mode=mode, label_set=label_set, few_shot_examples="An example.")
    history = [{"role": "user", "content": "before"}, {"role": "assistant", "content": "ok"}]
    model = ScriptedChatModel(["Final Answer: x"])
    executor = AgentExecutor(
        model=model, tools=[Adder()], prompt=prompt, config=AgentConfig(temperature=0.5)
    )
    record = next(iter(executor.run("Q?", history=history, memory_summary="S.")))
    preview = render_preview(
        prompt,
        tools=[Adder()],
        question="Q?",
        history=history,
        memory_summary="S.",
        temperature=0.5,
    )
    assert record.messages == preview.messages == model.calls[0].messages
    assert record.options == preview.options


def test_crlf_from_a_textarea_is_normalised():
    rendered = render_template("a\r\n{input}\r\n", {"input": "b"})
    assert rendered == "a\nb\n"


def test_unknown_label_set_and_mode_are_refused():
    with pytest.raises(ValueError, match="label set"):
        PromptConfig(label_set="fr")
    with pytest.raises(ValueError, match="mode"):
        PromptConfig(mode="plan")
