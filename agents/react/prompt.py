"""Prompts are data: default templates live in ``templates/``, staff edit copies in the admin.

Two modes:

- ``react``: the whole ReAct prompt is one template, sent as a single user message and
  re-rendered every step with the scratchpad (the steps so far) filled in. It must contain
  ``{tools}``, ``{tool_names}``, ``{input}``, ``{agent_scratchpad}`` and ``{history}``; it
  may contain ``{memory_summary}`` (otherwise the summary is part of ``{history}``) and
  ``{few_shot_examples}``.
- ``tools``: native tool calling. The template is the system message; the conversation so
  far, the question and the tool calls follow as ordinary chat messages, and the tools go in
  the request's ``tools``. It may contain ``{tools}``, ``{tool_names}``, ``{memory_summary}``
  (otherwise a summary is appended) and ``{few_shot_examples}``.

Variables are written ``{name}``. Any other brace is literal text, so JSON in an example needs
no escaping; ``{{`` and ``}}`` still give single braces, as in LangChain templates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from agents.react.errors import PromptTemplateError
from agents.react.labels import LabelSet, label_set
from agents.react.tools import Tool
from agents.react.types import ChatMessage, JsonDict

MODES = ("react", "tools")
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
SAMPLE_QUESTION = {"en": "What is (28+10)*3?", "zh": "(28+10)*3 等于多少？"}

_VARIABLES = {
    "react": {
        "required": ("tools", "tool_names", "input", "agent_scratchpad", "history"),
        "optional": ("memory_summary", "few_shot_examples"),
    },
    "tools": {
        "required": (),
        "optional": ("tools", "tool_names", "memory_summary", "few_shot_examples"),
    },
}
_WHY_NOT_IN_TOOLS_MODE = {
    "input": "the question is sent as its own message",
    "agent_scratchpad": "the steps are sent as tool-call messages",
    "history": "the conversation is sent as messages",
}
# A literal brace pair, or a {variable}. No nested quantifiers: linear.
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}\n]{0,80})\}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class PromptConfig:
    mode: str = "react"
    label_set: str = "en"
    template: str = ""  # empty: the default template for the mode and label set
    few_shot_examples: str = ""
    # The user's own instructions for every run: a block before the ReAct prompt, or at the
    # end of the system message in tools mode ("" adds nothing).
    user_instructions: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown prompt mode {self.mode!r}; known: {list(MODES)}")
        label_set(self.label_set)  # raises for an unknown set

    @property
    def labels(self) -> LabelSet:
        return label_set(self.label_set)

    def template_text(self) -> str:
        if self.template.strip():
            return self.template
        return default_template(self.mode, self.label_set)


@cache
def default_template(mode: str, label_set_code: str) -> str:
    return (TEMPLATE_DIR / f"{mode}_{label_set_code}.txt").read_text(encoding="utf-8")


# -- templates -----------------------------------------------------------------------------


def template_variables(template: str) -> list[str]:
    """The ``{name}`` placeholders in order of first use (a brace pair that is not a name,
    like JSON, is literal text and not listed)."""
    return list(_template_variables(template))


# A run asks at every step about the same few templates; scanning one each time was a large
# part of building the step's prompt.
@lru_cache(maxsize=64)
def _template_variables(template: str) -> tuple[str, ...]:
    names: list[str] = []
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        if name is not None and _IDENTIFIER.fullmatch(name.strip()) and name not in names:
            names.append(name)
    return tuple(names)


def validate_template(
    template: str, mode: str, *, label_set_code: str = "", few_shot_examples: str = ""
) -> list[str]:
    """Human-readable problems with ``template`` for ``mode``; an empty list means valid.

    An empty template is valid: it means the default one. With ``label_set_code`` a ReAct
    template is also checked to spell out that set's labels, because the parser and the
    stop sequence rely on them.
    """
    if mode not in MODES:
        return [f"Unknown mode {mode!r}: use one of {', '.join(MODES)}."]
    if not template.strip():
        return []
    allowed = _VARIABLES[mode]
    known = set(allowed["required"]) | set(allowed["optional"])
    used = template_variables(template)
    problems: list[str] = []
    for name in used:
        if name.strip() != name:
            problems.append(f"Variable {{{name}}} has spaces inside the braces.")
        elif name not in known:
            reason = _WHY_NOT_IN_TOOLS_MODE.get(name) if mode == "tools" else None
            hint = f" ({reason})" if reason else f" (known: {', '.join(sorted(known))})"
            problems.append(f"Unknown variable {{{name}}} in {mode} mode{hint}.")
    for name in allowed["required"]:
        if name not in used:
            problems.append(f"Missing variable {{{name}}}: the {mode} mode needs it.")
    if few_shot_examples.strip() and "few_shot_examples" not in used:
        problems.append(
            "Few-shot examples are set, but the template has no {few_shot_examples} to put them in."
        )
    if mode == "react" and label_set_code:
        labels = label_set(label_set_code)
        for role in ("action", "action_input", "observation", "final_answer"):
            if f"{labels.label(role)}{labels.colon}" not in template:
                problems.append(
                    f"The template never writes '{labels.label(role)}{labels.colon}': the "
                    f"{labels.code!r} label set needs the model to see that label."
                )
    return problems


def render_template(template: str, values: dict[str, str]) -> str:
    """Fill ``{name}`` placeholders; raises ``PromptTemplateError`` for an unknown name."""
    unknown: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "{{":
            return "{"
        if text == "}}":
            return "}"
        name = match.group(1)
        if not _IDENTIFIER.fullmatch(name):
            return text
        if name not in values:
            unknown.append(name)
            return text
        return values[name]

    rendered = _PLACEHOLDER.sub(substitute, template.replace("\r\n", "\n"))
    if unknown:
        raise PromptTemplateError([f"Unknown variable {{{name}}}." for name in unknown])
    return rendered


# -- blocks ----------------------------------------------------------------------------------


def describe_tools(tools: Sequence[Tool], labels: LabelSet) -> str:
    """One line per tool: ``name: description``, plus the argument shape when the input
    is a JSON object rather than plain text."""
    if not tools:
        return labels.no_tools
    lines = []
    for tool in tools:
        line = f"{tool.name}: {' '.join(tool.description.split())}"
        shape = _json_input_shape(tool)
        if shape:
            line += f" ({labels.json_arguments_hint.format(fields=shape)})"
        lines.append(line)
    return "\n".join(lines)


def _json_input_shape(tool: Tool) -> str:
    schema = tool.args_schema()
    properties: dict[str, JsonDict] = schema["properties"]
    required = schema["required"]
    # A lone (required) string argument takes the Action Input as plain text.
    targets = required or list(properties)
    if len(targets) == 1 and properties[targets[0]]["type"] == "string":
        return ""
    fields = [
        f"{json.dumps(name)}: {spec['type']}" + ("" if name in required else "?")
        for name, spec in properties.items()
    ]
    return "{" + ", ".join(fields) + "}"


def _block(heading: str, body: str) -> str:
    """An optional block: empty when there is nothing to say, else framed by blank lines."""
    body = body.strip()
    return f"\n{heading}\n\n{body}\n" if body else ""


def history_block(
    history: Sequence[ChatMessage], labels: LabelSet, *, memory_summary: str = ""
) -> str:
    turns = []
    speakers = {"user": labels.user_name, "assistant": labels.assistant_name}
    for message in history:
        speaker = speakers.get(message.get("role", ""))
        content = message.get("content")
        if speaker and isinstance(content, str) and content.strip():
            turns.append(labels.write(speaker, content))
    body = ""
    if memory_summary.strip():
        body = f"{labels.summary_heading}\n{memory_summary.strip()}"
        if turns:
            body += "\n\n"
    body += "\n".join(turns)
    return _block(labels.history_heading, body)


def summary_block(memory_summary: str, labels: LabelSet) -> str:
    return _block(labels.summary_heading, memory_summary)


def examples_block(few_shot_examples: str, labels: LabelSet) -> str:
    return _block(labels.examples_heading, few_shot_examples)


def user_instructions_block(user_instructions: str, labels: LabelSet) -> str:
    return _block(labels.user_instructions_heading, user_instructions)


def continuing_question(question: str, partial: str, labels: LabelSet) -> str:
    """The question of a run that goes on with a stopped answer: the model is shown what it
    wrote and asked for the rest only (``join_continuation`` puts the two together)."""
    return labels.continue_answer_request.format(question=question, partial=partial)


# A repeated tail shorter than this is taken for chance ("a"), not a repetition.
_SHORTEST_OVERLAP = 3
_NO_SPACE_BEFORE = tuple(".,;:!?)]}%'\"…")


def join_continuation(partial: str, rest: str) -> str:
    """A stopped answer followed by the rest the model wrote.

    The model is asked to begin with the last words written so far (the answer's label
    strips a leading space, so the words are what says how the two join): the longest
    such repetition, starting at a word, is dropped. A model that wrote the whole answer
    again is not made to repeat it. Without a repetition, a space goes between two words
    of a language written with spaces.
    """
    if not partial:
        return rest
    if rest.startswith(partial):
        return rest
    for length in range(min(len(partial), len(rest)), _SHORTEST_OVERLAP - 1, -1):
        start = len(partial) - length
        at_word = start == 0 or partial[start - 1].isspace()
        if at_word and partial.endswith(rest[:length]):
            return partial + rest[length:]
    if not rest or partial[-1].isspace() or rest[0].isspace() or rest.startswith(_NO_SPACE_BEFORE):
        return partial + rest
    if _unspaced(partial[-1]) or _unspaced(rest[0]):
        return partial + rest
    return f"{partial} {rest}"


class ContinuedAnswer:
    """The live answer of a run that continues a stopped one: the stopped text, then what the
    model writes, joined as ``join_continuation`` will join the whole. The model's first
    words are held back only while they may still be a repetition of the stopped text's end,
    so what is shown is always the start of the answer that is stored."""

    def __init__(self, partial: str) -> None:
        self.partial = partial
        self.reset()

    def reset(self) -> None:
        """What streamed was not the answer after all (native mode): start again."""
        self._rest = ""
        self._decided = False

    def feed(self, text: str) -> str:
        """The model's next words; returns what to show now ("" while holding back)."""
        if self._decided:
            return text
        self._rest += text
        if self._may_still_repeat():
            return ""
        self._decided = True
        return join_continuation(self.partial, self._rest)

    def _may_still_repeat(self) -> bool:
        partial, rest = self.partial, self._rest
        return any(
            (start == 0 or partial[start - 1].isspace())
            and len(partial) - start > len(rest)
            and partial.startswith(rest, start)
            for start in range(len(partial))
        )


