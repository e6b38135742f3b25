"""Reading a model's ReAct text: what it thought, and either one action or the final answer.

Labels (every label set's, whatever the profile's set):

- **At the start of a line** a label counts in any case, with extra spaces, underscores,
  markdown decoration before it (``**Action:**``, ``# ``, ``> ``, ``- ``), a number
  (``Action 1:``, ``Action 1 Input 1:``) and an ASCII or full-width colon (``行动：``).
- **In the middle of a line** a label counts only when capitalised as written, and only in
  these cases: ``Observation:`` always (the text is cut there); ``Action:`` when an
  ``Action Input:`` follows on the same line (the closest ``Action:`` before it), and
  ``Action Input:`` after an ``Action:`` on its line (a step written on one line);
  ``Final Answer:`` only when the reply has no other action, action input or final-answer
  label at all. So a thought that *mentions* a label ("…then give my Final Answer: once I
  know.", "No further Action: needed.") never ends the run nor hides the action that
  follows.
- Labels inside fenced code blocks do not count, unless the whole reply is fenced.

Sections:

- an action input is quoted, fenced, or runs over several lines up to the next label; a last
  line that is a cut stop sequence (``Observ``, any beginning of an observation label) and a
  closing fence left over from a fenced reply are not part of it;
- a JSON action blob ``{"action": ..., "action_input": ...}`` after ``Action:`` or on its own,
  bare or fenced (``tool``/``name`` and ``tool_input``/``input``/``arguments`` are accepted as
  keys too; an action named "Final Answer" is the final answer); JSON nested deeper than
  ``jsontext.MAX_DEPTH`` levels is a parse error, never a crash;
- ``Action: tool[input]`` with no ``Action Input`` line (the ReAct paper's form), and
  ``Finish[answer]``;
- the final answer is everything after its label, up to an action, action-input,
  observation or another final-answer label: later lines such as "Question: …" or
  "Thought: …" are part of it. A
  closing fence left over from a fenced reply (an odd fence count in the answer, the last
  line a bare fence) is not.

Policy when the text has both an action and a final answer: **whichever comes first wins**.
An action first means the model went on without waiting for the observation, so what follows
it (the "answer" too) was written without the tool's result and is dropped. A final answer
first ends the turn, and the action after it is dropped. An action that names no tool
(``Action: None``, ``N/A``) or an action input with no action, followed by a final answer,
is a leftover of the format: the final answer counts.

The model never gets to write its own observation: the text is cut at the first observation
label before anything else is read, even when the server ignored the ``stop`` sequence.

Text with neither an action nor a final answer, or an action with no input, raises
``ParseError``; such text is never taken as the answer.

Everything here runs in linear time, also on text that arrives in pieces: labels are found by
one ``LabelScanner`` that looks at each character a bounded number of times, and the
streaming filters (``AnswerStream``, ``ThoughtStream``, ``NativeAnswerStream``) only read
what the scanner has decided.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.react import jsontext
from agents.react.errors import ParseError
from agents.react.labels import PARSER_WORDS

JsonValue = str | dict[str, Any]
JsonObject = dict[str, Any]

# Where a label may start. Literal alternatives only: matching is linear.
_CANDIDATE_WORDS = (
    "action",
    "thought",
    "observation",
    "final",
    "question",
    "问题",
    "思考",
    "想法",
    "行动",
    "动作",
    "观察",
    "最终答案",
)
_CANDIDATES = re.compile("|".join(_CANDIDATE_WORDS), re.IGNORECASE)
_CANDIDATE_PREFIXES = frozenset(w[:n] for w in _CANDIDATE_WORDS for n in range(1, len(w)))
_LONGEST_CANDIDATE = max(len(word) for word in _CANDIDATE_WORDS)
# The common spellings, matched at once; anything else goes through the character reader.
_PLAIN_LABEL = re.compile(
    r"(action[ _]?input|action|thought|observation|final[ _]?answer|question"
    r"|问题|思考|想法|行动输入|行动|动作输入|动作|观察|最终答案) ?[:：]",
    re.IGNORECASE,
)
_LABEL_PREFIXES = frozenset(word[:n] for word in PARSER_WORDS for n in range(1, len(word) + 1))
_MAX_LABEL_CHARS = 40  # from a label's first letter to its colon
_INDENT = " \t"
_LINE_DECORATION = " \t*#>-_"
_STRIPPED_IN_THOUGHTS = " \t\r\n*"
_FENCE = "```"
_MAX_DIGITS = 4
_ACTION_KEYS = ("action", "tool", "name", "tool_name")
_INPUT_KEYS = ("action_input", "tool_input", "input", "arguments", "args", "parameters")
_FINISH_NAMES = frozenset({"final answer", "finalanswer", "final_answer", "finish", "最终答案"})
_NO_TOOL_NAMES = frozenset({"none", "n/a", "na", "null", "no action", "no tool", "无", "没有"})
_OBSERVATION_WORDS = ("observation", "观察")
_MAX_JSON_ATTEMPTS = 20
_ACTION_ROLES = frozenset({"action", "action_input", "final_answer"})
_ANSWER_ENDS = frozenset({"action", "action_input", "observation", "final_answer"})


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
    one (the scanner waits for more text then).
    """
    plain = _PLAIN_LABEL.match(text, start)
    if plain is not None:
        key = plain.group(1).casefold().replace(" ", "").replace("_", "")
        return PARSER_WORDS[key], plain.end()
    key = ""
    digits = 0
    position = start
    end = min(len(text), start + _MAX_LABEL_CHARS)
    while position < end:
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
    return True if end == len(text) and end < start + _MAX_LABEL_CHARS else None


