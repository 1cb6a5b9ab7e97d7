"""The small expression language of the rule table (``when``, ``recover``, ``params``).

An expression is a Python *expression* restricted to arithmetic (``+ - * / // % **``),
comparisons (``== != < <= > >= in not in``), ``and``/``or``/``not``, ``x if c else y``, number,
string and boolean literals, tuples/lists of literals (for ``in``), variable names and calls of
:data:`FUNCS`. No attribute access, subscripts, lambdas or other calls: a rule file is data, and
evaluating it can neither import nor touch anything.

``compile_expr(text)`` checks an expression once (at load) and returns an :class:`Expr`;
``Expr.eval(names)`` evaluates it, raising :class:`Unavailable` when a name it needs is not in
``names`` or the arithmetic is undefined (division by zero), so a rule can fall back or be skipped.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _clip(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


#: Functions an expression may call.
FUNCS: dict[str, Any] = {"min": min, "max": max, "abs": abs, "ceil": math.ceil,
                         "floor": math.floor, "round": round, "clip": _clip, "log2": math.log2,
                         "sqrt": math.sqrt}

_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
          ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List,
          ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
          ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
          ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)


class Unavailable(Exception):
    """An expression cannot be evaluated for this finding (missing name, undefined value)."""


class ExprError(ValueError):
    """An expression is not valid in the rule language (raised at load time)."""


@dataclass(frozen=True)
class Expr:
    text: str
    names: frozenset[str]
    code: Any

    def eval(self, names: Mapping[str, Any]) -> Any:
        # names are looked up lazily: ``a if c else b`` needs only the branch it takes
        scope = {n: names[n] for n in self.names if n in names}
        try:
            return eval(self.code, {"__builtins__": {}, **FUNCS}, scope)  # noqa: S307 (checked AST)
        except NameError as exc:
            raise Unavailable(f"{self.text!r}: no value for {exc.name!r}") from None
        except (ZeroDivisionError, OverflowError, TypeError, ValueError) as exc:
            raise Unavailable(f"{self.text!r}: {exc}") from None


def compile_expr(text: str | float | int | bool) -> Expr:
    """Check ``text`` against the rule language; numbers are constant expressions."""
    if isinstance(text, bool) or not isinstance(text, str):
        if not isinstance(text, (int, float)):
            raise ExprError(f"expected an expression string or a number, got {text!r}")
        text = repr(text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"syntax error in {text!r}: {exc.msg}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise ExprError(f"{type(node).__name__} is not allowed in {text!r}")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCS or node.keywords:
                raise ExprError(f"only calls of {', '.join(FUNCS)} (positional arguments) are "
                                f"allowed in {text!r}")
        elif isinstance(node, ast.Name) and node.id not in FUNCS:
            names.add(node.id)
        elif isinstance(node, ast.Constant) and not isinstance(node.value,
                                                               (int, float, str, bool)):
            raise ExprError(f"constant {node.value!r} is not allowed in {text!r}")
    return Expr(text, frozenset(names), compile(tree, "<rule>", "eval"))
