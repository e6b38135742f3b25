"""The agent loop: a generator of typed steps.

``AgentExecutor.run`` calls the model, reads its reply, runs tools, and yields every step as
it happens; the caller decides what to do with them (store, push, print). Apart from calling
the model and the tools it does no I/O, and it does not wait itself: the run is one generator
(``_work``) that yields what it waits on (a model call, a tool still running) beside its
steps, and ``run`` waits in the caller's thread while ``arun`` awaits on an event loop, so
the two give the same steps. Steps of one iteration, in order:

- ``ModelCallRecord`` after every model call (exact messages, options, response, tokens);
- ``ThoughtStep`` when the reply had any thought text (it carries that call's tokens);
- one ``ActionStep`` per tool call, then per call, in order: an ``ErrorStep`` if it failed
  (unknown tool, invalid arguments, tool error, timeout) and its ``ObservationStep``;
- or, for a reply that could not be used: ``ErrorStep`` (``parse_error`` / ``empty_reply``,
  or ``repeated_call_id`` for a native reply whose calls share an id: none of them runs)
  and an ``ObservationStep`` (tool ``""``) telling the model the format again;
- and finally one ``FinalAnswerStep``. Its tokens are the whole run's totals (this call to
  ``run`` plus the ``ModelCallRecord`` s among ``prior_steps``); its ``duration_ms`` is this
  call's wall time. ``ModelCallRecord`` s remain the authoritative per-call usage.

Limits: each iteration is one model reply that did not end the run. When ``max_iterations``
replies have been used, or ``max_execution_time`` has passed (checked before each model
call), one last call without tools asks for the final answer, and the ``FinalAnswerStep``'s
``stop_reason`` names the limit.

Pauses for a person: before a batch of tool calls starts, a call to a tool with
``needs_approval`` whose arguments are valid and that has no ``ApprovalDecisionStep`` among
the prior steps gets an ``ApprovalRequestStep`` (one per such call, never twice), and then
``AwaitingApproval`` is raised: nothing of the batch has run. Run again with the decisions in
``prior_steps``, an approved call runs once and a declined one becomes an ``ErrorStep``
(``declined``) and its observation, with the person's reason. Every call's id is the
engine's (``call-<n>``, unique within the run; a native call's own id only pairs its result
in the messages), and a decision applies only to the call its request showed: same id, tool
and arguments (``Transcript.decision_for``). ``AgentConfig.budget``
(``RunBudget``) stops a run with ``BudgetExhausted`` before a model call once the steps or
tokens are used up, or before a batch that would pass a tool's number of calls; run again
with a larger budget, it goes on from the stored steps.

A tool policy (``tool_policy``, ``agents/react/tools.py``) decides per call whether it
runs or gets a given observation instead (a replay answers from a stored run,
``agents/react/replay.py``). Under a policy nobody is asked for approval, and a call to a tool
that needs approval never runs: the policy's answer, or a ``not_recorded`` error step.

Suspension: a tool whose result will come from outside the run raises ``SuspendRun``
(``agents/react/tools.py``); the call gets no observation, the batch's other calls end as
usual, and then ``RunSuspended`` is raised with the suspended calls' ids. Run again with the
stored steps, the engine calls those tools again (same call ids), as after a crash.

Cancellation: ``should_cancel`` is asked before every model call and every tool call, while
waiting for a tool, and while a reply streams in; when it says yes, ``RunCancelled`` is
raised. A tool call already running is abandoned, and told through its ``CallInterrupt``
(``agents/react/tools.py``), as is a call abandoned at its timeout: a tool that can end its
work early (the HTTP tool closes its socket) does so at once.

Format repair that adapts: after ``PARSE_ERRORS_BEFORE_NATIVE`` parse errors in one ReAct
run, when ``AgentConfig.supports_tool_calling`` says the model can call tools natively, a
``ModeSwitchStep`` is yielded (after that error's observation) and the run goes on in native
tool-calling mode, with the default tools prompt of the same label set. A resumed run finds
the switch among its steps and stays in native mode.

Streaming. Three optional callbacks see the model's text while it is written; none of them
changes the steps, which stay the only record.

- ``on_answer_delta(text: str)``: the final answer, piece by piece. In ReAct mode only the
  text after a final-answer label that starts a line (``parser.AnswerStream``). In native
  mode the reply's text as it arrives (``parser.NativeAnswerStream``), since a reply without
  tool calls is the answer; this needs ``on_answer_reset`` too (without it native answers
  come in one piece at the end, as before). The concatenated deltas equal the
  ``FinalAnswerStep`` text whenever what was streamed is a prefix of it (the rest is sent
  just before the step, also when a ``return_direct`` tool's output is the answer); the
  filters only send what they know to be such a prefix.
- ``on_answer_reset()``: native mode only. The text passed to ``on_answer_delta`` during the
  model call that just ended was not the answer: the model followed it with tool calls, and
  it is that call's thought (sent next through ``on_thought_delta``). Called at most once
  per model call, after the call's ``ModelCallRecord`` and before its other steps.
- ``on_thought_delta(delta: ThoughtDelta)``: the thought of each model call
  (``delta.call_index`` is the ``ModelCallRecord.index`` the call gets). In ReAct mode the
  text after the thought label up to the action or final-answer label, as it is written
  (``parser.ThoughtStream``); never action lines, an invented observation or answer text.
  In native mode the text before the tool calls, in one delta when the reply has ended (only
  then is it known not to be the answer). A call's first delta has ``offset`` 0; its last has
  ``done`` True and comes when the reply has ended: after the call's ``ModelCallRecord``,
  before its other steps. Offsets count characters (code points). When the call yields a
  ``ThoughtStep``, the concatenated deltas equal its text whenever what was streamed is a
  prefix of it (the rest comes with the last delta). The filter only ever sends what it
  knows to be a prefix of what ``parse`` stores (tests/react/test_streaming.py checks the
  equality on generated replies); the deltas and the step can differ only if that promise
  breaks, and then the step is the truth. A call that yields no ``ThoughtStep`` (a parse
  error, an empty thought) may still have sent deltas: they end with ``done`` and are not
  stored anywhere. A call cut short by ``RunCancelled`` or a ``ModelError`` sends no
  ``done``. The last call after a limit streams no thought.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
from collections.abc import (
    AsyncGenerator,
    Callable,
    Coroutine,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from agents.react import jsontext
from agents.react.errors import (
    AwaitingApproval,
    BudgetExhausted,
    ParseError,
    RunCancelled,
    RunSuspended,
)
from agents.react.labels import LIMIT_REASONS, LabelSet
from agents.react.parser import (
    AnswerStream,
    NativeAnswerStream,
    ParsedFinalAnswer,
    SentText,
    ThoughtStream,
    native_answer,
    parse,
)
from agents.react.prompt import (
    PromptConfig,
    react_messages,
    request_options,
    tools_messages,
)
from agents.react.tools import (
    CallInterrupt,
    SuspendRun,
    Tool,
    ToolAnswer,
    ToolInputError,
    ToolPolicy,
    run_interruptibly,
)
from agents.react.transcript import (
    ToolRun,
    Transcript,
    Turn,
    native_messages,
    react_scratchpad,
    transcript_from_steps,
)
from agents.react.types import (
    ActionStep,
    ApprovalRequestStep,
    ChatMessage,
    ChatModel,
    Completion,
    ErrorStep,
    FinalAnswerStep,
    JsonDict,
    ModelCallRecord,
    ModeSwitchStep,
    ObservationStep,
    Step,
    StopReason,
    ThoughtDelta,
    ThoughtStep,
    ToolCall,
)

# How often a long tool call or a streaming reply asks ``should_cancel``.
CANCEL_POLL_SECONDS = 0.1
# Parse errors in one ReAct run after which a model that can call tools natively does so.
PARSE_ERRORS_BEFORE_NATIVE = 3


@dataclass(frozen=True)
class RunBudget:
    """Limits of one run that stop it (``BudgetExhausted``) rather than end it: the caller may
    raise them and run again from the stored steps. ``None`` or a missing tool: no limit."""

    steps: int | None = None
    tokens: int | None = None
    tool_calls: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentConfig:
    max_iterations: int = 15
    max_execution_time: float = 300.0
    max_observation_chars: int = 4000
    temperature: float | None = None
    # The model supports native tool calling: a ReAct run that keeps breaking the format
    # goes on in native mode (set by the runtime from the model's configuration).
    supports_tool_calling: bool = False
    budget: RunBudget | None = None

    def __post_init__(self) -> None:
        if self.max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        if self.max_execution_time <= 0:
            raise ValueError("max_execution_time must be positive")
        if self.max_observation_chars < 1:
            raise ValueError("max_observation_chars must be at least 1")


class _ThoughtChannel:
    """The thought deltas of one model call: offsets, and the rest sent at the end."""

    def __init__(self, call_index: int, emit: Callable[[ThoughtDelta], None]) -> None:
        self.call_index = call_index
        self._emit = emit
        self._sent = SentText()

    def send(self, text: str) -> None:
        if text:
            self._emit(ThoughtDelta(self.call_index, self._sent.length, text))
            self._sent.append(text)

    def end(self, thought: str) -> None:
        """The reply has ended and ``thought`` is what is stored of it ("" if nothing)."""
        sent = self._sent.text()
        if thought.startswith(sent):
            self.send(thought[len(sent) :])
        if self._sent.length:
            self._emit(ThoughtDelta(self.call_index, self._sent.length, "", done=True))


@dataclass
class _Run:
    """The state of one ``run`` call."""

    question: str
    history: Sequence[ChatMessage]
    memory_summary: str
    transcript: Transcript
    started: float
    prompt: PromptConfig
    options: JsonDict
    model_calls: int = 0
    actions: int = 0
    streamed: str = ""  # what on_answer_delta got during the last model call
    thought: _ThoughtChannel | None = None  # of the last model call


_Stream = AnswerStream | NativeAnswerStream | ThoughtStream


@dataclass
class _Outcome:
    """What running a batch of tool calls produced."""

    direct_answer: str | None = None


class _Workers:
    """Reusable daemon threads for tool calls.

    A call goes to an idle worker, or to a new one when all are busy, so a tool that hangs
    past its timeout (and is abandoned) never blocks the next call. Idle workers are kept
    for ``idle_seconds``: starting a thread per call costs more than most tools take.
    """

    def __init__(self, idle_seconds: float = 60.0) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._idle_seconds = idle_seconds

    def submit(self, job: Callable[[], None], finished: Callable[[], None]) -> None:
        """Run ``job``; ``finished`` is called once it has returned (or raised)."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self)
        worker.inbox.put((job, finished))

    def _park(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def _retire(self, worker: _Worker) -> bool:
        """Take an idle worker out of service; False if a job was handed to it meanwhile."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False


class _Worker:
    def __init__(self, pool: _Workers) -> None:
        self.pool = pool
        self.inbox: queue.SimpleQueue[tuple[Callable[[], None], Callable[[], None]]]
        self.inbox = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="agent-tool", daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                job, finished = self.inbox.get(timeout=self.pool._idle_seconds)
            except queue.Empty:
                if self.pool._retire(self):
                    return
                continue
            try:
                job()
            finally:
                # Idle again before the caller wakes up, so that its next call reuses us.
                self.pool._park(self)
                finished()


_WORKERS = _Workers()


class _ToolCall:
    """One tool call on a worker thread, so that it can time out (and be abandoned); a tool
    that ``runs_inline`` has finished when this returns."""

    def __init__(self, tool: Tool, arguments: JsonDict, call_id: str = "") -> None:
        self.tool = tool
        self.arguments = arguments
        self.result: object = None
        self.error: Exception | None = None
        self.done = threading.Event()
        self.interrupt = CallInterrupt(call_id)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._waiters: list[Callable[[], None]] = []
        if tool.runs_inline:
            self._target()
            self._finished()
        else:
            _WORKERS.submit(self._target, self._finished)

    def _target(self) -> None:
        try:
            self.result = run_interruptibly(self.interrupt, lambda: self.tool.run(**self.arguments))
        except Exception as exc:  # the tool's failure is reported to the model
            self.error = exc

    def _finished(self) -> None:
        with self._lock:
            self.done.set()
            waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()

    async def wait(self, seconds: float) -> None:
        """Return once the call has finished or ``seconds`` have passed, whichever is first,
        without blocking the event loop it is awaited on."""
        loop = asyncio.get_running_loop()
        finished = loop.create_future()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                loop.call_soon_threadsafe(_resolve, finished)

        with self._lock:
            if self.done.is_set():
                return
            self._waiters.append(wake)
        try:
            await asyncio.wait_for(finished, seconds)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                if wake in self._waiters:
                    self._waiters.remove(wake)

    def abandon(self) -> None:
        """Nobody waits for this call any more: tell the tool, if it is still running."""
        if not self.done.is_set():
            self.interrupt.interrupt()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# -- what the engine waits on, and the two drivers that wait for it ----------------------


@dataclass
class _ModelWait:
    """A model call the driver makes; the engine reads ``outcome()`` when it goes on."""

    messages: list[ChatMessage]
    stop: list[str] | None
    tools: list[JsonDict] | None
    temperature: float | None
    on_text: Callable[[str], None] | None
    completion: Completion | None = None
    error: Exception | None = None

    def arguments(self) -> dict[str, Any]:
        return {
            "stop": self.stop,
            "tools": self.tools,
            "temperature": self.temperature,
            "on_text": self.on_text,
        }

    def outcome(self) -> Completion:
        if self.error is not None:
            raise self.error
        assert self.completion is not None  # a driver sets one or the other
        return self.completion


@dataclass
class _ToolWait:
    """Wait until ``call`` finishes or ``seconds`` pass; the engine then looks again."""

    call: _ToolCall
    seconds: float
    interrupted: bool = False


_Wait = _ModelWait | _ToolWait
_T = TypeVar("_T")
# The engine's own generators: steps, and what to wait for before going on. ``run`` and
# ``arun`` do the waiting, the one in this thread, the other on an event loop.
_Work: TypeAlias = Generator[Step | _Wait, None, _T]


class AgentExecutor:
    def __init__(
        self,
        *,
        model: ChatModel,
        tools: Sequence[Tool],
        prompt: PromptConfig,
        config: AgentConfig | None = None,
        should_cancel: Callable[[], bool] | None = None,
        on_answer_delta: Callable[[str], None] | None = None,
        on_answer_reset: Callable[[], None] | None = None,
        on_thought_delta: Callable[[ThoughtDelta], None] | None = None,
        tool_policy: ToolPolicy | None = None,
    ) -> None:
        names = [tool.name for tool in tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"two tools share the name(s) {duplicates}")
        self.model = model
        self.tools = list(tools)
        self.prompt = prompt
        self.config = config or AgentConfig()
        self.should_cancel = should_cancel
        self.on_answer_delta = on_answer_delta
        self.on_answer_reset = on_answer_reset
        self.on_thought_delta = on_thought_delta
        self.tool_policy = tool_policy
        self.labels: LabelSet = prompt.labels
        self._by_name = {tool.name: tool for tool in self.tools}
        self._by_folded_name = {tool.name.casefold(): tool for tool in self.tools}
        self._tool_names = ", ".join(names)
        self._options = request_options(prompt, tools=self.tools)
        self._native_prompt = PromptConfig(
            mode="tools", label_set=prompt.label_set, user_instructions=prompt.user_instructions
        )

    # -- the loop ----------------------------------------------------------------------
    def run(
        self,
        question: str,
        *,
        history: Sequence[ChatMessage] = (),
        memory_summary: str = "",
        prior_steps: Sequence[Step] = (),
    ) -> Iterator[Step]:
        """Yield the run's steps, ending with one ``FinalAnswerStep``.

        ``prior_steps`` are the steps a crashed attempt already yielded (and the caller
        stored). They are not yielded again, nor re-run: they rebuild the scratchpad. A tool
        call whose observation is missing is run again. If they already end with a final
        answer, that answer is yielded again and nothing else happens.

        Raises ``RunCancelled`` or a ``ModelError``; pauses with ``AwaitingApproval``,
        ``BudgetExhausted`` or ``RunSuspended`` (see the module's docstring). The model
        calls and the waits for tools block this thread; ``arun`` is the same run on an event loop.
        """
        work = self._work(question, history, memory_summary, prior_steps)
        try:
            for item in work:
                if isinstance(item, _ModelWait):
                    try:
                        item.completion = self.model.complete(item.messages, **item.arguments())
                    except Exception as error:
                        item.error = error
                elif isinstance(item, _ToolWait):
                    item.call.done.wait(item.seconds)
                else:
                    yield item
        finally:
            # Closed with this iterator (or on an error out of a wait): tools still running
            # are abandoned at once, not when the generator is collected.
            work.close()

    async def arun(
        self,
        question: str,
        *,
        history: Sequence[ChatMessage] = (),
        memory_summary: str = "",
        prior_steps: Sequence[Step] = (),
        interrupt: asyncio.Event | None = None,
    ) -> AsyncGenerator[Step, None]:
        """``run`` on the running event loop: the same steps and errors, and nothing blocks
        the loop. Many runs share one loop this way, each costing a task, not a thread.

        The model's ``acomplete`` is awaited when it has one (``agents/llm`` does); a model
        with only ``complete`` is called in a thread. ``interrupt``, once set, ends the model
        call or the wait for a tool in progress at once; the engine then asks
        ``should_cancel``, which must say yes. Close the iterator (``contextlib.aclosing``)
        when leaving it early, so that tools still running are abandoned.
        """
        work = self._work(question, history, memory_summary, prior_steps)
        try:
            for item in work:
                if isinstance(item, _ModelWait):
                    await self._acall(item, interrupt)
                elif isinstance(item, _ToolWait):
                    item.interrupted = (
                        await _until_first(item.call.wait(item.seconds), interrupt) is None
                    )
                else:
                    yield item
        finally:
            work.close()

    async def _acall(self, wait: _ModelWait, interrupt: asyncio.Event | None) -> None:
        acomplete = getattr(self.model, "acomplete", None)
        if acomplete is not None:
            call = acomplete(wait.messages, **wait.arguments())
        else:
            call = asyncio.to_thread(self.model.complete, wait.messages, **wait.arguments())
        try:
            outcome = await _until_first(call, interrupt)
        except Exception as error:
            wait.error = error
            return
        if outcome is None:
            wait.error = RunCancelled()
        else:
            wait.completion = outcome[0]

    def _work(
        self,
        question: str,
        history: Sequence[ChatMessage],
        memory_summary: str,
        prior_steps: Sequence[Step],
    ) -> _Work[None]:
        transcript = transcript_from_steps(prior_steps)
        if transcript.final is not None:
            yield transcript.final
            return
        state = _Run(
            question=question,
            history=history,
            memory_summary=memory_summary,
            transcript=transcript,
            started=time.monotonic(),
            prompt=self.prompt,
            options=self._options,
            model_calls=transcript.model_calls,
            actions=transcript.action_count,
        )
        if transcript.mode_switch is not None:
            self._go_native(state)
        turns = transcript.turns
        if turns and turns[-1].invalid_text is not None and not turns[-1].correction:
            # The crash came between a parse error and its note to the model.
            yield self._correction(turns[-1], len(turns), transcript.last_error)
        # The crash may have come between the last parse error and the switch.
        yield from self._switch_if_needed(state)
        if turns and turns[-1].pending:
            outcome = _Outcome()
            yield from self._run_tools(state, turns[-1].pending, outcome)
            if outcome.direct_answer is not None:
                yield self._finish(state, outcome.direct_answer, "return_direct")
                return

        while True:
            limit = self._limit_reached(state)
            if limit is not None:
                yield from self._final_call(state, limit)
                return
            self._check_budget(state)
            if state.prompt.mode == "react":
                final = yield from self._react_iteration(state)
            else:
                final = yield from self._native_iteration(state)
            if final is not None:
                yield final
                return

    def _check_budget(self, state: _Run) -> None:
        """Before a model call: stop at the step or token budget (max_iterations, checked
        first, stays the ceiling that ends the run with an answer)."""
        budget = self.config.budget
        if budget is None:
            return
        if budget.steps is not None and len(state.transcript.turns) >= budget.steps:
            raise BudgetExhausted("steps", f"The run used its budget of {budget.steps} steps.")
        used = state.transcript.prompt_tokens + state.transcript.completion_tokens
        if budget.tokens is not None and used >= budget.tokens:
            raise BudgetExhausted(
                "tokens", f"The run used {used} tokens of its budget of {budget.tokens}."
            )

    def _hold_before_tools(self, state: _Run, runs: Sequence[ToolRun]) -> _Work[None]:
        """Before a batch of calls starts (none of it runs otherwise): stop at a tool's call
        budget, or ask for approval of the calls that need it and have no decision yet."""
        transcript = state.transcript
        budget = self.config.budget
        planned: dict[str, int] = {}
        waiting: list[tuple[ToolRun, Tool]] = []
        for run in runs:
            tool = self._resolve(run.action.tool)
            if tool is None or self._decided_on_another_call(transcript, run.action, tool):
                continue  # it will not run
            decision = transcript.decision_for(run.action.call_id, tool.name, run.action.tool_input)
            if decision is not None and not decision.approved:
                continue  # declined: it will not run, so it costs nothing
            limit = budget.tool_calls.get(tool.name) if budget is not None else None
            if limit is not None:
                planned[tool.name] = planned.get(tool.name, transcript.calls_run(tool.name)) + 1
                if planned[tool.name] > limit:
                    message = f"The run used its budget of {limit} calls of {tool.name}."
                    raise BudgetExhausted("tool_calls", message, tool=tool.name)
            if not tool.needs_approval or decision is not None or self.tool_policy is not None:
                continue  # under a policy nobody is asked: such a call never runs
            try:
                tool.coerce_input(self._tool_input(run.action.tool_input, state.prompt.mode))
            except ToolInputError:
                continue  # the model is told its input is wrong; nobody is asked
            waiting.append((run, tool))
        if not waiting:
            return
        for run, tool in waiting:
            if run.action.call_id not in transcript.requests:
                request = ApprovalRequestStep(
                    tool=tool.name, call_id=run.action.call_id, tool_input=run.action.tool_input
                )
                transcript.requests[request.call_id] = request
                yield request
        raise AwaitingApproval([run.action.call_id for run, _ in waiting])

    def _limit_reached(self, state: _Run) -> StopReason | None:
        if len(state.transcript.turns) >= self.config.max_iterations:
            return "max_iterations"
        if time.monotonic() - state.started >= self.config.max_execution_time:
            return "max_execution_time"
        return None

    # -- one iteration, ReAct mode ------------------------------------------------------
    def _react_iteration(self, state: _Run) -> _Work[FinalAnswerStep | None]:
        messages = self._react_messages(state)
        completion, record = yield from self._call_model(state, messages, state.options)
        try:
            parsed = parse(completion.text)
        except ParseError as error:
            self._end_thought(state, "")
            yield from self._unusable_reply(state, "parse_error", error, error.text)
            yield from self._switch_if_needed(state)
            return None
        self._end_thought(state, parsed.thought)
        if isinstance(parsed, ParsedFinalAnswer):
            if parsed.thought:
                yield ThoughtStep(text=parsed.thought)
            return self._finish(state, parsed.answer, "answer")
        yield from self._thought(parsed.thought, record)
        state.actions += 1
        action = ActionStep(
            tool=parsed.tool, tool_input=parsed.tool_input, call_id=f"call-{state.actions}"
        )
        yield action
        turn = Turn(thought=parsed.thought, runs=[ToolRun(action)])
        state.transcript.turns.append(turn)
        outcome = _Outcome()
        yield from self._run_tools(state, turn.runs, outcome)
        if outcome.direct_answer is not None:
            return self._finish(state, outcome.direct_answer, "return_direct")
        return None

    def _react_messages(self, state: _Run, *, closing_note: str = "") -> list[ChatMessage]:
        messages = react_messages(
            state.prompt,
            tools=self.tools,
            question=state.question,
            history=state.history,
            memory_summary=state.memory_summary,
            scratchpad=react_scratchpad(state.transcript.turns, self.labels),
        )
        if closing_note:
            messages.append({"role": "user", "content": closing_note})
        return messages

    # -- one iteration, native tool calling ----------------------------------------------
    def _native_iteration(self, state: _Run) -> _Work[FinalAnswerStep | None]:
        messages = self._native_messages(state)
        completion, record = yield from self._call_model(state, messages, state.options)
        text = completion.text.strip()
        if not completion.tool_calls:
            self._end_thought(state, "")
            if not text:
                error = ParseError("the reply was empty")
                yield from self._unusable_reply(state, "empty_reply", error, "")
                return None
            return self._finish(state, native_answer(text), "answer")
        if state.streamed and self.on_answer_reset is not None:
            state.streamed = ""
            self.on_answer_reset()
        repeated = _repeated_id(completion.tool_calls)
        if repeated is not None:
            # Which of the calls a decision or a result belongs to could not be told apart:
            # none of them runs, and the model is told why.
            self._end_thought(state, "")
            message = self.labels.repeated_call_id.format(call_id=repeated)
            yield from self._unusable_reply(state, "repeated_call_id", ParseError(message), text)
            return None
        self._end_thought(state, text)
        yield from self._thought(text, record)
        turn = Turn(thought=text)
        for call in completion.tool_calls:
            state.actions += 1
            # The engine names the call; the model's id only pairs the result in the messages.
            action = ActionStep(
                tool=call.name,
                tool_input=_arguments_for_display(call.arguments),
                call_id=f"call-{state.actions}",
                model_call_id=call.id,
            )
            turn.runs.append(ToolRun(action))
            yield action
        state.transcript.turns.append(turn)
        outcome = _Outcome()
        yield from self._run_tools(state, turn.runs, outcome)
        if outcome.direct_answer is not None:
            return self._finish(state, outcome.direct_answer, "return_direct")
        return None

    def _native_messages(self, state: _Run, *, closing_note: str = "") -> list[ChatMessage]:
        messages = tools_messages(
            state.prompt,
            tools=self.tools,
            question=state.question,
            history=state.history,
            memory_summary=state.memory_summary,
        )
        messages.extend(native_messages(state.transcript.turns))
        if closing_note:
            messages.append({"role": "user", "content": closing_note})
        return messages

    # -- shared pieces -------------------------------------------------------------------
    def _thought(self, text: str, record: ModelCallRecord) -> _Work[None]:
        if text:
            yield ThoughtStep(
                text=text,
                prompt_tokens=record.prompt_tokens,
                completion_tokens=record.completion_tokens,
                duration_ms=record.duration_ms,
            )

    def _unusable_reply(
        self, state: _Run, code: str, error: ParseError, model_text: str
    ) -> _Work[None]:
        turn = Turn(invalid_text=model_text)
        state.transcript.turns.append(turn)
        state.transcript.parse_errors += code == "parse_error"
        step = ErrorStep(code=code, message=str(error), model_text=model_text)
        yield step
        yield self._correction(turn, len(state.transcript.turns), step)

    def _correction(self, turn: Turn, number: int, error: ErrorStep | None) -> ObservationStep:
        """The note telling the model its reply could not be used, and the format again.

        Built from the stored ``ErrorStep`` alone, so that a resumed run writes the same note.
        """
        if error is not None and error.code == "empty_reply":
            turn.correction = self.labels.empty_reply
        elif error is not None and error.code == "repeated_call_id":
            turn.correction = error.message
        else:
            problem = error.message if error is not None else "?"
            turn.correction = self.labels.format_reminder.format(
                problem=problem, tool_names=self._tool_names
            )
        return ObservationStep(
            tool="", call_id=f"reply-{number}", text=turn.correction, is_error=True
        )

    def _switch_if_needed(self, state: _Run) -> _Work[None]:
        transcript = state.transcript
        if (
            state.prompt.mode == "react"
            and self.config.supports_tool_calling
            and transcript.mode_switch is None
            and transcript.parse_errors >= PARSE_ERRORS_BEFORE_NATIVE
        ):
            step = ModeSwitchStep(
                from_mode="react", to_mode="tools", parse_errors=transcript.parse_errors
            )
            transcript.mode_switch = step
            self._go_native(state)
            yield step

    def _go_native(self, state: _Run) -> None:
        state.prompt = self._native_prompt
        state.options = request_options(self._native_prompt, tools=self.tools)

    def _check_cancel(self) -> None:
        if self.should_cancel is not None and self.should_cancel():
            raise RunCancelled()

    def _end_thought(self, state: _Run, thought: str) -> None:
        if state.thought is not None:
            state.thought.end(thought)
            state.thought = None

    def _streams(self, state: _Run, index: int, *, final_call: bool) -> list[_Stream]:
        """The filters the reply of call ``index`` goes through as it streams."""
        streams: list[_Stream] = []
        react = state.prompt.mode == "react"
        state.thought = None
        if self.on_thought_delta is not None and not final_call:
            state.thought = _ThoughtChannel(index, self.on_thought_delta)
            if react:
                streams.append(ThoughtStream(state.thought.send))
        if self.on_answer_delta is not None:
            if react:
                streams.append(AnswerStream(self.on_answer_delta))
            elif final_call or self.on_answer_reset is not None:
                streams.append(NativeAnswerStream(self.on_answer_delta))
        return streams

    def _call_model(
        self,
        state: _Run,
        messages: list[ChatMessage],
        options: JsonDict,
        *,
        final_call: bool = False,
    ) -> _Work[tuple[Completion, ModelCallRecord]]:
        """Call the model (yielding its record); returns ``(completion, record)``."""
        self._check_cancel()
        index = state.model_calls
        streams = self._streams(state, index, final_call=final_call)
        on_text = self._on_text(streams)
        temperature = self.config.temperature
        sent_options = dict(options)
        if temperature is not None:
            sent_options["temperature"] = temperature
        state.model_calls += 1
        started = time.monotonic()
        wait = _ModelWait(
            messages,
            stop=options.get("stop"),
            tools=options.get("tools"),
            temperature=temperature,
            on_text=on_text,
        )
        yield wait
        try:
            completion = wait.outcome()
        except RunCancelled:
            raise
        except Exception as error:
            yield ModelCallRecord(
                index=index,
                messages=messages,
                options=sent_options,
                response_text="",
                duration_ms=_ms_since(started),
                error=f"{type(error).__name__}: {error}",
            )
            raise
        state.streamed = ""
        for stream in streams:
            stream.finish()
            if isinstance(stream, AnswerStream | NativeAnswerStream):
                state.streamed = stream.sent
        duration_ms = completion.duration_ms or _ms_since(started)
        record = ModelCallRecord(
            index=index,
            messages=messages,
            options=sent_options,
            response_text=completion.text,
            tool_calls=[
                {"id": call.id, "name": call.name, "arguments": call.arguments}
                for call in completion.tool_calls
            ],
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            duration_ms=duration_ms,
        )
        state.transcript.prompt_tokens += completion.prompt_tokens
        state.transcript.completion_tokens += completion.completion_tokens
        yield record
        return completion, record

    def _on_text(self, streams: list[_Stream]) -> Callable[[str], None] | None:
        if not streams and self.should_cancel is None:
            return None
        last_check = -CANCEL_POLL_SECONDS

        def on_text(delta: str) -> None:
            nonlocal last_check
            now = time.monotonic()
            if now - last_check >= CANCEL_POLL_SECONDS:
                last_check = now
                self._check_cancel()
            for stream in streams:
                stream.feed(delta)

        return on_text

    def _finish(self, state: _Run, answer: str, stop_reason: StopReason) -> FinalAnswerStep:
        if self.on_answer_delta is not None:
            streamed = state.streamed if stop_reason != "return_direct" else ""
            if answer.startswith(streamed) and len(answer) > len(streamed):
                self.on_answer_delta(answer[len(streamed) :])
        return FinalAnswerStep(
            text=answer,
            stop_reason=stop_reason,
            prompt_tokens=state.transcript.prompt_tokens,
            completion_tokens=state.transcript.completion_tokens,
            duration_ms=_ms_since(state.started),
        )

    def _final_call(self, state: _Run, limit: StopReason) -> _Work[None]:
        """One last model call, without tools, asking for the final answer."""
        reason = LIMIT_REASONS[self.labels.code][limit]
        note = self.labels.final_answer_request.format(reason=reason)
        if state.prompt.mode == "react":
            messages = self._react_messages(state, closing_note=note)
            options = {key: value for key, value in state.options.items() if key == "stop"}
        else:
            messages = self._native_messages(state, closing_note=note)
            options = {}
        completion, _ = yield from self._call_model(state, messages, options, final_call=True)
        if state.prompt.mode == "react":
            answer = _answer_from_last_reply(completion.text)
        else:
            answer = native_answer(completion.text)
        if not answer:
            answer = self.labels.gave_up
        yield self._finish(state, answer, limit)

    # -- tools ---------------------------------------------------------------------------
    def _run_tools(self, state: _Run, runs: Sequence[ToolRun], outcome: _Outcome) -> _Work[None]:
        """Start every call of the batch (each after a cancellation check), then report
        each one's observation in order."""
        yield from self._hold_before_tools(state, runs)
        started: list[tuple[ToolRun, Tool | None, _ToolCall | ErrorStep | ToolAnswer]] = []
        try:
            for run in runs:
                self._check_cancel()
                tool, prepared = self._start_tool(run.action, state)
                started.append((run, tool, prepared))
            yield from self._report_tools(started, outcome)
        except BaseException:
            # Cancelled, or the caller closed the generator: no call of the batch is waited
            # for any more.
            for _, _, prepared in started:
                if isinstance(prepared, _ToolCall):
                    prepared.abandon()
            raise

    def _report_tools(
        self,
        started: Sequence[tuple[ToolRun, Tool | None, _ToolCall | ErrorStep | ToolAnswer]],
        outcome: _Outcome,
    ) -> _Work[None]:
        # Calls whose tool suspended the run: they get no observation, and the run stops
        # once the batch's other calls have theirs.
        suspended: list[str] = []
        for run, tool, prepared in started:
            error: ErrorStep | None
            if isinstance(prepared, ErrorStep):
                error = prepared
                text = prepared.message
                duration_ms = 0
            elif isinstance(prepared, ToolAnswer):
                text = prepared.text
                code = prepared.error_code or "tool_error"
                error = ErrorStep(code=code, message=text) if prepared.is_error else None
                duration_ms = 0
            else:
                result = yield from self._wait_for(prepared)
                if result is None:
                    suspended.append(run.action.call_id)
                    continue
                error, text = result
                duration_ms = _ms_since(prepared.started)
            observation = self._observation(run.action, text, error is not None, duration_ms)
            run.observation = observation
            if error is not None:
                yield error
            yield observation
            if (
                error is None
                and tool is not None
                and tool.return_direct
                and outcome.direct_answer is None
            ):
                outcome.direct_answer = text
        if suspended:
            raise RunSuspended(suspended)

    def tool_named(self, name: str) -> Tool | None:
        """The tool a call naming ``name`` runs (names compared as the engine does)."""
        return self._resolve(name)

    def _resolve(self, name: str) -> Tool | None:
        return self._by_name.get(name) or self._by_folded_name.get(name.strip().casefold())

    def _start_tool(
        self, action: ActionStep, state: _Run
    ) -> tuple[Tool | None, _ToolCall | ErrorStep | ToolAnswer]:
        tool = self._resolve(action.tool)
        if tool is None:
            message = self.labels.unknown_tool.format(name=action.tool, tool_names=self._tool_names)
            return None, ErrorStep(code="unknown_tool", message=message)
        try:
            arguments = tool.coerce_input(self._tool_input(action.tool_input, state.prompt.mode))
        except ToolInputError as error:
            message = self.labels.invalid_arguments.format(name=tool.name, error=error)
            return tool, ErrorStep(code="invalid_arguments", message=message)
        transcript = state.transcript
        if self._decided_on_another_call(transcript, action, tool):
            message = self.labels.approval_mismatch.format(name=tool.name)
            return tool, ErrorStep(code="approval_mismatch", message=message)
        decision = transcript.decision_for(action.call_id, tool.name, action.tool_input)
        if decision is not None and not decision.approved:
            reason = decision.reason.strip()
            said = self.labels.declined_reason.format(reason=reason) if reason else ""
            message = self.labels.tool_declined.format(name=tool.name, reason=said)
            return tool, ErrorStep(code="declined", message=message)
        if self.tool_policy is not None:
            answer = self.tool_policy.answer(tool, arguments)
            if answer is None and tool.needs_approval:
                answer = ToolAnswer(not_recorded=True)  # never run without a person's yes
            if answer is not None and answer.not_recorded:
                message = self.labels.not_recorded.format(name=tool.name)
                return tool, ErrorStep(code="not_recorded", message=message)
            if answer is not None:
                return tool, answer
        return tool, _ToolCall(tool, arguments, action.call_id)

    @staticmethod
    def _decided_on_another_call(transcript: Transcript, action: ActionStep, tool: Tool) -> bool:
        """A call that needs approval under an id whose request showed another call. Ids are
        the engine's own, unique within a run, so only a run stored before they were can
        hold one; it is refused rather than run on someone else's decision."""
        if not tool.needs_approval:
            return False
        return transcript.request_for(action.call_id, tool.name, action.tool_input) == "other"

    def _tool_input(self, tool_input: str | JsonDict, mode: str) -> str | JsonDict:
        """Native calls must carry a JSON object; a ReAct Action Input may be plain text."""
        if mode == "react" or isinstance(tool_input, dict):
            return tool_input
        if not tool_input.strip():
            return {}
        quoted = tool_input if len(tool_input) <= 200 else tool_input[:200] + "…"
        try:
            arguments = jsontext.loads(tool_input)
        except ValueError as error:
            raise ToolInputError(f"the arguments are not valid JSON ({error}): {quoted}") from None
        if not isinstance(arguments, dict):
            raise ToolInputError(f"the arguments must be a JSON object, not {quoted}")
        return arguments

    def _wait_for(self, call: _ToolCall) -> _Work[tuple[ErrorStep | None, str] | None]:
        """The call's error step (if it failed) and observation text; None if its tool
        suspended the run (``SuspendRun``)."""
        timeout = call.tool.timeout_seconds
        deadline = call.started + timeout
        while True:
            wait = _ToolWait(call, max(0.0, min(CANCEL_POLL_SECONDS, deadline - time.monotonic())))
            yield wait
            if call.done.is_set():
                break
            self._check_cancel()
            if wait.interrupted:
                raise RunCancelled()
            if time.monotonic() >= deadline:
                call.abandon()
                message = self.labels.tool_timed_out.format(name=call.tool.name, seconds=timeout)
                return ErrorStep(code="tool_timeout", message=message), message
        if isinstance(call.error, RunCancelled):
            raise call.error
        if isinstance(call.error, SuspendRun):
            return None
        if isinstance(call.error, ToolInputError):
            message = self.labels.invalid_arguments.format(name=call.tool.name, error=call.error)
            return ErrorStep(code="invalid_arguments", message=message), message
        if call.error is not None:
            detail = f"{type(call.error).__name__}: {call.error}"
            message = self.labels.tool_failed.format(name=call.tool.name, error=detail)
            return ErrorStep(code="tool_error", message=message), message
        return None, _as_text(call.result)

    def _observation(
        self, action: ActionStep, text: str, is_error: bool, duration_ms: int
    ) -> ObservationStep:
        limit = self.config.max_observation_chars
        truncated = len(text) > limit
        if truncated:
            note = self.labels.observation_truncated.format(shown=limit, total=len(text))
            text = f"{text[:limit]}\n{note}"
        return ObservationStep(
            tool=action.tool,
            call_id=action.call_id,
            text=text,
            is_error=is_error,
            truncated=truncated,
            duration_ms=duration_ms,
        )


# -- helpers -----------------------------------------------------------------------------


async def _until_first(
    work: Coroutine[object, object, _T], interrupt: asyncio.Event | None
) -> tuple[_T] | None:
    """``(result,)`` of ``work``, or None if ``interrupt`` was set first (``work`` is then
    cancelled, and it is not started if ``interrupt`` is already set)."""
    if interrupt is None:
        return (await work,)
    if interrupt.is_set():
        work.close()
        return None
    task = asyncio.ensure_future(work)
    interrupted = asyncio.ensure_future(interrupt.wait())
    try:
        await asyncio.wait((task, interrupted), return_when=asyncio.FIRST_COMPLETED)
    finally:
        interrupted.cancel()
        if not task.done():
            task.cancel()
            # The call's own clean-up (closing its stream) runs before the engine goes on.
            await asyncio.wait((task,))
    if task.cancelled():
        return None
    return (task.result(),)


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _as_text(result: object) -> str:
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def _repeated_id(calls: Sequence[ToolCall]) -> str | None:
    """The first id that more than one of a reply's calls carry (calls without one aside)."""
    seen: set[str] = set()
    for call in calls:
        if call.id and call.id in seen:
            return call.id
        seen.add(call.id)
    return None


def _arguments_for_display(arguments: str) -> str | JsonDict:
    """A native call's arguments as a dict when they are a JSON object, else the raw text
    (so invalid arguments are stored as the model wrote them)."""
    try:
        parsed = jsontext.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments
    return parsed if isinstance(parsed, dict) else arguments


def _answer_from_last_reply(text: str) -> str:
    """The answer in the reply to the final request: the final-answer text when the reply
    has one, else the reply itself since no further turn can follow; empty when the model
    still asked for a tool."""
    try:
        parsed = parse(text)
    except ParseError as error:
        return native_answer(error.text)
    return parsed.answer if isinstance(parsed, ParsedFinalAnswer) else ""
