"""Random straight-line programs over the op registry, for traced-equals-eager tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import minitorch
from minitorch.core import ops

# The registry's built-in elementwise and broadcast ops (comparisons feed where)
UNARY = sorted(ops.UNARY) + ["exp_tanh"]
BINARY = sorted(n for n, (_, _, rule) in ops.BINARY.items() if rule != "bool")
BINARY += sorted(f"where_{n}" for n, (_, _, rule) in ops.BINARY.items() if rule == "bool")
REDUCE = ["sum", "mean", "max"]


@st.composite
def programs(draw, max_len: int = 10):
    """(shape, inputs as numpy arrays, steps); each step reads earlier values by index."""
    shape = draw(st.tuples(st.integers(1, 3), st.integers(1, 4)))
    n_in = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(n_in)]
    steps, count = [], n_in
    for _ in range(draw(st.integers(1, max_len))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "view"]))
        i = draw(st.integers(0, count - 1))
        j = draw(st.integers(0, count - 1))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(UNARY)), i, j))
        elif kind == "binary":
            steps.append(("binary", draw(st.sampled_from(BINARY)), i, j))
        elif kind == "reduce":
            axis = draw(st.sampled_from([0, 1]))
            steps.append(("reduce", draw(st.sampled_from(REDUCE)), i, axis))
        else:
            steps.append(("view", draw(st.sampled_from(["transpose2", "reshape", "scale"])), i, j))
        count += 1
    return shape, inputs, steps


def run_program(steps, *xs):
    """Run ``steps`` with Tensor methods: eager on Tensors, recorded on Proxies."""
    vals = list(xs)
    for kind, name, i, j in steps:
        a = vals[i]
        if kind == "unary":
            out = a.tanh().exp() if name == "exp_tanh" else minitorch.dispatch(name, a)
        elif kind == "binary":
            b = vals[j]
            if name.startswith("where_"):
                out = minitorch.where(minitorch.dispatch(name[6:], a, b), a, b * 0.5)
            else:
                out = minitorch.dispatch(name, a, b)
        elif kind == "reduce":
            # keepdims keeps every value broadcastable against the program's shape
            out = getattr(a, name)(axis=j, keepdims=True)
        elif name == "transpose2":
            out = a.T.T
        elif name == "reshape":
            out = a.reshape(-1).reshape(a.shape)
        else:
            out = a * 2.0 - 1
        vals.append(out)
    return vals[-1], vals[len(xs) - 1] + vals[-1]
