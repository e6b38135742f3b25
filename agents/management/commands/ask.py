"""``manage.py ask "question"``: run the agent in this process and print each step as it happens.

With ``--json`` every line is one JSON object shaped like the websocket frames of a run
(``run.started``, ``step``, ``answer.delta``, ``run.finished`` / ``run.failed``; see
docs/protocol.md), so a script can read it. A model that cannot be reached or is not
configured ends the command with a one-line reason and a non-zero exit code.

A call to a tool that needs approval is asked about at the terminal ("Approve? [y/N]"), or
decided for every such call by ``--approve`` / ``--deny``; without a terminal and without
either flag the command stops and says which call waited. A run that reaches one of its
profile's budgets stops with the reason (Continue is the chat's).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from agents.llm.factory import is_demo_model
from agents.models import AgentProfile
from agents.profile_snapshot import ProfileSnapshot, SnapshotInvalid, snapshot_model_config
from agents.protocol import FrameType, answer_delta_frame, run_failed_payload
from agents.react.errors import (
    AgentError,
    AwaitingApproval,
    BudgetExhausted,
    ModelError,
    RunCancelled,
)
from agents.react.labels import LabelSet, label_set
from agents.react.types import (
    ActionStep,
    ApprovalDecisionStep,
    ApprovalRequestStep,
    ChatMessage,
    ChatModel,
    Completion,
    ErrorStep,
    FinalAnswerStep,
    ModelCallRecord,
    ObservationStep,
    Step,
    ThoughtStep,
    step_to_event,
)
from agents.runtime import executor_for, snapshot_chat_model, snapshot_tool_configs
from agents.services.defaults import default_profile

DEMO_NOTE = (
    "The offline demo model is answering: it only calculates and tells the time. Set "
    "OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL, or pick a model endpoint for the "
    "profile in the admin, for real answers."
)


class Command(BaseCommand):
    help = "Ask the agent a question and print each step (Thought, Action, ...) as it happens."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question", help="The question to ask.")
        parser.add_argument("--profile", help="Slug of the agent profile (default: the default).")
        parser.add_argument(
            "--mode",
            choices=("react", "tools"),
            help="ReAct text or native tool calling (default: the profile's).",
        )
        decide = parser.add_mutually_exclusive_group()
        decide.add_argument(
            "--approve",
            action="store_true",
            help="Approve every call to a tool that needs approval (default: ask, if there "
            "is a terminal).",
        )
        decide.add_argument(
            "--deny",
            action="store_true",
            help="Deny every call to a tool that needs approval; the agent is told so.",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print one JSON object per line, shaped like the websocket events.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        question = options["question"].strip()
        if not question:
            raise CommandError("The question is empty.")
        try:
            profile = _profile(options.get("profile"))
            snapshot = ProfileSnapshot.from_profile(profile)
            if options.get("mode"):
                snapshot = snapshot.with_mode(options["mode"])
            model_config = snapshot_model_config(snapshot)
            model = snapshot_chat_model(snapshot)
            tool_configs = snapshot_tool_configs(snapshot)
        except SnapshotInvalid as exc:
            raise CommandError(f"Profile {profile.slug!r} cannot run: {exc}") from exc
        except DatabaseError as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc)
            raise CommandError(
                f"The database is not ready ({first_line}); run `python manage.py migrate`."
            ) from exc

        demo = is_demo_model(model_config)
        output = JsonLines(self.stdout) if options["json"] else Terminal(self.stdout, snapshot)
        if demo:
            self.stderr.write(f"Note: {DEMO_NOTE}")
        watched = _WatchedModel(model, output.on_model_text)
        try:
            executor = executor_for(
                snapshot=snapshot,
                model=watched,
                tool_configs=tool_configs,
                user=None,
                on_answer_delta=output.on_answer_delta,
            )
        except ValueError as exc:  # the profile itself cannot make an engine
            raise CommandError(f"Profile {profile.slug!r} cannot run: {exc}") from exc

        output.started(question=question, model=model.model_name, profile=profile.slug, demo=demo)
        steps: list[Step] = []
        try:
            while True:
                try:
                    # After a decision the engine goes on from the steps so far, as a worker
                    # resumes a stored run: nothing already done runs again.
                    for step in executor.run(question, prior_steps=_prior(steps)):
                        steps.append(step)
                        output.step(step)
                    return
                except AwaitingApproval as exc:
                    for request in _requests(steps, exc.call_ids):
                        decision = self._decide(request, options)
                        steps.append(decision)
                        output.step(decision)
        except BudgetExhausted as exc:
            output.failed(exc.code, str(exc))
            raise CommandError(
                f"The run stopped at its budget: {_one_line(exc)} Raise the profile's budget "
                "to let it go further (in the chat, Continue does that for one run)."
            ) from exc
        except ModelError as exc:
            output.failed(exc.code, str(exc))
            raise CommandError(f"The model failed ({exc.code}): {_one_line(exc)}") from exc
        except KeyboardInterrupt as exc:
            output.failed(RunCancelled.code, "Interrupted.")
            raise CommandError("Interrupted.", returncode=130) from exc
        except AgentError as exc:
            output.failed(exc.code, str(exc))
            raise CommandError(f"The agent stopped ({exc.code}): {_one_line(exc)}") from exc

    def _decide(
        self, request: ApprovalRequestStep, options: dict[str, Any]
    ) -> ApprovalDecisionStep:
        """The decision on one call: from ``--approve`` / ``--deny``, else asked at the
        terminal; with neither, the command stops and says how to decide."""
        call = f"{request.tool} {_shown_input(request.tool_input)}"
        if options["approve"] or options["deny"]:
            approved = bool(options["approve"])
        elif sys.stdin.isatty():
            self.stderr.write(f"The agent wants to call {call}, which needs approval.")
            self.stderr.write("Approve? [y/N] ", ending="")
            self.stderr.flush()
            approved = sys.stdin.readline().strip().lower() in ("y", "yes")
        else:
            raise CommandError(
                f"The agent wants to call {call}, which needs approval. Run again with "
                "--approve to let it or --deny to refuse it."
            )
        reason = "" if approved else "Denied at the command line."
        return ApprovalDecisionStep(call_id=request.call_id, approved=approved, reason=reason)


def _prior(steps: list[Step]) -> list[Step]:
    """Model calls first, then the steps, as ``run_prior_steps`` hands a resumed run."""
    calls = [step for step in steps if isinstance(step, ModelCallRecord)]
    return calls + [step for step in steps if not isinstance(step, ModelCallRecord)]


def _requests(steps: list[Step], call_ids: list[str]) -> list[ApprovalRequestStep]:
    waiting = set(call_ids)
    return [s for s in steps if isinstance(s, ApprovalRequestStep) and s.call_id in waiting]


def _shown_input(tool_input: Any) -> str:
    return tool_input if isinstance(tool_input, str) else json.dumps(tool_input, ensure_ascii=False)


def _profile(slug: str | None) -> AgentProfile:
    if slug:
        profile = AgentProfile.objects.filter(slug=slug).first()
        if profile is None:
            known = ", ".join(AgentProfile.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"No profile with slug {slug!r} (profiles: {known}).")
        return profile
    return default_profile()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class _WatchedModel:
    """Passes every streamed delta of the model's raw text to ``on_text`` as well."""

    def __init__(self, model: ChatModel, on_text: Callable[[str | None], None]) -> None:
        self.model = model
        self.model_name = model.model_name
        self._on_text = on_text

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> Completion:
        self._on_text(None)  # a new call starts

        def both(text: str) -> None:
            self._on_text(text)
            if on_text is not None:
                on_text(text)

        return self.model.complete(messages, on_text=both, **options)


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


