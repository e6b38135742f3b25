"""The offline demo model: a scripted policy that behaves like a very small ReAct agent.

It is not a language model. It reads the request the engine sends (the question, the
scratchpad or tool results, the tools on offer) and answers by rule: arithmetic goes to the
``calculator`` tool, questions about the time or date to ``current_time``, and anything else
gets a Final Answer saying that this is the demo and how to configure a real model. It
speaks the ReAct text format (English and Chinese labels) and native tool calling, and its
answers stream like a real model's. When no endpoint is configured, chatsite runs against it
(``ensure_demo_server``), so a fresh checkout works with no network and no key.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from agents.llm.scripted import Reply, ScriptedServer, ToolCalls
from chatsite.server.per_process import PerProcess

JsonDict = dict[str, Any]

DEMO_MODEL_NAME = "chatsite-demo"
CALCULATOR = "calculator"
CURRENT_TIME = "current_time"


# Small chunks with a short pause, so the browser and the terminal visibly stream.
_CHUNK_SIZE = 12
_CHUNK_INTERVAL = 0.01


def _streamed(text: str) -> Reply:
    return Reply(text, chunk_size=_CHUNK_SIZE, chunk_interval=_CHUNK_INTERVAL)


_LABELS = {
    "en": {
        "question": "Question",
        "thought": "Thought",
        "action": "Action",
        "action_input": "Action Input",
        "observation": "Observation",
        "final_answer": "Final Answer",
        "colon": ": ",
    },
    "zh": {
        "question": "问题",
        "thought": "思考",
        "action": "行动",
        "action_input": "行动输入",
        "observation": "观察",
        "final_answer": "最终答案",
        "colon": "：",
    },
}

_TEXT = {
    "en": {
        "use_calculator": "This is arithmetic, so I will use the calculator.",
        "use_clock": "I need the current time, so I will ask the clock.",
        "done": "I now know the final answer.",
        "explain": "I am only the offline demo model, so I will say what I can do.",
        "calculated": "The answer is {result}: {expression} = {result}.",
        "calculator_said": "The calculator answered: {result}",
        "time_is": "The current time is {result}.",
        "no_calculator": (
            "This looks like arithmetic, but the calculator tool is not enabled for this "
            "profile, and the demo model cannot calculate by itself."
        ),
        "no_clock": (
            "This is a question about the time, but the current_time tool is not enabled "
            "for this profile."
        ),
        "intro": (
            "I am chatsite's offline demo model ({model}), not a real language model. I can "
            "only do arithmetic with the calculator tool and tell the time with the "
            'current_time tool; try "what is (28+10)*3?". To get real answers, set '
            "OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL (OpenAI, Ollama, vLLM or a "
            "llama.cpp server), or add a model endpoint in the admin and choose it in the "
            "agent profile."
        ),
    },
    "zh": {
        "use_calculator": "这是一个算术问题，我用计算器来算。",
        "use_clock": "我需要知道现在的时间，我来查一下时钟。",
        "done": "我现在知道最终答案了。",
        "explain": "我只是离线演示模型，我来说明我能做什么。",
        "calculated": "答案是 {result}：{expression} = {result}。",
        "calculator_said": "计算器的结果：{result}",
        "time_is": "现在的时间是 {result}。",
        "no_calculator": "这看起来是算术问题，但这个配置没有启用计算器工具，演示模型自己不会计算。",
        "no_clock": "这是关于时间的问题，但这个配置没有启用 current_time 工具。",
        "intro": (
            "我是 chatsite 的离线演示模型（{model}），不是真正的语言模型。我只能用计算器工具"
            "做算术、用 current_time 工具报时；试试“(28+10)*3 等于多少？”。要得到真正的回答，"
            "请设置 OPENAI_BASE_URL、OPENAI_API_KEY 和 OPENAI_MODEL（OpenAI、Ollama、vLLM "
            "或 llama.cpp 服务器），或在管理后台添加模型端点并在智能体配置中选择它。"
        ),
    },
}

_WORD_OPERATORS = [
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (r"\b(?:times|multiplied by)\b", "*"),
    (r"\bdivided by\b", "/"),
    (r"\bto the power of\b", "**"),
    ("加", "+"),
    ("减", "-"),
    ("乘以", "*"),
    ("除以", "/"),
]
_EXPRESSION_RUN = re.compile(r"[0-9.()+\-*/%^ ]+")
_OPERATOR = re.compile(r"[0-9)]\s*(?:\*\*|[+\-*/%^])\s*[0-9(.\-]")
_TIME_WORDS = re.compile(
    r"\b(?:time|date|today|day is it|clock|what day)\b|几点|时间|日期|今天|星期几|现在",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class _Request:
    question: str
    tools: list[str]
    tool_schemas: dict[str, JsonDict]
    native: bool
    labels: str  # "en" | "zh": the label set of the ReAct prompt
    observation: str | None  # the latest tool result for this question
    observed_tool: str
    prompt_ends_with_thought: bool

    @property
    def language(self) -> str:
        return "zh" if _CJK.search(self.question) else "en"


def demo_policy(body: JsonDict) -> Reply:
    """The demo model's reply to one chat completion request."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not body.get("tools") and _is_summary_request(messages):
        return _streamed(_summarise(messages))
    request = _read_request(body, messages)
    text = _TEXT[request.language]

    if request.observation is not None:
        return _final(request, _answer_from_observation(request))

    expression = find_expression(request.question)
    if expression is not None:
        if CALCULATOR not in request.tools:
            return _final(request, text["no_calculator"] + " " + _intro(request), "explain")
        return _act(request, CALCULATOR, expression, text["use_calculator"])
    if _TIME_WORDS.search(request.question):
        if CURRENT_TIME not in request.tools:
            return _final(request, text["no_clock"] + " " + _intro(request), "explain")
        return _act(request, CURRENT_TIME, "", text["use_clock"])
    return _final(request, _intro(request), "explain")


