"""``python``: runs the model's code in a bubblewrap sandbox (``agents/tools/sandbox.py``).

The code sees the conversation's files read-only in ``/data`` (``conversation_sandbox_files``
in ``agents/attachments/selectors.py``: the chat's attachments), writes only to its scratch
folder, and has numpy, pandas and matplotlib (Agg) from a virtualenv of its own. What it
prints, its traceback and the files it leaves come back as the observation; the files are
stored for the conversation's owner (``SandboxFile``) and named by their URL, which the chat
shows under the step: PNG images inline, other files as downloads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from agents.react.tools import ToolInputError, current_interrupt
from agents.tools.base import ConfiguredTool, ToolError
from agents.tools.sandbox import (
    DATA,
    SCRATCH,
    Limits,
    SandboxResult,
    SandboxUnavailable,
    run_sandboxed,
    safe_file_name,
    unavailable_reason,
)

_MB = 1024 * 1024

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # Per process: the code and every process it starts each have this much.
        "cpu_seconds": {"type": "integer", "minimum": 1, "maximum": 600, "default": 20},
        "wall_seconds": {"type": "number", "minimum": 1, "maximum": 3600, "default": 25},
        "memory_mb": {"type": "integer", "minimum": 128, "maximum": 16384, "default": 1024},
        "max_processes": {"type": "integer", "minimum": 1, "maximum": 512, "default": 32},
        "max_output_chars": {"type": "integer", "minimum": 100, "maximum": 200000, "default": 3000},
        "max_file_mb": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 20},
        "max_files": {"type": "integer", "minimum": 0, "maximum": 100, "default": 10},
        "max_code_chars": {"type": "integer", "minimum": 100, "maximum": 500000, "default": 50000},
    },
    "additionalProperties": False,
}

_ENDINGS = {
    "time": "The code was stopped: it ran past the time limit of {wall:g} s.",
    "cpu": "The code was stopped: it used up its {cpu} s of CPU time.",
    "memory": "The code ran out of memory: the limit is {memory} MB.",
    "file_size": "The code was stopped: it wrote more than {file_mb} MB to a file or its output.",
    "signal": "The code was killed: it went over a limit of the sandbox.",
    "interrupted": "The code was stopped because the run was stopped.",
    "no_sandbox": "The sandbox could not be made on this server, so no code was run.",
}


class PythonSandbox(ConfiguredTool):
    """Runs Python (numpy, pandas, matplotlib) in a sandbox with no network."""

    name = "python"
    description = (
        "Runs Python 3 code in a sandbox and returns what it prints, its errors and the "
        f"files it saves. numpy, pandas and matplotlib are installed; there is no network. "
        f"The conversation's files are in {DATA} (read-only); save charts as PNG files in "
        f"the working folder ({SCRATCH}) to show them to the user. Input: the code."
    )
    uses_database = True
    # Runs code the model wrote: a person approves each call unless staff switch it off.
    needs_approval_by_default: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        reason = unavailable_reason()
        if reason:
            self.description += f" (Unavailable on this server: {reason}.)"

    @classmethod
    def unavailable_reason(cls) -> str:
        return unavailable_reason()

    def _limits(self) -> Limits:
        config = self.config
        # Stop the code a little before the engine stops waiting, so the model reads why.
        wall = min(float(config["wall_seconds"]), max(self.timeout_seconds - 1.0, 1.0))
        return Limits(
            cpu_seconds=int(config["cpu_seconds"]),
            memory_bytes=int(config["memory_mb"]) * _MB,
            processes=int(config["max_processes"]),
            file_bytes=int(config["max_file_mb"]) * _MB,
            wall_seconds=wall,
            output_chars=int(config["max_output_chars"]),
        )

    def run(self, code: str) -> str:
        from agents.attachments.selectors import conversation_sandbox_files

        if not code.strip():
            raise ToolInputError("give the Python code to run")
        if len(code) > self.config["max_code_chars"]:
            raise ToolInputError(
                f"the code is longer than {self.config['max_code_chars']} characters"
            )
        conversation_id = getattr(self.conversation, "pk", None)
        files = conversation_sandbox_files(conversation_id) if conversation_id else []
        limits = self._limits()
        interrupt = current_interrupt()

        def on_start(kill: Callable[[], None]) -> Callable[[], None]:
            return interrupt.on_interrupt(kill)

        try:
            with run_sandboxed(code, limits=limits, files=files, on_start=on_start) as result:
                stored = self._store_files(result, conversation_id)
                text = _observation(result, stored, limits)
        except SandboxUnavailable as exc:
            raise ToolError(
                f"the python tool is unavailable on this server: {exc}. No code was run."
            ) from None
        except ValueError as exc:  # an input file's name or path
            raise ToolError(str(exc)) from None
        ending = _ENDINGS.get(result.ending)
        if ending:
            raise ToolError(
                ending.format(
                    wall=limits.wall_seconds,
                    cpu=limits.cpu_seconds,
                    memory=limits.memory_bytes // _MB,
                    file_mb=limits.file_bytes // _MB,
                )
                + ("\n" + text if text else "")
            )
        return text or "The code ran and printed nothing."

    def _store_files(
        self, result: SandboxResult, conversation_id: int | None
    ) -> list[tuple[str, str, int, str]]:
        """(name, content type, size, URL) of each file kept; the rest are named only."""
        from django.urls import reverse

        from agents.services.sandbox import sandbox_files_store

        if conversation_id is None or not result.files:
            return []
        kept = [path for path in result.files if _plain_name(path.name)]
        kept = kept[: self.config["max_files"]]
        stored = sandbox_files_store(conversation_id=conversation_id, paths=kept)
        return [
            (
                item.name,
                item.content_type,
                item.size,
                reverse("sandbox_file", kwargs={"file_id": item.pk, "name": item.name}),
            )
            for item in stored
        ]


def _observation(
    result: SandboxResult, stored: list[tuple[str, str, int, str]], limits: Limits
) -> str:
    """The files and how the code ended first, then what it printed: the engine cuts a long
    observation at its end, and the files' lines are what the chat shows images from."""
    parts = []
    if stored:
        lines = [
            f"- {name} ({content_type}, {_size(size)}): {url}"
            for name, content_type, size, url in stored
        ]
        parts.append("Files saved (the user sees them under this step):\n" + "\n".join(lines))
    kept = {name for name, _type, _size, _url in stored}
    others = [repr(path.name) for path in result.files if path.name not in kept]
    if others:
        parts.append("Files not kept: " + ", ".join(others))
    if result.ending == "error":
        status = [f"Exit status {result.exit_code}."]
        if "BlockingIOError: [Errno 11]" in result.stderr:
            status.append(f"The code reached the sandbox's limit of {limits.processes} processes.")
        if "[Errno 27] File too large" in result.stderr:
            # Python ignores SIGXFSZ, so a write past the limit raises instead.
            status.append(
                f"The code reached the sandbox's limit of {limits.file_bytes // _MB} MB per "
                "file (what it prints counts as one)."
            )
        parts.append(" ".join(status))
    if result.stdout:
        cut = "\n[output cut short]" if result.stdout_cut else ""
        parts.append(f"Output:\n{result.stdout.rstrip()}{cut}")
    if result.stderr:
        cut = "\n[errors cut short]" if result.stderr_cut else ""
        parts.append(f"Errors:\n{result.stderr.rstrip()}{cut}")
    return "\n\n".join(parts)


def _plain_name(name: str) -> bool:
    try:
        return safe_file_name(name) == name
    except ValueError:
        return False


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < _MB:
        return f"{size / 1024:.0f} KB"
    return f"{size / _MB:.1f} MB"