def _unspaced(character: str) -> bool:
    """A character of a script written without spaces between words (CJK, kana, and the
    full-width forms)."""
    return "\u2e80" <= character <= "\u9fff" or "\uf900" <= character <= "\uffef"


# -- messages ------------------------------------------------------------------------------


def react_prompt(
    prompt: PromptConfig,
    *,
    tools: Sequence[Tool],
    question: str,
    history: Sequence[ChatMessage] = (),
    memory_summary: str = "",
    scratchpad: str = "",
) -> str:
    labels = prompt.labels
    template = prompt.template_text()
    has_summary_slot = "memory_summary" in template_variables(template)
    values = {
        "tools": describe_tools(tools, labels),
        "tool_names": ", ".join(tool.name for tool in tools),
        "input": question,
        "agent_scratchpad": scratchpad,
        "history": history_block(
            history, labels, memory_summary="" if has_summary_slot else memory_summary
        ),
        "memory_summary": summary_block(memory_summary, labels),
        "few_shot_examples": examples_block(prompt.few_shot_examples, labels),
    }
    rendered = render_template(template, values)
    instructions = user_instructions_block(prompt.user_instructions, labels)
    return f"{instructions.strip()}\n\n{rendered}" if instructions else rendered


def react_messages(
    prompt: PromptConfig,
    *,
    tools: Sequence[Tool],
    question: str,
    history: Sequence[ChatMessage] = (),
    memory_summary: str = "",
    scratchpad: str = "",
) -> list[ChatMessage]:
    content = react_prompt(
        prompt,
        tools=tools,
        question=question,
        history=history,
        memory_summary=memory_summary,
        scratchpad=scratchpad,
    )
    # The model continues right after the last "Thought:", not on a new line.
    return [{"role": "user", "content": content.rstrip()}]


