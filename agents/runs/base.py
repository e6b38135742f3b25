"""The run store's interface: every write of a run's life, and what each guarantees.

Two implementations (``portable.py``, ``postgres.py``); ``store.run_store()`` picks one. The
guarantees are stated once, here, and held by ``tests/runs/test_store_contract.py`` on both:

- **The claim is exclusive.** One conditional UPDATE: two racing claims, one wins; a run
  whose heartbeat is fresh is not claimed, a stale one is.
- **Writes are fenced.** Every write given a ``worker_id`` first makes sure that worker
  still holds the run (and locks its row until commit); a worker that lost it gets
  ``RunLost`` and nothing is written: no event, no model call, no tokens.
- **``seq`` has no gap.** Each event takes the conversation's next ``seq``, one by one,
  under the conversation's row lock.
- **Events are published after commit**, never for a write that rolled back.
- **Tokens reach the ledger.** A model call's tokens are added to the run and to its
  ``UsageEntry`` in the same commit; the entry is created if the run has none.
- **Finish** stores the answer as a child of its question, and moves the conversation's
  active leaf to it only if the owner still looks at that question.
- **Release** hands a run back: no holder and no heartbeat, so the next claim takes it.
- **A child's end wakes its parent.** Finish, fail or cancel of a child run locks its
  parent's row first and, if the parent waits for its children (``awaiting_subagent``) and
  none is left unfinished, queues it again in the same commit (``waits.py``); an end that
  is refused wakes nobody.

Each sync method is one transaction, or joins the caller's. The ``a``-prefixed methods are
the same writes for the run driver on the process's event loop; they never block it.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, NamedTuple

from agents.models import AgentRun, Message, RunEvent, ToolConfig
from agents.protocol import FrameType, run_started_payload
from agents.react.types import FinalAnswerStep, ModelCallRecord, Step, step_to_event
from agents.runs.threads import in_database_thread


class RunLost(Exception):
    """This worker no longer holds the run: another took it over, or it ended meanwhile."""


class StartInputs(NamedTuple):
    """What else a run starts with, beside its own rows. Each is defined by the selector
    named beside it, which the portable store calls; the PostgreSQL store reads the same
    values in its claim's statement, and the contract tests hold the two alike."""

    # The step budget its schedule's firing gave it (``selectors.firing_budget_steps``).
    firing_budget_steps: int | None
    # Its owner's custom instructions (``selectors.custom_instructions_of``).
    owner_instructions: str
    # Whether its conversation has a file to give it (``attachments_any_ready``).
    has_ready_files: bool


class Claim(NamedTuple):
    """A run taken by ``RunStore.claim``, the tool rows and inputs read with it, and its
    ``run.started`` if the claim announced the attempt."""

    run: AgentRun
    # The enabled tools among its profile version's, in no order (None: not read with the
    # claim; ``agents.runtime.snapshot_tool_configs`` reads them).
    tool_configs: list[ToolConfig] | None
    inputs: StartInputs
    # Stored (and published once committed) with the claim where the store does that in
    # one statement; None elsewhere, and for an attempt ``run_execute`` fails at once (too
    # many attempts, no profile version), which is never announced.
    started: RunEvent | None = None


