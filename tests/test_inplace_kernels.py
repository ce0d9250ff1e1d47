"""A fused elementwise loop that overwrites one of its inputs (``fusion/inplace.py``): it
reads that input from the output array, so that LLVM vectorises it, with the bits of the
loop it replaces."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numba import njit

import minitorch as mt
from minitorch.fusion import inplace
from minitorch.nn.optim import Adam
from minitorch.tensor.data import TensorData

pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py

LINES = ["v0 = np.float32((a0 * a1))", "v1 = np.float32((a2 / v0))", "v2 = np.float32((a0 - v1))"]


def _compile(layouts, which="serial"):
    env = {"np": np, "prange": range}
    exec(inplace.source(layouts, LINES, "v2", which), env)  # noqa: S102 - our generated source
    return njit(error_model="numpy")(env[which])


def _args(out, *inputs):
    args = [out, np.array(out.shape, np.int64)]
    for storage, offset in inputs:
        args += [storage, offset, np.ones(1, np.int64)]
    return args


def test_the_input_that_is_the_output_is_read_from_it_with_the_same_bits():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1003).astype(np.float32)
    x[:4] = [np.nan, np.inf, -0.0, 1e-42]
    want = x - y[3:] / (x * np.float32(0.5))
    out = x.copy()
    fn = _compile(("out", "scalar", "flat"))
    fn(*_args(out, (out, 0), (np.array([0.5], np.float32), 0), (y, 3)))
    assert np.array_equal(out, want, equal_nan=True)
    llvm = "".join(fn.inspect_llvm().values())
    assert re.search(r"<\d+ x float>", llvm), "the in-place loop is not vectorised"


def test_only_a_flat_input_starting_where_the_output_starts_is_the_output():
    buf = np.zeros(16, np.float32)
    same = TensorData(buf, (4, 4), (4, 1), 0)
    later = TensorData(buf, (2, 4), (4, 1), 8)  # the same buffer, another place
    other = TensorData(np.zeros(16, np.float32), (4, 4), (4, 1), 0)
    flat = ("flat", "flat", "scalar")
    assert inplace.mark(flat, [same, other, other], buf) == ("out", "flat", "scalar")
    assert inplace.mark(flat, [later, other, other], buf[8:]) == ("out", "flat", "scalar")
    assert inplace.mark(flat, [later, other, other], buf) == flat
    assert inplace.mark(flat, [same, other, other], None) == flat
    # a strided input: chapter 7's loop nest, unchanged
    strided = ("flat", "strided", "scalar")
    assert inplace.mark(strided, [same, other, other], buf) == strided


def test_a_compiled_adam_step_updates_in_place_with_eagers_bits(monkeypatch):
    made = []
    source = inplace.source
    monkeypatch.setattr(inplace, "source", lambda *a: made.append(a[0]) or source(*a))

    def run(compiled):
        model = mt.nn.Sequential(mt.nn.Linear(64, 128), mt.nn.ReLU(), mt.nn.Linear(128, 4))
        for k, p in enumerate(model.parameters()):  # the same start for both runs
            p.assign_(mt.tensor(np.random.default_rng(k).standard_normal(p.shape), dtype=p.dtype))
        opt = Adam(model, lr=1e-2)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        f = mt.compile(step, mode="max-autotune") if compiled else step
        rng = np.random.default_rng(1)
        for _ in range(4):
            x = mt.tensor(rng.standard_normal((16, 64)).astype(np.float32))
            y = mt.tensor(rng.standard_normal((16, 4)).astype(np.float32))
            f(x, y)
        return [p.numpy() for p in model.parameters()]

    want = run(False)
    got = run(True)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert any("out" in layouts for layouts in made), "no update ran in place"