# The scanner's place in the current line.
_INDENTATION, _DECORATION, _LINE_LABEL, _BODY, _SKIP = range(5)


class LabelScanner:
    """Finds the labels of text that arrives in pieces (``feed``, then ``finish``).

    ``markers`` holds every label found so far, in order, and never changes once appended;
    nothing before ``decided`` can still become a label. Each character is looked at a
    bounded number of times, so scanning is linear in the text's length however it is cut.
    ``block_start`` is where the first line starting with ``{`` or a code fence begins (a
    JSON action may be written there), or -1.
    """

    def __init__(self, *, skip_fenced: bool = True) -> None:
        self.text = ""
        self.markers: list[Marker] = []
        self.decided = 0
        self.block_start = -1
        self.in_fence = False
        self._skip_fenced = skip_fenced
        self._line = 0
        self._phase = _INDENTATION
        self._cursor = 0
        self._pending_action: Marker | None = None  # mid-line, waiting for its input
        self._line_has_action = False
        self._finished = False

    def feed(self, chunk: str) -> None:
        if self._finished or not chunk:
            return
        # Appending to a local whose only other reference was just dropped lets CPython grow
        # the string in place; ``self.text += chunk`` would copy it whole every time.
        text = self.text
        self.text = ""
        text += chunk
        self.text = text
        self._scan(final=False)

    def finish(self) -> None:
        if not self._finished:
            self._scan(final=True)
            self._finished = True
            self.decided = len(self.text)

    def _scan(self, *, final: bool) -> None:
        text = self.text
        length = len(text)
        while True:
            cursor = self._cursor
            if self._phase == _INDENTATION:
                while cursor < length and text[cursor] in _INDENT:
                    cursor += 1
                self._cursor = cursor
                if cursor == length and not final:
                    self.decided = self._line
                    return
                if text.startswith(_FENCE, cursor):
                    if self.block_start == -1:
                        self.block_start = self._line
                    if self._skip_fenced:
                        self.in_fence = not self.in_fence
                    self._phase = _SKIP
                    continue
                if not final and _FENCE.startswith(text[cursor:]):
                    self.decided = self._line  # a fence still arriving
                    return
                if self.in_fence:
                    self._phase = _SKIP
                    continue
                if cursor < length and text[cursor] == "{" and self.block_start == -1:
                    self.block_start = self._line
                self._phase = _DECORATION
            elif self._phase == _DECORATION:
                while cursor < length and text[cursor] in _LINE_DECORATION:
                    cursor += 1
                self._cursor = cursor
                if cursor == length and not final:
                    self.decided = self._line
                    return
                self._phase = _LINE_LABEL
            elif self._phase == _LINE_LABEL:
                found = _read_label(text, cursor) if cursor < length else None
                if found is True:
                    if not final:
                        self.decided = self._line
                        return
                    found = None
                if isinstance(found, tuple):
                    role, content_start = found
                    self.markers.append(Marker(role, self._line, content_start, True))
                    self._line_has_action = role == "action"
                    self._cursor = content_start
                self._phase = _BODY
            elif self._phase == _SKIP:
                newline = text.find("\n", cursor)
                if newline == -1:
                    self._cursor = length
                    self.decided = length
                    return
                self._next_line(newline + 1)
            else:
                if not self._scan_body(text, final=final):
                    return

    def _next_line(self, start: int) -> None:
        self._line = self._cursor = start
        self._phase = _INDENTATION
        self._pending_action = None
        self._line_has_action = False

    def _scan_body(self, text: str, *, final: bool) -> bool:
        """Read labels in the middle of the current line; False when more text is needed."""
        length = len(text)
        newline = text.find("\n", self._cursor)
        limit = newline if newline != -1 else length
        cursor = self._cursor
        while True:
            match = _CANDIDATES.search(text, cursor, limit)
            if match is None:
                break
            start = match.start()
            if start > 0 and text[start - 1].isalnum():
                cursor = start + 1
                continue
            found = _read_label(text, start)
            if found is True and not final and newline == -1:
                self._cursor = start
                self.decided = self._held_from(start)
                return False
            if not isinstance(found, tuple) or text[start].islower():
                cursor = match.end()
                continue
            role, content_start = found
            cursor = content_start
            self._mid_line(Marker(role, start, content_start, False))
        if newline == -1:
            if final:
                self._cursor = length
                return False
            tail = self._partial_candidate(max(cursor, length - _LONGEST_CANDIDATE), length)
            self._cursor = tail
            self.decided = self._held_from(tail)
            return False
        self._next_line(newline + 1)
        return True

    def _mid_line(self, marker: Marker) -> None:
        if marker.role == "observation":
            self._pending_action = None
            self.markers.append(marker)
        elif marker.role == "final_answer":
            self.markers.append(marker)
        elif marker.role == "action":
            # An action input belongs to the action label closest before it on its line; an
            # earlier one there was a mention in the thought.
            if not self._line_has_action:
                self._pending_action = marker
        elif marker.role == "action_input":
            if self._pending_action is not None:
                self.markers.append(self._pending_action)
                self._pending_action = None
                self._line_has_action = True
            if self._line_has_action:
                self.markers.append(marker)
                self._line_has_action = False

    def _held_from(self, position: int) -> int:
        pending = self._pending_action
        return min(position, pending.start) if pending is not None else position

    def _partial_candidate(self, start: int, end: int) -> int:
        """Where a word that may still become a label begins at the end of the text."""
        text = self.text
        for position in range(start, end):
            if not text[position].isalpha():
                continue
            if position > 0 and text[position - 1].isalnum():
                continue
            if text[position:end].casefold() in _CANDIDATE_PREFIXES:
                return position
        return end


