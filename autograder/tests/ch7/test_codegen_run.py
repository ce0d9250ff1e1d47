"""Graded tests, chapter 7: fused groups generated, compiled with Numba and run, equal eager.

Few examples, each a new kernel structure (a Numba compile each): random
elementwise programs over strided, flipped, offset and stride-0 inputs, a
zero-size output, reductions with prologue and epilogue, an anchor's epilogue.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.harness import assert_close, check, graded
from minitorch import Tensor
from minitorch.core.registry import Spec
from minitorch.fusion import make_kernel
from minitorch.tensor.data import TensorData
from minitorch.tracing.tracer import trace_function

from .codegen_cases import F32, expanded, fused_node, make_input, programs, traced


def _generated(kernel, exercise):
    """The runtime generated this group's kernel (it did not fall back to numpy)."""
    reason = getattr(kernel, "reason", None)
    check(reason is None, exercise, "the group was not generated", why=reason)
    return kernel


def _eager(fn, vals):
    with np.errstate(all="ignore"):
        ts = [
            Tensor._make(TensorData.from_numpy(np.array(v, copy=True, order="C")), "cpu")
            for v in vals
        ]
        return fn(*ts).numpy()


@graded("7.8", points=2)
@settings(max_examples=6)
@given(
    programs(min_len=3), st.sampled_from(["permuted", "flipped", "mixed", "expanded"]), st.data()
)
def test_random_programs_compiled_equal_eager(prog, kind, data):
    steps, in_shapes = prog
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    const = (
        rng.standard_normal(in_shapes[0][-1:]).astype(np.float32)
        if data.draw(st.booleans())
        else None
    )
    sub, fn = traced(steps, in_shapes, const)
    node = fused_node(sub, "elementwise")
    kernel = _generated(make_kernel(node, "numpy"), "7.8")
    check(getattr(kernel, "writes_into", False), "7.8", "the fused kernel advertises dest=")
    vals, datas = [], []
    for k, shape in enumerate(in_shapes):
        if kind == "expanded" and len(shape) > 1 and k == 0:
            row = rng.standard_normal(shape[1:]).astype(np.float32)
            datas.append(expanded(row, shape))
            vals.append(np.broadcast_to(row, shape))
        else:
            v = rng.standard_normal(shape).astype(np.float32)
            vals.append(v)
            datas.append(make_input(rng, v, kind if kind != "expanded" else "offset"))
    with np.errstate(all="ignore"):
        got = kernel(*datas, out=node.spec).to_numpy()
    assert_close(got, _eager(fn, vals), "7.8", rtol=1e-4, atol=1e-5, steps=steps, shapes=in_shapes)
    dest = np.full(node.spec.size, np.nan, np.float32)
    with np.errstate(all="ignore"):
        r = kernel(*datas, out=node.spec, dest=dest)
    check(r.storage is dest, "7.8", "with dest= the result lives in dest")
    assert_close(dest.reshape(node.spec.shape), got, "7.8")


@graded("7.8", points=1)
def test_zero_size_and_zero_d():
    """
    contract: Any ``ndim`` (0 included) and an empty output must work.
    """
    f = lambda x, y: (x * y - y).relu()  # noqa: E731
    for shape in [(0, 3), (2, 0), ()]:
        sub = trace_function(f, [Spec(shape, F32), Spec(shape, F32)])
        node = fused_node(sub, "elementwise")
        vals = [np.ones(shape, np.float32) * 2, np.ones(shape, np.float32)]
        kernel = _generated(make_kernel(node), "7.8")
        got = kernel(*map(TensorData.from_numpy, vals), out=node.spec).to_numpy()
        assert_close(got, _eager(f, vals), "7.8", shape=shape)


def _reduce_prog(kind):
    if kind == "softmax_denominator":
        return lambda x, m: ((x - m) * 0.5).relu().sum(axis=1, keepdims=True) + 1.0
    if kind == "mean_sq":
        return lambda x, m: (x * x).mean(axis=(0, 2)) - m.reshape(-1)[:1] * 0.0
    if kind == "max_abs":
        return lambda x, m: (x.abs() * 2.0).max(axis=0) * 0.5
    return lambda x, m: (x - m).sum()


@graded("7.9", points=2)
@settings(max_examples=4)
@given(
    st.sampled_from(["softmax_denominator", "max_abs", "all"]),
    st.sampled_from(["contiguous", "mixed"]),
    st.data(),
)
def test_reductions_with_prologue_and_epilogue(kind, layout, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shape = (3, 4, 2)
    f = _reduce_prog(kind)
    x = rng.standard_normal(shape).astype(np.float32)
    m = rng.standard_normal((3, 1, 2)).astype(np.float32)
    sub = trace_function(f, [Spec(shape, F32), Spec(m.shape, F32)])
    node = fused_node(sub, "reduce")
    got = _generated(make_kernel(node), "7.9")(
        make_input(rng, x, layout), make_input(rng, m, "flipped"), out=node.spec
    )
    assert_close(got.to_numpy(), _eager(f, [x, m]), "7.9", rtol=1e-4, atol=1e-4, kind=kind)


@graded("7.8", points=1)
def test_matmul_epilogue_in_place():
    rng = np.random.default_rng(1)
    f = lambda a, w, b: (a @ w + b).relu()  # noqa: E731
    vals = [rng.standard_normal(s).astype(np.float32) for s in [(5, 4), (4, 6), (6,)]]
    sub = trace_function(f, [Spec(v.shape, F32) for v in vals])
    node = fused_node(sub, "epilogue")
    kernel = _generated(make_kernel(node), "7.8")
    got = kernel(*map(TensorData.from_numpy, vals), out=node.spec).to_numpy()
    assert_close(got, _eager(f, vals), "7.8", rtol=1e-4, atol=1e-5)
