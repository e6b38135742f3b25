"""Differential testing: our parser beside LangChain's ReAct single-input and MRKL parsers.

Over the corpus in ``tests/react/corpus/replies.json`` every disagreement must be listed in
the table of ``docs/parser-differences.md`` (with a class that says why ours is right), and
every row of that table must still be a disagreement. A hypothesis generator adds ReAct
replies in the format both parsers document, where they must agree and give what was
written; and noisier replies, on which ours only ever answers or raises ``ParseError``, and
its streaming filters send prefixes of what it parses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_classic.agents.mrkl.output_parser import MRKLOutputParser
from langchain_classic.agents.output_parsers.react_single_input import (
    ReActSingleInputOutputParser,
)
from langchain_core.agents import AgentAction
from langchain_core.exceptions import OutputParserException

from agents.react.errors import ParseError
from agents.react.parser import (
    AnswerStream,
    ParsedAction,
    ParsedFinalAnswer,
    ThoughtStream,
    parse,
)

ROOT = Path(__file__).resolve().parents[2]
CORPUS = json.loads((Path(__file__).parent / "corpus" / "replies.json").read_text("utf-8"))
CASES = {case["id"]: case for case in CORPUS["cases"]}
DOC = ROOT / "docs" / "parser-differences.md"
PARSERS = {"react": ReActSingleInputOutputParser(), "mrkl": MRKLOutputParser()}

Outcome = tuple[str, ...]


def _input_key(value: str | dict) -> str:
    """An action input in a comparable form: JSON objects by content, text stripped."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    text = value.strip()
    try:
        loaded = json.loads(text)
    except ValueError:
        return text
    return json.dumps(loaded, sort_keys=True) if isinstance(loaded, dict) else text


def ours(text: str) -> Outcome:
    try:
        parsed = parse(text)
    except ParseError:
        return ("error",)
    if isinstance(parsed, ParsedAction):
        return ("action", parsed.tool, _input_key(parsed.tool_input))
    return ("finish", parsed.answer)


def theirs(parser_name: str, text: str) -> Outcome:
    try:
        result = PARSERS[parser_name].parse(text)
    except OutputParserException:
        return ("error",)
    if isinstance(result, AgentAction):
        tool_input = result.tool_input
        return ("action", result.tool.strip(), _input_key(tool_input))
    return ("finish", result.return_values["output"])


def disagreements() -> dict[tuple[str, str], tuple[str, str]]:
    """(case, parser) -> (LangChain's outcome kind, ours) for every case they differ on."""
    found = {}
    for case_id, case in CASES.items():
        mine = ours(case["text"])
        for parser_name in PARSERS:
            other = theirs(parser_name, case["text"])
            if other != mine:
                found[(case_id, parser_name)] = (other[0], mine[0])
    return found


def documented() -> tuple[dict[tuple[str, str], tuple[str, str, str]], set[str]]:
    """The disagreement table (case, parser) -> (LangChain, ours, class) and the classes."""
    text = DOC.read_text("utf-8")
    classes_part, _, table_part = text.partition("## Disagreements in the corpus")
    classes = set(re.findall(r"^\| `([a-z-]+)` \|", classes_part, re.MULTILINE))
    rows = {}
    for line in table_part.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            case_id, parser_name, lc, mine, klass = (cell.strip("`") for cell in cells)
            rows[(case_id, parser_name)] = (lc, mine, klass)
    return rows, classes


def test_the_corpus_has_every_kind_of_source():
    sources = [case["source"] for case in CASES.values()]
    assert any(source.startswith("LangChain docs") for source in sources)
    assert any(source.startswith("engine format variant") for source in sources)
    assert sum(source.startswith("https://github.com/") for source in sources) >= 12