# --------------------------------------------------------------------------------------
# Reading the request
# --------------------------------------------------------------------------------------


def _read_request(body: JsonDict, messages: list[JsonDict]) -> _Request:
    tool_schemas = {
        tool["function"]["name"]: tool["function"].get("parameters") or {}
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
    }
    if tool_schemas:
        return _read_native(messages, tool_schemas)
    return _read_react(messages)


def _read_native(messages: list[JsonDict], tool_schemas: dict[str, JsonDict]) -> _Request:
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    question = _content(messages[last_user]) if last_user >= 0 else ""
    observation, observed_tool = None, ""
    names_by_call = {}
    for message in messages[last_user + 1 :]:
        for call in message.get("tool_calls") or []:
            names_by_call[call.get("id")] = (call.get("function") or {}).get("name", "")
        if message.get("role") == "tool":
            observation = _content(message)
            observed_tool = names_by_call.get(message.get("tool_call_id"), "")
    return _Request(
        question=question.strip(),
        tools=list(tool_schemas),
        tool_schemas=tool_schemas,
        native=True,
        labels="zh" if _CJK.search(question) else "en",
        observation=observation,
        observed_tool=observed_tool,
        prompt_ends_with_thought=False,
    )


def _read_react(messages: list[JsonDict]) -> _Request:
    transcript = "\n".join(_content(m) for m in messages)
    labels = "zh" if "行动输入" in transcript else "en"
    names = _LABELS[labels]
    lines = transcript.split("\n")

    question_at = _last_label_line(lines, names["question"])
    if question_at is None:
        user_messages = [m for m in messages if m.get("role") == "user"]
        question = _content(user_messages[-1]) if user_messages else ""
        prompt, after = transcript, []
    else:
        question = _after_label(lines[question_at], names["question"])
        prompt, after = "\n".join(lines[:question_at]), lines[question_at + 1 :]

    observation, observed_tool = None, ""
    for index, line in enumerate(after):
        if _has_label(line, names["action"]) and not _has_label(line, names["action_input"]):
            observed_tool = _after_label(line, names["action"])
        if _has_label(line, names["observation"]):
            block = [_after_label(line, names["observation"])]
            for following in after[index + 1 :]:
                if any(_has_label(following, names[role]) for role in _LABEL_ROLES):
                    break
                block.append(following)
            observation = "\n".join(block).strip()

    tools = [name for name in (CALCULATOR, CURRENT_TIME) if name in prompt]
    last = _content(messages[-1]).rstrip() if messages else ""
    ends_with_thought = last.endswith(names["thought"] + names["colon"].strip())
    return _Request(
        question=question.strip(),
        tools=tools,
        tool_schemas={},
        native=False,
        labels=labels,
        observation=observation,
        observed_tool=observed_tool,
        prompt_ends_with_thought=ends_with_thought,
    )


_LABEL_ROLES = ("question", "thought", "action", "action_input", "observation", "final_answer")


