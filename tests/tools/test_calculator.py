"""The calculator: right answers, and bounded refusals for everything that is not arithmetic."""

from __future__ import annotations

import pytest

from agents.react.tools import ToolInputError
from agents.tools.base import ToolError
from agents.tools.builtin.calculator import Calculator


@pytest.fixture
def calculator() -> Calculator:
    return Calculator()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("(28+10)*3", "114"),
        ("2**10", "1024"),
        ("7 // 2", "3"),
        ("7 % 4", "3"),
        ("10 / 4", "2.5"),
        ("10 / 2", "5"),
        ("0.1 + 0.2", "0.3"),
        ("-3 + +2", "-1"),
        ("sqrt(2)", "1.41421356237"),
        ("round(pi, 3)", "3.142"),
        ("max(3, 9, 4) - min(2, 8)", "7"),
        ("factorial(5)", "120"),
        ("2 ** -1", "0.5"),
        ("6 × 7", "42"),
        ("2**1000 % 7", "2"),
    ],
)
def test_computes(calculator, expression, expected):
    assert calculator.run(expression=expression) == expected


def test_import_is_refused_by_name(calculator):
    with pytest.raises(ToolInputError, match="'__import__' is not allowed"):
        calculator.run(expression="__import__('os')")
    with pytest.raises(ToolInputError, match="only the calculator's own functions"):
        calculator.run(expression="__import__('os').system('echo hi')")


@pytest.mark.parametrize(
    "expression",
    ["().__class__", "(1).real", "pi.__class__.__bases__"],
)
def test_attribute_access_is_refused(calculator, expression):
    with pytest.raises(ToolInputError, match="attribute access"):
        calculator.run(expression=expression)


def test_calling_through_an_attribute_is_refused(calculator):
    with pytest.raises(ToolInputError, match="only the calculator's own functions"):
        calculator.run(expression="math.sqrt(4)")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("open('/etc/passwd')", "'open' is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "'a' is not a number"),
        ("[1] * 3", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("2 ^ 3", "use \\*\\* for powers"),
        ("1 << 100000", "<< is not supported"),
        ("True + 1", "True is not a number"),
        ("sqrt(x=4)", "plain positional arguments"),
        ("1 +", "could not read"),
        ("", "empty"),
    ],
)
def test_refuses_what_is_not_arithmetic(calculator, expression, message):
    with pytest.raises(ToolInputError, match=message):
        calculator.run(expression=expression)


@pytest.mark.parametrize("expression", ["9**9**9", "2**100000", "10**5000", "(10**1000)**10"])
def test_huge_powers_are_refused_before_computing(calculator, expression):
    with pytest.raises(ToolError, match="too large"):
        calculator.run(expression=expression)


def test_huge_products_and_factorials_are_refused(calculator):
    with pytest.raises(ToolError, match="too large"):
        calculator.run(expression="10**1200 * 10**1200")
    with pytest.raises(ToolInputError, match="factorial is limited"):
        calculator.run(expression="factorial(100000)")


def test_float_overflow_is_reported(calculator):
    with pytest.raises(ToolError, match="too large"):
        calculator.run(expression="2.0 ** 5000.5")
    with pytest.raises(ToolError, match="too large"):
        calculator.run(expression="exp(1000)")


def test_division_by_zero_is_a_clear_error(calculator):
    with pytest.raises(ToolError, match="division by zero"):
        calculator.run(expression="1/0")
    with pytest.raises(ToolError, match="division by zero"):
        calculator.run(expression="5 % 0")


def test_math_domain_error(calculator):
    with pytest.raises(ToolError, match="math error"):
        calculator.run(expression="sqrt(-1)")


def test_long_input_is_refused(calculator):
    with pytest.raises(ToolInputError, match="longer than 500 characters"):
        calculator.run(expression="1+" * 5000 + "1")


def test_deep_nesting_is_refused(calculator):
    with pytest.raises(ToolInputError):
        calculator.run(expression="(" * 240 + "1" + ")" * 240)
    configured = Calculator(config={"max_input_chars": 10000})
    with pytest.raises(ToolInputError, match="nested too deeply"):
        configured.run(expression="-" * 9000 + "1")
    with pytest.raises(ToolInputError, match="more than 400 parts"):
        configured.run(expression="max(" + "1," * 1000 + "1)")


def test_text_action_input_reaches_the_expression(calculator):
    assert calculator.coerce_input("(28+10)*3") == {"expression": "(28+10)*3"}
    assert calculator.run(**calculator.coerce_input("(28+10)*3")) == "114"


def test_the_calculator_runs_inline_as_every_operation_is_bounded_first():
    """The engine runs it without a tool thread (agents/react/tools.py, ``runs_inline``),
    which is only safe because an expression too large to be quick is refused first."""
    assert Calculator.runs_inline
    with pytest.raises(ToolError, match="too large"):
        Calculator().run(expression="9**9**9")
