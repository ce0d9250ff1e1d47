"""Kernels that prepare themselves for a plan step (``kernel.prepare(out, inputs)``): chapter
11's Numba row kernels, numpy's ``where``, ``softmax`` and ``pad_slice``. They write into the
step's place in the arena (no copy of an allocated result) with the bits of the kernel eager
runs, bound (``kernel.bind``) or not."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.backends import base as backends
from minitorch.core.registry import Spec, get_op
from minitorch.tensor.data import TensorData

pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py


RNG = np.random.default_rng(0)
F32 = np.float32


def _case(name, shapes_dtypes, attrs):
    datas = []
    for shape, dtype in shapes_dtypes:
        if dtype == np.bool_:
            a = RNG.random(shape) < 0.5
        elif np.dtype(dtype).kind == "i":
            a = RNG.integers(0, 5, shape).astype(dtype)
        else:
            a = RNG.standard_normal(shape).astype(dtype)
        datas.append(TensorData.from_numpy(a))
    return name, datas, attrs


CASES = [  # (backend, op, inputs, attrs): small ones run serially, large ones in parallel
    ("numba", *_case("layer_norm", [((2, 1, 3, 8), F32), ((8,), F32), ((8,), F32)], {"eps": 1e-5})),
    (
        "numba",
        *_case("layer_norm", [((64, 1, 64, 64), F32), ((64,), F32), ((64,), F32)], {"eps": 1e-5}),
    ),  # fmt: skip
    ("numba", *_case("embedding", [((5, 4), F32), ((2, 1, 3), np.int64)], {})),
    ("numba", *_case("embedding", [((5, 512), F32), ((2, 1, 64), np.int64)], {})),
    ("numba", *_case("causal_mask", [((2, 3, 4, 4), F32)], {"fill": -np.inf})),
    ("numba", *_case("causal_mask", [((8, 4, 64, 64), F32)], {"fill": 0.0})),
    ("numba", *_case("softmax", [((2, 3, 5), F32)], {"axis": 2})),
    ("numba", *_case("softmax", [((2, 3, 5), np.float64)], {"axis": 1})),
    ("numba", *_case("softmax", [((64, 4, 8, 64), F32)], {"axis": 3})),
    ("numpy", *_case("layer_norm", [((2, 1, 3, 8), F32), ((8,), F32), ((8,), F32)], {"eps": 1e-5})),
    ("numpy", *_case("embedding", [((5, 4), F32), ((2, 1, 3), np.int64)], {})),
    (
        "numpy",
        *_case("where", [((1, 1, 6, 1), np.bool_), ((1, 4, 1, 3), F32), ((1, 4, 6, 3), F32)], {}),
    ),  # fmt: skip
    (
        "numba",
        *_case("where", [((1, 1, 6, 1), np.bool_), ((1, 4, 1, 3), F32), ((1, 4, 6, 3), F32)], {}),
    ),  # fmt: skip
    ("numba", *_case("where", [((6, 3), np.bool_), ((), F32), ((3,), F32)], {})),
    (
        "numba",
        *_case("where", [((64, 1), np.bool_), ((8, 4, 64, 64), F32), ((1,), F32)], {}),
    ),  # fmt: skip
    ("numpy", *_case("softmax", [((2, 3, 5), F32)], {"axis": 2})),
    ("numpy", *_case("softmax", [((2, 3, 5), np.float64)], {"axis": 1})),
    (
        "numpy",
        *_case(
            "pad_slice", [((2, 2, 3), F32)], {"key": (slice(None), slice(1, 3)), "shape": (2, 4, 3)}
        ),
    ),  # fmt: skip
]


@pytest.mark.parametrize("backend,name,datas,attrs", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_prepared_kernel_writes_into_its_place_with_eagers_bits(backend, name, datas, attrs):
    op, b = get_op(name), backends.get_backend(backend)
    specs = [Spec(d.shape, d.dtype) for d in datas]
    out = op.infer(*specs, **attrs)
    want = b.kernel(op)(*datas, out=out, **attrs).to_numpy()
    kernel = b.prepare(op, out, specs)
    assert kernel is not None and kernel.writes_into, f"{name} on {backend} prepares nothing"
    assert np.array_equal(kernel(*datas, out=out, **attrs).to_numpy(), want, equal_nan=True)
    dest = np.full(out.size, np.nan, out.dtype)
    r = kernel(*datas, out=out, dest=dest, **attrs)
    assert r.storage is dest and np.array_equal(dest.reshape(out.shape), want, equal_nan=True)
    for fixed in ([None] * len(datas), datas):  # inputs given per call, or held by the arena
        dest = np.full(out.size, np.nan, out.dtype)
        bound = kernel.bind(dest, fixed)
        for _ in range(2):  # the same place on every call
            r = bound(*datas, **attrs)
            assert r.storage is dest and np.array_equal(r.to_numpy(), want, equal_nan=True)
    output = kernel.bind(None, datas)  # an output the caller keeps: a new array per call
    first, second = output(*datas, **attrs), output(*datas, **attrs)
    assert first.storage is not second.storage
    assert np.array_equal(first.to_numpy(), want, equal_nan=True)


def test_a_held_input_is_read_again_on_each_call():
    op = get_op("layer_norm")
    x = TensorData.from_numpy(RNG.standard_normal((4, 8)).astype(F32))
    w, bias = (TensorData.from_numpy(np.ones(8, F32)), TensorData.from_numpy(np.zeros(8, F32)))
    specs = [Spec(d.shape, d.dtype) for d in (x, w, bias)]
    kernel = backends.get_backend("numba").prepare(op, specs[0], specs)
    bound = kernel.bind(np.empty(32, F32), [x, w, bias])
    first = bound(x, w, bias, eps=1e-5).to_numpy()
    x.storage[:] *= 2.0  # the arena's slot holds new values: the bound kernel sees them
    second = bound(x, w, bias, eps=1e-5).to_numpy()
    want = backends.get_backend("numba").kernel(op)(x, w, bias, out=specs[0], eps=1e-5).to_numpy()
    assert np.array_equal(second, want) and not np.array_equal(first * 2, second)


def test_a_step_of_a_row_kernel_copies_no_allocated_result():
    """The decode step's layer norms, softmaxes and embeddings write into the arena: no
    step runs the executor's copy of an allocated result (``copy_into``)."""
    from minitorch.core.tensor import no_grad
    from minitorch.transformer.model import TinyGPT, decode_step, empty_cache

    model = TinyGPT(12, context=8, width=16, heads=2, layers=1, seed=0)
    cache = empty_cache(model)
    f = mt.compile(lambda t, p, *c: decode_step(model, t, p, *c), mode="reduce-overhead")
    token, pos = mt.tensor(np.zeros((1, 1, 1), np.int64)), mt.tensor(np.zeros((1, 1, 1), np.int64))
    with no_grad():
        f(token, pos, *cache)  # the first call: Python runs, as jit's first call does
        got = f(token, pos, *cache)[0].numpy()
        want = decode_step(model, token, pos, *cache)[0].numpy()
    assert np.array_equal(got, want)
    plan = list(f._jit.cache.values())[-1].compiled.plan  # an inference function: plain jit's
    table = plan._generated.__globals__
    kernels = [table[f"k{i}"] for i in range(len(plan.steps))]
    ops = [st.node.op for st in plan.steps if st.node is not None]
    assert {"layer_norm", "softmax", "embedding"} <= set(ops)
    copies = [ops[i] for i, k in enumerate(kernels) if getattr(k, "__name__", "") == "copy_into"]
    assert copies == [], copies


