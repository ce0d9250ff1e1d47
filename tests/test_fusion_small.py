"""Small fused groups bound to their buffers run as generated numpy calls (``fusion/small.py``),
with eager's bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch as mt
from autograder.tests.ch5.programs import programs, run_program
from minitorch.core.registry import dispatch
from minitorch.core.tensor import no_grad
from minitorch.fusion import small
from minitorch.passes import CompileOptions

ARENA = CompileOptions(fuse=True, memory=True, keep=True)


pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py


BOUND = []


@pytest.fixture
def counted(monkeypatch):
    """Every small group the executor bound, as its generated source."""
    real = small.small_binder

    def binder(node):
        bind = real(node)
        if bind is None:
            return None

        def counting(dest, fixed):
            run = bind(dest, fixed)
            if run is not None:
                BOUND.append(run.source)
            return run

        return counting

    monkeypatch.setattr(small, "small_binder", binder)
    BOUND.clear()
    yield BOUND


def _softmax_of(outs):
    # an op no group holds reads each value: the groups' values live in the arena
    return [dispatch("softmax", o.float(), axis=-1) for o in outs]


@settings(max_examples=60, derandomize=True, deadline=None)
@given(programs(max_len=10), st.booleans())
def test_random_small_groups_bound_to_the_arena_equal_eager(case, inside):
    shape, arrays, steps = case
    xs = [mt.tensor(a) for a in arrays]

    def f(*t):  # the groups' values in the arena, or outputs (a new array per call)
        outs = run_program(steps, *t)
        return _softmax_of(outs) if inside else outs

    compiled = mt.jit(f).trace(*xs).compile(options=ARENA)
    ys = [mt.tensor(a * 0.5 + 1.0) for a in arrays]
    first = compiled(*xs)
    for _ in range(2):  # later calls run the same bound functions again
        for a, b in zip(compiled(*ys), f(*ys)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(first, f(*xs)):  # an output is the caller's: later calls leave it alone
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_the_random_programs_do_reach_the_small_road(counted):
    @settings(max_examples=40, derandomize=True, deadline=None)
    @given(programs(max_len=10))
    def run(case):
        shape, arrays, steps = case
        xs = [mt.tensor(a) for a in arrays]
        mt.jit(lambda *t: _softmax_of(run_program(steps, *t))).trace(*xs).compile(options=ARENA)(
            *xs
        )

    run()
    assert len(BOUND) > 20, len(BOUND)
    text = "\n".join(BOUND)
    assert all(f"# {name}" in text for name in ("add", "multiply", "where", "tanh")), text


def test_a_decode_steps_gelu_runs_as_numpy_calls_with_eagers_bits(counted):
    from minitorch.transformer.model import TinyGPT, decode_step, empty_cache

    model = TinyGPT(12, context=8, width=16, heads=2, layers=1, seed=0)
    cache = empty_cache(model)
    token, pos = mt.tensor(np.full((1, 1, 1), 3, np.int64)), mt.tensor(np.ones((1, 1, 1), np.int64))
    f = mt.compile(lambda t, p, *c: decode_step(model, t, p, *c), mode="reduce-overhead")
    with no_grad():
        for _ in range(3):
            got = f(token, pos, *cache)
        want = decode_step(model, token, pos, *cache)
    for a, b in zip(got, want):
        assert np.array_equal(a.numpy(), b.numpy())
    gelu = [s for s in BOUND if "# tanh" in s]
    assert gelu and "# rows_matmul" in gelu[0], BOUND  # matmul, bias and GELU: one function


def test_a_group_above_the_limit_keeps_its_kernel(counted):
    n = small.SMALL_MAX + 1
    x = mt.tensor(np.linspace(-1, 1, n, dtype=np.float32))

    def f(x):
        return dispatch("softmax", (x * 2.0 + 1.0).tanh(), axis=-1)

    compiled = mt.jit(f).trace(x).compile(options=ARENA)
    assert np.array_equal(compiled(x).numpy(), f(x).numpy())
    assert BOUND == []
    y = mt.tensor(np.linspace(-1, 1, n - 1, dtype=np.float32))
    mt.jit(f).trace(y).compile(options=ARENA)(y)
    assert len(BOUND) == 1  # the same group at the limit: bound
