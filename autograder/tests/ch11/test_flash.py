"""Graded: tiled attention with an online softmax, the Numba rows (11.19) and the CUDA kernel
(11.20), against full-matrix attention in float64 numpy (``util.attention_ref``).

The CUDA tests run on the simulator, which counts global and shared memory accesses; on a GPU
machine each reruns itself there (chapter 4's ``rerun_on_simulator``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
import minitorch.cuda  # noqa: F401  (chooses the simulator before numba.cuda loads)
from autograder.harness import assert_close, check, graded, text
from autograder.strategies import values
from autograder.tests.ch4.util import on_device, rerun_on_simulator
from minitorch.cuda.traffic import count_traffic
from minitorch.transformer import flash, flash_attention

from .util import attention_ref

# One query (q = 1, D = 1: each score is one exact product) per batch over 6 keys: only -inf
# scores in the first tiles, then finite ones (a tile with no finite score must add nothing);
# scores of -1e30 (a maximum started at 0 makes every exp 0); a +inf and a NaN score (NaN rows,
# as the plain softmax gives).
EXTREME_Q = np.ones((4, 1, 1))
EXTREME_K = np.array([[-np.inf] * 4 + [0.5, 1.0], [-1e30, -2e30, -1e30, -3e30, -1e30, -2e30],
                      [1.0, np.inf, 0.0, 2.0, 0.0, 0.0], [1.0, np.nan, 0.0, 2.0, 0.0, 0.0]])[..., None]  # fmt: skip
EXTREME_V = np.arange(48.0).reshape(4, 6, 2)


def _arrays(rng, lead, tq, tk, d, dv, dtype=np.float64):
    q, k = rng.standard_normal(lead + (tq, d)), rng.standard_normal(lead + (tk, d))
    v = rng.standard_normal(lead + (tk, dv))
    return tuple(a.astype(dtype) for a in (q, k, v))


def _rows(q, k, v, keep, causal, tile):
    """Exercise 11.19 run directly on (B, T, D) arrays with a chosen tile."""
    out = np.full(q.shape[:2] + v.shape[-1:], -7.25, q.dtype)
    returned = flash._cpu_kernel()(out, q, k, v, keep, causal, 1.0 / np.sqrt(q.shape[-1]), tile)
    return out, returned


@st.composite
def problems(draw, max_t=12, max_b=3):
    b = draw(st.integers(1, max_b))
    tk = draw(st.integers(1, max_t))
    causal = draw(st.booleans())
    tq = draw(st.integers(1, tk if causal else max_t))
    d, dv = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    masked = draw(st.booleans())
    return b, tq, tk, d, dv, causal, seed, masked


def _keep(rng, b, tk, masked):
    return rng.random((b, tk)) > 0.35 if masked else np.ones((b, tk), bool)


# ---------------------------------------------------------------- 11.19 flash_rows


@graded("11.19", points=2)
@settings(max_examples=20)
@given(problem=problems(), tile=st.sampled_from([1, 2, 3, 16]))
def test_flash_rows_equal_attention(problem, tile):
    """contract: Fill ``out`` with causal, key-masked attention, visiting the keys ``tile`` at a time
    contract: ``out[b, i]`` must equal ``attention(q[b], k[b], v[b], causal, key_mask)``
    contract: the queries are the last ``Tq`` positions"""
    b, tq, tk, d, dv, causal, seed, masked = problem
    rng = np.random.default_rng(seed)
    q, k, v = _arrays(rng, (b,), tq, tk, d, dv)
    keep = _keep(rng, b, tk, masked)
    got, _ = _rows(q, k, v, keep, causal, tile)
    want = attention_ref(q, k, v, causal, keep[:, None, :])
    assert_close(got, want, "11.19", rtol=1e-9, atol=1e-12, shape=q.shape, tk=tk, tile=tile,
                 causal=causal, keep=keep)  # fmt: skip


@graded("11.19", points=1)
def test_flash_rows_rescale_when_the_maximum_grows():
    # scores rise by 40 a key: every tile raises the maximum, and what was summed under the
    # old one must shrink by exp(old - new) (without it the first keys weigh e**40 too much)
    tk = 11
    q = np.ones((1, 1, 1))
    k = (np.arange(tk) * 40.0).reshape(1, tk, 1)
    v = np.random.default_rng(3).standard_normal((1, tk, 2))
    keep = np.ones((1, tk), bool)
    for tile in (1, 2, 4):
        got, _ = _rows(q, k, v, keep, False, tile)
        assert_close(got, attention_ref(q, k, v, False, None), "11.19", rtol=1e-9, atol=1e-12,
                     tile=tile)  # fmt: skip


@graded("11.19", points=2)
@settings(max_examples=25)
@given(data=st.data())
def test_flash_rows_extreme_values(data):
    """contract: A query that sees no key gets a row of NaN
    contract: so does a row whose seen scores hold a NaN or ``+inf``"""
    # D = 1 (one product per score: the same bits in any order); the values strategy mixes
    # inf, -inf, NaN, -0.0, denormals and huge values into q and k
    tk = data.draw(st.integers(1, 7))
    tq = data.draw(st.integers(1, tk))
    q, k = data.draw(values((2, tq, 1))), data.draw(values((2, tk, 1)))
    v = data.draw(values((2, tk, 2), special=False, families=("quarters",)))
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=2 * tk, max_size=2 * tk)))
    keep = keep.reshape(2, tk)
    causal, tile = data.draw(st.booleans()), data.draw(st.sampled_from([1, 2, 5]))
    got, _ = _rows(q, k, v, keep, causal, tile)
    with np.errstate(all="ignore"):
        want = attention_ref(q, k, v, causal, keep[:, None, :])
    assert_close(got, want, "11.19", rtol=1e-9, atol=1e-12, q=q, k=k, keep=keep, causal=causal,
                 tile=tile)  # fmt: skip
    # the table above (-inf tiles first, scores of -1e30, +inf, NaN), and every key hidden
    for keep in (np.ones((4, 6), bool), np.zeros((4, 6), bool)):
        got, _ = _rows(EXTREME_Q, EXTREME_K, EXTREME_V, keep, True, 2)
        with np.errstate(all="ignore"):
            want = attention_ref(EXTREME_Q, EXTREME_K, EXTREME_V, True, keep[:, None, :])
        assert_close(got, want, "11.19", rtol=1e-9, atol=1e-12, q=EXTREME_Q, k=EXTREME_K,
                     keep=keep)  # fmt: skip


@graded("11.19", points=1)
def test_flash_rows_write_into_out():
    """contract: It returns None: the result is written into ``out``
    contract: ``q``, ``k``, ``v`` and ``out`` share one float dtype"""
    rng = np.random.default_rng(4)
    q, k, v = _arrays(rng, (2,), 5, 9, 3, 2, np.float32)
    keep = _keep(rng, 2, 9, True)
    before = [a.copy() for a in (q, k, v, keep)]
    got, returned = _rows(q, k, v, keep, True, 4)
    check(returned is None, "11.19", "flash_rows returns None (it fills out)", value=text(returned))
    check(all((a == b).all() for a, b in zip((q, k, v, keep), before)), "11.19",
          "q, k, v and keep are read, never written")  # fmt: skip
    want = attention_ref(q, k, v, True, keep[:, None, :])
    assert_close(got, want, "11.19", rtol=1e-5, atol=1e-6, dtype=text("float32"))
    # and through flash_attention: heads broadcast, a (B, 1, 1, Tk) key mask
    q, k, v = _arrays(rng, (2, 3), 6, 6, 4, 4)
    mask = rng.random((2, 1, 1, 6)) > 0.3
    got = flash_attention(*(minitorch.tensor(a) for a in (q, k, v)), causal=True,
                          key_mask=minitorch.tensor(mask)).numpy()  # fmt: skip
    assert_close(got, attention_ref(q, k, v, True, mask), "11.19", rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- 11.20 flash_kernel


def _on_cuda(q, k, v, keep, causal):
    tensors = [on_device(a) for a in (q, k, v)]
    mask = minitorch.tensor(keep[:, None, :])
    return tensors, flash_attention(*tensors, causal=causal, key_mask=mask)


@graded("11.20", points=2)
def test_flash_kernel_equal_attention(request):
    """contract: Return the body of a tiled attention kernel
    contract: Same arrays and the same result as :func:`flash_rows`"""
    if rerun_on_simulator(request) is not None:  # before the examples: one child for all
        return
    _kernel_examples()


@settings(max_examples=6)
@given(problem=problems(max_t=9, max_b=3))
def _kernel_examples(problem):
    b, tq, tk, d, dv, causal, seed, masked = problem
    rng = np.random.default_rng(seed)
    q, k, v = _arrays(rng, (b,), tq, tk, d, dv)
    keep = _keep(rng, b, tk, masked)
    _, got = _on_cuda(q, k, v, keep, causal)
    want = attention_ref(q, k, v, causal, keep[:, None, :])
    assert_close(got.numpy(), want, "11.20", rtol=1e-9, atol=1e-12, shape=q.shape, tk=tk,
                 causal=causal, keep=keep)  # fmt: skip


@graded("11.20", points=1)
def test_flash_kernel_many_query_blocks_and_extremes(request):
    if rerun_on_simulator(request) is not None:
        return
    # 3 batches of 10 queries: 9 query blocks of 4 threads on a grid of 4 blocks; a query block
    # whose last threads have no query (10 = 4 + 4 + 2)
    rng = np.random.default_rng(6)
    q, k, v = _arrays(rng, (3,), 10, 10, 2, 2)
    keep = _keep(rng, 3, 10, True)
    _, got = _on_cuda(q, k, v, keep, True)
    want = attention_ref(q, k, v, True, keep[:, None, :])
    assert_close(got.numpy(), want, "11.20", rtol=1e-9, atol=1e-12, keep=keep)
    # one query and many keys: threads without a query load the tiles
    q, k, v = _arrays(rng, (1,), 1, 7, 3, 2)
    _, got = _on_cuda(q, k, v, np.ones((1, 7), bool), False)
    assert_close(got.numpy(), attention_ref(q, k, v, False, None), "11.20", rtol=1e-9, atol=1e-12)
    for keep in (np.ones((4, 6), bool), np.zeros((4, 6), bool)):
        _, got = _on_cuda(EXTREME_Q, EXTREME_K, EXTREME_V, keep, True)
        with np.errstate(all="ignore"):
            want = attention_ref(EXTREME_Q, EXTREME_K, EXTREME_V, True, keep[:, None, :])
        assert_close(got.numpy(), want, "11.20", rtol=1e-9, atol=1e-12, keep=keep)
    q, k, v = _arrays(rng, (2,), 5, 5, 3, 3, np.float32)
    _, got = _on_cuda(q, k, v, np.ones((2, 5), bool), True)
    check(got.dtype == np.float32, "11.20", "float32 in, float32 out", value=text(got.dtype.name))
    assert_close(got.numpy(), attention_ref(q, k, v, True, None), "11.20", rtol=1e-5, atol=1e-6)


@graded("11.20", points=3)
def test_flash_kernel_traffic(request):
    """contract: ``q`` is read from global memory once
    contract: each element of ``k`` and ``v`` at most once per query block
    contract: ``out`` is the only thing written
    contract: every query of the block reads them there
    contract: a query block loads no tile that starts past the last key its last query sees"""
    if rerun_on_simulator(request) is not None:
        return
    from minitorch.transformer.flash_cuda import FLASH_TILE

    b, t, d = 2, 10, 3
    blocks = -(-t // FLASH_TILE)
    rng = np.random.default_rng(7)
    q, k, v = _arrays(rng, (b,), t, t, d, d)
    keep = _keep(rng, b, t, True)
    for causal in (False, True):
        with count_traffic() as traffic:
            (tq, tk, tv), y = _on_cuda(q, k, v, keep, causal)
        want = attention_ref(q, k, v, causal, keep[:, None, :])
        assert_close(y.numpy(), want, "11.20", rtol=1e-9, atol=1e-12, causal=causal)
        check(traffic.reads(tq) == q.size and traffic.max_reads_per_element(tq) == 1, "11.20",
              "each element of q read from global memory once",
              value=[traffic.reads(tq), traffic.max_reads_per_element(tq)])  # fmt: skip
        seen = keep[:, None, :] & (np.tri(t, dtype=bool) if causal else True)
        check(traffic.shared_reads >= int(seen.sum()) * d, "11.20",
              "every score should read its key row from the shared tile",
              shared_reads=traffic.shared_reads, causal=causal)  # fmt: skip
        most = max(traffic.max_reads_per_element(x) for x in (tk, tv))
        check(most <= blocks, "11.20",
              f"k and v read at most once per query block ({blocks}): cache each tile in shared memory",
              value=most, causal=causal)  # fmt: skip
        # under causal (Tq = Tk), the block of queries first..first + tile - 1 loads the keys
        # before first + tile, the last query's view, in whole tiles
        firsts = range(0, t, FLASH_TILE)
        starts = [min(t, -(-(f + FLASH_TILE) // FLASH_TILE) * FLASH_TILE) for f in firsts]
        keys = b * sum(starts) if causal else b * t * blocks
        check(traffic.reads(tk) <= keys * d, "11.20",
              f"k read for at most {keys} keys (causal: no tile past a block's last query)",
              value=traffic.reads(tk), causal=causal)  # fmt: skip
        # full-matrix attention writes the b * t * t scores (and reads them back); here only
        # out is written, once per element
        check(traffic.writes(y) == y.size and traffic.total_global_writes == y.size, "11.20",
              f"only out written, once per element ({y.size}); {b * t * t} scores would be more",
              value=traffic.total_global_writes, causal=causal)  # fmt: skip