def _content(message: JsonDict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _has_label(line: str, label: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(label) and stripped[len(label) : len(label) + 1] in (":", "：")


def _after_label(line: str, label: str) -> str:
    return line.strip()[len(label) + 1 :].strip()


def _last_label_line(lines: list[str], label: str) -> int | None:
    for index in range(len(lines) - 1, -1, -1):
        if _has_label(lines[index], label):
            return index
    return None


def find_expression(question: str) -> str | None:
    """The arithmetic in a question (``what is (28+10)*3?`` → ``(28+10)*3``), if any."""
    text = unicodedata.normalize("NFKC", question).replace("×", "*").replace("÷", "/")
    for pattern, operator in _WORD_OPERATORS:
        text = re.sub(pattern, f" {operator} ", text, flags=re.IGNORECASE)
    candidates = []
    for run in _EXPRESSION_RUN.findall(text):
        expression = _balance(" ".join(run.split()))
        if expression and _OPERATOR.search(expression):
            candidates.append(expression)
    if not candidates:
        return None
    return max(candidates, key=len).replace("^", "**")


def _balance(expression: str) -> str:
    """Trim stray parentheses and operators the surrounding sentence left at the edges."""
    expression = expression.lstrip(" +*/%^.").rstrip(" +-*/%^.")
    while expression.endswith("(") or expression.count(")") > expression.count("("):
        if expression.endswith(")") and expression.count(")") > expression.count("("):
            expression = expression[:-1].rstrip()
        elif expression.startswith(")"):
            expression = expression[1:].lstrip()
        else:
            expression = expression[:-1].rstrip()
    while expression.count("(") > expression.count(")") and expression.startswith("("):
        expression = expression[1:].lstrip()
    return expression


# --------------------------------------------------------------------------------------
# Writing the reply
# --------------------------------------------------------------------------------------


def _act(request: _Request, tool: str, tool_input: str, thought: str) -> Reply:
    if request.native:
        return ToolCalls(
            [(tool, _native_arguments(request.tool_schemas.get(tool) or {}, tool_input))],
            text=thought,
            chunk_size=_CHUNK_SIZE,
            chunk_interval=_CHUNK_INTERVAL,
        )
    names = _LABELS[request.labels]
    colon = names["colon"]
    lines = [
        _thought_line(request, thought),
        f"{names['action']}{colon}{tool}",
        f"{names['action_input']}{colon}{tool_input or '{}'}",
    ]
    return _streamed("\n".join(lines))


def _native_arguments(schema: JsonDict, tool_input: str) -> JsonDict:
    if not tool_input:
        return {}
    properties = list((schema.get("properties") or {}).keys())
    required = list(schema.get("required") or [])
    target = (required or properties or ["input"])[0]
    return {target: tool_input}


def _final(request: _Request, answer: str, thought: str = "done") -> Reply:
    if request.native:
        return _streamed(answer)
    names = _LABELS[request.labels]
    text = _TEXT[request.language]
    thought_line = _thought_line(request, text[thought])
    return _streamed(f"{thought_line}\n{names['final_answer']}{names['colon']}{answer}")


def _thought_line(request: _Request, thought: str) -> str:
    if request.prompt_ends_with_thought:
        return f" {thought}" if request.labels == "en" else thought
    names = _LABELS[request.labels]
    return f"{names['thought']}{names['colon']}{thought}"


def _answer_from_observation(request: _Request) -> str:
    text = _TEXT[request.language]
    result = (request.observation or "").strip()
    if request.observed_tool == CURRENT_TIME:
        return text["time_is"].format(result=result)
    expression = find_expression(request.question)
    if expression is not None and re.fullmatch(r"-?[0-9][0-9.,eE+\-]*", result):
        return text["calculated"].format(result=result, expression=expression)
    return text["calculator_said"].format(result=result)


def _intro(request: _Request) -> str:
    return _TEXT[request.language]["intro"].format(model=DEMO_MODEL_NAME)


# --------------------------------------------------------------------------------------
# Conversation summaries (the memory's summariser also calls the configured model)
# --------------------------------------------------------------------------------------

_SUMMARY_MARKERS = ("New lines:", "Updated memory:")
_PLACEHOLDER_SUMMARY = "(nothing yet"


def _is_summary_request(messages: list[JsonDict]) -> bool:
    text = _content(messages[-1]) if messages else ""
    return all(marker in text for marker in _SUMMARY_MARKERS)


def _summarise(messages: list[JsonDict]) -> str:
    """An extractive summary: the memory so far plus the new lines, clipped to the limit."""
    text = _content(messages[-1])
    limit = re.search(r"at most (\d+) words", text)
    max_words = int(limit.group(1)) if limit else 200
    memory = _section(text, "Memory so far:", "New lines:")
    new_lines = _section(text, "New lines:", "Updated memory:")
    sentences = [] if memory.startswith(_PLACEHOLDER_SUMMARY) or not memory else [memory]
    for line in new_lines.splitlines():
        role, _, said = line.partition(":")
        if said.strip() and role.strip() in ("User", "Assistant"):
            verb = "The user said" if role.strip() == "User" else "The assistant answered"
            sentences.append(f"{verb}: {said.strip()}")
    words = " ".join(sentences).split()
    return " ".join(words[:max_words]) or "The conversation has no content yet."


def _section(text: str, start: str, end: str) -> str:
    head = text.rfind(start)
    if head < 0:
        return ""
    tail = text.find(end, head)
    return text[head + len(start) : tail if tail >= 0 else None].strip()


# --------------------------------------------------------------------------------------
# One demo server per process
# --------------------------------------------------------------------------------------


def _start_server() -> ScriptedServer:
    server = ScriptedServer()
    server.policy(DEMO_MODEL_NAME, demo_policy)
    return server.start()


# A forked child does not inherit the server's thread: it starts its own.
_server = PerProcess(_start_server)


def ensure_demo_server() -> str:
    """The base_url of this process's demo server, starting it on first use."""
    return _server.get().base_url
