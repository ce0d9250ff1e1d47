"""Chapter 4 framework: the cuda device plumbing, the simulator switch and the traffic counter."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import minitorch
from minitorch.core.registry import OPS, OpKind, register_kernel, register_op
from minitorch.cuda import backend as cb  # first: it chooses the simulator

# isort: split
import numba
from numba import cuda

from minitorch.cuda import elementwise, lowering
from minitorch.cuda.baselines import naive_matmul, tiled_matmul
from minitorch.cuda.traffic import count_traffic


def on_device(x):
    return minitorch.tensor(x).to("cuda")


# Only the simulator counts memory traffic (NUMBA_ENABLE_CUDASIM=0 on a GPU runs these there).
needs_simulator = pytest.mark.skipif(
    not cb.SIMULATOR, reason="counts memory traffic, which only the CUDA simulator can"
)


def test_round_trip_views_and_repr():
    x = np.arange(6.0).reshape(2, 3)
    t = on_device(x)
    assert t.device == "cuda" and "device='cuda'" in repr(t)
    np.testing.assert_array_equal(t.to("cpu").numpy(), x)
    np.testing.assert_array_equal(t.T.numpy(), x.T)  # a view: metadata only
    assert t.T._data.storage is t._data.storage
    r = t.T.reshape(6)  # not a view: Backend.copy makes a contiguous device copy
    assert r._data.storage is not t._data.storage and r.is_contiguous()
    np.testing.assert_array_equal(r.numpy(), x.T.reshape(6))
    np.testing.assert_array_equal(t[1, ::2].numpy(), x[1, ::2])
    minitorch.synchronize()


def test_dtypes_scalars_and_empty():
    t = on_device(np.array([[1, 2], [3, 4]]))
    assert t.dtype == np.int64
    np.testing.assert_array_equal((t * 2).numpy(), [[2, 4], [6, 8]])
    np.testing.assert_allclose(t.mean(axis=0).numpy(), [2.0, 3.0])
    assert t.mean().dtype == np.float32
    np.testing.assert_array_equal((t > 2).numpy(), [[False, False], [True, True]])
    np.testing.assert_array_equal((t > 2).sum().numpy(), 2)
    e = on_device(np.zeros((0, 3)))
    assert e.sum().item() == 0.0 and e.sum(axis=0).shape == (3,)
    np.testing.assert_array_equal(e.exp().numpy(), np.zeros((0, 3)))


def test_matmul_batched_broadcast_needs_copy():
    # (2, 1, n, k) @ (3, k, m) with a transposed batch layout: batch dims that do not merge.
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 2, 4, 5)).transpose(1, 0, 2, 3)  # (2, 3, 4, 5), non-mergeable
    b = rng.standard_normal((5, 2))
    ta = on_device(np.ascontiguousarray(a.transpose(1, 0, 2, 3))).permute(1, 0, 2, 3)
    np.testing.assert_allclose((ta @ on_device(b)).numpy(), a @ b, rtol=1e-9)


def test_missing_kernel_is_a_clear_op_error():
    # Every framework op has a cuda kernel: an op with a numpy kernel only shows the refusal.
    register_op("numpy_only", OpKind.OPAQUE, 1, lambda x: x)
    register_kernel("numpy_only", "numpy")(lambda x, out: x)
    try:
        t = on_device(np.arange(6.0).reshape(2, 3))
        with pytest.raises(minitorch.OpError, match="numpy_only.*cuda"):
            minitorch.dispatch("numpy_only", t)
    finally:
        del OPS["numpy_only"]


def test_different_devices_are_rejected():
    with pytest.raises(minitorch.OpError, match="different devices"):
        on_device(np.ones(3)) + minitorch.tensor(np.ones(3))


@needs_simulator
def test_traffic_counter_on_naive_and_tiled_matmul():
    n = 2 * cb.TILE
    a = minitorch.randn(n, n).to("cuda")
    with count_traffic() as naive:
        c1 = naive_matmul(a, a)
    assert naive.max_reads_per_element(a) == 2 * n  # row and column of every output
    assert naive.shared_reads == naive.shared_writes == 0
    with count_traffic() as tiled:
        c2 = tiled_matmul(a, a)
    assert tiled.max_reads_per_element(a) == 2 * n // cb.TILE
    assert tiled.shared_writes == 2 * n * n * (n // cb.TILE)
    np.testing.assert_allclose(c1.numpy(), c2.numpy(), rtol=1e-5)
    assert tiled.threads == n * n and tiled.summary()["global_writes"] >= n * n


def test_kernels_compute_in_the_tensors_dtype():
    # numba-cuda's compiler, not the simulator (which follows numpy's promotion), types the
    # references for a GPU: 4.3-4.5, 11.4 and 11.5 keep no float64 instruction for float32 and
    # int64 inputs; relu's map, whose formula returns the literal 0.0, shows that one is seen.
    found = lowering.report("minitorch.transformer.cuda", "minitorch.fusion.epilogue_cuda")
    builders = {k: v for k, v in found.items() if k[0].isdigit() and k[:3] not in ("4.1", "4.2")}
    assert len(builders) == 6, builders
    assert all(n == 0 for counts in builders.values() for n in counts.values()), builders
    # the course's own kernels too: convolution, pooling, rows of any length (either way), the
    # tuned ones (reductions, online softmax and logsumexp, layer norm: a warp or a block), the
    # tuned matmul alone and with a fused bias + relu epilogue, a generated elementwise chain
    own = {k: v for k, v in found.items() if not k[0].isdigit()}
    tuned = {k for k in own if k.startswith("tuned")}  # reduce.py, rows.py, elementwise.py...
    assert len(own) - len(tuned) == 16 and "gemm + bias + relu (a fused epilogue)" in own, own
    assert len(tuned) == 15 + len(elementwise.LOWERED), own
    assert all(n == 0 for counts in own.values() for n in counts.values()), own
    assert found["4.1 map: relu"]["float32"] > 0


def test_sums_keep_the_dtype_the_shape_rules_give():
    # bool sums count in int64 and the mean of ints is float32: the input is cast first
    b = on_device(np.array([[True, False, True], [True, True, False]]))
    for axis in (None, 1):
        np.testing.assert_array_equal(b.sum(axis=axis).numpy(), b.numpy().sum(axis=axis))
        assert b.sum(axis=axis).dtype == np.int64 and b.max(axis=axis).dtype == np.bool_
    i = on_device(np.array([[2**40 + 1, 3], [5, -(2**41)]]))
    assert i.mean(axis=1).dtype == np.float32
    np.testing.assert_allclose(i.mean(axis=1).numpy(), i.numpy().mean(axis=1), rtol=1e-6)
    np.testing.assert_array_equal((b @ b.T).numpy(), b.numpy() @ b.numpy().T)  # bool: int64 counts


@needs_simulator
def test_counter_refuses_nesting():
    with count_traffic():
        with pytest.raises(RuntimeError, match="nested"):
            with count_traffic():
                pass


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=os.path.dirname(os.path.dirname(__file__)),
    )


@pytest.mark.skipif(cb.gpu_present(), reason="a GPU is present: the simulator is not chosen")
def test_simulator_is_chosen_without_a_gpu_even_after_numba():
    r = _run(
        "import numba, minitorch, numpy as np\n"
        "x = minitorch.tensor([1.0, 2.0]).to('cuda')\n"
        "from numba.core import config; print(config.ENABLE_CUDASIM, (x + x).tolist())"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "1"


@pytest.mark.skipif(cb.gpu_present(), reason="a GPU is present")
def test_clear_error_when_numba_cuda_was_loaded_without_the_simulator():
    r = _run("from numba import cuda\nimport minitorch\nminitorch.tensor([1.0]).to('cuda')")
    assert r.returncode != 0 and "NUMBA_ENABLE_CUDASIM=1" in r.stderr


@needs_simulator
def test_simulator_barrier_keeps_its_rules():
    # minitorch.cuda.simulator runs a block's threads as greenlets: a thread that returned
    # no longer holds a barrier up, an exception in one thread ends the block and is raised
    # from the launch naming the thread, and a forgotten barrier still shows
    assert cb.simulator.patch()

    @cuda.jit
    def early_exit(out, n):
        i = cuda.threadIdx.x
        if i >= n:
            return
        cuda.syncthreads()
        out[i] = cuda.syncthreads_count(1)

    out = cuda.to_device(np.zeros(8, np.int64))
    early_exit[1, 8](out, 5)
    np.testing.assert_array_equal(out.copy_to_host(), [5] * 5 + [0] * 3)

    @cuda.jit
    def fails(out):
        if cuda.threadIdx.x == 3:
            raise ValueError("thread three fails")
        cuda.syncthreads()
        out[cuda.threadIdx.x] = 1

    with pytest.raises(ValueError, match=r"tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]: thread three"):
        fails[2, 8](out)

    @cuda.jit
    def shift(out, sync):
        cache = cuda.shared.array(8, numba.int64)
        t = cuda.threadIdx.x
        cache[t] = t + 1
        if sync:
            cuda.syncthreads()
        out[t] = cache[(t + 1) % 8]

    shift[1, 8](out, True)
    np.testing.assert_array_equal(out.copy_to_host(), [2, 3, 4, 5, 6, 7, 8, 1])
    out = cuda.to_device(np.zeros(8, np.int64))
    shift[1, 8](out, False)  # thread 0 reads its neighbour's slot before the neighbour ran
    assert not np.array_equal(out.copy_to_host(), [2, 3, 4, 5, 6, 7, 8, 1])
