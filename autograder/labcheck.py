"""Lab test cells' comparisons, judged outside the kernel against the reference notebook's.

A lab's test cell runs in the learner's kernel, after the learner's answer
cells: an answer that returns an object whose ``==`` is always true, or that
rebinds ``np.allclose``, passes every ``assert`` there. So when the grader
builds its nbgrader course it rewrites each graded test cell (never the
learner's copy, and never what a learner runs in Jupyter): every comparison in
an ``assert`` and every ``np.allclose``-like call prints what it compared as
a record line in the cell's output.

* ``a == b``, ``a is b``: both values (numbers, strings, lists, dicts, arrays);
* ``x in y``: ``x``, and the kind of ``y`` (a message's wording is free);
* ``<``, ``>``, ``!=`` ...: the kinds of both sides (a bound is not a value);
* ``np.allclose(a, b, rtol, atol)`` and the like: both arrays and the tolerances.

``make oracle`` records the reference notebooks' records twice (a record that
differs between the two runs, a random draw, is not judged), and the parent
passes a task only when nbgrader passed it *and* its records agree with the
reference's (:func:`judge`). An object of the learner's own class shows up as
``{"o": "ClassName"}`` where the reference compared a number. Like the graded
tests' oracle this does not stop code that reads the reference notebook (labs
hide nothing; see CONTRIBUTING.md) or that prints made-up records with the
right values.
"""

from __future__ import annotations

import ast
import json
import math
import operator

import numpy as np

MARK = "\x1elabcheck "
LIMIT = 400  # records per cell: a loop over thousands of cases keeps its first ones
SAMPLE = 512  # array elements kept per record
FLOOR = (1e-5, 1e-6)  # as autograder.oracle: another machine's numpy may round differently
CALLS = {  # name: (rtol, atol) defaults; None: exact
    "np.allclose": (1e-5, 1e-8),
    "np.isclose": (1e-5, 1e-8),
    "np.array_equal": None,
    "np.testing.assert_allclose": (1e-7, 0.0),
    "np.testing.assert_array_equal": None,
    "np.testing.assert_equal": None,
}
_OPS = {"Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
        "Gt": operator.gt, "GtE": operator.ge, "Is": operator.is_, "IsNot": operator.is_not,
        "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b}  # fmt: skip
_VALUES = ("Eq", "Is")  # the comparisons whose right answer is one value

# --- the grader's side: rewriting a test cell ------------------------------------------


class _Rewrite(ast.NodeTransformer):
    def __init__(self):
        self.in_assert = False

    def visit_Assert(self, node):
        self.in_assert = True
        node.test = self.visit(node.test)
        self.in_assert = False
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if not self.in_assert or len(node.ops) != 1:
            return node
        op = type(node.ops[0]).__name__
        return ast.Call(ast.Name("_lc_cmp", ast.Load()),
                        [ast.Constant(op), node.left, node.comparators[0]], [])  # fmt: skip

    def visit_Call(self, node):
        self.generic_visit(node)
        name = ast.unparse(node.func).replace("numpy.", "np.")
        if name not in CALLS:
            return node
        return ast.Call(ast.Name("_lc_call", ast.Load()),
                        [ast.Constant(name), node.func, *node.args], node.keywords)  # fmt: skip


def instrument(source: str) -> str:
    """``source`` with its comparisons reporting themselves (see the module's docstring)."""
    try:
        tree = ast.fix_missing_locations(_Rewrite().visit(ast.parse(source)))
    except SyntaxError:  # IPython syntax (a magic): graded by nbgrader alone
        return source
    head = "from autograder.labcheck import cmp as _lc_cmp, call as _lc_call\n"
    return head + ast.unparse(tree) + "\n"


def records(cell: dict) -> list:
    """The records an executed cell printed, in order."""
    out = []
    for o in cell.get("outputs", []):
        text = o.get("text", "") if o.get("name") == "stdout" else ""
        text = "".join(text) if isinstance(text, list) else str(text)
        for line in text.split("\n"):  # not splitlines(): it splits at the mark too
            if line.startswith(MARK) and len(out) < LIMIT:
                try:
                    out.append(json.loads(line[len(MARK) :]))
                except (ValueError, RecursionError):
                    out.append(["unreadable"])
    return out


# --- the kernel's side: what a comparison sends -----------------------------------------


def _kind(x) -> str:
    if type(x) is np.ndarray and x.ndim == 0:  # a 0-d array is a number to its reader
        x = x[()]
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (int, float, np.integer, np.floating)) and type(x).__module__ in (
        "builtins",
        "numpy",
    ):
        return "number"
    if type(x) in (str, list, tuple, dict, type(None), np.ndarray):
        return {list: "list", tuple: "list"}.get(type(x), type(x).__name__)
    return "o:" + type(x).__name__