def find_markers(text: str, *, skip_fenced: bool = True) -> list[Marker]:
    """Every label in ``text``, in order (see the module docstring for which count).

    A label at the start of a line starts (``Marker.start``) where its line begins, so that
    its decoration (``**Action:**``) belongs to it and not to the text before.
    """
    scanner = LabelScanner(skip_fenced=skip_fenced)
    scanner.feed(text)
    scanner.finish()
    return scanner.markers


def counted_markers(markers: list[Marker]) -> list[Marker]:
    """``markers`` without mid-line final-answer labels, unless no other label of an action
    role is there (the one-line "Thought: … Final Answer: …" reply)."""
    if any(m.role in _ACTION_ROLES and (m.line_start or m.role != "final_answer") for m in markers):
        return [m for m in markers if m.line_start or m.role != "final_answer"]
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
    if not stripped.startswith(_FENCE):
        return stripped
    first_newline = stripped.find("\n")
    if first_newline == -1:
        return stripped.strip("`").strip()
    body = stripped[first_newline + 1 :]
    if body.rstrip().endswith(_FENCE):
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


def _is_fence_line(line: str) -> bool:
    return line.lstrip(_INDENT).startswith(_FENCE)


def drop_leftover_fence(value: str) -> str:
    """``value`` without its last line when that line is a bare fence (```` ``` ````) that
    closes nothing in ``value``: the end of a fence the whole reply was wrapped in."""
    stripped = value.rstrip()
    line_start = stripped.rfind("\n") + 1
    if stripped[line_start:].strip() != _FENCE:
        return value
    fences = sum(1 for line in stripped.split("\n") if _is_fence_line(line))
    return stripped[:line_start] if fences % 2 == 1 else value


