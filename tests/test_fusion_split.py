"""Fused groups holding exp/log/tanh/sigmoid/pow (``fusion/split.py``): numpy runs those ops,
generated loops run the rest, and the result is eager's bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch as mt
from minitorch.fusion import runtime, split
from minitorch.fusion.split import SplitKernel
from minitorch.passes import CompileOptions

FUSE = CompileOptions(fuse=True)
C = math.sqrt(2 / math.pi)


@pytest.fixture(autouse=True)
def reference(tmp_path, monkeypatch):
    monkeypatch.setenv("MINITORCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(split, "SPLIT_MIN", 0)  # small groups: the tests stay fast
    mode = mt.get_mode()
    mt.exercises._set("reference", None)
    yield
    mt.exercises._set(*mode) if isinstance(mode, tuple) else mt.exercises._set(mode, None)


def _gelu_backward(x, w, b):  # the shape of GELU's backward after its matmul
    t = ((x + x * x * x * 0.044715) * C).tanh()
    return (x @ w) * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * ((x * x * 0.134145 + 1.0) * C))


PROGRAMS = {  # name: (program, how many passes it runs in)
    "gelu backward (epilogue)": (_gelu_backward, 3),
    "exp then tanh": (lambda x, w, b: ((x * 0.5 + 1.0).exp() * 0.25 - 0.5).tanh() * x + b, 5),
    "three slow ops": (
        lambda x, w, b: (
            ((x * 2.0 - 1.0).tanh() * b + 0.5).exp() * x - ((x - 1.0) * 0.5).sigmoid() * 3.0
        ),
        7,
    ),
    "slow op last": (lambda x, w, b: (x * b + 1.0).tanh(), 2),
    "one argument, two slow ops": (
        lambda x, w, b: (x * b + 1.0).tanh() * 2.0 + (x * b + 1.0).exp() * 0.5,
        5,
    ),
    "broadcast pow": (lambda x, w, b: (x.abs() + 1.0) ** b * x, 3),
}


def _fused(jf, *args):
    graph = jf.trace(*args).compile(options=FUSE).graph
    nodes = [n for n in graph.nodes if n.op == "fused"]
    assert len(nodes) == 1, nodes
    return nodes[0], runtime.make_kernel(nodes[0]), graph


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_groups_give_eagers_bits(name, dtype):
    f, stages = PROGRAMS[name]
    rng = np.random.default_rng(0)
    x, w, b = (mt.tensor(rng.standard_normal(s).astype(dtype)) for s in ((6, 16), (16, 16), (16,)))
    jf = mt.jit(f, options=FUSE)
    got, want = jf(x, w, b).numpy(), f(x, w, b).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    node, k, graph = _fused(jf, x, w, b)
    assert isinstance(k, SplitKernel), runtime.DECISIONS[id(node)][1]
    assert "split (cost model" in runtime.DECISIONS[id(node)][1]
    # each slow op's argument is one loop, the op one numpy call, the value one last loop
    # (fewer passes than ops: else the group runs op by op)
    assert len(k.stages) == stages, [s[0].op for s in k.stages]
    dest = np.full(node.spec.size, np.nan, node.spec.dtype)  # a place in an arena
    args = dict(zip(graph.inputs, (x, w, b)))
    datas = [(i.value if i.op == "const" else args[i])._data for i in node.inputs]
    r = k(*datas, out=node.spec, dest=dest)
    assert r.storage is dest and np.array_equal(dest.reshape(want.shape), want, equal_nan=True)


def test_a_slow_op_of_an_integer_runs_the_backends_kernel_and_casts_as_eager():
    def f(i, y):
        return (i * 3).exp() * y + 1.0

    i = mt.tensor(np.arange(-4, 8, dtype=np.int64).reshape(3, 4))
    y = mt.tensor(np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4))
    jf = mt.jit(f, options=FUSE)
    assert np.array_equal(jf(i, y).numpy(), f(i, y).numpy())
    assert isinstance(_fused(jf, i, y)[1], SplitKernel)


def test_a_slow_op_of_a_view_stays_on_numpy_and_says_why():
    def f(x):
        return x.T.tanh() * 2.0

    x = mt.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
    jf = mt.jit(f, options=FUSE)
    assert np.array_equal(jf(x).numpy(), f(x).numpy())
    node, k, _ = _fused(jf, x)
    assert not isinstance(k, SplitKernel)
    assert "not split" in runtime.DECISIONS[id(node)][1]


def test_a_split_with_no_fewer_passes_than_ops_stays_on_numpy():
    def f(x):
        return (x.exp() * 0.5).tanh() + x  # 4 ops; split: exp, a loop, tanh, a loop

    x = mt.tensor(np.linspace(-2, 2, 12, dtype=np.float32))
    jf = mt.jit(f, options=FUSE)
    assert np.array_equal(jf(x).numpy(), f(x).numpy())
    node, k, _ = _fused(jf, x)
    assert not isinstance(k, SplitKernel)
    assert "4 passes over memory, no fewer than 4 ops" in runtime.DECISIONS[id(node)][1]


def test_buffers_of_one_call_serve_the_next_and_results_are_never_shared():
    x = mt.tensor(np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16))
    w = mt.tensor(np.eye(16, dtype=np.float32))
    jf = mt.jit(lambda x, w: _gelu_backward(x, w, None), options=FUSE)
    first, second = jf(x, w), jf(x, w)
    want = _gelu_backward(x, w, None).numpy()
    assert np.array_equal(first.numpy(), want) and np.array_equal(second.numpy(), want)
    assert not np.shares_memory(first._data.storage, second._data.storage)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_written_as_its_parts_splits_with_its_numpy_kernels_bits(dtype):
    import minitorch.transformer  # noqa: F401  (registers gelu)

    def f(x, w, b):
        return mt.dispatch("gelu", x @ w + b) * 2.0

    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 16)).astype(dtype) * 4
    x[0, 0, :4] = [np.inf, -np.inf, np.nan, 0.0]
    x, w, b = (
        mt.tensor(x),
        mt.tensor(rng.standard_normal((16, 8)).astype(dtype)),
        mt.tensor(rng.standard_normal(8).astype(dtype)),
    )
    jf = mt.jit(f, options=FUSE)
    got, want = jf(x, w, b).numpy(), f(x, w, b).numpy()
    assert np.array_equal(got, want, equal_nan=True)
    node, k, _ = _fused(jf, x, w, b)
    assert isinstance(k, SplitKernel), runtime.DECISIONS[id(node)][1]
    assert "gelu" not in [n.op for n in k.sub.ops] and "tanh" in [n.op for n in k.sub.ops]


def test_gelu_of_integers_keeps_its_kernel():
    import minitorch.transformer  # noqa: F401

    def f(i):
        return mt.dispatch("gelu", i * 2) + 1.0

    i = mt.tensor(np.arange(-3, 9, dtype=np.int64).reshape(3, 4))
    jf = mt.jit(f, options=FUSE)
    assert np.array_equal(jf(i).numpy(), f(i).numpy())


def test_a_group_smaller_than_split_min_stays_on_numpy(monkeypatch):
    monkeypatch.setattr(split, "SPLIT_MIN", 97)
    rng = np.random.default_rng(0)
    x, w = (mt.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((6, 16), (16, 16)))
    jf = mt.jit(lambda x, w: _gelu_backward(x, w, None), options=FUSE)
    assert np.array_equal(jf(x, w).numpy(), _gelu_backward(x, w, None).numpy())
    node, k, _ = _fused(jf, x, w)
    assert not isinstance(k, SplitKernel)
    assert "96 elements, fewer than SPLIT_MIN = 97" in runtime.DECISIONS[id(node)][1]


def test_a_destination_is_written_once_and_never_kept_as_scratch():
    import minitorch.transformer  # noqa: F401  (registers gelu)

    def f(x, b):  # the last stage is sigmoid's own kernel (not a ufunc), which allocates
        return ((x * b + 1.0) * 0.5 - x).sigmoid()

    rng = np.random.default_rng(2)
    x, b = (mt.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((4, 8), (8,)))
    jf = mt.jit(f, options=FUSE)
    node, k, graph = _fused(jf, x, b)
    assert isinstance(k, SplitKernel)
    args = dict(zip(graph.inputs, (x, b)))
    datas = [(i.value if i.op == "const" else args[i])._data for i in node.inputs]
    dest = np.empty(node.spec.size, np.float32)
    for _ in range(3):
        k(*datas, out=node.spec, dest=dest)
        assert np.array_equal(dest.reshape(4, 8), f(x, b).numpy())
        assert not any(np.shares_memory(s, dest) for s in k.spare)
