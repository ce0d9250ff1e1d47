"""Issue 42: the tuned contiguous elementwise kernels (minitorch/cuda/elementwise.py), run on the
simulator under ``backend.tuned(True)``, give numpy's answer and the exercise kernels' answer,
and really serve the layouts they claim (the exercise kernels are not asked for)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch import profiler
from minitorch.cuda import backend as cb
from minitorch.cuda import elementwise as ew

RNG = np.random.default_rng(42)


def _values(shape, dtype):
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if dtype == "int64":
        return RNG.integers(-5, 6, shape)
    a = RNG.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    for k, v in zip(range(0, flat.size, 7), (np.nan, np.inf, -np.inf, 0.0, -0.0)):
        flat[k] = v  # the specials the formulas define
    return a


def _cuda(a, offset):
    """``a`` on the device; with ``offset``, a contiguous view after one junk element."""
    if not offset:
        return mt.tensor(a, device="cuda")
    flat = mt.tensor(np.concatenate([np.zeros(1, a.dtype), a.reshape(-1)]), device="cuda")
    return flat[1:].reshape(*a.shape) if a.ndim else flat[1:].reshape(())


# (output shape, a's shape, b's shape): every layout kind, sizes not divisible by the launch
# (the simulator launches 32-thread blocks, four loads per thread per trip), empty and size 1.
SHAPES = {
    "same-300": ((300,), (300,), (300,)),
    "same-1": ((1,), (1,), (1,)),
    "empty": ((0, 3), (0, 3), (3,)),
    "scalar-0d": ((5, 61), (5, 61), ()),
    "scalar-first": ((613,), (1,), (613,)),
    "row": ((9, 67), (9, 67), (67,)),
    "column": ((67, 9), (67, 1), (67, 9)),
    "channels": ((3, 5, 41), (3, 5, 41), (1, 5, 1)),
    "outer": ((37, 11), (37, 1), (1, 11)),
}
OPS = {"add": np.add, "mul": np.multiply, "div": np.divide, "sub": np.subtract}


def _forbid_exercises(monkeypatch):
    """Fail if the backend compiles exercise 4.1 or 4.2: the tuned kernels must serve."""
    real = cb.compiled

    def compiled(ex_id, *args):
        assert ex_id not in ("4.1", "4.2"), f"exercise {ex_id} ran where a tuned kernel applies"
        return real(ex_id, *args)

    monkeypatch.setattr(cb, "compiled", compiled)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("offset", [False, True], ids=["at0", "offset"])
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_tuned_zip_equals_numpy_and_the_exercise(case, offset, dtype, monkeypatch):
    shape, sa, sb = SHAPES[case]
    a, b = _values(sa, dtype), _values(sb, dtype)
    ta, tb = _cuda(a, offset), _cuda(b, not offset)
    name = "div" if case.startswith("s") else "add"  # both formulas, on every layout
    with cb.tuned(False):
        untuned = mt.dispatch(name, ta, tb).numpy()
    with cb.tuned(True), monkeypatch.context() as m:
        _forbid_exercises(m)
        got = mt.dispatch(name, ta, tb)
    with np.errstate(all="ignore"):
        want = OPS[name](a, b)
    assert got.shape == shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), untuned)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["relu", "exp", "log", "sigmoid", "neg", "sqrt", "recip", "gelu"])
def test_tuned_map_equals_numpy_and_the_exercise(op, dtype, monkeypatch):
    a = _values((7, 101), dtype)
    ta = _cuda(a, True)
    with cb.tuned(False):
        untuned = mt.dispatch(op, ta).numpy()
    with cb.tuned(True), monkeypatch.context() as m:
        _forbid_exercises(m)
        got = mt.dispatch(op, ta).numpy()
    if dtype == "float64":
        np.testing.assert_array_equal(got, untuned)
    else:  # the tuned formula computes in float32 (elementwise.typed): rounding may differ
        np.testing.assert_allclose(got, untuned, rtol=1e-6, atol=1e-7)  # gelu: cancellation
    with mt.use_backend("numpy"):
        want = mt.dispatch(op, mt.tensor(a)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7 if dtype == "float32" else 0)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("float32", "float64"),
        ("float64", "int64"),
        ("int64", "bool"),
        ("bool", "float32"),
        ("float32", "bool"),
    ],  # fmt: skip
)
def test_tuned_cast_copy_fill_and_where(src, dst, monkeypatch):
    a = _values((3, 211), src)
    if dst == "int64" or src == "float32" and dst == "bool":
        a = np.nan_to_num(a, posinf=7.0, neginf=-7.0)  # numpy's cast of NaN/inf is undefined
    ta, cond = _cuda(a, True), mt.tensor(RNG.random((3, 1)) < 0.5, device="cuda")
    with cb.tuned(True), monkeypatch.context() as m:
        _forbid_exercises(m)
        cast = mt.dispatch("cast", ta, dtype=dst)
        copy = cb._BACKEND.copy(ta._data)
        full = mt.full((4, 77), 2.5, device="cuda")
        picked = mt.where(cond, ta, ta * 2) if src != "bool" else None
    np.testing.assert_array_equal(cast.numpy(), a.astype(dst))
    np.testing.assert_array_equal(cb._BACKEND.to_numpy(copy), a)
    np.testing.assert_array_equal(full.numpy(), np.full((4, 77), 2.5, np.float32))
    if picked is not None:
        np.testing.assert_array_equal(picked.numpy(), np.where(cond.numpy(), a, a * 2))


def test_layouts_the_tuned_kernels_do_not_cover_fall_back_to_the_exercises():
    a = _values((13, 17), "float32")
    ta = mt.tensor(a, device="cuda")
    assert ew.layout(ta.permute(1, 0)._data, (17, 13)) is None  # transposed
    assert ew.layout(ta[:, ::2]._data, (13, 9)) is None  # strided
    b = mt.tensor(_values((3, 1, 5), "float32"), device="cuda")
    assert ew.layout(b._data, (3, 4, 5)) is None  # kept dims not adjacent
    with cb.tuned(True):
        np.testing.assert_array_equal((ta.permute(1, 0) + 1).numpy(), a.T + 1)
        np.testing.assert_array_equal((ta[:, ::2] * 2).numpy(), a[:, ::2] * 2)


def test_layout_kinds():
    t = mt.tensor(np.zeros((4, 5, 6), np.float32), device="cuda")
    assert ew.layout(t._data, (4, 5, 6)) == (ew.SAME, 1, 120)
    assert ew.layout(t._data, (2, 4, 5, 6)) == (ew.PERIOD, 1, 120)
    assert ew.layout(t[0:1, :, 0:1]._data, (4, 5, 6)) is None  # strided: elements 6 apart
    col = mt.tensor(np.zeros((5, 1), np.float32), device="cuda")
    assert ew.layout(col._data, (5, 6)) == (ew.STRETCH, 6, 5)
    assert ew.layout(col._data, (4, 5, 6)) == (ew.BLOCK, 6, 5)
    assert ew.layout(mt.tensor(3.0, device="cuda")._data, (4, 5)) == (ew.SCALAR, 1, 1)


def test_launch_sizes_come_from_the_device_properties():
    # An H200: 132 multiprocessors of 2048 threads, 1024 threads a block, warps of 32.
    assert ew.sizes_for(132, 1024, 32, 2048) == (256, 2 * 132 * 8)
    assert ew.sizes_for(40, 1024, 32, 1024) == (256, 2 * 40 * 4)  # a T4
    assert ew.sizes_for(2, 128, 32, 128) == (128, 4)  # small blocks: still whole warps
    assert ew.launch_shape() == (cb.THREADS, cb.MAX_BLOCKS)  # tiny on the simulator
    assert ew.grid(10) == (1, cb.THREADS) and ew.grid(10**6)[0] == cb.MAX_BLOCKS


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_pinned_staging_copies_round_trip(dtype, monkeypatch):
    # Chunks of 40 bytes: many of them, the last one partial, both buffers reused.
    from minitorch.cuda import copies

    a = _values((3, 337), dtype)
    dev = copies.to_device(a.reshape(-1), chunk=40, small=0)
    np.testing.assert_array_equal(dev.copy_to_host(), a.reshape(-1))
    back = copies.to_host(dev, chunk=40, small=0)
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a.reshape(-1))
    # the backend copies through them under TUNED, in chunks of 48 bytes here
    monkeypatch.setattr(copies, "SMALL", 0)
    monkeypatch.setattr(copies, "CHUNK", 48)
    chunks = []
    real = copies._chunks
    monkeypatch.setattr(copies, "_chunks", lambda *x: chunks.append(x) or real(*x))
    with cb.tuned(True):
        t = mt.tensor(a, device="cuda")
        np.testing.assert_array_equal(t[1:].numpy(), a[1:])
    assert len(chunks) == 2  # one each way


# ---------------------------------------------------------------- compiled fused kernels


def test_fused_kernels_merge_dims_where_every_input_allows():
    """``codegen_cuda.merged``: size-1 dims dropped, neighbours joined only where every operand
    steps over both as one; a 0-d output keeps one dim."""
    from minitorch.fusion.codegen_cuda import merged

    assert merged((2, 3, 4), [(12, 4, 1), (0, 0, 0)]) == ((24,), [(1,), (0,)])
    assert merged((2, 3, 4), [(12, 4, 1), (0, 0, 1)]) == ((6, 4), [(4, 1), (0, 1)])  # a row
    assert merged((2, 3, 4), [(12, 4, 1), (1, 2, 6)]) == ((2, 3, 4), [(12, 4, 1), (1, 2, 6)])
    assert merged((2, 1, 4), [(4, 9, 1), (4, 4, 1)]) == ((8,), [(1,), (1,)])  # size 1 dropped
    assert merged((), [(), ()]) == ((1,), [(0,), (0,)])


@pytest.mark.parametrize(
    "layout", ["contiguous", "transposed", "row", "column", "scalar", "0-d", "offset-view"]
)
def test_fused_chain_on_cuda_equals_eager(layout):
    """relu(x * 2 + 1) * y compiled into one generated kernel on the cuda device, with x in
    each layout, gives eager's answer bit for bit."""
    a = RNG.standard_normal((6, 10)).astype("float32")
    y_np = RNG.standard_normal((6, 10)).astype("float32")
    x = {
        "contiguous": lambda: _cuda(a, False),
        "transposed": lambda: mt.tensor(np.ascontiguousarray(a.T), device="cuda").permute(1, 0),
        "row": lambda: _cuda(a[0], False),
        "column": lambda: _cuda(a[:, :1], False),
        "scalar": lambda: _cuda(a[:1, :1], False),
        "0-d": lambda: _cuda(np.float32(a[0, 0]), False),
        "offset-view": lambda: _cuda(a, True),
    }[layout]()
    y = _cuda(y_np, False)

    def f(x, y):
        return (x * 2.0 + 1.0).relu() * y

    want = f(x, y).numpy()
    fn = mt.compile(f)
    fn(x, y)  # traced, planned and generated
    with profiler.profile() as prof:
        got = fn(x, y).numpy()
    np.testing.assert_array_equal(got, want)
    assert "fused_0" in [e.name for e in prof.events if e.cat == "kernel"]  # generated
