"""Formulas of declared KPI measures: arithmetic over the measures declared before them.

A formula holds measure names, numbers, ``+ - * /``, unary minus and parentheses, nothing
else (it is parsed, never executed as Python). Its value is a double; a null operand gives
null, and so does a division by zero (an average without events, a rate without a
denominator).
"""

import ast
import functools
from collections.abc import Mapping, Sequence
from typing import Any

_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_UNARY = (ast.USub, ast.UAdd)


def check_formula(formula: str, known: Sequence[str]) -> str | None:
    """Why ``formula`` cannot be evaluated over the measures ``known`` (None: it can)."""
    try:
        tree = _parse(formula)
    except SyntaxError:
        return f"{formula!r} is not arithmetic: write names, numbers, + - * / and parentheses"
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known:
            return f"{node.id} is not a measure declared before this one"
        if isinstance(node, ast.Constant) and (
            isinstance(node.value, bool) or not isinstance(node.value, int | float)
        ):
            return f"{node.value!r} is not a number"
        if not isinstance(node, allowed + _BINARY + _UNARY):
            return f"{type(node).__name__} is not allowed: use names, numbers, + - * /"
    return None


def evaluate(formula: str, row: Mapping[str, Any]) -> float | None:
    """The value of ``formula`` over the measures of ``row`` (null rules: module docstring).

    Raises:
        ValueError: the formula is not one ``check_formula`` accepts.
    """
    problem = check_formula(formula, list(row))
    if problem is not None:
        raise ValueError(problem)
    value = _value(_parse(formula).body, row)
    return None if value is None else float(value)


@functools.lru_cache(maxsize=256)
def _parse(formula: str) -> ast.Expression:
    return ast.parse(formula, mode="eval")


def _value(node: ast.AST, row: Mapping[str, Any]) -> float | None:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int | float)  # check_formula refused anything else
        return float(node.value)
    if isinstance(node, ast.Name):
        found = row[node.id]
        return None if found is None else float(found)
    if isinstance(node, ast.UnaryOp):
        inner = _value(node.operand, row)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    assert isinstance(node, ast.BinOp)
    left, right = _value(node.left, row), _value(node.right, row)
    if left is None or right is None:
        return None
    if isinstance(node.op, ast.Add):
        return left + right
    if isinstance(node.op, ast.Sub):
        return left - right
    if isinstance(node.op, ast.Mult):
        return left * right
    return left / right if right != 0 else None