def _drop_cut_stop_sequence(value: str) -> str:
    """``value`` without a last line that is the beginning of an observation label (a stop
    sequence the server cut part-way, ``\\nObserv``)."""
    stripped = value.rstrip()
    line_start = stripped.rfind("\n") + 1
    if line_start == 0:
        return value
    last = stripped[line_start:].strip(" \t*").casefold()
    if last and any(word.startswith(last) for word in _OBSERVATION_WORDS):
        return stripped[:line_start]
    return value


def clean_input(value: str) -> str:
    value = drop_leftover_fence(_drop_cut_stop_sequence(value))
    return _unquote(_unfence(_drop_label_emphasis(value)).strip()).strip()


def clean_tool_name(value: str) -> str:
    first_line = next((line for line in value.strip().split("\n") if line.strip()), "")
    name = first_line.strip(" \t\r").rstrip(".。").strip(" *`'\"“”")
    if name.endswith("()"):
        name = name[:-2]
    return name.strip()


def _json_action(value: str, *, text: str) -> JsonObject | None:
    candidate = _unfence(value)
    if not candidate.startswith("{"):
        return None
    try:
        blob = jsontext.loads(candidate)
    except ValueError as error:
        _refuse_deep_json(error, text)
        return None
    return blob if isinstance(blob, dict) and _blob_key(blob, _ACTION_KEYS) else None


def _refuse_deep_json(error: ValueError, text: str) -> None:
    if "nested deeper" in str(error):
        raise ParseError(
            f"the JSON is nested deeper than {jsontext.MAX_DEPTH} levels", text=text
        ) from None


def _blob_key(blob: JsonObject, keys: tuple[str, ...]) -> str | None:
    return next((key for key in keys if key in blob), None)


def _from_blob(blob: JsonObject, *, thought: str, text: str) -> Parsed:
    name = str(next(blob[key] for key in _ACTION_KEYS if key in blob)).strip()
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


def _fenced_ranges(text: str) -> list[tuple[int, int]]:
    """Spans of fenced code blocks (an unclosed fence runs to the end)."""
    ranges: list[tuple[int, int]] = []
    opened_at: int | None = None
    offset = 0
    for line in text.split("\n"):
        if _is_fence_line(line):
            if opened_at is None:
                opened_at = offset
            else:
                ranges.append((opened_at, offset + len(line)))
                opened_at = None
        offset += len(line) + 1
    if opened_at is not None:
        ranges.append((opened_at, len(text)))
    return ranges


def _at_line_start(text: str, index: int) -> bool:
    position = index - 1
    while position >= 0 and text[position] in _LINE_DECORATION:
        position -= 1
    return position < 0 or text[position] == "\n"


def _find_json_blob(text: str) -> tuple[JsonObject, int] | None:
    """A JSON action written on its own (fenced, or an object starting a line), and where."""
    for start, end in _fenced_ranges(text):
        blob = _json_action(text[start:end], text=text)
        if blob is not None:
            return blob, start
    attempts = 0
    position = text.find("{")
    while position != -1 and attempts < _MAX_JSON_ATTEMPTS:
        if _at_line_start(text, position):
            attempts += 1
            try:
                blob, _ = jsontext.raw_decode(text, position)
            except ValueError as error:
                _refuse_deep_json(error, text)
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