def tools_messages(
    prompt: PromptConfig,
    *,
    tools: Sequence[Tool],
    question: str,
    history: Sequence[ChatMessage] = (),
    memory_summary: str = "",
) -> list[ChatMessage]:
    """The messages before the first tool call: system, the conversation, the question."""
    labels = prompt.labels
    template = prompt.template_text()
    values = {
        "tools": describe_tools(tools, labels),
        "tool_names": ", ".join(tool.name for tool in tools),
        "memory_summary": summary_block(memory_summary, labels),
        "few_shot_examples": examples_block(prompt.few_shot_examples, labels),
    }
    system = render_template(template, values).strip()
    if memory_summary.strip() and "memory_summary" not in template_variables(template):
        system += "\n" + summary_block(memory_summary, labels)
    if prompt.user_instructions.strip():
        system += "\n" + user_instructions_block(prompt.user_instructions, labels)
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    for message in history:
        if message.get("role") in ("user", "assistant") and message.get("content"):
            messages.append({"role": message["role"], "content": message["content"]})
    messages.append({"role": "user", "content": question})
    return messages


def request_options(
    prompt: PromptConfig, *, tools: Sequence[Tool], temperature: float | None = None
) -> JsonDict:
    """The request options besides the messages: stop sequences or tool schemas, and the
    temperature when one is set."""
    options: JsonDict = {}
    if prompt.mode == "react":
        options["stop"] = list(prompt.labels.stop)
    elif tools:
        options["tools"] = [tool.openai_schema() for tool in tools]
    if temperature is not None:
        options["temperature"] = temperature
    return options


@dataclass(frozen=True)
class RenderedRequest:
    messages: list[ChatMessage]
    options: JsonDict


def render_preview(
    prompt: PromptConfig,
    *,
    tools: Sequence[Tool] = (),
    question: str = "",
    history: Sequence[ChatMessage] = (),
    memory_summary: str = "",
    temperature: float | None = None,
) -> RenderedRequest:
    """The exact messages and options of a run's first model call, for a sample question.

    Built by the same functions the executor uses. Raises ``PromptTemplateError`` when the
    template cannot be rendered.
    """
    question = question or SAMPLE_QUESTION[prompt.label_set]
    build = react_messages if prompt.mode == "react" else tools_messages
    messages = build(
        prompt, tools=tools, question=question, history=history, memory_summary=memory_summary
    )
    return RenderedRequest(
        messages=messages,
        options=request_options(prompt, tools=tools, temperature=temperature),
    )
