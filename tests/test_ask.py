"""``manage.py ask``: every step printed as it happens, JSON lines, clear one-line failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from agents.models import AgentProfile, ModelConfig, ToolConfig
from agents.services.defaults import ensure_defaults

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "what is (28+10)*3?"


@pytest.fixture(autouse=True)
def no_endpoint(settings):
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_MODEL = ""


def ask(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ask", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def assert_in_order(text: str, *parts: str) -> None:
    position = 0
    for part in parts:
        found = text.find(part, position)
        assert found >= 0, f"{part!r} not found after position {position} in:\n{text}"
        position = found + len(part)


@pytest.mark.django_db
def test_prints_every_step_of_the_demo_run():
    ensure_defaults()

    out, err = ask(QUESTION)

    assert_in_order(
        out,
        "Question: what is (28+10)*3?",
        "Thought: This is arithmetic",
        "Action: calculator",
        "Action Input: (28+10)*3",
        "Observation: 114",
        "Thought: I now know the final answer.",
        "Final Answer: The answer is 114",
    )
    assert out.count("Final Answer:") == 1
    assert "offline demo" in out
    assert "offline demo model is answering" in err


@pytest.mark.django_db
def test_native_tool_mode():
    ensure_defaults()

    out, _ = ask(QUESTION, "--mode", "tools")

    assert_in_order(
        out,
        "Action: calculator",
        'Action Input: {"expression": "(28+10)*3"}',
        "Observation: 114",
        "Final Answer: The answer is 114",
    )


@pytest.mark.django_db
def test_a_chinese_profile_prints_chinese_labels():
    default = ensure_defaults()
    profile = AgentProfile.objects.create(
        name="中文", slug="zh", label_set="zh", model_config=default.model_config
    )
    profile.tools.set(ToolConfig.objects.filter(name="calculator"))

    out, _ = ask("（28+10）×3 等于多少？", "--profile", "zh")

    assert_in_order(
        out,
        "问题：",
        "行动：calculator",
        "行动输入：(28+10)*3",
        "观察：114",
        "最终答案：答案是 114",
    )


@pytest.mark.django_db
def test_json_lines_are_websocket_shaped_frames():
    ensure_defaults()

    out, _ = ask(QUESTION, "--json")

    frames = [json.loads(line) for line in out.splitlines()]
    types = [frame["type"] for frame in frames]
    assert types[0] == "run.started"
    assert types[-1] == "run.finished"
    steps = [frame for frame in frames if frame["type"] == "step"]
    assert [s["kind"] for s in steps] == ["thought", "action", "observation", "thought"]
    assert steps[1]["tool"] == "calculator"
    assert steps[2]["text"] == "114"
    finished = frames[-1]
    assert "114" in finished["message"]["content"]
    assert finished["stop_reason"] == "answer"
    assert finished["usage"]["prompt_tokens"] > 0
    deltas = [frame["text"] for frame in frames if frame["type"] == "answer.delta"]
    assert "".join(deltas) == finished["message"]["content"]
    stored = [frame["seq"] for frame in frames if "seq" in frame]
    assert stored == list(range(1, len(stored) + 1))
    assert frames[0]["demo"] is True


@pytest.mark.django_db
def test_without_any_profile_the_defaults_are_created():
    AgentProfile.objects.all().delete()

    out, _ = ask(QUESTION)

    assert "Observation: 114" in out
    assert AgentProfile.objects.filter(is_default=True).exists()


@pytest.mark.django_db
def test_an_unknown_profile_is_a_clear_error():
    ensure_defaults()

    with pytest.raises(CommandError, match="No profile with slug 'nope'"):
        ask("hi", "--profile", "nope")


@pytest.mark.django_db
def test_an_unreachable_endpoint_is_a_one_line_model_error():
    model_config = ModelConfig.objects.create(
        name="gone", base_url="http://127.0.0.1:9/v1", model="x", max_retries=0
    )
    AgentProfile.objects.create(name="Gone", slug="gone", model_config=model_config)

    with pytest.raises(CommandError) as raised:
        ask("hi", "--profile", "gone", "--json")

    assert "model_unavailable" in str(raised.value)
    assert "\n" not in str(raised.value)


def _database_url() -> str:
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{settings_dict['NAME']}"


@pytest.mark.django_db(transaction=True)
def test_the_process_exits_non_zero_with_one_line_and_no_traceback():
    model_config = ModelConfig.objects.create(
        name="gone", base_url="http://127.0.0.1:9/v1", model="x", max_retries=0
    )
    AgentProfile.objects.create(name="Gone", slug="gone", model_config=model_config)
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "OPENAI_BASE_URL": "",
        "OPENAI_API_KEY": "",
    }

    result = subprocess.run(
        [sys.executable, "manage.py", "ask", "hi", "--profile", "gone"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "cannot reach http://127.0.0.1:9/v1" in lines[0]


class _Terminal(StringIO):
    """Typed answers, as from a person at a terminal."""

    def isatty(self) -> bool:
        return True


def _calculator_needs_approval() -> None:
    ensure_defaults()
    ToolConfig.objects.filter(name="calculator").update(needs_approval=True)


@pytest.mark.django_db
def test_a_call_that_needs_approval_stops_with_how_to_decide(monkeypatch):
    _calculator_needs_approval()
    monkeypatch.setattr(sys, "stdin", StringIO(""))

    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as stopped:
        call_command("ask", QUESTION, stdout=out, stderr=err)

    assert str(stopped.value) == (
        "The agent wants to call calculator (28+10)*3, which needs approval. "
        "Run again with --approve to let it or --deny to refuse it."
    )
    assert "[needs approval] calculator (28+10)*3" in out.getvalue()
    assert "Observation:" not in out.getvalue()


@pytest.mark.django_db
def test_approve_runs_the_call_once_and_the_run_goes_on():
    _calculator_needs_approval()

    out, _ = ask(QUESTION, "--approve")

    assert_in_order(
        out,
        "Action: calculator",
        "[needs approval] calculator (28+10)*3",
        "[approved]",
        "Observation: 114",
        "Final Answer: The answer is 114",
    )
    assert out.count("Observation: 114") == 1
    assert out.count("[needs approval]") == 1


@pytest.mark.django_db
def test_deny_tells_the_agent_and_the_call_never_runs():
    _calculator_needs_approval()

    out, _ = ask(QUESTION, "--deny", "--json")

    frames = [json.loads(line) for line in out.splitlines()]
    types = [frame["type"] for frame in frames]
    assert types[-1] == "run.finished"
    decided = [frame for frame in frames if frame["type"] == "approval.decided"]
    assert decided
    assert all(frame["approved"] is False for frame in decided)
    observations = [f["text"] for f in frames if f.get("kind") == "observation"]
    assert observations
    assert all("declined" in text for text in observations)
    assert "114" not in " ".join(observations)


@pytest.mark.django_db
def test_at_a_terminal_the_command_asks(monkeypatch):
    _calculator_needs_approval()
    monkeypatch.setattr(sys, "stdin", _Terminal("y\n"))

    out, err = ask(QUESTION)

    assert "The agent wants to call calculator (28+10)*3, which needs approval." in err
    assert "Approve? [y/N]" in err
    assert "Observation: 114" in out


@pytest.mark.django_db
def test_a_budget_ends_the_command_with_its_reason():
    ensure_defaults()
    AgentProfile.objects.update(budget_steps=1)

    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as stopped:
        call_command("ask", QUESTION, stdout=out, stderr=err)

    assert str(stopped.value).startswith(
        "The run stopped at its budget: The run used its budget of 1 steps."
    )
    assert "Observation: 114" in out.getvalue()
    assert "Final Answer" not in out.getvalue()
