"""Slice assembly (``fusion/slices.py``, max-autotune): a sum of ``pad_slice``s with disjoint
windows, and the permute and reshape after it, as one write per slice; eager's bits."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import minitorch as mt
from minitorch.autograd import pad_slice
from minitorch.fusion import slices
from minitorch.passes import CompileOptions

jit_module = importlib.import_module("minitorch.tracing.jit")

pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py

AUTOTUNE = CompileOptions(fuse=True, memory=True, keep=True, mode="max-autotune")
S = (3, 6, 5, 4)  # (batch, 3 * heads, time, dim), as a transformer's q/k/v gradient


def _values(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 6)] = [-0.0, -0.0, np.nan, np.inf, -np.inf, 1e-42]
    return x


def _jit(fn):
    jit_module._STORES.clear()  # a jit of its own (traces are shared per code object)
    return mt.jit(lambda *a: fn(*a), options=AUTOTUNE)


def _kinds(jf) -> list:
    graphs = [t.compiled.graph for t in jf.cache.values()]
    return [n.attrs["kind"] for g in graphs for n in g.nodes if n.op == "fused"]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _qkv(a, b, c):  # three windows covering axis 1, summed, then back to (B * T, 3 * H * D)
    s = pad_slice(a, (slice(None), slice(0, 2)), S) + pad_slice(b, (slice(None), slice(2, 4)), S)
    s = s + pad_slice(c, (slice(None), slice(4, None)), S)
    return s.permute(0, 2, 1, 3).reshape(15, 24)


def _gap(a, b, c):  # two windows with a gap, the sum kept as it is, tree the other way
    return pad_slice(a, (slice(0, 1),), S) + (
        pad_slice(b, (slice(2, 3), slice(1, 5)), S) + pad_slice(c, (slice(1, 2),), S)
    )


def _overlap(a, b, c):  # windows that overlap: a real sum, left to chapter 7
    return pad_slice(a, (slice(None), slice(0, 2)), S) + pad_slice(b, (slice(None), slice(1, 3)), S)


CASES = [
    (_qkv, [(3, 2, 5, 4)] * 3, True),
    (_gap, [(1, 6, 5, 4), (1, 4, 5, 4), (1, 6, 5, 4)], True),
    (_overlap, [(3, 2, 5, 4)] * 2 + [(1,)], False),
]


@pytest.mark.parametrize("fn,shapes,assembled", CASES, ids=[c[0].__name__ for c in CASES])
def test_slices_are_written_into_one_buffer_with_eagers_bits(fn, shapes, assembled):
    rng = np.random.default_rng(len(shapes[0]))
    args = [mt.tensor(_values(rng, s)) for s in shapes]
    want = fn(*args).numpy()
    jf = _jit(fn)
    for _ in range(2):  # the second call runs the plan bound to its arena
        got = jf(*args).numpy()
    assert _same(got, want)
    assert ("slices" in _kinds(jf)) == assembled


def test_a_transposed_slice_is_read_through_its_strides():
    rng = np.random.default_rng(5)
    a, c = (mt.tensor(_values(rng, (3, 2, 5, 4))) for _ in range(2))
    b = mt.tensor(_values(rng, (3, 2, 4, 5))).permute(0, 1, 3, 2)  # as k's gradient arrives
    jf = _jit(_qkv)
    got = [jf(a, b, c) for _ in range(2)][-1]
    assert _same(got.numpy(), _qkv(a, b, c).numpy())


def test_put_adds_zero_in_the_windows_memory_order():
    g = np.array([[-0.0, 1.5], [np.nan, -2.0]], np.float32)
    out = np.full((2, 4), 7.0, np.float32)
    slices.put(out[:, 1:3], g.T.copy().T, np.float32(0))
    assert np.array_equal(out[:, 1:3], g + np.float32(0), equal_nan=True)
    assert np.signbit(out[0, 1]) == np.False_ and (out[:, [0, 3]] == 7.0).all()


def test_a_compiled_transformer_step_assembles_q_k_and_v_with_eagers_bits():
    from minitorch.nn.optim import Adam
    from minitorch.transformer.data import make_batch
    from minitorch.transformer.measure import make_step
    from minitorch.transformer.model import TinyGPT

    rng = np.random.default_rng(0)
    # big enough for row groups (smaller rows are chapter 7's reductions, summed in float64)
    batch = make_batch([rng.integers(0, 12, 9) for _ in range(16)], 8)
    params = []
    for compiled in (False, True):
        model = TinyGPT(12, context=8, width=32, heads=2, layers=1, seed=0)
        step = make_step(model, Adam(model, lr=1e-2))
        f = mt.compile(step, mode="max-autotune") if compiled else step
        for _ in range(3):
            f(*batch)
        params.append([p.numpy() for p in model.parameters()])
    assert all(_same(a, b) for a, b in zip(*params))
    unit = mt.explain(mt.compile(make_step(model, Adam(model)), mode="max-autotune"))(*batch)
    assert "Slice assembly (1)" in str(unit)
