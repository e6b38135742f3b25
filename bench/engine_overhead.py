"""Engine overhead: the median time per agent step of three loops on one scripted server.

The three loops answer the same scripted conversation (``--tool-steps`` tool calls, then the
final answer) from the same OpenAI-compatible server on loopback (``agents.llm.scripted``),
all streaming, with ``stop`` at the observation label:

- ``bare``: a loop of ``openai`` SDK calls with the least parsing that works (the floor);
- ``engine``: ``AgentExecutor`` over ``OpenAIChatModel``, as a run uses it (with an answer
  stream and a cancellation check);
- ``langchain``: LangChain's classic ``AgentExecutor`` with ``create_react_agent`` and
  ``ChatOpenAI``.

Runs are interleaved (each round runs every loop once, in a rotating order) so that drift in
the machine's load hits all three alike. A step is one model call plus its tool call; a run's
time per step is its wall time over its model calls, and the figure reported is the median
over the rounds. Overhead is a loop's median minus the bare loop's. The server runs in a
process of its own unless ``--in-process`` is given.

    .venv/bin/pip install -r requirements-bench.txt
    .venv/bin/python bench/engine_overhead.py --rounds 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from agents.llm.client import OpenAIChatModel  # noqa: E402
from agents.llm.scripted import Reply, ScriptedServer  # noqa: E402
from agents.react.executor import AgentConfig, AgentExecutor  # noqa: E402
from agents.react.prompt import PromptConfig, default_template, render_template  # noqa: E402
from agents.react.tools import Tool  # noqa: E402

QUESTION = "What are the capitals on my list?"
CAPITALS = {"france": "Paris", "japan": "Tokyo", "peru": "Lima", "kenya": "Nairobi"}
API_KEY = "bench"


class Lookup(Tool):
    name = "lookup"
    description = "Looks up the capital of a country."

    def run(self, *, country: str) -> str:
        return CAPITALS.get(country.strip().lower(), "unknown")


def script(tool_steps: int) -> list[Reply]:
    countries = list(CAPITALS)
    replies = [
        Reply(
            f"Thought: I need the capital of {countries[i % len(countries)]}.\n"
            f"Action: lookup\nAction Input: {countries[i % len(countries)]}"
        )
        for i in range(tool_steps)
    ]
    replies.append(
        Reply("Thought: I now know the final answer\nFinal Answer: Paris, Tokyo, Lima and Nairobi.")
    )
    return replies


def template_without_memory() -> str:
    """The engine's default ReAct template with no history or examples, for all three loops."""
    return render_template(
        default_template("react", "en"),
        {
            "history": "",
            "few_shot_examples": "",
            "tools": "{tools}",
            "tool_names": "{tool_names}",
            "input": "{input}",
            "agent_scratchpad": "{agent_scratchpad}",
        },
    )


# -- the three loops -------------------------------------------------------------------------


def bare_loop(base_url: str, model: str) -> Callable[[], int]:
    client = openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
    tool = Lookup()
    prompt = render_template(
        template_without_memory(),
        {
            "tools": f"{tool.name}: {tool.description}",
            "tool_names": tool.name,
            "input": QUESTION,
            "agent_scratchpad": "",
        },
    )

    def run() -> int:
        scratchpad = ""
        calls = 0
        while True:
            calls += 1
            with client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": prompt + scratchpad}],
                stop=["\nObservation:"],
                stream=True,
                stream_options={"include_usage": True},
            ) as stream:
                text = "".join(
                    chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices
                )
            if "Final Answer:" in text:
                return calls
            tool_input = text.split("Action Input:", 1)[1].strip()
            scratchpad += f"{text}\nObservation: {tool.run(country=tool_input)}\nThought:"

    return run


def engine_loop(base_url: str, model: str) -> Callable[[], int]:
    chat_model = OpenAIChatModel(
        base_url=base_url, api_key=API_KEY, model=model, deadline_seconds=30, max_retries=0
    )
    deltas: list[str] = []
    executor = AgentExecutor(
        model=chat_model,
        tools=[Lookup()],
        prompt=PromptConfig(template=template_without_memory()),
        config=AgentConfig(),
        should_cancel=lambda: False,
        on_answer_delta=deltas.append,
    )

    def run() -> int:
        steps = list(executor.run(QUESTION))
        return sum(step.kind == "model_call" for step in steps)

    return run


