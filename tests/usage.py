"""Spending tokens the way a worker does: a stored model call adds them to the run and to the
usage ledger (agents/services/usage.py)."""

from __future__ import annotations

from agents.models import AgentRun
from agents.react.types import ModelCallRecord
from agents.runs.store import run_record_model_call


def spend(run: AgentRun, *, prompt_tokens: int, completion_tokens: int) -> None:
    run_record_model_call(
        run=run,
        record=ModelCallRecord(
            index=0,
            messages=[{"role": "user", "content": "a question"}],
            options={},
            response_text="Final Answer: an answer",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        ),
    )
