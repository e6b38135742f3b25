"""Parser and streaming filters against reply length: is the time per character flat?

For replies of 1e3 … 1e6 characters, the median time (over ``--repeat`` runs) of:

- ``parse``: ``agents.react.parser.parse`` on the whole reply;
- ``answer stream``: ``AnswerStream`` fed the reply in chunks of ``--chunk`` characters;
- ``thought stream``: ``ThoughtStream`` fed the same chunks;
- ``native stream``: ``NativeAnswerStream`` fed the same chunks.

The reply is the slow case of the old answer filter: a thought, then a final answer whose
every chunk holds a colon or a backtick (``a: b `c` d:`` repeated), so that a filter that
rescans its buffer on such chunks shows its quadratic cost. The thought stream reads the
same text with ``Thought:`` in place of the answer label (its whole body is thought).
``--old REV`` also times the ``AnswerStream`` of that git revision (for example ``b25a416``,
before the scanner) up to ``--old-max`` characters.

    .venv/bin/python bench/parser_linearity.py
    .venv/bin/python bench/parser_linearity.py --old b25a416 --old-max 100000
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.react import parser  # noqa: E402

PATTERN = "a: b `c` d: "
SIZES = (1_000, 10_000, 100_000, 1_000_000)


def reply(size: int, label: str) -> str:
    head = f"Thought: the plan.\n{label}: "
    body = (PATTERN * (size // len(PATTERN) + 1))[: size - len(head)]
    return head + body


def chunks(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def time_stream(factory: Callable[[], object], pieces: list[str]) -> float:
    stream = factory()
    started = time.perf_counter()
    for piece in pieces:
        stream.feed(piece)  # type: ignore[attr-defined]
    stream.finish()  # type: ignore[attr-defined]
    return time.perf_counter() - started


def time_parse(text: str) -> float:
    started = time.perf_counter()
    with contextlib.suppress(parser.ParseError):
        parser.parse(text)
    return time.perf_counter() - started


def old_answer_stream(revision: str) -> type:
    """The ``AnswerStream`` class of ``agents/react/parser.py`` at a git revision."""
    source = subprocess.run(
        ["git", "show", f"{revision}:agents/react/parser.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_parser.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_parser", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_parser"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.AnswerStream


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arguments.add_argument("--chunk", type=int, default=4, help="characters per chunk")
    arguments.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    arguments.add_argument("--old", default="", help="also time this revision's AnswerStream")
    arguments.add_argument("--old-max", type=int, default=100_000)
    args = arguments.parse_args(argv)
    old_class = old_answer_stream(args.old) if args.old else None

    def ignore(_: object) -> None:
        return None

    columns = ["parse", "answer stream", "thought stream", "native stream"]
    if old_class is not None:
        columns.append(f"answer stream @{args.old}")
    print(f"chunk = {args.chunk} characters; median of {args.repeat} runs; ms (µs per 1k chars)")
    print("| characters | chunks | " + " | ".join(columns) + " |")
    print("|---:|---:|" + "---:|" * len(columns))
    for size in SIZES:
        answer_text = reply(size, "Final Answer")
        thought_text = reply(size, "Thought")
        answer_pieces = chunks(answer_text, args.chunk)
        thought_pieces = chunks(thought_text, args.chunk)
        repeat = args.repeat if size < 1_000_000 else max(1, args.repeat // 2)
        figures = [
            median([time_parse(answer_text) for _ in range(repeat)]),
            median(
                [
                    time_stream(lambda: parser.AnswerStream(ignore), answer_pieces)
                    for _ in range(repeat)
                ]
            ),
            median(
                [
                    time_stream(lambda: parser.ThoughtStream(ignore), thought_pieces)
                    for _ in range(repeat)
                ]
            ),
            median(
                [
                    time_stream(lambda: parser.NativeAnswerStream(ignore), answer_pieces)
                    for _ in range(repeat)
                ]
            ),
        ]
        if old_class is not None:
            if size <= args.old_max:
                old_repeat = 1 if size >= 100_000 else repeat
                figures.append(
                    median(
                        [
                            time_stream(lambda: old_class(ignore), answer_pieces)
                            for _ in range(old_repeat)
                        ]
                    )
                )
            else:
                figures.append(float("nan"))
        cells = [
            "–" if figure != figure else f"{figure * 1000:.1f} ({figure * 1e9 / size:.1f})"
            for figure in figures
        ]
        print(f"| {size:,} | {len(answer_pieces):,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
