"""Shared helpers for the chapter 7 code-generation tests: random fused groups, strided inputs,
and running generated source as plain Python (no Numba compile: fast and exact)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

import minitorch
from minitorch.core.registry import Spec, get_op
from minitorch.fast.scalars import scalar_for
from minitorch.tensor.data import TensorData
from minitorch.tracing.graph import Graph
from minitorch.tracing.tracer import trace_function

F32 = np.dtype("float32")

UNARY = ["neg", "abs", "relu", "sqrt_abs", "scale"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "where_gt", "rsub"]


def apply(op, a, b):
    """One step of a random program, written with Tensor ops (traced or eager alike)."""
    if op == "neg":
        return -a
    if op == "abs":
        return a.abs()
    if op == "relu":
        return a.relu()
    if op == "sqrt_abs":
        return a.abs().sqrt()
    if op == "scale":
        return a * 0.5 - 1.25
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / (b.abs() + 0.5)
    if op == "maximum":
        return minitorch.dispatch("maximum", a, b)
    if op == "minimum":
        return minitorch.dispatch("minimum", a, b)
    if op == "where_gt":
        return minitorch.dispatch("where", a > b, a, b - 1.0)
    if op == "rsub":
        return 2.0 - a / 3.0
    raise ValueError(op)


def run_steps(steps, xs):
    vals = list(xs)
    for op, i, j in steps:
        vals.append(apply(op, vals[i % len(vals)], vals[j % len(vals)]))
    return vals[-1]


@st.composite
def shapes(draw, max_ndim=3, min_side=1):
    """An output shape and 1-3 input shapes that broadcast to it (some size-1 and missing axes)."""
    ndim = draw(st.integers(1, max_ndim))
    out = tuple(draw(st.lists(st.integers(min_side, 4), min_size=ndim, max_size=ndim)))
    k = draw(st.integers(1, 3))
    ins = [out]
    for _ in range(k - 1):
        drop = draw(st.integers(0, ndim))
        sh = list(out[drop:])
        mask = draw(st.lists(st.booleans(), min_size=len(sh), max_size=len(sh)))
        ins.append(tuple(1 if m else n for n, m in zip(sh, mask)))
    order = draw(st.permutations(range(k)))
    return out, [ins[i] for i in order]


@st.composite
def programs(draw, min_len=2, max_len=7):
    """(steps, input shapes): a random elementwise/broadcast program."""
    out, ins = draw(shapes())
    n = draw(st.integers(min_len, max_len))
    steps = []
    for _ in range(n):
        op = draw(st.sampled_from(UNARY + BINARY))
        steps.append((op, draw(st.integers(0, 20)), draw(st.integers(0, 20))))
    return steps, ins


def traced(steps, in_shapes, const=None):
    """The program traced on float32 inputs; ``const`` (an array) is added to the result."""
    specs = [Spec(tuple(s), F32) for s in in_shapes]
    c = minitorch.tensor(const) if const is not None else None

    def f(*xs):
        y = run_steps(steps, xs)
        return y + c if c is not None else y

    return trace_function(f, specs), f


def fused_node(sub: Graph, kind: str, name: str = "fused_0"):
    """A fused node holding ``sub`` (the format part A's grouping produces)."""
    g = Graph("outer")
    ins = [g.add_input(i.spec) for i in sub.inputs]
    return g.add_node("fused", ins, {"graph": sub, "kind": kind, "name": name}, sub.outputs[0].spec)


def make_input(rng, values: np.ndarray, kind: str) -> TensorData:
    """``values`` stored as ``kind``: contiguous, permuted axes, flipped axes, offset, or both."""
    nd = values.ndim
    perm = list(range(nd))
    flips = [False] * nd
    pad = 0
    if kind in ("permuted", "mixed") and nd > 1:
        perm = list(rng.permutation(nd))
    if kind in ("flipped", "mixed"):
        flips = [bool(b) for b in rng.integers(0, 2, nd)]
        if nd and not any(flips):
            flips[-1] = True
    if kind in ("offset", "mixed", "flipped"):
        pad = 3
    flipped = values[tuple(slice(None, None, -1) if f else slice(None) for f in flips)]
    phys = np.ascontiguousarray(np.transpose(flipped, perm))
    pst = [s // values.itemsize for s in phys.strides] if phys.size else [1] * nd
    strides, offset = [0] * nd, pad
    for j, a in enumerate(perm):
        strides[a] = pst[j]
    for a in range(nd):
        if flips[a] and values.shape[a] > 0:
            offset += (values.shape[a] - 1) * strides[a]
            strides[a] = -strides[a]
    storage = np.concatenate([np.full(pad, np.nan, values.dtype), phys.reshape(-1)])
    d = TensorData(storage, values.shape, tuple(strides), offset)
    if values.size:
        assert np.array_equal(d.to_numpy(), values, equal_nan=True), kind
    return d


def expanded(values_row: np.ndarray, shape: tuple) -> TensorData:
    """A stride-0 view: ``values_row`` (the last axes) repeated along the leading axes."""
    row = np.ascontiguousarray(values_row).reshape(np.shape(values_row))  # keeps a 0-d row 0-d
    lead = len(shape) - row.ndim
    st_row = [s // row.itemsize for s in row.strides] if row.size else [1] * row.ndim
    return TensorData(row.reshape(-1), tuple(shape), tuple([0] * lead + st_row), 0)


def python_function(source: str, name: str):
    """Define generated ``source`` as plain Python (``prange`` is ``range``): exact and fast."""
    ns = {"np": np, "math": math, "prange": range}
    for op in ("exp", "log", "tanh", "sigmoid", "pow", "sqrt", "div", "recip"):
        fn = scalar_for(get_op(op))
        if fn is not None:
            ns[f"_f_{op}"] = fn
    with np.errstate(all="ignore"):
        exec(compile(source, f"<generated {name}>", "exec"), ns)
    return ns[name]
