"""Reading a model's ReAct text: what it thought, and either one action or the final answer.

What is accepted (every label set's labels, whatever the profile's set):

- labels at the start of a line in any case, with extra spaces, underscores, markdown
  emphasis (``**Action:**``), a number (``Action 1:``, ``Action 1 Input 1:``) and an ASCII or
  full-width colon (``行动：``); labels in the middle of a line only when capitalised as
  written in the label set (``... Action: search``), so prose like "my observation: ..." in an
  answer is left alone;
- an action input that is quoted, fenced in a code block, or runs over several lines (it ends
  at the next label);
- a JSON action blob ``{"action": ..., "action_input": ...}`` after ``Action:`` or on its own,
  bare or fenced (``tool``/``name`` and ``tool_input``/``input``/``arguments`` are accepted as
  keys too; an action named "Final Answer" is the final answer);
- ``Action: tool[input]`` with no ``Action Input`` line (the ReAct paper's form), and
  ``Finish[answer]``;
- a final answer over several lines (it ends at the next label at the start of a line).

Policy when the text has both an action and a final answer: **whichever comes first wins**.
An action first means the model went on without waiting for the observation, so what follows
it (the "answer" too) was written without the tool's result and is dropped. A final answer
first ends the turn, and the action after it is dropped.

The model never gets to write its own observation: the text is cut at the first observation
label before anything else is read, even when the server ignored the ``stop`` sequence.

Text with neither an action nor a final answer, or an action with no input, raises
``ParseError``; such text is never taken as the answer.

Everything here runs in linear time: labels are found by scanning, not by regular expressions
that could backtrack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.react.errors import ParseError
from agents.react.labels import PARSER_WORDS

JsonValue = str | dict[str, Any]

# Where a label may start. Literal alternatives only: matching is linear.
_CANDIDATES = re.compile(
    r"action|thought|observation|final|question|问题|思考|想法|行动|动作|观察|最终答案",
    re.IGNORECASE,
)
# The common spellings, matched at once; anything else goes through the scanner.
_PLAIN_LABEL = re.compile(
    r"(action[ _]?input|action|thought|observation|final[ _]?answer|question"
    r"|问题|思考|想法|行动输入|行动|动作输入|动作|观察|最终答案) ?[:：]",
    re.IGNORECASE,
)
_LABEL_PREFIXES = frozenset(word[:n] for word in PARSER_WORDS for n in range(1, len(word) + 1))
_LINE_DECORATION = " \t*#>-_"
_MAX_DIGITS = 4
_ACTION_KEYS = ("action", "tool", "name", "tool_name")
_INPUT_KEYS = ("action_input", "tool_input", "input", "arguments", "args", "parameters")
_FINISH_NAMES = frozenset({"final answer", "finalanswer", "final_answer", "finish", "最终答案"})
_MAX_JSON_ATTEMPTS = 20
_ACTION_ROLES = frozenset({"action", "action_input", "final_answer"})


@dataclass(frozen=True)
class Marker:
    """A label found in the text."""

    role: str
    start: int  # first character of the label, or of its line when it starts one
    content_start: int  # first character after the colon
    line_start: bool


@dataclass(frozen=True)
class ParsedAction:
    tool: str
    tool_input: JsonValue
    thought: str
    text: str  # the model's text after cutting invented observations


@dataclass(frozen=True)
class ParsedFinalAnswer:
    answer: str
    thought: str
    text: str


Parsed = ParsedAction | ParsedFinalAnswer


# -- scanning ------------------------------------------------------------------------------


def _read_label(text: str, start: int) -> tuple[str, int] | bool | None:
    """The role and content start of a label beginning at ``start``.

    None when there is no label there; True when the text ends while it could still become
    one (the streaming filter waits for more text then).
    """
    plain = _PLAIN_LABEL.match(text, start)
    if plain is not None:
        key = plain.group(1).casefold().replace(" ", "").replace("_", "")
        return PARSER_WORDS[key], plain.end()
    key = ""
    digits = 0
    position = start
    length = len(text)
    while position < length:
        char = text[position]
        if char == ":" or char == "：":
            role = PARSER_WORDS.get(key)
            return (role, position + 1) if role else None
        if char.isdigit():
            digits += 1
            if digits > _MAX_DIGITS or not key:
                return None
        elif char.isalpha():
            key += char.casefold()
            if key not in _LABEL_PREFIXES:
                return None
        elif char not in " \t_*":
            return None
        position += 1
    return True


def _fenced_ranges(text: str) -> list[tuple[int, int]]:
    """Spans of fenced code blocks (an unclosed fence runs to the end)."""
    ranges: list[tuple[int, int]] = []
    opened_at: int | None = None
    offset = 0
    for line in text.split("\n"):
        if line.lstrip(" \t").startswith("```"):
            if opened_at is None:
                opened_at = offset
            else:
                ranges.append((opened_at, offset + len(line)))
                opened_at = None
        offset += len(line) + 1
    if opened_at is not None:
        ranges.append((opened_at, len(text)))
    return ranges


def _line_begin(text: str, index: int) -> int:
    """Where the line holding ``index`` begins, if only decoration (spaces, ``**``, ``#``,
    ``>``, ``-``) comes before ``index`` on it; else -1."""
    position = index - 1
    while position >= 0 and text[position] in _LINE_DECORATION:
        position -= 1
    return position + 1 if position < 0 or text[position] == "\n" else -1


def _at_line_start(text: str, index: int) -> bool:
    return _line_begin(text, index) != -1


def find_markers(text: str, *, skip_fenced: bool = True) -> list[Marker]:
    """Every label in ``text``, in order, outside code fences.

    A label at the start of a line starts (``Marker.start``) where its line begins, so that
    its decoration (``**Action:**``) belongs to it and not to the text before.
    """
    fences = _fenced_ranges(text) if skip_fenced else []
    fence_index = 0
    markers: list[Marker] = []
    for match in _CANDIDATES.finditer(text):
        start = match.start()
        while fence_index < len(fences) and fences[fence_index][1] <= start:
            fence_index += 1
        if fence_index < len(fences) and fences[fence_index][0] <= start:
            continue
        if start > 0 and text[start - 1].isalnum():
            continue
        if markers and start < markers[-1].content_start:
            continue
        found = _read_label(text, start)
        if not isinstance(found, tuple):
            continue
        role, content_start = found
        line_begin = _line_begin(text, start)
        if line_begin == -1 and text[start].islower():
            continue
        begin = line_begin if line_begin != -1 else start
        markers.append(Marker(role, begin, content_start, line_begin != -1))
    return markers


def cut_invented_observation(text: str) -> tuple[str, bool]:
    """``text`` up to the first observation label, and whether anything was cut."""
    for marker in find_markers(text):
        if marker.role == "observation":
            return text[: marker.start].rstrip(), True
    return text, False


# -- values ----------------------------------------------------------------------------------


def _unfence(value: str) -> str:
    stripped = value.strip()
    if not stripped.startswith("```"):
        return stripped
    first_newline = stripped.find("\n")
    if first_newline == -1:
        return stripped.strip("`").strip()
    body = stripped[first_newline + 1 :]
    if body.rstrip().endswith("```"):
        body = body.rstrip()[:-3]
    return body.strip()


def _unquote(value: str) -> str:
    if len(value) >= 2:
        for left, right in (('"', '"'), ("'", "'"), ("`", "`"), ("“", "”"), ("「", "」")):
            if value[0] == left and value[-1] == right and left not in value[1:-1]:
                return value[1:-1]
    return value


def _drop_label_emphasis(value: str) -> str:
    """``** x`` -> ``x``: the closing ``**`` of a bold label (``**Action:** x``)."""
    stripped = value.lstrip(" \t")
    if stripped.startswith("**") and (len(stripped) == 2 or stripped[2].isspace()):
        return stripped[2:]
    return value


def clean_input(value: str) -> str:
    return _unquote(_unfence(_drop_label_emphasis(value)).strip()).strip()


def clean_tool_name(value: str) -> str:
    first_line = next((line for line in value.strip().split("\n") if line.strip()), "")
    name = first_line.strip(" \t\r").rstrip(".。").strip(" *`'\"“”")
    if name.endswith("()"):
        name = name[:-2]
    return name.strip()


def _json_action(value: str) -> dict[str, Any] | None:
    candidate = _unfence(value)
    if not candidate.startswith("{"):
        return None
    try:
        blob = json.loads(candidate)
    except ValueError:
        return None
    return blob if isinstance(blob, dict) and _blob_key(blob, _ACTION_KEYS) else None


def _blob_key(blob: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((key for key in keys if key in blob), None)


def _from_blob(blob: dict[str, Any], *, thought: str, text: str) -> Parsed:
    action_key = _blob_key(blob, _ACTION_KEYS)
    assert action_key is not None  # only blobs naming an action get here
    name = str(blob[action_key]).strip()
    input_key = _blob_key(blob, _INPUT_KEYS)
    if input_key is None:
        raise ParseError(
            f'the JSON action names "{name}" but has no "action_input"',
            text=text,
        )
    raw_input = blob[input_key]
    if name.casefold() in _FINISH_NAMES:
        answer = raw_input if isinstance(raw_input, str) else json.dumps(raw_input)
        return ParsedFinalAnswer(answer=answer.strip(), thought=thought, text=text)
    if isinstance(raw_input, str | dict):
        tool_input: JsonValue = raw_input
    else:
        tool_input = json.dumps(raw_input, ensure_ascii=False)
    return ParsedAction(tool=name, tool_input=tool_input, thought=thought, text=text)


def _find_json_blob(text: str) -> tuple[dict[str, Any], int] | None:
    """A JSON action written on its own (fenced, or an object starting a line), and where."""
    for start, end in _fenced_ranges(text):
        blob = _json_action(text[start:end])
        if blob is not None:
            return blob, start
    decoder = json.JSONDecoder()
    attempts = 0
    position = text.find("{")
    while position != -1 and attempts < _MAX_JSON_ATTEMPTS:
        if _at_line_start(text, position):
            attempts += 1
            try:
                blob, _ = decoder.raw_decode(text, position)
            except ValueError:
                blob = None
            if isinstance(blob, dict) and _blob_key(blob, _ACTION_KEYS):
                return blob, position
        position = text.find("{", position + 1)
    return None


def _bracket_form(value: str) -> tuple[str, str] | None:
    line = value.strip()
    if "\n" in line or not line.endswith("]") or "[" not in line:
        return None
    name, _, rest = line.partition("[")
    name = name.strip(" *`")
    if not name or any(char.isspace() for char in name):
        return None
    return name, rest[:-1].strip()


def _thought_before(text: str, markers: list[Marker], end: int) -> str:
    parts: list[str] = []
    position = 0
    for marker in markers:
        if marker.start >= end:
            break
        if marker.role in ("thought", "question"):
            parts.append(text[position : marker.start])
            position = marker.content_start
    parts.append(text[position:end])
    return "\n".join(part.strip(" \t\r\n*") for part in parts if part.strip(" \t\r\n*")).strip()


def _section_end(markers: list[Marker], after: int, *, line_start_only: bool) -> Marker | None:
    for marker in markers:
        if marker.start >= after and (marker.line_start or not line_start_only):
            return marker
    return None


# -- parsing ---------------------------------------------------------------------------------


def parse(text: str) -> Parsed:
    """Read one model turn. Raises ``ParseError`` saying what is wrong, for the model."""
    markers = find_markers(text)
    observation = next((marker for marker in markers if marker.role == "observation"), None)
    if observation is not None:
        # Labels before the cut are found the same way in the cut text: reuse them.
        text = text[: observation.start].rstrip()
        markers = markers[: markers.index(observation)]
    if not any(marker.role in _ACTION_ROLES for marker in markers):
        # A model that wrapped its whole reply in a code fence.
        unfenced = find_markers(text, skip_fenced=False)
        if any(marker.role in _ACTION_ROLES for marker in unfenced):
            markers = unfenced
    first = next((marker for marker in markers if marker.role in _ACTION_ROLES), None)

    if first is None:
        found = _find_json_blob(text)
        if found is not None:
            blob, blob_start = found
            return _from_blob(blob, thought=_thought_before(text, markers, blob_start), text=text)
        raise ParseError(
            "the reply has neither an action nor a final answer",
            text=text,
        )

    thought = _thought_before(text, markers, first.start)

    if first.role == "final_answer":
        end = _section_end(markers, first.content_start, line_start_only=True)
        answer = text[first.content_start : end.start if end else len(text)]
        answer = _drop_label_emphasis(answer).strip(" \t\r\n")
        if not answer:
            raise ParseError("the final answer is empty", text=text)
        return ParsedFinalAnswer(answer=answer, thought=thought, text=text)

    if first.role == "action_input":
        raise ParseError("an action input with no action before it", text=text)

    following = _section_end(markers, first.content_start, line_start_only=False)
    action_value = text[first.content_start : following.start if following else len(text)]
    action_blob = _json_action(action_value)
    if action_blob is not None:
        return _from_blob(action_blob, thought=thought, text=text)
    tool = clean_tool_name(action_value)
    if not tool:
        raise ParseError("the action names no tool", text=text)

    if following is None or following.role != "action_input":
        bracket = _bracket_form(action_value)
        if bracket is not None:
            name, bracket_input = bracket
            if name.casefold() in _FINISH_NAMES:
                return ParsedFinalAnswer(answer=bracket_input, thought=thought, text=text)
            return ParsedAction(tool=name, tool_input=bracket_input, thought=thought, text=text)
        raise ParseError(
            f"the action {tool!r} has no action input",
            text=text,
        )

    input_end = _section_end(markers, following.content_start, line_start_only=False)
    raw_input = text[following.content_start : input_end.start if input_end else len(text)]
    return ParsedAction(tool=tool, tool_input=clean_input(raw_input), thought=thought, text=text)


# -- streaming -------------------------------------------------------------------------------


class AnswerStream:
    """Passes on the text after the final-answer label as the model streams it.

    Nothing is passed on unless the final-answer label comes before any action label (the
    parser's policy), so thought text never reaches the answer. The tail that may still turn
    into a label (``\nActi``), and trailing whitespace, are held back until they are known:
    what has been sent is always a prefix of the answer ``parse`` will return.

    Most chunks cost work in proportion to their own size: the text is scanned for labels
    again only when a chunk brings a colon or a backtick (no label or fence can complete
    without one).
    """

    _TRIGGERS = frozenset(":：`")
    _TAIL = 64  # longer than any label with its decoration

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._buffer = ""
        self._markers: list[Marker] = []
        self._answer_start: int | None = None
        self._sent_until = 0
        self._closed = False
        self.sent = ""

    def feed(self, chunk: str) -> None:
        if self._closed or not chunk:
            return
        self._buffer += chunk
        if not self._TRIGGERS.isdisjoint(chunk):
            self._markers = find_markers(self._buffer)
        self._flush(final=False)

    def finish(self) -> None:
        if not self._closed:
            self._markers = find_markers(self._buffer)
            self._flush(final=True)
            self._closed = True

    def _flush(self, *, final: bool) -> None:
        buffer = self._buffer
        first = next((m for m in self._markers if m.role in _ACTION_ROLES), None)
        cut = next((m for m in self._markers if m.role == "observation"), None)
        if first is None or (cut is not None and cut.start < first.start):
            if cut is not None:
                self._closed = True
            return
        if first.role != "final_answer":
            self._closed = True
            return
        end = next(
            (
                m
                for m in self._markers
                if m.start >= first.content_start and (m.line_start or m.role == "observation")
            ),
            None,
        )
        limit = end.start if end is not None else len(buffer)
        complete = final or end is not None
        if self._answer_start is None:
            start = first.content_start
            while start < limit and buffer[start] in " \t":
                start += 1
            if not complete and buffer[start:limit] in ("*", "**"):
                return  # the closing ``**`` of a bold label, or the answer's own
            if buffer.startswith("**", start) and (
                start + 2 == limit or buffer[start + 2].isspace()
            ):
                start += 2
            while start < limit and buffer[start] in " \t\r\n":
                start += 1
            if start >= limit and not complete:
                return
            self._answer_start = self._sent_until = start
        safe = limit if complete else self._hold_back(limit)
        while safe > self._sent_until and buffer[safe - 1] in " \t\r\n":
            safe -= 1
        if safe > self._sent_until:
            delta = buffer[self._sent_until : safe]
            self._sent_until = safe
            self.sent += delta
            self._emit(delta)
        if complete:
            self._closed = True

    def _hold_back(self, limit: int) -> int:
        """Where the text that may still become a label begins (``limit``, the end of the
        buffer, if none)."""
        buffer = self._buffer
        window_start = max(self._sent_until, limit - self._TAIL)
        last_newline = buffer.rfind("\n", window_start, limit)
        if last_newline != -1 and all(
            char in _LINE_DECORATION for char in buffer[last_newline + 1 : limit]
        ):
            return last_newline + 1  # a line of only decoration, so far
        for position in range(window_start, limit):
            if not buffer[position].isalpha():
                continue
            if position > 0 and buffer[position - 1].isalnum():
                continue
            if _read_label(buffer, position) is True:
                line_begin = _line_begin(buffer, position)
                return line_begin if line_begin != -1 else position
        return limit
