"""The numpy backend's matmul of a stack by a matrix (``x @ w`` with ``x`` of shape
``(B, T, C)``) is one GEMM over ``B * T`` rows, eager and in a compiled plan, with
``np.matmul``'s bits."""

from __future__ import annotations

import types

import numpy as np
import pytest

import minitorch as mt
from minitorch.backends import numpy_backend
from minitorch.passes import CompileOptions


@pytest.fixture(autouse=True)
def reference():
    mode = mt.get_mode()
    mt.exercises._set("reference", None)
    yield
    mt.exercises._set(*mode) if isinstance(mode, tuple) else mt.exercises._set(mode, None)


@pytest.fixture
def gemms(monkeypatch):
    """The ranks of the operands of each ``np.matmul`` the numpy backend calls."""
    seen = []

    def matmul(a, b, **kw):
        seen.append((np.ndim(a), np.ndim(b)))
        return np.matmul(a, b, **kw)

    shim = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    shim.matmul = matmul
    monkeypatch.setattr(numpy_backend, "np", shim)
    return seen


def _operands(dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 1, 16, 24)).astype(dtype)
    w = rng.standard_normal((24, 40)).astype(dtype)
    return x, w


@pytest.mark.parametrize("transposed", [False, True])
def test_eager_stack_times_matrix_is_one_gemm_with_numpys_bits(gemms, transposed):
    x, w = _operands()
    wt = mt.tensor(np.ascontiguousarray(w.T)).T if transposed else mt.tensor(w)  # grad @ W^T
    got = (mt.tensor(x) @ wt).numpy()
    assert gemms == [(2, 2)]
    assert np.array_equal(got, np.matmul(x, w))


@pytest.mark.parametrize("options", [CompileOptions(), CompileOptions(memory=True)])
def test_compiled_stack_times_matrix_is_one_gemm_into_its_place(gemms, options):
    x, w = _operands()
    f = mt.jit(lambda x, w: (x @ w).relu() * 2.0, options=options)
    got = f(mt.tensor(x), mt.tensor(w)).numpy()
    gemms.clear()
    again = f(mt.tensor(x), mt.tensor(w)).numpy()
    assert gemms == [(2, 2)]
    want = np.maximum(np.matmul(x, w), 0) * np.float32(2.0)
    assert np.array_equal(got, want) and np.array_equal(again, want)


def test_other_operands_keep_numpys_broadcasting_matmul(gemms):
    x, w = _operands(np.float64)
    xt = mt.tensor(x).permute(0, 1, 3, 2).permute(0, 1, 3, 2)  # same values, still contiguous
    stacks = mt.tensor(np.stack([w] * 4)[:, None])  # (4, 1, 24, 40): a stack, not a matrix
    strided = mt.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).permute(0, 1, 3, 2)
    for a, b in ((xt, mt.tensor(w)), (mt.tensor(x), stacks), (strided, mt.tensor(w))):
        gemms.clear()
        assert np.array_equal((a @ b).numpy(), np.matmul(x, w))
    assert gemms == [(4, 2)]  # the strided stack: its rows are not one matrix
