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


def test_an_exercise_jitted_directly_is_guarded_on_its_implementation_not_its_cache():
    """The dispatcher's cache fills as the traced function first calls exercises: that is
    no reason to retrace; switching the learner's code for the reference is."""
    import minitorch
    from minitorch import exercises
    from minitorch.transformer import lm_loss

    def args(b, t):
        vals = (np.zeros((b, 1, t, 7), np.float32), np.zeros((b, 1, t, 1), np.int64),
                np.ones((b, 1, t, 1), np.float32))  # fmt: skip
        return [minitorch.mark_dynamic(minitorch.mark_dynamic(minitorch.tensor(v), 0), 2)
                for v in vals]  # fmt: skip

    mode, focus = exercises.get_mode()
    minitorch.set_mode("reference")  # empties the cache
    try:
        jf = minitorch.jit(lm_loss)
        jf(*args(2, 3))
        jf(*args(3, 5))
        assert jf.trace_count == 1, jf.recompiles
    finally:
        minitorch.set_mode(mode, focus)


def test_positional_arguments_keep_their_names_and_arity_errors():
    """A keyword-free call binds in order without ``Signature.bind``: the same names
    (``rest[1]``), the same TypeError for a wrong count, keywords still bound by name."""

    def f(x, *rest):
        return x + rest[-1]

    jf = minitorch.jit(f)
    jf(minitorch.ones(2), minitorch.ones(2), minitorch.ones(2))
    jf(minitorch.ones(2), minitorch.ones(2), minitorch.ones(3, 2))
    assert jf.recompiles[-1] == "rest[1].shape changed from (2,) to (3, 2)"

    g = minitorch.jit(lambda x, y: x * y)
    with pytest.raises(TypeError):
        g(minitorch.ones(2))
    with pytest.raises(TypeError):
        g(minitorch.ones(2), minitorch.ones(2), minitorch.ones(2))
    np.testing.assert_array_equal(g(minitorch.ones(2), y=minitorch.full((2,), 3.0)).numpy(), [3, 3])


def test_a_parameter_given_new_data_of_another_shape_is_guarded():
    class Holder:
        pass

    h = Holder()
    h.w = minitorch.nn.Parameter(minitorch.ones(3, 2))
    jf = minitorch.jit(lambda x: x @ h.w)
    jf(minitorch.ones(4, 3))
    jf(minitorch.ones(4, 3))  # the guard has seen the weight's data
    h.w = minitorch.nn.Parameter(minitorch.ones(5, 2))  # another shape
    assert jf(minitorch.ones(4, 5)).shape == (4, 2)
    assert jf.trace_count == 2