def _thought_before(text: str, markers: list[Marker], end: int, *, unfenced: bool) -> str:
    """The text before ``end`` without its thought and question labels: the parts between
    them, each stripped, joined by newlines (``ThoughtStream`` passes on the same text)."""
    parts: list[str] = []
    position = 0
    for marker in markers:
        if marker.start >= end:
            break
        if marker.role in ("thought", "question"):
            parts.append(text[position : marker.start])
            position = marker.content_start
    parts.append(text[position:end])
    if unfenced:  # the fence the whole reply was wrapped in is not part of the thought
        parts = [
            "\n".join(ln for ln in part.split("\n") if not _is_fence_line(ln)) for part in parts
        ]
    stripped = (part.strip(_STRIPPED_IN_THOUGHTS) for part in parts)
    return "\n".join(part for part in stripped if part)


def _next_marker(
    markers: list[Marker], after: int, roles: frozenset[str] | None = None
) -> Marker | None:
    for marker in markers:
        if marker.start >= after and (roles is None or marker.role in roles):
            return marker
    return None


def is_no_tool(value: str) -> bool:
    """Whether an action's text names no tool (``None``, ``N/A``)."""
    return clean_tool_name(value).casefold() in _NO_TOOL_NAMES


# -- parsing ---------------------------------------------------------------------------------


def parse(text: str) -> Parsed:
    """Read one model turn. Raises ``ParseError`` saying what is wrong, for the model."""
    markers = find_markers(text)
    observation = next((marker for marker in markers if marker.role == "observation"), None)
    if observation is not None:
        # Labels before the cut are found the same way in the cut text: reuse them.
        text = text[: observation.start].rstrip()
        markers = markers[: markers.index(observation)]
    unfenced = False
    if not any(marker.role in _ACTION_ROLES for marker in markers):
        # A model that wrapped its whole reply in a code fence.
        candidates = find_markers(text, skip_fenced=False)
        if any(marker.role in _ACTION_ROLES for marker in candidates):
            markers, unfenced = candidates, True
    markers = counted_markers(markers)
    actions = [marker for marker in markers if marker.role in _ACTION_ROLES]

    if not actions:
        found = _find_json_blob(text)
        if found is not None:
            blob, blob_start = found
            thought = _thought_before(text, markers, blob_start, unfenced=unfenced)
            return _from_blob(blob, thought=thought, text=text)
        raise ParseError(
            "the reply has neither an action nor a final answer",
            text=text,
        )

    thought = _thought_before(text, markers, actions[0].start, unfenced=unfenced)
    chosen = _chosen_marker(text, markers, actions)

    if chosen.role == "final_answer":
        end = _next_marker(markers, chosen.content_start, _ANSWER_ENDS)
        answer = text[chosen.content_start : end.start if end else len(text)]
        answer = drop_leftover_fence(_drop_label_emphasis(answer)).strip(" \t\r\n")
        if not answer:
            raise ParseError("the final answer is empty", text=text)
        return ParsedFinalAnswer(answer=answer, thought=thought, text=text)

    if chosen.role == "action_input":
        raise ParseError("an action input with no action before it", text=text)

    following = _next_marker(markers, chosen.content_start)
    action_value = text[chosen.content_start : following.start if following else len(text)]
    action_blob = _json_action(action_value, text=text)
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

    input_end = _next_marker(markers, following.content_start)
    raw_input = text[following.content_start : input_end.start if input_end else len(text)]
    return ParsedAction(tool=tool, tool_input=clean_input(raw_input), thought=thought, text=text)


def _chosen_marker(text: str, markers: list[Marker], actions: list[Marker]) -> Marker:
    """The label that decides the reply: the first action or final answer, passing over an
    action that names no tool and an action input with no action when a final answer
    follows them."""
    answer_later = [index for index, m in enumerate(actions) if m.role == "final_answer"]
    last_answer = answer_later[-1] if answer_later else -1
    for index, marker in enumerate(actions):
        if marker.role == "final_answer" or index > last_answer:
            return marker
        if marker.role == "action":
            following = _next_marker(markers, marker.content_start)
            value = text[marker.content_start : following.start if following else len(text)]
            if not is_no_tool(value):
                return marker
    return actions[0]


