"""The cuda backend's tuned row kernels (issue 42) on the simulator: its warp shuffles, the tuned
reductions (reduce.py), the online softmax and logsumexp (rows.py) and the Welford layer norm
(transformer/cuda.py), each against numpy and against the learners' path, under ``tuned(True)``."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.cuda import backend as cb  # first: it chooses the simulator

# isort: split
from numba import cuda

from minitorch.cuda import reduce as fr
from minitorch.cuda import rows as cr
from minitorch.transformer import cuda as tc

pytestmark = pytest.mark.skipif(
    not cb.SIMULATOR, reason="the simulator's shuffles and launch sizes"
)
RNG = np.random.default_rng(42)
FULL = 0xFFFFFFFF


def dev(a):
    return mt.tensor(a, dtype=a.dtype.name).to("cuda")


# ---------------------------------------------------------------- the simulator's warp shuffles


def _warp_sums(out, x):
    # a warp's sum with shfl_down (lane 0), every lane's butterfly sum with shfl_xor, an
    # inclusive scan with shfl_up, lane 5's value with shfl_sync
    t = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    v = down = x[t]
    scan = v
    d = 16
    while d > 0:
        down += cuda.shfl_down_sync(FULL, down, d)
        v += cuda.shfl_xor_sync(FULL, v, d)
        d //= 2
    d = 1
    while d < 32:
        up = cuda.shfl_up_sync(FULL, scan, d)
        if cuda.laneid >= d:
            scan += up
        d *= 2
    out[0, t], out[1, t], out[2, t] = down, v, scan
    out[3, t] = cuda.shfl_sync(FULL, x[t], 5)


def _shared_twin(out, x):
    # the same four answers through shared memory and barriers
    cache = cuda.shared.array(64, x.dtype)
    i = cuda.threadIdx.x
    t = i + cuda.blockIdx.x * cuda.blockDim.x
    cache[i] = x[t]
    cuda.syncthreads()
    w = i - i % 32
    total = cache[w]
    scan = cache[w]
    for k in range(1, 32):
        total += cache[w + k]
        if k <= i % 32:
            scan += cache[w + k]
    out[1, t], out[2, t], out[3, t] = total, scan, cache[w + 5]
    out[0, t] = total if i % 32 == 0 else out[0, t]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_shuffles_give_what_their_shared_memory_twin_gives(dtype):
    x = (RNG.integers(-50, 50, 128) / (4 if dtype != "int64" else 1)).astype(dtype)
    got, want = (cuda.to_device(np.zeros((4, 128), dtype)) for _ in range(2))
    cuda.jit(_warp_sums)[2, 64](got, cuda.to_device(x))
    cuda.jit(_shared_twin)[2, 64](want, cuda.to_device(x))
    got, want = got.copy_to_host(), want.copy_to_host()
    np.testing.assert_array_equal(got[1:], want[1:])
    np.testing.assert_array_equal(got[0, ::32], want[0, ::32])  # shfl_down: lane 0's is the sum
    assert got.dtype == np.dtype(dtype)


def _uneven(out, x):
    # warp 0 folds the block's values with shuffles while warp 1 already waits at the barrier
    cache = cuda.shared.array(2, x.dtype)
    t = cuda.threadIdx.x
    v = x[t]
    if t < 32:
        v = x[t] + x[t + 32]
        d = 16
        while d > 0:
            v += cuda.shfl_down_sync(FULL, v, d)
            d //= 2
        if t == 0:
            cache[0] = v
    cuda.syncthreads()
    out[t] = cache[0]


def test_a_barrier_waits_for_a_warp_still_shuffling():
    x = np.arange(64, dtype=np.float64)
    out = cuda.to_device(np.zeros(64))
    cuda.jit(_uneven)[1, 64](out, cuda.to_device(x))
    np.testing.assert_array_equal(out.copy_to_host(), np.full(64, x.sum()))


def _down(out, x, mask, delta):
    t = cuda.threadIdx.x
    if mask >> t & 1:
        out[t] = cuda.shfl_down_sync(mask, x[t], delta)


def _half_at_barrier(out, x):
    t = cuda.threadIdx.x
    if t < 16:
        out[t] = cuda.shfl_down_sync(FULL, x[t], 1)
    cuda.syncthreads()


def _outside_own_mask(out, x):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_down_sync(0xFFFF0000 if t < 16 else 0x0000FFFF, x[t], 1)


@pytest.mark.parametrize(
    "kernel, threads, args, says",
    [
        (_down, 16, (FULL, 16), "reads lane 16, which is not at this shuffle"),  # partial warp
        (_down, 32, (0x0000FFFF, 8), "reads lane 16"),  # lane 8 reads past the mask
        (_half_at_barrier, 32, (), "wait at syncthreads"),
        (_outside_own_mask, 32, (), "must be in its mask"),
    ],
)
def test_undefined_shuffles_raise(kernel, threads, args, says):
    # where CUDA leaves a shuffle's value undefined (or hangs) the simulator names the lane
    x = cuda.to_device(np.arange(32, dtype=np.float32))
    out = cuda.to_device(np.zeros(32, np.float32))
    with pytest.raises(RuntimeError, match=says):
        cuda.jit(kernel)[1, threads](out, x, *args)


def test_a_shuffle_past_the_warp_returns_the_callers_value():
    x = np.arange(32, dtype=np.float32)
    out = cuda.to_device(np.zeros(32, np.float32))
    cuda.jit(_down)[1, 32](out, cuda.to_device(x), FULL, 8)
    np.testing.assert_array_equal(out.copy_to_host(), np.where(x < 24, x + 8, x))


# ---------------------------------------------------------------- tuned reductions


@pytest.fixture
def taken(monkeypatch):
    """Names of the tuned paths that ran (so a test fails if the backend skipped them)."""
    seen = []
    for module, name in ((fr, "reduce"), (cr, "online"), (tc, "layer_norm_tuned")):
        fn = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda *a, fn=fn, name=name, **k: seen.append(name) or fn(*a, **k)
        )
    return seen


def _specials(a, rng=RNG):
    if a.dtype.kind == "f" and a.size > 4:
        flat = a.reshape(-1)
        flat[rng.integers(0, a.size, 2)] = [np.nan, np.inf]
    return a


REDUCE_CASES = [  # (shape, axis): every path of reduce.py on the simulator's launch sizes
    ((1,), None),
    ((7,), None),
    ((3000,), None),  # all: one block, or chunks and a second pass
    ((5, 40), 1),
    ((3, 200), -1),
    ((2, 1500), 1),  # last axis: a warp a row, a block, chunks
    ((300, 3), 0),
    ((2, 200, 3), 1),  # columns: rows in chunks, then a second pass
    ((7, 45), 0),
    ((2, 33, 35), 1),  # columns: leading and middle axes
    ((2, 1, 3, 4), (2, 3)),
    ((4, 1, 5), (0, 1)),
    ((3, 4, 5), (0, 1, 2)),  # runs of axes, size 1
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("shape, axis", REDUCE_CASES)
def test_tuned_reductions_match_numpy_and_the_learners_path(shape, axis, dtype, taken):
    a = RNG.integers(-100, 100, shape).astype(dtype) / (1 if dtype == "int64" else 8)
    a = a.astype(dtype)
    plain = a.copy()
    a = _specials(a)
    for name in ("sum", "max", "min"):
        for x in (plain, a):
            want = getattr(np, name)(x, axis=axis)
            t = dev(x)
            with cb.tuned(True):
                got = getattr(t, name)(axis=axis)
            untuned = getattr(t, name)(axis=axis).numpy()
            assert got.dtype == want.dtype, (name, got.dtype)
            tol = 1e-5 if dtype == "float32" else 1e-12
            np.testing.assert_allclose(
                got.numpy(), want, rtol=tol, err_msg=f"{name} {shape} {axis}"
            )
            np.testing.assert_allclose(got.numpy(), untuned, rtol=tol, err_msg=name)
    assert taken.count("reduce") == 6


def test_tuned_reductions_take_dense_views_and_leave_other_layouts_to_the_learners_path(taken):
    base = RNG.standard_normal((9, 70)).astype(np.float32)
    cube = base.reshape(3, 3, 70)
    t, c = dev(base), dev(cube)
    tuned = [  # (tensor, axis, numpy's answer): contiguous at an offset, transposed, permuted
        (t[2:], 1, base[2:].sum(axis=1)),
        (t.permute(1, 0), 1, base.sum(axis=0)),
        (t.permute(1, 0), None, base.sum()),
        (c.permute(2, 0, 1), (1, 2), cube.sum(axis=(0, 1))),
        (c.permute(0, 2, 1), 2, cube.sum(axis=1)),
    ]
    learners = [  # a gap (every other column), axes apart, kept dims reordered in storage
        (t[:, ::2], 1, base[:, ::2].sum(axis=1)),
        (c, (0, 2), cube.sum(axis=(0, 2))),
        (c.permute(2, 1, 0), 1, cube.sum(axis=1).T),
    ]
    with cb.tuned(True):
        for i, (x, axis, want) in enumerate(tuned + learners):
            np.testing.assert_allclose(x.sum(axis=axis).numpy(), want, rtol=1e-5, atol=1e-5)
            assert len(taken) == min(i + 1, len(tuned)), (i, taken)
        np.testing.assert_allclose(t.mean(axis=0).numpy(), base.mean(axis=0), rtol=1e-5, atol=1e-6)
        empty = dev(np.zeros((0, 3), np.float32))
        assert empty.sum(axis=0).numpy().tolist() == [0, 0, 0]
    assert taken == ["reduce"] * (len(tuned) + 1)


def test_launch_sizes_come_from_the_device_on_a_gpu(monkeypatch):
    from types import SimpleNamespace

    h200 = SimpleNamespace(WARP_SIZE=32, MAX_THREADS_PER_BLOCK=1024, MULTIPROCESSOR_COUNT=132,
                           MAX_THREADS_PER_MULTIPROCESSOR=2048)  # fmt: skip
    monkeypatch.setattr(cb, "SIMULATOR", False)
    monkeypatch.setattr(fr.cuda, "get_current_device", lambda: h200)
    assert fr.limits.__wrapped__() == fr.Limits(threads=256, blocks=132 * 8, warp_row=1024)
    h200.WARP_SIZE = 64
    with pytest.raises(RuntimeError, match="warps of 64 lanes"):
        fr.limits.__wrapped__()


def test_tuned_kernels_serve_only_under_tuned(taken):
    t = dev(RNG.standard_normal((3, 5)).astype(np.float32))
    t.sum(), mt.dispatch("softmax", t, axis=1), mt.dispatch("logsumexp", t, axis=1)
    w = dev(np.ones(5, np.float32))
    mt.dispatch("layer_norm", t, w, w, eps=1e-5)
    assert taken == []  # the simulator's default: the learners' kernels, which grading measures


# ---------------------------------------------------------------- softmax, logsumexp, layer norm

LENGTHS = [1, 33, 255, 256, 257, 4096, 5000]


def _rows(cols, dtype):
    """Four rows: plain, all -inf (one NaN when short), large negative, a NaN and an inf."""
    a = RNG.standard_normal((4, cols)) * 3
    a[1] = -np.inf
    a[2] = a[2] - 1e4
    a[3, cols // 2] = np.nan
    if cols > 1:
        a[3, 0] = np.inf
    return a.astype(dtype)


def _softmax(a, axis):
    with np.errstate(all="ignore"):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _logsumexp(a, axis):
    m = a.max(axis=axis, keepdims=True)
    with np.errstate(all="ignore"):
        r = np.where(np.isfinite(m), m + np.log(np.exp(a - m).sum(axis=axis, keepdims=True)), m)
    return r.squeeze(axis)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cols", LENGTHS)
def test_online_softmax_and_logsumexp(cols, dtype, taken):
    a = _rows(cols, dtype)
    tol = dict(rtol=2e-5, atol=1e-7) if dtype == "float32" else dict(rtol=1e-12, atol=1e-15)
    for x, axis in ((a, 1), (np.ascontiguousarray(a.T), 0)):  # a row along a strided axis too
        t = dev(x)
        for name, ref in (("softmax", _softmax), ("logsumexp", _logsumexp)):
            with cb.tuned(True):
                got = mt.dispatch(name, t, axis=axis)
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_allclose(got.numpy(), ref(x, axis), **tol, err_msg=f"{name} {cols}")
            if cols <= 300:  # the learners' path is slow on the simulator
                np.testing.assert_allclose(
                    got.numpy(), mt.dispatch(name, t, axis=axis).numpy(), **tol
                )
    assert taken == ["online"] * 4


def _layer_norm_exact(x, w, b, eps):
    x, w, b = (np.asarray(v, np.longdouble) for v in (x, w, b))
    d = x - x.mean(axis=-1, keepdims=True)
    return (d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * w + b).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cols", LENGTHS)
def test_welford_layer_norm_keeps_digits_of_large_rows_with_small_spread(cols, dtype, taken):
    a = RNG.standard_normal((3, cols))
    a[1] = a[1] * 1e-3 + 1e4  # a one-pass sum of squares, or a float32 mean, loses these digits
    a[2] = a[2] * 1e3
    a, w, b = a.astype(dtype), *(RNG.standard_normal(cols).astype(dtype) for _ in range(2))
    want = _layer_norm_exact(a, w, b, 1e-9)
    x = dev(np.concatenate([np.zeros((3, 1), dtype), a], axis=1))[:, 1:]  # an offset row stride
    with cb.tuned(True):
        got = mt.dispatch("layer_norm", x, dev(w), dev(b), eps=1e-9)
    assert got.dtype == np.dtype(dtype) and taken == ["layer_norm_tuned"]
    tol = 5e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("shape", [(0, 5), (0, 3, 4)])
def test_tuned_row_ops_of_empty_tensors(shape):
    a = np.zeros(shape, np.float32)
    w = np.ones(shape[-1], np.float32)
    for name, args, attrs in (
        ("softmax", (a,), {"axis": 1}),
        ("logsumexp", (a,), {"axis": 1}),
        ("layer_norm", (a, w, w), {"eps": 1e-5}),
    ):
        want = mt.dispatch(name, *(mt.tensor(v) for v in args), **attrs).numpy()
        with cb.tuned(True):
            got = mt.dispatch(name, *(dev(v) for v in args), **attrs).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_rows_of_merges_lead_dims_only_where_every_tensor_allows():
    """A contiguous tensor's rows have one lead dim (row_start then divides nothing); a view
    whose lead dims do not merge, in it or in the tensor numbered alike, keeps them."""
    t = dev(RNG.standard_normal((2, 3, 4, 5)).astype("float32"))
    x = t._data
    shape, strides, offset, step = cr.rows_of(x, 3)
    assert (list(shape), list(strides), step) == ([24], [5], 1)
    shape, strides, _, step = cr.rows_of(x, 1)  # dims 2 and 3 merge, dim 0 does not follow them
    assert (list(shape), list(strides), step) == ([2, 20], [60, 1], 20)
    p = t.permute(0, 2, 1, 3)._data  # (2, 4, 3, 5): dims 0 and 1 no longer merge
    assert list(cr.rows_of(p, 3)[0]) == [2, 4, 3]
    c = mt.tensor(np.zeros((2, 4, 3, 5), "float32"), device="cuda")._data
    assert list(cr.rows_of(c, 3)[0]) == [24] and list(cr.rows_of(c, 3, like=p)[0]) == [2, 4, 3]
    assert list(cr.rows_of(p, 3, like=c)[1]) == [60, 5, 20]
    a = RNG.standard_normal((2, 4, 3, 5)).astype("float32")
    for view in (dev(a), dev(np.ascontiguousarray(a.transpose(0, 2, 1, 3))).permute(0, 2, 1, 3)):
        for tuned in (True, False):
            with cb.tuned(tuned):
                got = mt.dispatch("softmax", view, axis=3).numpy()
            np.testing.assert_allclose(got, _softmax(a, 3), rtol=2e-6, atol=1e-7)