class RunStore(abc.ABC):
    """The writes of a run's life. ``worker_id`` None skips the fence (not a worker: tests,
    the admin)."""

    @abc.abstractmethod
    def claim(self, *, run_id: int, worker_id: str, announce: bool) -> Claim | None:
        """Take the run for this worker, with what it starts with (its conversation and
        owner, question, profile version, endpoint, ``StartInputs``), or None if it ended or
        a live worker holds it. With ``announce`` the store may store ``run.started`` with
        the claim (``Claim.started``); where it does not, the driver calls ``start``."""

    @abc.abstractmethod
    def start(
        self, *, run: AgentRun, model: str, profile: str, worker_id: str | None = None
    ) -> RunEvent:
        """Announce an attempt (``run.started``, with its attempt number)."""

    @abc.abstractmethod
    def record(
        self, *, run: AgentRun, steps: Sequence[Step], worker_id: str | None = None
    ) -> list[RunEvent]:
        """Store steps that came out of the engine together, in one commit: model call
        records as ``ModelCall`` rows (their tokens on the run and its ledger entry), every
        other step as a ``step`` event. Returns the events."""

    @abc.abstractmethod
    def finish(
        self,
        *,
        run: AgentRun,
        step: FinalAnswerStep,
        worker_id: str | None = None,
        preceding: Sequence[Step] = (),
    ) -> Message | None:
        """Store ``preceding`` (the same reply's call record and thought), the answer, and
        end the run as succeeded with ``run.finished``, in one commit. None (nothing
        written) if the run had ended, or another worker holds it."""

    @abc.abstractmethod
    def fail(
        self,
        *,
        run: AgentRun,
        code: str,
        message: str,
        detail: str = "",
        worker_id: str | None = None,
    ) -> bool:
        """End the run as failed with an error the user sees (``detail`` only staff see);
        False if it had already ended or another worker holds it."""

    @abc.abstractmethod
    def cancel(
        self, *, run: AgentRun, partial_answer: str = "", worker_id: str | None = None
    ) -> bool:
        """End the run as cancelled, keeping a partial answer as the assistant message."""

    @abc.abstractmethod
    def heartbeat(self, *, run_ids: list[int], worker_id: str) -> set[int]:
        """Refresh the heartbeat of the runs this worker still holds; returns those ids."""

    @abc.abstractmethod
    def release(self, *, run_ids: list[int], worker_id: str) -> list[int]:
        """Hand back runs this worker holds: no holder, no heartbeat, so the next claim by
        any worker takes them at once. A step committed first is kept; a step after is
        refused (``RunLost``). Returns the ids released."""

    @abc.abstractmethod
    def cancel_requested(self, *, run_ids: list[int]) -> set[int]:
        """Which of these runs a user asked to cancel."""

    @abc.abstractmethod
    def needing_rescue(self, *, queued_for_seconds: float) -> list[int]:
        """Runs no live worker holds: running with a stale heartbeat, or queued (no fresh
        heartbeat) for longer than ``queued_for_seconds``."""

    # The run driver's writes, on the process's event loop. By default the sync write on a
    # database thread; a store that can send a write from the loop itself overrides them.

    async def aclaim(self, *, run_id: int, worker_id: str, announce: bool) -> Claim | None:
        return await in_database_thread(
            self.claim, run_id=run_id, worker_id=worker_id, announce=announce
        )

    async def astart(self, *, run: AgentRun, model: str, profile: str, worker_id: str) -> RunEvent:
        return await in_database_thread(
            self.start, run=run, model=model, profile=profile, worker_id=worker_id
        )

    async def arecord(
        self, *, run: AgentRun, steps: Sequence[Step], worker_id: str
    ) -> list[RunEvent]:
        return await in_database_thread(self.record, run=run, steps=steps, worker_id=worker_id)

    async def afinish(
        self,
        *,
        run: AgentRun,
        step: FinalAnswerStep,
        worker_id: str,
        preceding: Sequence[Step] = (),
    ) -> Message | None:
        return await in_database_thread(
            self.finish, run=run, step=step, worker_id=worker_id, preceding=preceding
        )

    async def afail(
        self, *, run: AgentRun, code: str, message: str, detail: str = "", worker_id: str
    ) -> bool:
        return await in_database_thread(
            self.fail, run=run, code=code, message=message, detail=detail, worker_id=worker_id
        )

    async def acancel(self, *, run: AgentRun, partial_answer: str = "", worker_id: str) -> bool:
        return await in_database_thread(
            self.cancel, run=run, partial_answer=partial_answer, worker_id=worker_id
        )

    async def arelease(self, *, run_ids: list[int], worker_id: str) -> list[int]:
        return await in_database_thread(self.release, run_ids=run_ids, worker_id=worker_id)


# What the two stores write alike.


def started_payload(run: AgentRun, model: str, profile: str) -> dict[str, Any]:
    payload = run_started_payload(
        attempt=run.attempts,
        model=model,
        profile=profile,
        trigger_message_id=run.trigger_message_id,
    )
    if run.is_child:
        # A sub-agent's run: the page draws it under its parent's call.
        payload["parent_run_id"] = run.parent_run_id
        payload["parent_call_id"] = run.parent_call_id
    return payload


def step_items(steps: Sequence[Step]) -> list[tuple[FrameType, dict[str, Any]]]:
    """The ``step`` events for ``steps``; model call records are rows, not events."""
    return [
        (FrameType.STEP, step_to_event(step))
        for step in steps
        if not isinstance(step, ModelCallRecord)
    ]


def call_records(steps: Sequence[Step]) -> list[ModelCallRecord]:
    return [step for step in steps if isinstance(step, ModelCallRecord)]
