"""The kernel's side of a lab test cell's comparisons: each one prints what it compared.

The grader rewrites every graded test cell of its copy of a lab (never the
learner's, never what a learner runs in Jupyter): an ``assert``'s comparison
becomes :func:`cmp`, an ``np.allclose``-like call becomes :func:`call`, and
each prints a record line (:data:`MARK`) with the values it compared. The
parent passes a task only when those records agree with the reference
notebook's (``autograder/grader/labs.py``).

* ``a == b``, ``a is b``: both values (numbers, strings, lists, dicts, arrays);
* ``x in y``: ``x``, and the kind of ``y`` (a message's wording is free);
* ``<``, ``>``, ``!=`` ...: the kinds of both sides (a bound is not a value);
* ``np.allclose(a, b, rtol, atol)`` and the like: both arrays and the tolerances.
"""

from __future__ import annotations

import json
import math
import operator

import numpy as np

from . import config

MARK = "\x1elabcheck "
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
        return {"l": [encode(v, depth + 1) for v in x[: config.LAB_SAMPLE]], "n": len(x)}
    if t is dict:
        items = sorted(x.items(), key=lambda kv: repr(kv[0]))[: config.LAB_SAMPLE]
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
        if flat.size > config.LAB_SAMPLE:
            flat = flat[np.linspace(0, flat.size - 1, config.LAB_SAMPLE).astype(np.int64)]
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
