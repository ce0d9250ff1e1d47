"""The max-autotune stage "recompute" (``fusion/recompute.py``): a matmul written in the
layout of the permute + reshape that reads it, later reshapes of a value made views of
its first, and a cheap op moved into the elementwise groups that read it. Each keeps
eager's bits; each refuses what it cannot do without a copy or a different GEMM."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import minitorch as mt
from minitorch.fusion import recompute
from minitorch.passes import CompileOptions

jit_module = importlib.import_module("minitorch.tracing.jit")

pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py

AUTOTUNE = CompileOptions(fuse=True, memory=True, keep=True, mode="max-autotune")
B, H, T, D = 3, 4, 5, 6


def _values(rng, shape, dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 5)] = [-0.0, np.nan, np.inf, -np.inf, 1e-42]
    return x


def _jit(fn):
    jit_module._STORES.clear()  # a jit of its own (traces are shared per code object)
    return mt.jit(lambda *a: fn(*a), options=AUTOTUNE)


def _graph(jf):
    return [t.compiled.graph for t in jf.cache.values()][-1]


def _kinds(jf) -> list:
    return [n.attrs["kind"] for n in _graph(jf).nodes if n.op == "fused"]


def _same(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def merge_heads(p, v):
    return (p @ v).permute(0, 2, 1, 3).reshape(B, T, H * D)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_matmul_writes_merged_heads_in_place_with_eagers_bits(dtype):
    rng = np.random.default_rng(0)
    p, v = (
        mt.tensor(_values(rng, (B, H, T, T), dtype)),
        mt.tensor(_values(rng, (B, H, T, D), dtype)),
    )
    jf = _jit(merge_heads)
    for _ in range(2):
        got = jf(p, v).numpy()
    assert _same(got, merge_heads(p, v).numpy())
    assert "layout" in _kinds(jf)
    ops = [n.op for n in _graph(jf).nodes]
    assert "matmul" not in ops and "permute" not in ops  # both inside the layout node


@pytest.mark.parametrize(
    "fn",
    [
        lambda p, v: (p @ v).permute(0, 1, 3, 2).reshape(B, H, D * T),  # the last axis moves
        lambda p, v: ((p @ v).permute(0, 2, 1, 3).reshape(B, T, H * D), p @ v),  # a second reader
    ],
)
def test_no_layout_where_blas_cannot_write_it_or_the_product_is_read_elsewhere(fn):
    rng = np.random.default_rng(1)
    p, v = mt.tensor(_values(rng, (B, H, T, T))), mt.tensor(_values(rng, (B, H, T, D)))
    jf = _jit(fn)
    got, want = jf(p, v), fn(p, v)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert all(_same(g.numpy(), w.numpy()) for g, w in zip(got, want))
    assert "layout" not in _kinds(jf)


def test_a_later_reshape_reads_the_first_one():
    def two(x, w):  # as attention's merged heads: the projection's input, then its gradient's
        m = x.permute(0, 2, 1)
        return m.reshape(B, T * H), m.reshape(B * T, H) @ w

    rng = np.random.default_rng(2)
    x, w = mt.tensor(_values(rng, (B, H, T))), mt.tensor(rng.standard_normal((H, 2)))
    jf = _jit(two)
    got = jf(x, w)
    assert all(_same(g.numpy(), w.numpy()) for g, w in zip(got, two(x, w)))
    g = _graph(jf)
    perms = [n for n in g.nodes if n.op == "permute"]
    assert len(perms) == 1 and [u.op for u in perms[0].users] == ["reshape"]


def test_share_reshapes_orders_by_the_graph():
    """The reshape that comes first in the graph is the one the others read."""

    def two(x, w):
        m = x.permute(1, 0)
        return m.reshape(12), m.reshape(6, 2) @ w

    jf = _jit(two)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    jf(mt.tensor(x), mt.tensor(np.ones((2, 2), np.float32)))
    g = _graph(jf)
    at = {n: k for k, n in enumerate(g.nodes)}
    for n in g.nodes:
        for i in n.inputs:
            assert at[i] < at[n], f"%{n.name} reads %{i.name} before it is computed"


def test_a_training_step_recomputes_the_bias_add_instead_of_storing_it():
    """TinyGPT's MLP ``x @ w1 + b1``: the GELU's gradient group recomputes it (no standalone
    add of a matmul and a bias is left), the gradient reads the forward's ``tanh`` (stage
    "share": one ``tanh`` a layer, no ``gelu`` left) and the step keeps eager's bits."""
    from minitorch.nn.optim import Adam
    from minitorch.transformer.data import make_batch
    from minitorch.transformer.measure import make_step
    from minitorch.transformer.model import TinyGPT

    rng = np.random.default_rng(0)
    batch = make_batch([rng.integers(0, 20, 17) for _ in range(4)], 16)
    m1, m2 = (TinyGPT(20, context=16, width=16, heads=2, layers=1, seed=0) for _ in range(2))
    eager = make_step(m1, Adam(m1, lr=1e-2))
    comp = mt.compile(make_step(m2, Adam(m2, lr=1e-2)), mode="max-autotune")
    for _ in range(3):
        assert float(eager(*batch).item()) == float(comp(*batch).item())
    assert all(_same(a.numpy(), b.numpy()) for a, b in zip(m1.parameters(), m2.parameters()))
    g = comp.last.compiled.graph
    stored = [
        n for n in g.nodes if n.op == "add" and [i.op for i in n.inputs] == ["matmul", "input"]
    ]
    assert stored == [], [n.name for n in stored]
    assert "layout" in [n.attrs["kind"] for n in g.nodes if n.op == "fused"]
    ops = [m.op for n in g.nodes for m in (n.attrs["graph"].ops if n.op == "fused" else [n])]
    assert ops.count("tanh") == 1 and "gelu" not in ops


def test_recompute_cheap_leaves_an_op_that_is_an_output():
    from minitorch.tracing.graph import Graph

    g = Graph("g")
    x = g.add_input(mt.tensor(np.zeros(4, np.float32)).spec, "x")
    add = g.add_node("add", [x, x], {}, x.spec)
    g.set_outputs([add])
    assert recompute.recompute_cheap(g) == [] and add in g.nodes