# -- streaming -------------------------------------------------------------------------------


class SentText:
    """The text a filter has passed on: appended in pieces, joined only when read (appending
    to one growing ``str`` attribute would copy it whole every time)."""

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self.length = 0

    def append(self, piece: str) -> None:
        self._pieces.append(piece)
        self.length += len(piece)

    def text(self) -> str:
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""


class _Tail:
    """The last character of a region that is not in ``stripped``, found incrementally: each
    character is looked at once however many times the region grows."""

    def __init__(self, stripped: str) -> None:
        self._stripped = stripped
        self.scanned = -1  # characters before this have been looked at
        self.last_solid = -1

    def update(self, text: str, start: int, end: int) -> int:
        """The position just after the last solid character of ``text[start:end]``."""
        begin = max(start, self.scanned)
        if end > begin:
            kept = len(text[begin:end].rstrip(self._stripped))
            if kept:
                self.last_solid = begin + kept - 1
            self.scanned = end
        return self.last_solid + 1 if self.last_solid >= start else start


class _Lead:
    """Where an answer starts after its label, found incrementally: past spaces, a bold
    label's closing ``**``, then any whitespace (what ``_drop_label_emphasis`` and the strip
    in ``parse`` drop). Each character is looked at once however the text arrives."""

    def __init__(self, position: int) -> None:
        self.position = position
        self._past_emphasis = False

    def find(self, text: str, limit: int, *, final: bool = False) -> int | None:
        """The answer's first character; None while the text up to ``limit`` cannot tell,
        or (``final``: the text ends at ``limit``) when the answer is empty."""
        position = self.position
        if not self._past_emphasis:
            while position < limit and text[position] in " \t":
                position += 1
            self.position = position
            if not final and limit - position < 3 and text[position:limit] in ("", "*", "**"):
                return None  # maybe the closing ``**`` of a bold label, or the answer's own
            if text.startswith("**", position) and (
                position + 2 == limit or text[position + 2].isspace()
            ):
                position += 2
            self._past_emphasis = True
        while position < limit and text[position] in " \t\r\n":
            position += 1
        self.position = position
        return position if position < limit else None


class _Filter(ABC):
    """What the streaming filters share: a scanner over the reply so far, the text passed on,
    and ``feed`` / ``finish``. ``_update`` passes on what has become known."""

    def __init__(self, emit: Callable[[str], None], *, skip_fenced: bool = True) -> None:
        self._emit = emit
        self._scanner = LabelScanner(skip_fenced=skip_fenced)
        self._sent = SentText()
        self._closed = False

    @property
    def sent(self) -> str:
        return self._sent.text()

    def feed(self, chunk: str) -> None:
        if not self._closed and chunk:
            self._scanner.feed(chunk)
            self._update(final=False)

    def finish(self) -> None:
        if not self._closed:
            self._scanner.finish()
            self._update(final=True)
            self._closed = True

    @abstractmethod
    def _update(self, *, final: bool) -> None:
        """Look at what the scanner has found so far and send what is now known."""

    def _send(self, delta: str) -> None:
        self._sent.append(delta)
        self._emit(delta)


