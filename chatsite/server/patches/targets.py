"""What a patch relies on in a library, checked when Django runs its system checks.

A ``Target`` names one attribute (``Channel.conn_or_acquire`` of ``kombu.transport.redis``)
and the shape the patch was written for: its parameters as ``inspect.signature`` lists them,
the kind of object it is (a ``property``), or lines of its source the patch depends on (the
private attributes a constructor sets).
The library is imported when the check runs, not when this module is: a server that never
uses a library (the MCP SDK) does not load it to start.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.apps import AppConfig
from django.core import checks

Check = Callable[..., list[checks.CheckMessage]]


@dataclass(frozen=True)
class Target:
    module: str
    attribute: str  # dotted inside the module: "Channel.conn_or_acquire"
    parameters: tuple[str, ...] | None = None
    kind: type | None = None
    source_contains: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.module}.{self.attribute}"


def target_problem(target: Target) -> str | None:
    """What is wrong with ``target`` in the installed library, or None if it is as expected."""
    try:
        owner: Any = importlib.import_module(target.module)
    except ImportError as exc:
        return f"module {target.module} cannot be imported ({exc})"
    *path, last = target.attribute.split(".")
    for part in path:
        if not hasattr(owner, part):
            return f"{target.module}.{part} is gone"
        owner = getattr(owner, part)
    try:
        # Static: a property is seen as the property, not as what it returns.
        static = inspect.getattr_static(owner, last)
    except AttributeError:
        return f"{target.name} is gone"
    if target.kind is not None and not isinstance(static, target.kind):
        return (
            f"{target.name} is a {type(static).__name__} now, "
            f"the patch was written for a {target.kind.__name__}"
        )
    value = getattr(owner, last)
    if target.parameters is not None:
        try:
            found = tuple(inspect.signature(value).parameters)
        except (TypeError, ValueError):
            return f"{target.name} is no longer a function with a signature"
        if found != target.parameters:
            return (
                f"{target.name} takes ({', '.join(found)}) now, "
                f"the patch was written for ({', '.join(target.parameters)})"
            )
    if target.source_contains:
        try:
            source = inspect.getsource(value)
        except (OSError, TypeError):
            source = ""
        for line in target.source_contains:
            if line not in source:
                return f"{target.name} no longer contains `{line}`"
    return None


def check_for(*, check_id: str, library: str, patch: str, targets: Sequence[Target]) -> Check:
    """A system check reporting, under ``check_id``, each target of ``patch`` that changed."""

    def check(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[Any]:
        return [
            checks.Error(
                f"{library} changed under the patch in {patch}: {problem}.",
                hint=(
                    f"Install the {library} version requirements.txt pins, or bring {patch} "
                    f"up to date with the installed {library} and its TARGETS with it."
                ),
                obj=patch,
                id=check_id,
            )
            for problem in map(target_problem, targets)
            if problem is not None
        ]

    check.__name__ = check.__qualname__ = f"check_{library.replace('-', '_')}_patch"
    return check