class JsonLines:
    """Frames like the websocket's: stored events carry ``seq``, ``run_id`` and ``ts``."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.seq = 0
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "duration_ms": 0}

    def _emit(self, frame: dict[str, Any], *, stored: bool = True) -> None:
        if stored:
            self.seq += 1
            frame = {
                **frame,
                "seq": self.seq,
                "run_id": None,
                "ts": datetime.now(UTC).isoformat(),
            }
        self.stream.write(json.dumps(frame, ensure_ascii=False))
        self.stream.flush()

    def on_model_text(self, text: str | None) -> None:
        """Raw model text is not an event (the websocket does not send it either)."""

    def on_answer_delta(self, text: str) -> None:
        self._emit(answer_delta_frame(run_id=None, text=text), stored=False)

    def started(self, *, question: str, model: str, profile: str, demo: bool) -> None:
        self._emit(
            {
                "type": FrameType.RUN_STARTED,
                "attempt": 1,
                "model": model,
                "profile": profile,
                "demo": demo,
                "question": question,
            }
        )

    def step(self, step: Step) -> None:
        if isinstance(step, ModelCallRecord):
            self.usage["prompt_tokens"] += step.prompt_tokens
            self.usage["completion_tokens"] += step.completion_tokens
            return  # stored for the run inspector, never sent to clients
        if isinstance(step, FinalAnswerStep):
            self.usage["duration_ms"] = step.duration_ms
            self._emit(
                {
                    "type": FrameType.RUN_FINISHED,
                    "message": {"role": "assistant", "content": step.text},
                    "usage": dict(self.usage),
                    "stop_reason": step.stop_reason,
                }
            )
            return
        if isinstance(step, ApprovalRequestStep):
            self._emit(
                {
                    "type": FrameType.APPROVAL_REQUESTED,
                    "call_id": step.call_id,
                    "tool": step.tool,
                    "tool_input": step.tool_input,
                }
            )
            return
        if isinstance(step, ApprovalDecisionStep):
            self._emit(
                {
                    "type": FrameType.APPROVAL_DECIDED,
                    "call_id": step.call_id,
                    "approved": step.approved,
                    "reason": step.reason,
                }
            )
            return
        self._emit({**step_to_event(step), "type": FrameType.STEP})

    def failed(self, code: str, message: str) -> None:
        self._emit({"type": FrameType.RUN_FAILED, **run_failed_payload(code=code, message=message)})


class Terminal:
    """Readable steps, with the final answer streamed as it arrives.

    The engine yields a call's thought only once the call has finished, but streams the
    answer during it; so when the answer starts, the thought is printed from the raw text
    the model wrote before the answer label, and the thought step that follows is not
    printed again.
    """

    def __init__(self, stream: Any, snapshot: ProfileSnapshot) -> None:
        self.stream = stream
        self.labels: LabelSet = label_set(snapshot.label_set)
        self.raw: list[str] = []
        self.streamed: list[str] = []
        self.thought_shown: str | None = None
        self.model_calls = 0
        self.tokens = 0
        self.started_at = time.monotonic()

    def _line(self, role: str, text: str) -> None:
        self.stream.write(self.labels.line(role, text))

    def _write(self, text: str) -> None:
        self.stream.write(text, ending="")
        self.stream.flush()

    def on_model_text(self, text: str | None) -> None:
        if text is None:
            self.raw = []
        else:
            self.raw.append(text)

    def on_answer_delta(self, text: str) -> None:
        if not self.streamed:
            thought = self._thought_before_answer()
            if thought:
                self._line("thought", thought)
            self.thought_shown = thought
            self._write(
                self.labels.line("final_answer") + (" " if self.labels.colon == ":" else "")
            )
        self.streamed.append(text)
        self._write(text)

    def _thought_before_answer(self) -> str:
        raw = "".join(self.raw)
        cut = raw.rfind(self.labels.final_answer)
        if cut < 0:
            return ""
        thought = raw[:cut].strip()
        prefix = self.labels.line("thought")
        if thought.startswith(prefix):
            thought = thought[len(prefix) :].strip()
        return thought

    def started(self, *, question: str, model: str, profile: str, demo: bool) -> None:
        suffix = " (offline demo)" if demo else ""
        self.stream.write(f"[profile {profile} · model {model}{suffix}]")
        self._line("question", question)

    def step(self, step: Step) -> None:
        if isinstance(step, ModelCallRecord):
            self.model_calls += 1
            self.tokens += step.prompt_tokens + step.completion_tokens
        elif isinstance(step, ThoughtStep):
            if self.thought_shown is None or step.text.strip() != self.thought_shown:
                self._line("thought", step.text)
        elif isinstance(step, ActionStep):
            tool_input = step.tool_input
            if not isinstance(tool_input, str):
                tool_input = json.dumps(tool_input, ensure_ascii=False)
            self._line("action", step.tool)
            self._line("action_input", tool_input)
        elif isinstance(step, ObservationStep):
            self._line("observation", step.text)
        elif isinstance(step, ErrorStep):
            self.stream.write(f"[{step.code}] {step.message}")
        elif isinstance(step, ApprovalRequestStep):
            self.stream.write(f"[needs approval] {step.tool} {_shown_input(step.tool_input)}")
        elif isinstance(step, ApprovalDecisionStep):
            self.stream.write("[approved]" if step.approved else f"[denied] {step.reason}")
        elif isinstance(step, FinalAnswerStep):
            self._final(step)

    def _final(self, step: FinalAnswerStep) -> None:
        if self.streamed:
            self.stream.write("")  # end the streamed line
            if "".join(self.streamed).strip() != step.text.strip():
                self._line("final_answer", step.text)
        else:
            self._line("final_answer", step.text)
        seconds = time.monotonic() - self.started_at
        calls = f"{self.model_calls} model call{'s' if self.model_calls != 1 else ''}"
        reason = "" if step.stop_reason == "answer" else f", stopped: {step.stop_reason}"
        self.stream.write(f"[{calls}, {self.tokens} tokens, {seconds:.1f}s{reason}]")

    def failed(self, code: str, message: str) -> None:
        if self.streamed:
            self.stream.write("")
