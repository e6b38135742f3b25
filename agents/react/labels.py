"""Label sets: the words of the ReAct format in one language, and the engine's notes to the model.

A profile picks the set its prompt is written in. The set decides how the scratchpad is
rendered, which stop sequences are sent and the language of the notes the engine writes into
observations. The parser reads every set's labels whatever the profile's set, because a model
prompted in Chinese sometimes answers with English labels (and the other way round).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabelSet:
    code: str
    question: str
    thought: str
    action: str
    action_input: str
    observation: str
    final_answer: str
    colon: str
    # Notes the engine writes for the model; ``{...}`` fields are filled with str.format.
    format_reminder: str
    unknown_tool: str
    tool_failed: str
    tool_timed_out: str
    invalid_arguments: str
    observation_truncated: str
    final_answer_request: str
    json_arguments_hint: str
    no_tools: str
    empty_reply: str
    gave_up: str
    # Headings of the optional prompt blocks, and how history speakers are named.
    examples_heading: str
    history_heading: str
    summary_heading: str
    user_name: str
    assistant_name: str
    # The observation of a call the user declined (approval before side effects).
    tool_declined: str = "The user declined this call to {name}; it was not run.{reason}"
    declined_reason: str = " Their reason: {reason}"
    # A native reply that gave two of its tool calls the same id: none of them ran.
    repeated_call_id: str = (
        "Your reply was refused and none of its tool calls ran: more than one call had the "
        "id {call_id!r}. Give every tool call in a reply its own id."
    )
    # A call under an id a person approved or declined for another call (it did not run).
    approval_mismatch: str = (
        "The call to {name} was not run: the decision under its id was taken on another call."
    )
    # The user's own instructions for every run (their custom instructions), as a block.
    user_instructions_heading: str = (
        "The user asks you to follow these instructions of theirs in every answer:"
    )
    # A stopped answer the user asked to have continued; ``{question}`` and ``{partial}``.
    continue_answer_request: str = (
        "{question}\n\n(You began answering this and were stopped. Your answer so far, "
        "between the lines:\n-----\n{partial}\n-----\nContinue it exactly where it stops: "
        "begin your answer with the last few words written so far, exactly as they are, "
        "then write the rest; repeat nothing else.)"
    )
    # A replay's call that the original run did not record (agents/react/replay.py).
    not_recorded: str = (
        "The call to {name} was not run: it is not recorded in the original run, and this "
        "replay does not run calls the original did not make."
    )

    def label(self, role: str) -> str:
        return str(getattr(self, role))

    def line(self, role: str, text: str = "") -> str:
        """``Label: text`` for a role: question, thought, action, action_input, observation
        or final_answer."""
        return self.write(self.label(role), text)

    def write(self, label: str, text: str = "") -> str:
        """``label: text``, with no space after a full-width colon."""
        head = f"{label}{self.colon}"
        if not text:
            return head
        return f"{head} {text}" if self.colon == ":" else f"{head}{text}"

    @property
    def stop(self) -> list[str]:
        """Stop sequences: the model must end its turn before writing an observation."""
        if self.code == "en":
            return ["\nObservation:"]
        return [f"\n{self.observation}{self.colon}", f"\n{self.observation}:", "\nObservation:"]


ENGLISH = LabelSet(
    code="en",
    question="Question",
    thought="Thought",
    action="Action",
    action_input="Action Input",
    observation="Observation",
    final_answer="Final Answer",
    colon=":",
    format_reminder=(
        "Your reply did not follow the format ({problem}). Either name one tool, with "
        "'Action: <one of [{tool_names}]>' followed by 'Action Input: <the input>', or finish "
        "with 'Final Answer: <your answer>'."
    ),
    unknown_tool="There is no tool named {name!r}. Valid tools: [{tool_names}].",
    tool_failed="The tool {name} failed: {error}",
    tool_timed_out="The tool {name} did not finish within {seconds:g} seconds.",
    invalid_arguments="The input for {name} is not valid: {error}",
    observation_truncated="[cut: showing {shown} of {total} characters]",
    final_answer_request=(
        "({reason}) Use no more tools. Using what you found so far, reply now with "
        "'Final Answer: <your answer>'."
    ),
    json_arguments_hint="input: a JSON object {fields}",
    no_tools="(no tools available)",
    empty_reply="Your reply was empty. Answer the question or call a tool.",
    gave_up="I stopped before reaching an answer.",
    examples_heading="Examples:",
    history_heading="The conversation so far:",
    summary_heading="Summary of the earlier conversation:",
    user_name="User",
    assistant_name="Assistant",
)

CHINESE = LabelSet(
    code="zh",
    question="问题",
    thought="思考",
    action="行动",
    action_input="行动输入",
    observation="观察",
    final_answer="最终答案",
    colon="：",
    format_reminder=(
        "你的回复不符合格式（{problem}）。要么写“行动：<[{tool_names}]中的一个>”并接着写"
        "“行动输入：<输入>”，要么用“最终答案：<你的答案>”结束。"
    ),
    unknown_tool="没有名为 {name!r} 的工具。可用的工具：[{tool_names}]。",
    tool_failed="工具 {name} 出错：{error}",
    tool_timed_out="工具 {name} 在 {seconds:g} 秒内没有完成。",
    invalid_arguments="{name} 的输入无效：{error}",
    observation_truncated="[已截断：显示 {total} 个字符中的 {shown} 个]",
    final_answer_request="（{reason}）不要再使用工具。根据目前得到的信息，现在用“最终答案：<你的答案>”回复。",
    json_arguments_hint="输入：JSON 对象 {fields}",
    no_tools="（没有可用的工具）",
    empty_reply="你的回复是空的。请回答问题或调用工具。",
    gave_up="我在得到答案之前停止了。",
    examples_heading="示例：",
    history_heading="目前为止的对话：",
    summary_heading="之前对话的摘要：",
    user_name="用户",
    assistant_name="助手",
    tool_declined="用户拒绝了对 {name} 的这次调用，它没有运行。{reason}",
    declined_reason="理由：{reason}",
    repeated_call_id=(
        "你的回复被拒绝，其中的工具调用都没有运行：多个调用使用了同一个 id {call_id!r}。"
        "同一个回复中的每个工具调用都要有自己的 id。"
    ),
    approval_mismatch="对 {name} 的调用没有运行：这个 id 下的决定是针对另一个调用作出的。",
    not_recorded="对 {name} 的调用没有运行：原始运行没有记录它，重放不运行未记录的调用。",
    user_instructions_heading="用户请你在每个回答中遵循他们的这些要求：",
    continue_answer_request=(
        "{question}\n\n（你已开始回答这个问题，但被中途停止。你目前的回答在两条线之间："
        "\n-----\n{partial}\n-----\n请从停止的地方接着写：你的答案先原样重复已写内容的"
        "最后几个词，然后写剩下的部分；不要重复其他内容。）"
    ),
)

LABEL_SETS: dict[str, LabelSet] = {ENGLISH.code: ENGLISH, CHINESE.code: CHINESE}

# The reasons given in ``final_answer_request`` when a limit is reached.
LIMIT_REASONS: dict[str, dict[str, str]] = {
    "en": {
        "max_iterations": "The step limit is reached.",
        "max_execution_time": "The time limit is reached.",
    },
    "zh": {
        "max_iterations": "已达到步骤上限。",
        "max_execution_time": "已达到时间上限。",
    },
}


def label_set(code: str) -> LabelSet:
    try:
        return LABEL_SETS[code]
    except KeyError:
        raise ValueError(f"unknown label set {code!r}; known: {sorted(LABEL_SETS)}") from None


# The words the parser recognises for each role, normalised (casefolded, no spaces or
# underscores). Aliases beyond the label sets are spellings models are seen to produce.
PARSER_WORDS: dict[str, str] = {
    "question": "question",
    "thought": "thought",
    "action": "action",
    "actioninput": "action_input",
    "observation": "observation",
    "finalanswer": "final_answer",
    "问题": "question",
    "思考": "thought",
    "想法": "thought",
    "行动": "action",
    "动作": "action",
    "行动输入": "action_input",
    "动作输入": "action_input",
    "观察": "observation",
    "最终答案": "final_answer",
}
