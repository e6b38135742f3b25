"""What a tool is, to the engine.

A tool is an object with a name, a description and a ``run`` method whose keyword arguments
are type-hinted. The JSON schema the model sees is derived from those hints, so the schema
cannot drift from the code. Pure Python: Django-backed tools live in ``agents/tools``.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import inspect
import json
import threading
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agents.react import jsontext

JsonDict = dict[str, Any]

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


class ToolInputError(ValueError):
    """The input does not fit the tool's arguments; the model is told why."""


class SuspendRun(Exception):
    """Raised by a tool's ``run`` whose result is not ready and will come from outside the
    run (another run that has not ended, say), so that nothing waits for it meanwhile.

    The engine stores no observation for the call, lets the batch's other calls end, and
    raises ``RunSuspended``; the caller keeps the run's steps and runs it again once the
    result can be had, and the engine calls the tool again with the same ``call_id``
    (``current_interrupt().call_id``), which must then answer or suspend again. Such a tool
    keys its work on the call's id, so that calling it again starts nothing twice.
    """


class CallInterrupt:
    """How the engine tells a tool call in progress that nobody waits for its result any more:
    the run was stopped, or the call outlived the tool's ``timeout_seconds``.

    The engine abandons such a call either way; a tool that can end its work early (close a
    socket, kill a process) registers a callback with ``on_interrupt`` inside ``run``, reading
    the call's interrupt with ``current_interrupt()``, so that the work ends when the run does
    instead of at the tool's own deadline. Callbacks run on the thread that interrupts (the
    run's thread): they must be quick and must not block.
    """

    def __init__(self, call_id: str = "") -> None:
        # The engine's id of the call (``call-<n>``, unique within the run): a tool whose
        # work must happen once per call (a sub-agent's run) keys it on this.
        self.call_id = call_id
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self._interrupted = False

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def on_interrupt(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once when the call is interrupted (at once if it already was).
        Returns a function that unregisters it, for when the work has ended by itself."""
        with self._lock:
            if not self._interrupted:
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def interrupt(self) -> None:
        """Tell the call's callbacks, once; later calls do nothing."""
        with self._lock:
            if self._interrupted:
                return
            self._interrupted = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


_current_interrupt: contextvars.ContextVar[CallInterrupt | None] = contextvars.ContextVar(
    "tool_call_interrupt", default=None
)


def current_interrupt() -> CallInterrupt:
    """The interrupt of the tool call running on this thread. Outside the engine (a tool run
    from the admin's "Test tool") it is one that never fires."""
    return _current_interrupt.get() or CallInterrupt()


def run_interruptibly(interrupt: CallInterrupt, run: Callable[[], Any]) -> Any:
    """Call ``run()`` with ``interrupt`` as ``current_interrupt()`` (the engine's tool
    threads do this for every call)."""
    token = _current_interrupt.set(interrupt)
    try:
        return run()
    finally:
        _current_interrupt.reset(token)


class Tool:
    """Subclass and implement ``run(self, *, arg: type, ...) -> str``.

    The first line of ``run``'s docstring is not used: ``description`` is what the model
    reads, so that staff can edit it in the admin.
    """

    # Instance attributes with class defaults: a configured tool (ToolConfig) sets its own.
    name: str = ""
    description: str = ""
    return_direct: bool = False
    timeout_seconds: float = 30.0
    # A person approves each call before it runs (the engine pauses the run to ask).
    needs_approval: bool = False
    # Every call is bounded CPU work of well under a millisecond, with no I/O and no
    # waiting: the engine runs it in the thread the engine runs in, instead of handing it to
    # a tool thread, a hop that costs more than such a call
    # (docs/performance.md#inline-tools). Such a call cannot time out or be interrupted, so
    # anything that could take longer leaves this False.
    runs_inline: bool = False
    # Calls only read: running one again changes nothing (a replay may run a call the
    # original run did not make only for such a tool, ``agents/react/replay.py``).
    read_only: bool = False

    def run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    # -- schema ----------------------------------------------------------------------
    @classmethod
    def args_schema(cls) -> JsonDict:
        """JSON schema of ``run``'s keyword arguments, from its type hints and defaults."""
        # Reading type hints evaluates annotations: worked out once per ``run`` function.
        return copy.deepcopy(_schema_of(cls.run))

    def coerce_input(self, tool_input: str | JsonDict) -> JsonDict:
        """Turn an Action Input (text or JSON object) into ``run``'s keyword arguments.

        A text input goes to the only required argument; text that is a JSON object is
        treated as the arguments themselves.
        """
        schema = self.args_schema()
        properties: dict[str, JsonDict] = schema["properties"]
        if isinstance(tool_input, str):
            stripped = tool_input.strip()
            if stripped.startswith("{"):
                try:
                    parsed = jsontext.loads(stripped)
                except json.JSONDecodeError:
                    parsed = None
                if isinstance(parsed, dict) and set(parsed) <= set(properties):
                    tool_input = parsed
            if isinstance(tool_input, str):
                targets = schema["required"] or list(properties)
                if len(targets) != 1:
                    raise ToolInputError(
                        f"{self.name} takes a JSON object with keys {sorted(properties)}"
                    )
                tool_input = {targets[0]: tool_input}
        unknown = set(tool_input) - set(properties)
        if unknown:
            raise ToolInputError(f"{self.name} has no argument(s) {sorted(unknown)}")
        missing = [name for name in schema["required"] if name not in tool_input]
        if missing:
            raise ToolInputError(f"{self.name} is missing argument(s) {missing}")
        for name, value in tool_input.items():
            expected = properties[name]["type"]
            if not _matches(value, expected):
                raise ToolInputError(f"{self.name}: argument {name!r} must be a {expected}")
        return dict(tool_input)

    def openai_schema(self) -> JsonDict:
        """The ``tools`` entry for native tool calling."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.args_schema(),
            },
        }


@dataclass(frozen=True)
class ToolAnswer:
    """What a ``ToolPolicy`` gives the model for a call instead of running it."""

    text: str = ""
    is_error: bool = False
    # The code of the error step shown with an error observation (the original's, if any).
    error_code: str = ""
    # No observation exists for the call: the engine tells the model, in the run's labels,
    # that it was not run.
    not_recorded: bool = False


class ToolPolicy(Protocol):
    """Decides, for each tool call of a run, whether it runs.

    Without a policy every valid call runs (after its approval, if the tool needs one).
    With one, ``answer`` is asked once per call, in the order the calls were made, with
    the call's checked arguments: ``None`` runs it, a ``ToolAnswer`` is its observation.
    Under a policy no person is asked to approve anything, and a call to a tool that needs
    approval never runs: the engine answers it as not recorded if the policy would run it.
    """

    def answer(self, tool: Tool, arguments: JsonDict) -> ToolAnswer | None: ...


@functools.cache
def _schema_of(run: Any) -> JsonDict:
    signature = inspect.signature(run)
    hints = typing.get_type_hints(run)
    properties: dict[str, JsonDict] = {}
    required: list[str] = []
    for name, param in signature.parameters.items():
        if name == "self" or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        properties[name] = {"type": _json_type(hints.get(name, str))}
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            properties[name]["default"] = param.default
    return {"type": "object", "properties": properties, "required": required}


def _json_type(hint: Any) -> str:
    origin = typing.get_origin(hint) or hint
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _json_type(args[0]) if args else "string"
    return _JSON_TYPES.get(origin, "string")


def _matches(value: Any, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    return True
