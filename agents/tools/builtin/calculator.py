"""``calculator``: arithmetic on an AST allowlist, never ``eval``.

Every operation is bounded before it runs: the input length, the number of syntax nodes,
the size of any integer (``MAX_INT_BITS``) and the result of a power are checked first, so
``9**9**9`` is refused at once instead of computing for hours.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from agents.react.tools import ToolInputError
from agents.tools.base import ConfiguredTool, ToolError

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_input_chars": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 500},
    },
    "additionalProperties": False,
}

MAX_NODES = 400
MAX_INT_BITS = 4096  # about 1233 decimal digits
MAX_FACTORIAL = 450  # 450! is just under MAX_INT_BITS

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _factorial(value: Number) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise ToolInputError("factorial needs a whole number")
        value = int(value)
    if value < 0:
        raise ToolInputError("factorial needs a number that is not negative")
    if value > MAX_FACTORIAL:
        raise ToolInputError(f"factorial is limited to {MAX_FACTORIAL}!")
    return math.factorial(value)


def _round(value: Number, digits: Number = 0) -> Number:
    if not isinstance(digits, int) or not -20 <= digits <= 20:
        raise ToolInputError("round takes a whole number of digits between -20 and 20")
    return round(value, digits)


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "degrees": math.degrees,
    "radians": math.radians,
    "floor": math.floor,
    "ceil": math.ceil,
    "hypot": math.hypot,
    "factorial": _factorial,
}

# Symbols people and models type that Python spells differently.
_SPELLINGS = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-"})


class Calculator(ConfiguredTool):
    """Evaluates arithmetic expressions safely."""

    read_only = True

    name = "calculator"
    description = (
        "Evaluates an arithmetic expression and returns the number. Supports + - * / // % **, "
        "parentheses, pi, e and functions such as sqrt, log, sin, round, min, max. "
        "Input: the expression, e.g. (28+10)*3"
    )
    # Every operation is bounded before it runs (the module's docstring).
    runs_inline = True

    def run(self, expression: str) -> str:
        return evaluate(expression, max_chars=self.config.get("max_input_chars", 500))


def evaluate(expression: str, *, max_chars: int = 500) -> str:
    """The value of ``expression`` as plain text (``114``, ``0.3``, ``1.4142135623731``)."""
    text = expression.strip().translate(_SPELLINGS)
    if not text:
        raise ToolInputError("the expression is empty")
    if len(text) > max_chars:
        raise ToolInputError(f"the expression is longer than {max_chars} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolInputError(f"could not read {text!r} as an arithmetic expression") from None
    except (RecursionError, MemoryError):
        raise ToolInputError("the expression is nested too deeply") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ToolInputError(f"the expression has more than {MAX_NODES} parts")
    try:
        value = _eval(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero is undefined") from None
    except OverflowError:
        raise ToolError("the result is too large") from None
    except ValueError as exc:
        if isinstance(exc, ToolInputError):
            raise
        # math domain errors: sqrt(-1), log(0), ...
        raise ToolError(f"math error: {exc}") from None
    return _format(value)


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolInputError(f"{node.value!r} is not a number")
        return _bounded(node.value)
    if isinstance(node, ast.BinOp):
        operation = _BINARY.get(type(node.op))
        if operation is None:
            hint = " (use ** for powers)" if isinstance(node.op, ast.BitXor) else ""
            raise ToolInputError(f"the operator {_symbol(node.op)} is not supported{hint}")
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _bounded(operation(left, right))
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY.get(type(node.op))
        if unary is None:
            raise ToolInputError(f"the operator {_symbol(node.op)} is not supported")
        return unary(_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ToolInputError(
            f"unknown name {node.id!r}; only the constants {', '.join(_CONSTANTS)} "
            f"and the functions {', '.join(_FUNCTIONS)} are available"
        )
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.Attribute):
        raise ToolInputError("attribute access (a.b) is not allowed in an expression")
    raise ToolInputError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name):
        raise ToolInputError("only the calculator's own functions can be called")
    function = _FUNCTIONS.get(node.func.id)
    if function is None:
        raise ToolInputError(
            f"the function {node.func.id!r} is not allowed; "
            f"available functions: {', '.join(_FUNCTIONS)}"
        )
    if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
        raise ToolInputError(f"{node.func.id} takes plain positional arguments")
    arguments = [_eval(arg) for arg in node.args]
    try:
        return _bounded(function(*arguments))
    except TypeError:
        raise ToolInputError(f"wrong number of arguments for {node.func.id}") from None


def _check_power(base: Number, exponent: Number) -> None:
    """Refuse a power whose result would exceed the size limit, before computing it."""
    if abs(base) <= 1 or exponent <= 0:
        return
    if exponent * math.log2(abs(base)) > MAX_INT_BITS:
        raise ToolError(f"the result of {_short(base)} ** {_short(exponent)} is too large")


def _bounded(value: Any) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError("the result is too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is too large" if math.isinf(value) else "undefined result")
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    return value


def _format(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".12g")


def _short(value: Number) -> str:
    text = _format(value)
    return text if len(text) <= 20 else text[:8] + "…" + text[-8:]


def _symbol(op: ast.AST) -> str:
    return {
        ast.BitXor: "^",
        ast.BitAnd: "&",
        ast.BitOr: "|",
        ast.LShift: "<<",
        ast.RShift: ">>",
        ast.MatMult: "@",
        ast.Invert: "~",
        ast.Not: "not",
    }.get(type(op), type(op).__name__)