def encode(x, depth: int = 0):
    """``x`` as plain JSON; anything not plainly data as ``{"o": its class}``."""
    t = type(x)
    if x is None or t in (bool, str, int):
        return x
    if t is float:
        return {"f": x if math.isfinite(x) else repr(x)}
    if isinstance(x, np.generic) and t.__module__ == "numpy" and x.dtype.kind in "biuf":
        return encode(x.item(), depth)
    if depth > 8:
        return {"o": "deep"}
    if t in (list, tuple):
        return {"l": [encode(v, depth + 1) for v in x[:SAMPLE]], "n": len(x)}
    if t is dict:
        items = sorted(x.items(), key=lambda kv: repr(kv[0]))[:SAMPLE]
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in items]}
    if t.__module__.startswith("minitorch") and t.__name__ == "Tensor":
        try:
            x, t = np.asarray(x.numpy()), np.ndarray
        except Exception:  # noqa: BLE001 - a learner's broken tensor: its class is enough
            return {"o": "Tensor"}
    if t is np.ndarray and x.dtype.kind in "biuf":
        if x.ndim == 0:
            return encode(x[()], depth)
        flat = np.ascontiguousarray(x).reshape(-1)
        if flat.size > SAMPLE:
            flat = flat[np.linspace(0, flat.size - 1, SAMPLE).astype(np.int64)]
        return {"a": flat.astype(np.float64).tolist(), "shape": list(x.shape)}
    return {"o": t.__name__}


def _emit(rec: list) -> None:
    try:
        line = json.dumps(rec, default=str)
    except ValueError:
        line = json.dumps(["unencodable"])
    print(MARK + line, flush=True)


def cmp(op: str, left, right):
    result = _OPS[op](left, right)
    if op in _VALUES:
        _emit([op, encode(left), encode(right)])
    elif op in ("In", "NotIn"):
        _emit([op, encode(left), _kind(right)])
    else:
        _emit([op, _kind(left), _kind(right)])
    return result


def call(name: str, fn, *args, **kwargs):
    result = fn(*args, **kwargs)
    tol = CALLS.get(name)
    if tol is not None:
        rest = list(args[2:4]) + [None, None]
        tol = (kwargs.get("rtol", rest[0] if rest[0] is not None else tol[0]),
               kwargs.get("atol", rest[1] if rest[1] is not None else tol[1]))  # fmt: skip
    values = [encode(np.asarray(a)) if _kind(a) in ("list", "number") else encode(a)
              for a in args[:2]]  # fmt: skip
    _emit(["call", name, *values, list(tol) if tol else None])
    return result


# --- the parent's side: judging --------------------------------------------------------


def _num(x):
    if type(x) in (bool, int):
        return float(x)
    if isinstance(x, dict) and set(x) == {"f"}:
        return float(x["f"])
    return None


def _same(a, b, tol) -> bool:
    na, nb = _num(a), _num(b)
    if na is not None or nb is not None:
        return na is not None and nb is not None and _close(np.array([na]), np.array([nb]), tol)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return False
        if "a" in a:
            if a.get("shape") != b.get("shape") or len(a["a"]) != len(b["a"]):
                return False
            return _close(np.array(a["a"], dtype=float), np.array(b["a"], dtype=float), tol)
        return all(_same(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, tol) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def _close(a: np.ndarray, b: np.ndarray, tol) -> bool:
    rtol, atol = (max(tol[0], FLOOR[0]), max(tol[1], FLOOR[1])) if tol else (0.0, 0.0)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol, atol, equal_nan=True))


def judge(want: list, got: list) -> tuple[bool, str]:
    """Do a task's records ``got`` agree with the reference run's ``want``?

    ``"*"`` in ``want`` stands for a record that differed between two reference runs.
    """
    if not isinstance(got, list) or len(got) != len(want):
        n = len(got) if isinstance(got, list) else "no"
        return False, f"{n} comparisons, the reference notebook makes {len(want)}"
    for i, (w, g) in enumerate(zip(want, got)):
        if w == "*":
            continue
        try:
            # A test cell's tolerance T bounds a right answer's distance from the exact
            # value, and the reference's too: a right answer is within 2T of the reference's.
            tol = FLOOR if w[0] != "call" else [2 * t for t in (w[-1] or (0.0, 0.0))]
            body_w, body_g = (w[:-1], g[:-1]) if w[0] == "call" else (w, g)
            same = isinstance(g, list) and _same(body_w, body_g, tol)
        except Exception:  # noqa: BLE001 - a made-up record of any shape: a failure
            same = False
        if not same:
            return False, (f"comparison {i + 1} of the test cell: yours compared {_shown(g)}, "
                           f"the reference notebook's {_shown(w)}")  # fmt: skip
    return True, ""


def _shown(record, limit: int = 200) -> str:
    """A comparison record as a learner reads it: ``np.allclose([1.0, 2.0], [1.0, 2.5])``."""

    def value(x):
        if isinstance(x, dict) and "a" in x:
            return str([round(v, 6) for v in x["a"][:8]])[:-1] + (
                ", ...]" if len(x["a"]) > 8 else "]"
            )
        if isinstance(x, dict) and set(x) == {"f"}:
            return repr(x["f"])
        if isinstance(x, dict) and "o" in x:
            return f"a {x['o']}"
        return json.dumps(x)[:80]

    try:
        if record[0] == "call":
            text = f"{record[1]}({', '.join(value(v) for v in record[2:-1])})"
        else:
            text = f"{value(record[1])} {record[0]} {value(record[2])}"
    except (TypeError, IndexError, KeyError):
        text = json.dumps(record)
    return text if len(text) <= limit else text[:limit] + " ..."


def merge(first: list, second: list) -> list | None:
    """One oracle entry from two reference runs: differing records become ``"*"``."""
    if len(first) != len(second):
        return None
    return [a if judge([a], [b])[0] else "*" for a, b in zip(first, second)]