class AnswerStream(_Filter):
    """Passes on the final answer of a ReAct reply as the model streams it.

    Nothing is passed on unless a final-answer label at the start of a line decides the
    reply (the parser's policy), so thought text never reaches the answer. The tail that may
    still turn into a label (``\\nActi``), a last line that may be a leftover fence, and
    trailing whitespace are held back until they are known: what has been sent is always a
    prefix of the answer ``parse`` returns. A one-line answer (``… Final Answer: 42``) is
    known only at the end; the executor sends it then.
    """

    def __init__(self, emit: Callable[[str], None]) -> None:
        super().__init__(emit)
        self._seen = 0  # markers looked at
        self._skipping_action: Marker | None = None  # an action that may name no tool
        self._answer: Marker | None = None
        self._end: int | None = None
        self._lead: _Lead | None = None
        self._last_line: _LastLine | None = None  # of the answer, once it starts
        self._sent_until = 0
        self._tail = _Tail(" \t\r\n")

    def _update(self, *, final: bool) -> None:
        markers = self._scanner.markers
        while self._seen < len(markers) and not self._closed:
            marker = markers[self._seen]
            self._seen += 1
            self._read(marker)
        if self._closed:
            return
        if self._skipping_action is not None and final:
            self._closed = True  # an action with nothing after it: no answer
            return
        if self._answer is not None:
            self._flush(final=final or self._end is not None)

    def _read(self, marker: Marker) -> None:
        if self._answer is not None:
            ends = marker.role in _ANSWER_ENDS and (
                marker.line_start or marker.role != "final_answer"
            )
            if ends and self._end is None:
                self._end = marker.start
            return
        skipping = self._skipping_action
        if skipping is not None:
            value = self._scanner.text[skipping.content_start : marker.start]
            if not is_no_tool(value):
                self._closed = True
                return
            self._skipping_action = None
        if marker.role == "observation":
            self._closed = True
        elif marker.role == "action":
            self._skipping_action = marker
        elif marker.role == "final_answer" and marker.line_start:
            self._answer = marker

    def _flush(self, *, final: bool) -> None:
        text = self._scanner.text
        answer = self._answer
        assert answer is not None
        limit = self._end if self._end is not None else self._scanner.decided
        if final:
            # The end is known: send what ``parse`` will return, past what was sent.
            whole = drop_leftover_fence(_drop_label_emphasis(text[answer.content_start : limit]))
            self._send_rest(whole.strip(" \t\r\n"))
            self._closed = True
            return
        if self._sent_until == 0:
            if self._lead is None:
                self._lead = _Lead(answer.content_start)
            start = self._lead.find(text, limit)
            if start is None:
                return
            self._sent_until = start
            self._last_line = _LastLine(start)
        safe = self._before_bare_fence_line(self._tail.update(text, self._sent_until, limit))
        if safe > self._sent_until:
            delta = text[self._sent_until : safe]
            self._sent_until = safe
            self._send(delta)

    def _send_rest(self, answer: str) -> None:
        sent = self.sent
        if answer.startswith(sent) and len(answer) > len(sent):
            self._send(answer[len(sent) :])

    def _before_bare_fence_line(self, safe: int) -> int:
        """``safe``, or the start of its line when that line, so far, is only a fence (it may
        be the leftover end of a fenced reply: known only when more text follows). However
        deep the fence is indented: ``drop_leftover_fence`` drops it at any depth."""
        assert self._last_line is not None
        text = self._scanner.text
        line = self._last_line
        line.update(text, safe)
        if line.start < self._sent_until or line.solid == -1:
            return safe
        if safe - line.solid <= len(_FENCE) and _FENCE.startswith(text[line.solid : safe]):
            return self._sent_until + len(text[self._sent_until : line.start].rstrip())
        return safe


