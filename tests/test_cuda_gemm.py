"""The register-blocked matmul (minitorch/cuda/gemm.py) on the simulator, under ``tuned(True)``:
against numpy and against exercise 4.5's kernel (the untuned path), with sizes that are not
multiples of the tiles, batches, transposed and offset views, empty dims and NaN/inf, and
with its epilogue (a broadcast operand, then a device function)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import minitorch as mt
from minitorch import profiler
from minitorch.cuda import backend as cb
from minitorch.cuda import gemm

RNG = np.random.default_rng(42)
T = gemm.tiles()  # the simulator's tiles: 8 x 8 outputs per block, k in chunks of 4


def _on_cuda(a: np.ndarray, layout: str):
    """``a`` on cuda: "c" contiguous, "t" a transposed view of a contiguous matrix (the last
    two axes swapped), "o" after one junk element (an offset)."""
    if layout == "t":
        return mt.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), device="cuda").transpose(
            -1, -2
        )
    if layout == "o":
        flat = np.concatenate([np.full(1, 7, a.dtype), a.reshape(-1)])
        return mt.tensor(flat, device="cuda")[1:].reshape(*a.shape)
    return mt.tensor(a, device="cuda")


def _kernels(fn):
    with profiler.profile() as prof:
        out = fn().numpy()
    return out, [e.name for e in prof.events if e.cat == "kernel"]


BROADCAST_BATCH = 3
CASES = [  # (a shape, b shape, a layout, b layout)
    ((T.bm + 3, 2 * T.bk + 1), (2 * T.bk + 1, T.bn + 5), "c", "c"),  # ragged in n, k, m
    ((1, 1), (1, 1), "c", "c"),
    ((3, 9, 5), (5, 11), "t", "c"),  # batched a, shared b; a transposed
    ((2, 1, 6, 4), (3, 4, 9), "c", "t"),  # batch dims broadcast (copied: not one stride)
    ((13, 6), (6, 10), "t", "t"),
    ((5, 7), (7, 3), "o", "o"),  # offsets
    ((0, 4), (4, 3), "c", "c"),  # empty rows
    ((4, 0), (0, 3), "c", "c"),  # empty k: zeros
    ((0, 2, 3), (3, 2), "c", "c"),  # empty batch
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_gemm_matches_numpy_and_exercise_4_5(case, dtype):
    sa, sb, la, lb = CASES[case]
    a, b = RNG.standard_normal(sa).astype(dtype), RNG.standard_normal(sb).astype(dtype)
    want = a @ b
    with cb.tuned(True):
        got, names = _kernels(lambda: _on_cuda(a, la) @ _on_cuda(b, lb))
    untuned, old = _kernels(lambda: _on_cuda(a, la) @ _on_cuda(b, lb))
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got, untuned, rtol=tol, atol=tol)
    if want.size:  # the tuned kernel ran, without copying transposed or offset views
        assert names.count("gemm") == 1 and "matmul" not in names
        assert "map" not in names or case == BROADCAST_BATCH
        assert "gemm" not in old and "matmul" in old


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the simulator computes inf - inf
def test_nan_and_inf_propagate_as_in_numpy():
    a = RNG.standard_normal((9, 5))
    a[2, 3], a[4, 0] = np.nan, np.inf
    b = RNG.standard_normal((5, 10))
    b[1, 7] = -np.inf
    with cb.tuned(True):
        got = (_on_cuda(a, "c") @ _on_cuda(b, "t")).numpy()
    with np.errstate(invalid="ignore"):
        want = a @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_ints_and_bools_keep_exercise_4_5():
    a = RNG.integers(-3, 4, (5, 6))
    b = RNG.integers(-3, 4, (6, 4))
    with cb.tuned(True):
        got, names = _kernels(lambda: _on_cuda(a, "c") @ _on_cuda(b, "c"))
    np.testing.assert_array_equal(got, a @ b)
    assert "gemm" not in names and "matmul" in names


def _relu(acc, e):
    v = acc + e
    return v if v > 0 else v * 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias_shape", [(11,), (3, 9, 1), (1, 1), (2, 3, 9, 11)])
def test_epilogue_reads_a_broadcast_operand_at_each_output(bias_shape, dtype):
    a = RNG.standard_normal((2, 3, 9, 6)).astype(dtype)
    b = RNG.standard_normal((6, 11)).astype(dtype)
    e = RNG.standard_normal(bias_shape).astype(dtype)
    if len(bias_shape) == 4:  # batch strides that do not merge into one: copied first
        ev = mt.tensor(np.ascontiguousarray(np.swapaxes(e, 0, 1)), device="cuda").permute(
            1, 0, 2, 3
        )
    else:
        ev = mt.tensor(e, device="cuda")
    fn = cuda.jit(device=True, inline="always")(_relu)
    got = gemm.matmul(_on_cuda(a, "c")._data, _on_cuda(b, "t")._data, dtype, fn, ev._data)
    got = cb._BACKEND.to_numpy(got)
    want = np.maximum(a @ b + e, 0)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_tiles_must_divide_among_the_threads():
    with pytest.raises(ValueError, match="gemm_kernel.*bm % tm"):
        gemm.gemm_kernel(gemm.Tiles(8, 8, 4, 3, 2), None, None)


@pytest.mark.parametrize("threads, small", [(1024, False), (128, True)])
def test_tiles_on_a_gpu_come_from_the_device(monkeypatch, threads, small):
    from types import SimpleNamespace

    dev = SimpleNamespace(MAX_THREADS_PER_BLOCK=threads, MAX_SHARED_MEMORY_PER_BLOCK=48 * 1024)
    monkeypatch.setattr(cb, "SIMULATOR", False)
    monkeypatch.setattr(gemm, "_tiles", [])
    monkeypatch.setattr(gemm.cuda, "get_current_device", lambda: dev)
    assert gemm.tiles() == (gemm.SMALL_GPU_TILES if small else gemm.GPU_TILES)