def test_a_strided_view_is_read_only_and_exact():
    storage = np.arange(40, dtype=F32)
    d = TensorData(storage, (3, 4), (-8, 2), 20)  # a negative stride and a gap
    v = d.as_numpy_view()
    assert np.array_equal(v, [[20 - 8 * i + 2 * j for j in range(4)] for i in range(3)])
    assert not v.flags.writeable and np.shares_memory(v, storage)
    with pytest.raises(ValueError):
        v[0, 0] = 1.0


@pytest.mark.parametrize(
    "shapes",
    [
        ((1, 1, 6, 1), (1, 4, 1, 3), (1, 4, 6, 3)),  # a decode step's cache write
        ((6, 5), (2, 6, 5), (1,)),  # the condition varies along the last axis
        ((3, 1), (), (2, 3, 4)),  # a scalar operand
        ((2, 1, 1, 3, 4), (3, 4), (3, 4)),  # 5-D: numpy's kernel
        ((70000,), (70000,), ()),  # long enough to run in parallel
    ],
)
def test_numbas_where_selects_numpys_bits(shapes):
    """Every bit of ``np.where``: NaN payloads, -0.0, broadcast and strided operands."""
    c = RNG.random(shapes[0]) < 0.5
    a, b = (RNG.standard_normal(s).astype(F32) for s in shapes[1:])
    if a.size > 2:
        a.reshape(-1)[:3] = [np.float32(-0.0), np.nan, -np.inf]
    weird = np.array([0x7FC01234], np.uint32).view(F32)  # a NaN with a payload
    b = np.where(RNG.random(b.shape) < 0.1, weird, b).astype(F32)
    if b.ndim >= 2:  # a transposed view of contiguous storage
        b = np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)
    datas = [TensorData.from_numpy(x) for x in (c, a)] + [
        TensorData(
            b.base.reshape(-1) if b.base is not None else b.reshape(-1),
            b.shape,
            tuple(s // 4 for s in b.strides),
            0,
        )  # fmt: skip
    ]
    want = np.where(c, a, b)
    op, nb = get_op("where"), backends.get_backend("numba")
    specs = [Spec(d.shape, d.dtype) for d in datas]
    out = op.infer(*specs)
    got = nb.kernel(op)(*datas, out=out).to_numpy()
    assert got.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
    kernel = nb.prepare(op, out, specs)
    dest = np.empty(out.size, F32)
    kernel(*datas, out=out, dest=dest)
    assert dest.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
