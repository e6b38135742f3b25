"""Prompt tokens per turn over a long conversation, for each memory strategy.

Drives the real memory path (``memory_for_run`` before each run, ``memory_after_run`` after
it, the summariser task run eagerly) against the scripted model on loopback, in a throwaway
SQLite database, and counts the tokens of the first request of each run as the engine renders
it (ReAct mode, default template, no tools). No network, no API key.

    .venv/bin/pip install -r requirements-bench.txt
    .venv/bin/python bench/memory_growth.py --turns 200 --plot docs/memory_growth.png
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STRATEGIES = ("buffer", "window", "summary_buffer")
FACTS = {
    3: "Please remember that my name is Ada Quintero.",
    11: "Remember that I am allergic to peanuts.",
    27: "Remember that the project deadline is 14 March.",
}
TOPICS = ("budget", "garden", "invoice", "recipe", "train", "museum", "laptop", "harbour")
WORDS = (
    "the",
    "a",
    "we",
    "could",
    "should",
    "maybe",
    "about",
    "after",
    "before",
    "during",
    "with",
    "for",
    "plan",
    "price",
    "time",
    "list",
    "check",
    "send",
    "book",
    "compare",
    "explain",
    "draft",
    "review",
    "cheaper",
    "faster",
    "option",
    "detail",
    "weekend",
    "morning",
    "evening",
    "report",
    "table",
    "number",
    "total",
    "week",
    "month",
    "team",
    "friend",
    "email",
)


def _setup_django(workdir: Path) -> None:
    """Django on a fresh SQLite file, tables created from the models (as the tests do)."""
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    os.environ["CHATSITE_VAR_DIR"] = str(workdir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # one INFO line per model call otherwise
    sys.path.insert(0, str(ROOT))
    import django
    from django.conf import settings

    django.setup()

    class NoMigrations(dict):
        def __contains__(self, app_label: object) -> bool:
            return True

        def __getitem__(self, app_label: str) -> None:
            return None

    settings.MIGRATION_MODULES = NoMigrations()
    from django.core.management import call_command

    call_command("migrate", run_syncdb=True, verbosity=0)


def _sentence(rng: random.Random, topic: str, words: int) -> str:
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return f"About the {topic}: {body}."


def question_text(rng: random.Random, turn: int) -> str:
    if turn in FACTS:
        return FACTS[turn]
    topic = rng.choice(TOPICS)
    return " ".join(_sentence(rng, topic, rng.randint(8, 16)) for _ in range(2))


def answer_text(rng: random.Random) -> str:
    topic = rng.choice(TOPICS)
    return " ".join(_sentence(rng, topic, rng.randint(10, 20)) for _ in range(rng.randint(2, 5)))


@dataclass
class Series:
    strategy: str
    prompt_tokens: list[int] = field(default_factory=list)
    summary_calls: int = 0
    facts_kept: int = 0

    def at(self, turn: int) -> int:
        return self.prompt_tokens[turn - 1]


def run_strategy(strategy: str, *, turns: int, budget: int, window: int, seed: int) -> Series:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from agents.llm.scripted import ScriptedServer
    from agents.llm.tokens import count_message_tokens
    from agents.memory.services import memory_after_run, memory_for_run
    from agents.memory.testing import summariser_policy
    from agents.models import AgentProfile, Conversation, Message, ModelConfig
    from agents.profile_snapshot import ProfileSnapshot
    from agents.react.prompt import PromptConfig, react_messages

    rng = random.Random(seed)
    series = Series(strategy)
    model_name = f"bench-summariser-{strategy}"
    with ScriptedServer() as server:
        server.policy(model_name, summariser_policy)
        model_config = ModelConfig.objects.create(
            name=model_name, base_url=server.base_url, model=model_name, max_retries=0
        )
        profile = AgentProfile.objects.create(
            name=f"Bench {strategy}",
            slug=f"bench-{strategy}",
            model_config=model_config,
            memory_strategy=strategy,
            memory_token_budget=budget,
            memory_window_turns=window,
        )
        owner, _ = get_user_model().objects.get_or_create(username="bench")
        conversation = Conversation.objects.create(owner=owner, profile=profile)
        snapshot = ProfileSnapshot.from_profile(profile)
        prompt = PromptConfig()
        context = None
        for turn in range(1, turns + 1):
            question = Message.objects.create(
                conversation=conversation, role="user", content=question_text(rng, turn)
            )
            context = memory_for_run(
                conversation=conversation,
                snapshot=snapshot,
                model_name=model_name,
                before_message=question,
            )
            messages = react_messages(
                prompt,
                tools=[],
                question=question.content,
                history=context.history,
                memory_summary=context.summary,
            )
            series.prompt_tokens.append(count_message_tokens(messages))
            with transaction.atomic():  # like the end of a run: enqueued on commit
                Message.objects.create(
                    conversation=conversation, role="assistant", content=answer_text(rng)
                )
                memory_after_run(conversation=conversation, snapshot=snapshot)
        series.summary_calls = len(server.requests(model_name))
        remembered = (context.summary if context else "") + " ".join(
            message["content"] for message in (context.history if context else [])
        )
        series.facts_kept = sum(fact in remembered for fact in FACTS.values())
    return series


def print_table(all_series: list[Series], turns: int) -> None:
    marks = [t for t in (1, 10, 25, 50, 100, 150, 200) if t <= turns]
    header = ["strategy", *[f"turn {t}" for t in marks], "max", "mean", "summaries", "facts"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for series in all_series:
        row = [
            series.strategy,
            *[str(series.at(t)) for t in marks],
            str(max(series.prompt_tokens)),
            f"{statistics.fmean(series.prompt_tokens):.0f}",
            str(series.summary_calls),
            f"{series.facts_kept}/{len(FACTS)}",
        ]
        print("| " + " | ".join(row) + " |")


def plot(all_series: list[Series], path: Path, *, budget: int, window: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 5), dpi=120)
    labels = {
        "buffer": "buffer (whole history)",
        "window": f"window (last {window} turns)",
        "summary_buffer": f"summary_buffer (budget {budget})",
    }
    for series in all_series:
        turns = range(1, len(series.prompt_tokens) + 1)
        axes.plot(turns, series.prompt_tokens, label=labels[series.strategy], linewidth=1.4)
    axes.set_xlabel("turn")
    axes.set_ylabel("prompt tokens (first request of the run)")
    axes.set_title("Prompt size per turn by memory strategy")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    print(f"plot written to {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--budget", type=int, default=2000, help="memory_token_budget")
    parser.add_argument("--window", type=int, default=6, help="memory_window_turns")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "memory_growth.png")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="memory-growth-") as workdir:
        _setup_django(Path(workdir))
        from chatsite.celery import app

        app.conf.task_always_eager = True  # the summariser runs inline, right after commit
        all_series = [
            run_strategy(
                strategy, turns=args.turns, budget=args.budget, window=args.window, seed=args.seed
            )
            for strategy in STRATEGIES
        ]
    print(f"{args.turns} turns, budget {args.budget} tokens, window {args.window} turns")
    print_table(all_series, args.turns)
    plot(all_series, args.plot, budget=args.budget, window=args.window)


if __name__ == "__main__":
    main()