def test_every_disagreement_is_documented_and_every_documented_one_is_real():
    actual = disagreements()
    rows, classes = documented()
    missing = sorted(set(actual) - set(rows))
    stale = sorted(set(rows) - set(actual))
    hint = "\n".join(
        "| `{}` | `{}` | {} | {} | `?` |".format(case, parser, *actual[(case, parser)])
        for case, parser in missing
    )
    assert not missing, f"disagreements missing from {DOC.name}:\n{hint}"
    assert not stale, f"rows of {DOC.name} that no longer disagree: {stale}"
    for key, (lc, mine, klass) in rows.items():
        assert (lc, mine) == actual[key], (key, (lc, mine), actual[key])
        assert klass in classes, f"{key}: class {klass!r} is not explained in {DOC.name}"
    unused = classes - {klass for _, _, klass in rows.values()}
    assert not unused, f"classes no corpus case shows: {sorted(unused)}"


def test_the_corpus_cases_agree_where_the_table_says_nothing():
    # The other side of the table: cases absent from it give the same outcome, in detail.
    rows, _ = documented()
    for case_id, case in CASES.items():
        for parser_name in PARSERS:
            if (case_id, parser_name) not in rows:
                assert theirs(parser_name, case["text"]) == ours(case["text"]), case_id


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_our_streaming_filters_agree_with_our_parser_on_the_corpus(case_id):
    _check_streams(CASES[case_id]["text"])


def _check_streams(text: str, chunk_size: int = 3) -> None:
    thought, answer = ThoughtStream(lambda _: None), AnswerStream(lambda _: None)
    for start in range(0, len(text), chunk_size):
        thought.feed(text[start : start + chunk_size])
        answer.feed(text[start : start + chunk_size])
    thought.finish()
    answer.finish()
    try:
        parsed = parse(text)
    except ParseError:
        assert answer.sent == ""
        return
    assert parsed.thought.startswith(thought.sent)
    if isinstance(parsed, ParsedFinalAnswer):
        assert parsed.answer.startswith(answer.sent)
    else:
        assert answer.sent == ""


# -- generated replies ------------------------------------------------------------------------

# Words with no label in them and no quotes at their ends (LangChain strips those).
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789,.!?-+*/()=", min_size=1, max_size=8)
PHRASE = (
    st.lists(WORD, min_size=1, max_size=8)
    .map(" ".join)
    .filter(lambda phrase: not phrase.strip().startswith(("*", "-")) and phrase.strip() != "")
)
TOOL = st.sampled_from(["search", "calculator", "get_word_length", "wiki_lookup"])


@st.composite
def documented_replies(draw) -> tuple[str, Outcome]:
    """A reply in the format both parsers document, and what it means."""
    thought = draw(PHRASE)
    label = draw(st.sampled_from(["Thought: ", ""]))
    gap = draw(st.sampled_from(["\n", "\n\n"]))
    if draw(st.booleans()):
        tool, tool_input = draw(TOOL), draw(PHRASE).strip()
        text = f"{label}{thought}{gap}Action: {tool}\nAction Input: {tool_input}"
        return text, ("action", tool, tool_input)
    lines = draw(st.lists(PHRASE, min_size=1, max_size=3))
    answer = "\n".join(line.strip() for line in lines)
    return f"{label}{thought}{gap}Final Answer: {answer}", ("finish", answer)


@settings(
    max_examples=300,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(documented_replies())
def test_generated_documented_replies_mean_the_same_to_both(reply):
    text, meaning = reply
    assert ours(text) == meaning
    for parser_name in PARSERS:
        assert theirs(parser_name, text) == meaning, parser_name


NOISE = st.sampled_from(
    [
        "Thought:",
        "Action:",
        "Action Input:",
        "Final Answer:",
        "Observation:",
        "final answer:",
        "**Action:**",
        "行动：",
        "最终答案：",
        "```",
        "{",
        "}",
        "[",
        '"',
        "\n",
        "\n\n",
        " ",
        "None",
        "Obs",
    ]
)


@settings(max_examples=400, derandomize=True, database=None)
@given(st.lists(st.one_of(NOISE, WORD), max_size=30).map("".join))
# Found by this test: a mid-line final answer then a thought label streamed the label as thought.
@example("Thought:Final Answer:\nThought:")
def test_noisy_replies_parse_or_raise_a_parse_error_and_streams_agree(text):
    outcome = ours(text)
    assert outcome[0] in ("action", "finish", "error")
    _check_streams(text, chunk_size=2)
