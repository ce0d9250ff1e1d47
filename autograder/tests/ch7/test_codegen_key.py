"""Graded tests, chapter 7, exercise 7.10: the kernel cache's structural key."""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import check, graded
from minitorch.core.registry import Spec
from minitorch.fusion import structure_key
from minitorch.tracing.tracer import trace_function

F32, F64 = np.dtype("float32"), np.dtype("float64")


def key(fn, shapes, layouts=("flat",), dtype=F32, names=None):
    g = trace_function(fn, [Spec(tuple(s), dtype) for s in shapes], names=names)
    k = structure_key(g, list(layouts))
    check(isinstance(k, str) and len(k) == 16 and all(c in "0123456789abcdef" for c in k), "7.10",
          "return the first 16 hex digits of the sha256", got=k)  # fmt: skip
    return k


def sub(x, y):
    return (x - y).relu() * 2.0


@graded("7.10", points=1)
def test_merges_what_only_differs_in_sizes_or_names():
    """
    contract: What it does not depend on stays out: sizes, node names, the values of constants with more than one element
    contract: Return ``hashlib.sha256(text).hexdigest()[:16]`` of a text
    """
    a = key(sub, [(2, 3), (2, 3)], ["flat", "flat"])
    b = key(sub, [(7, 9), (7, 9)], ["flat", "flat"], names=["p", "q"])
    check(
        a == b,
        "7.10",
        "sizes and names are run-time facts: one kernel serves both",
        value=len({a, b}),
    )
    big1 = minitorch.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    big2 = minitorch.tensor(np.ones((2, 3), np.float32))
    k1 = key(lambda x: x + big1, [(2, 3)])
    k2 = key(lambda x: x + big2, [(2, 3)])
    check(
        k1 == k2,
        "7.10",
        "a many-element constant is passed in: its values are not code",
        value=len({a, b, k1, k2}),  # two kernels: sub and x + a constant
    )


@graded("7.10", points=2)
def test_separates_what_changes_the_code():
    """
    contract: A hash naming the kernel of ``graph``: equal exactly when the generated code is.
    contract: the positions (not the names) of its inputs in ``graph.nodes``
    contract: a size-1 constant's value (it is inlined)
    """
    base = key(sub, [(2, 3), (2, 3)], ["flat", "flat"])
    others = {
        "the operand order": key(lambda x, y: (y - x).relu() * 2.0, [(2, 3), (2, 3)], ["flat"] * 2),
        "an op": key(lambda x, y: (x + y).relu() * 2.0, [(2, 3), (2, 3)], ["flat"] * 2),
        "the dtype": key(sub, [(2, 3), (2, 3)], ["flat"] * 2, dtype=F64),
        "the rank": key(sub, [(1, 2, 3), (1, 2, 3)], ["flat"] * 2),
        "a layout": key(sub, [(2, 3), (2, 3)], ["flat", "strided"]),
        "an inlined constant": key(
            lambda x, y: (x - y).relu() * 3.0, [(2, 3), (2, 3)], ["flat"] * 2
        ),
        # float32's next value after 2.0: the literal differs in its 8th digit
        "an inlined constant one float32 step away": key(
            lambda x, y: (x - y).relu() * float(np.nextafter(np.float32(2), np.float32(3))),
            [(2, 3), (2, 3)],
            ["flat"] * 2,
        ),
        "the output": key(
            lambda x, y: ((x - y).relu() * 2.0, x - y)[1], [(2, 3), (2, 3)], ["flat"] * 2
        ),
    }
    for what, k in others.items():
        check(k != base, "7.10", f"{what} changes the generated code, so the key", key=k)
    s0 = key(lambda x: x.sum(axis=0), [(2, 3)], ["reduce"])
    s1 = key(lambda x: x.sum(axis=1), [(2, 3)], ["reduce"])
    s2 = key(lambda x: x.sum(axis=1, keepdims=True), [(2, 3)], ["reduce"])
    distinct = len({s0, s1, s2})
    check(distinct == 3, "7.10", "attributes (axis, keepdims) change the code", value=distinct)