def langchain_loop(base_url: str, model: str) -> Callable[[], int]:
    from langchain_classic.agents import AgentExecutor as ClassicExecutor
    from langchain_classic.agents import create_react_agent
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.prompts import PromptTemplate
    from langchain_core.tools import Tool as LangChainTool
    from langchain_openai import ChatOpenAI

    class CountCalls(BaseCallbackHandler):
        def __init__(self) -> None:
            self.calls = 0

        def on_llm_start(self, *args: object, **kwargs: object) -> None:
            self.calls += 1

        def on_chat_model_start(self, *args: object, **kwargs: object) -> None:
            self.calls += 1

    tool = Lookup()
    tools = [
        LangChainTool(
            name=tool.name,
            description=tool.description,
            func=lambda country: tool.run(country=country),
        )
    ]
    llm = ChatOpenAI(
        base_url=base_url,
        api_key=API_KEY,
        model=model,
        max_retries=0,
        streaming=True,
        stream_usage=True,
    )
    prompt = PromptTemplate.from_template(template_without_memory())
    agent = create_react_agent(llm, tools, prompt)
    executor = ClassicExecutor(agent=agent, tools=tools, max_iterations=15)

    def run() -> int:
        counter = CountCalls()
        executor.invoke({"input": QUESTION}, config={"callbacks": [counter]})
        return counter.calls

    return run


# -- measuring ---------------------------------------------------------------------------------


class ServerProcess:
    """The scripted server in a process of its own, programmed over its control API, so that
    its work does not compete with the loops for this process's interpreter lock (a real
    model server is elsewhere too)."""

    def __enter__(self) -> ServerProcess:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agents.llm.serve", "--port", "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        first_line = self.process.stdout.readline()
        self.base_url = first_line.rsplit(" ", 1)[-1].strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.process.kill()
            raise SystemExit(f"the scripted server did not start: {first_line!r}")
        return self

    def script(self, model: str, replies: list[Reply]) -> None:
        body = {"model": model, "responses": [{"type": "reply", "text": r.text} for r in replies]}
        control = self.base_url.removesuffix("/v1") + "/_control/script"
        request = urllib.request.Request(
            control, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def __exit__(self, *exc_info: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def measure(
    rounds: int, warmup: int, tool_steps: int, *, in_process: bool
) -> dict[str, list[float]]:
    per_step: dict[str, list[float]] = {"bare": [], "engine": [], "langchain": []}
    with ScriptedServer() if in_process else ServerProcess() as server:
        loops = {
            name: factory(server.base_url, f"bench-{name}")
            for name, factory in (
                ("bare", bare_loop),
                ("engine", engine_loop),
                ("langchain", langchain_loop),
            )
        }
        names = list(loops)
        for round_index in range(warmup + rounds):
            order = names[round_index % 3 :] + names[: round_index % 3]
            for name in order:
                server.script(f"bench-{name}", script(tool_steps))
                started = time.perf_counter()
                calls = loops[name]()
                elapsed = time.perf_counter() - started
                if calls != tool_steps + 1:
                    raise SystemExit(f"{name} made {calls} model calls, not {tool_steps + 1}")
                if round_index >= warmup:
                    per_step[name].append(elapsed / calls)
    return per_step


def report(per_step: dict[str, list[float]]) -> str:
    medians = {name: statistics.median(times) * 1000 for name, times in per_step.items()}
    bare = medians["bare"]
    overhead = {name: medians[name] - bare for name in medians}
    lines = [
        "| loop | median ms per step | overhead over bare, ms | relative to bare |",
        "|---|---|---|---|",
    ]
    for name in ("bare", "engine", "langchain"):
        lines.append(
            f"| {name} | {medians[name]:.2f} | {overhead[name]:+.2f} | "
            f"{medians[name] / bare:.2f}x |"
        )
    if overhead["langchain"] > 0:
        share = overhead["engine"] / overhead["langchain"]
        lines.append("")
        lines.append(f"engine overhead / LangChain overhead = {share:.2f} (goal: at most 0.50)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=100, help="measured rounds (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured rounds first")
    parser.add_argument("--tool-steps", type=int, default=3, help="tool calls per run")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the scripted server in this process (default: a process of its own)",
    )
    args = parser.parse_args(argv)
    per_step = measure(args.rounds, args.warmup, args.tool_steps, in_process=args.in_process)
    where = "in this process" if args.in_process else "in its own process"
    print(
        f"{args.rounds} rounds, {args.tool_steps} tool steps + 1 answer per run, server "
        f"{where}, Python {sys.version.split()[0]}, openai {openai.__version__}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(report(per_step))


if __name__ == "__main__":
    main()
