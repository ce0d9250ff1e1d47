"""The course's own mutation operators, for the mistakes mutmut's do not make.

Each gives, for one top-level function's source, the function with one change
(its text edited in place, so the rest keeps its layout and the change reads
as one line):

* ``extreme``: an initial value (``name = 0``, ``0.0``, ``1``, ``1.0``) made
  ``inf``, ``-inf`` or ``1e30``, and an initial ``±inf`` made ``0.0`` (a running
  maximum started at 0 is NaN on a row of large negative values);
* ``while_if``: a ``while`` loop run once, as an ``if`` (one without ``break``
  or ``continue`` of its own);
* ``narrow``: a float64 dtype made float32 in an array's making or casting
  (``np.zeros``, ``np.empty``, ``astype``, any ``dtype=`` argument, a dtype given
  by a variable included: the accumulator that loses digits);
* ``in_place``: ``x = x + y`` on a parameter ``x`` made ``x += y`` (the caller's
  array changes), and a ``.copy()`` or ``np.copy(x)`` dropped.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

INF = {"inf", "infinity"}
MAKERS = {"zeros", "empty", "ones", "full", "array", "asarray", "astype", "zeros_like",
          "empty_like", "ones_like", "full_like", "ascontiguousarray", "arange"}  # fmt: skip
ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def mutations(source: str, module: str = "") -> Iterator[str]:
    """Every one-change variant of the function ``source`` (one top-level ``def``) of the
    module whose text is ``module`` (its imports say how to name ``inf`` and ``float32``)."""
    tree = ast.parse(source)
    fn = tree.body[0]
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(lineno: int, col: int) -> int:  # ast columns are utf-8 byte offsets
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    def span(node: ast.AST) -> tuple[int, int]:
        return at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)

    def edit(node: ast.AST, text: str) -> str:
        a, b = span(node)
        return source[:a] + text + source[b:]

    has_np = "import numpy as np" in module
    inf, float32 = ("np.inf", "np.float32") if has_np else ('float("inf")', '"float32"')
    params = {a.arg for a in fn.args.args + fn.args.posonlyargs + fn.args.kwonlyargs}
    running = _accumulators(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target, value in _pairs(node):
                if _names([target]) & running:
                    yield from _extreme(value, edit, inf)
        if isinstance(node, ast.While) and not _leaves_loop(node):
            a, _ = span(node)
            yield source[:a] + "if" + source[a + len("while") :]
        if isinstance(node, ast.Call):
            yield from _narrow(node, edit, float32)
            if _is_copy(node):
                inner = node.args[0] if node.args else node.func.value
                yield edit(node, ast.get_source_segment(source, inner))
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in params
            and isinstance(node.value, ast.BinOp)
            and type(node.value.op) in ARITH
            and isinstance(node.value.left, ast.Name)
            and node.value.left.id == node.targets[0].id
        ):
            right = ast.get_source_segment(source, node.value.right)
            yield edit(node, f"{node.targets[0].id} {ARITH[type(node.value.op)]}= {right}")


def _leaves_loop(loop: ast.While) -> bool:
    """Whether the loop's own body has a ``break`` or ``continue`` (an ``if`` cannot hold one)."""
    todo = list(loop.body) + list(loop.orelse)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        if not isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _names(targets) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _accumulators(fn) -> set[str]:
    """Names updated from their own value (``acc += x``, ``m = max(m, x)``): a constant
    assigned to one of them is an initial value."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.Assign):
            reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            out |= _names(node.targets) & reads
    return out


def _number(node: ast.AST) -> float | None:
    """The value of ``0``, ``-1.0``, ``np.inf``, ``-math.inf``, ``float("-inf")``..., else None."""
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign, node = (-1.0 if isinstance(node.op, ast.USub) else 1.0), node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sign * node.value
    if isinstance(node, ast.Attribute) and node.attr in INF:
        return sign * float("inf")
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "float"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and str(node.args[0].value).lower().lstrip("+-") in INF
    ):
        return sign * float(node.args[0].value)
    return None


def _pairs(node: ast.Assign) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) of ``a = v``, ``a = b = v`` and, element by element, ``a, b = v, w``."""
    (first, *rest), value = node.targets, node.value
    if not rest and isinstance(first, ast.Tuple) and isinstance(value, ast.Tuple):
        if len(first.elts) == len(value.elts):
            return list(zip(first.elts, value.elts))
    return [(first if not rest else ast.Tuple(elts=node.targets), value)]


def _extreme(node: ast.AST, edit, inf: str) -> Iterator[str]:
    v = _number(node)
    if v in (0, 1):
        for text in (inf, f"-{inf}", "1e30"):
            yield edit(node, text)
    elif v is not None and abs(v) == float("inf"):
        yield edit(node, "0.0")


def _narrow(call: ast.Call, edit, float32: str) -> Iterator[str]:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    for kw in call.keywords:
        if kw.arg == "dtype" and not _is_float32(kw.value):
            yield edit(kw.value, float32)
    if name in MAKERS:
        for arg in call.args:
            if _is_float64(arg) or (name == "astype" and not _is_float32(arg)):
                yield edit(arg, float32)


def _is_float64(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in ("float64", "f8", "double")
    if isinstance(node, ast.Attribute):
        return node.attr in ("float64", "double")
    return isinstance(node, ast.Name) and node.id in ("float64", "float")


def _is_float32(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in ("float32", "f4")
    return getattr(node, "attr", getattr(node, "id", None)) == "float32"


def _is_copy(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "copy" and not call.args:
        return not (isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy"))
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "copy"
        and isinstance(func.value, ast.Name)
        and func.value.id in ("np", "numpy")
        and len(call.args) == 1
        and not call.keywords
    )