class _LastLine:
    """Where the last line of a growing region starts, and where its text after the
    indentation starts (-1 until some arrives), found incrementally: each character is looked
    at once however the region grows. The region's first line starts at ``start``."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.solid = -1
        self._scanned = start

    def update(self, text: str, end: int) -> None:
        if end <= self._scanned:
            return
        position = self._scanned
        newline = text.rfind("\n", position, end)
        if newline != -1:
            self.start = position = newline + 1
            self.solid = -1
        if self.solid == -1:
            while position < end and text[position] in _INDENT:
                position += 1
            if position < end:
                self.solid = position
        self._scanned = end


class ThoughtStream(_Filter):
    """Passes on the thought of a ReAct reply as the model streams it: the text before the
    first action, action-input or final-answer label, without the thought (and question)
    labels; its parts are stripped and joined by newlines, as ``parse`` stores it.

    Held back until known: a line that may become a label, trailing whitespace and ``*``, a
    mid-line ``Final Answer:`` (it counts only when no other such label follows), and
    everything from a line starting with ``{`` or a code fence (a JSON action may be there)
    until a label shows it was thought. What has been sent is a prefix of the thought
    ``parse`` returns whenever the reply parses; the executor sends the rest at the end.
    """

    def __init__(self, emit: Callable[[str], None]) -> None:
        super().__init__(emit)
        self._seen = 0
        self._part_sent = False  # something of the current part was sent
        self._sent_until = 0
        self._tail = _Tail(_STRIPPED_IN_THOUGHTS)
        self._one_line_answer: int | None = None

    def _update(self, *, final: bool) -> None:
        if final:
            return
        markers = self._scanner.markers
        while self._seen < len(markers) and not self._closed:
            marker = markers[self._seen]
            self._seen += 1
            if marker.role in ("thought", "question"):
                if self._one_line_answer is not None:
                    # A mid-line final answer may still count, and everything after it would
                    # then be the answer: only ``parse``, at the end, can tell.
                    self._send_part(self._one_line_answer, whole=True)
                    self._closed = True
                    break
                self._send_part(marker.start, whole=True)
                self._sent_until = marker.content_start
                self._part_sent = False
                self._tail = _Tail(_STRIPPED_IN_THOUGHTS)
            elif marker.role == "final_answer" and not marker.line_start:
                if self._one_line_answer is None:
                    self._one_line_answer = marker.start
            elif marker.role in _ACTION_ROLES or marker.role == "observation":
                if marker.role != "observation" or self._one_line_answer is None:
                    self._send_part(marker.start, whole=True)
                self._closed = True
        if not self._closed:
            limit = self._scanner.decided
            for hold in (self._one_line_answer, self._scanner.block_start):
                if hold is not None and hold >= 0:
                    limit = min(limit, hold)
            self._send_part(limit, whole=False)

    def _send_part(self, end: int, *, whole: bool) -> None:
        text = self._scanner.text
        start = self._sent_until
        if not self._part_sent:
            while start < end and text[start] in _STRIPPED_IN_THOUGHTS:
                start += 1
            self._sent_until = start
        if whole:
            safe = start + len(text[start:end].rstrip(_STRIPPED_IN_THOUGHTS))
        else:
            safe = self._tail.update(text, start, end)
        if safe <= start:
            return
        delta = text[start:safe]
        if not self._part_sent and self._sent.length:
            delta = "\n" + delta
        self._part_sent = True
        self._sent_until = safe
        self._send(delta)


class NativeAnswerStream(_Filter):
    """Passes on a native tool-calling reply's text as it streams, as the answer it becomes
    when no tool call follows (``native_answer``): stripped, without a leading final-answer
    label (some models write one out of habit). The executor takes it back
    (``on_answer_reset``) when tool calls do follow."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        super().__init__(emit, skip_fenced=False)
        self._first = 0  # the first character that is not whitespace, once found
        self._lead: _Lead | None = None  # after a leading final-answer label
        self._start: int | None = None
        self._sent_until = 0
        self._tail = _Tail(" \t\r\n")

    def _update(self, *, final: bool) -> None:
        text = self._scanner.text
        if self._start is None:
            self._start = self._answer_start(text, final=final)
            if self._start is None:
                return
            self._sent_until = self._start
        safe = self._tail.update(text, self._sent_until, len(text))
        if safe > self._sent_until:
            delta = text[self._sent_until : safe]
            self._sent_until = safe
            self._send(delta)

    def _answer_start(self, text: str, *, final: bool) -> int | None:
        if self._lead is None:
            while self._first < len(text) and text[self._first] in " \t\r\n":
                self._first += 1
            line = text.rfind("\n", 0, self._first) + 1
            if not final and (self._first == len(text) or self._scanner.decided <= line):
                return None  # the first line may still turn out to hold a label
            markers = self._scanner.markers
            label = markers[0] if markers and markers[0].start == line else None
            if label is None or label.role != "final_answer":
                return self._first
            self._lead = _Lead(label.content_start)
        start = self._lead.find(text, len(text), final=final)
        return len(text) if start is None and final else start


def native_answer(text: str) -> str:
    """The answer of a native reply that called no tool: what ``NativeAnswerStream`` sends."""
    stream = NativeAnswerStream(lambda _: None)
    stream.feed(text)
    stream.finish()
    return stream.sent
