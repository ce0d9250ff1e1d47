"""Chapter 11's flash_attention (framework around exercises 11.19-11.20): its checks, broadcasting,
the cuda path and the memory it saves (not graded)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch import OpError
from minitorch.transformer import attention, flash, flash_attention


def _t(a, **kw):
    return mt.tensor(np.asarray(a), **kw)


def _qkv(rng, lead, tq, tk, d=4, dv=3):
    return (_t(rng.standard_normal(lead + (n, m))) for n, m in ((tq, d), (tk, d), (tk, dv)))


@pytest.mark.parametrize("causal", [True, False])
def test_equals_plain_attention_with_heads_broadcast_and_a_key_mask(causal):
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, (2, 3), 5, 21, 4, 2)  # 21 keys: two tiles of 16, the second partial
    k, v = k[:1], v[:1]  # one batch of keys and values for both batches of queries
    mask = _t(rng.random((2, 1, 1, 21)) > 0.3)
    got = flash_attention(q, k, v, causal=causal, key_mask=mask).numpy()
    want = attention(q, k, v, causal=causal, key_mask=mask).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_a_fully_masked_row_is_nan_as_in_plain_attention():
    rng = np.random.default_rng(1)
    q, k, v = _qkv(rng, (2,), 3, 3)
    mask = _t(np.array([[[False, True, True]], [[False, False, False]]]))  # causal query 0: none
    got = flash_attention(q, k, v, key_mask=mask).numpy()
    want = attention(q, k, v, key_mask=mask).numpy()
    assert np.isnan(got[1]).all() and np.isnan(got[0, 0]).all()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_cuda_equals_cpu():
    rng = np.random.default_rng(2)
    q, k, v = _qkv(rng, (2,), 6, 6)
    got = flash_attention(q.to("cuda"), k.to("cuda"), v.to("cuda"))
    assert got.device == "cuda"
    np.testing.assert_allclose(got.numpy(), flash_attention(q, k, v).numpy(), rtol=1e-9)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda q, k, v: flash_attention(q[0, 0], k, v), ["q", "2+ dims"]),
        (lambda q, k, v: flash_attention(q, k.float(), v), ["k", "float32"]),
        (lambda q, k, v: flash_attention(q, k[..., :3], v), ["share D"]),
        (lambda q, k, v: flash_attention(q, k, v[:, :2]), ["share Tk"]),
        (lambda q, k, v: flash_attention(q, k[:, :2], v[:, :2]), ["causal", "Tq <= Tk"]),
        (lambda q, k, v: flash_attention(q, k, v, key_mask=_t(np.ones((2, 4, 4)))), ["bool"]),
        (
            lambda q, k, v: flash_attention(q, k, v, key_mask=_t(np.ones((2, 4, 4), bool))),
            ["key_mask", "(..., 1, Tk)"],
        ),
        (lambda q, k, v: flash_attention(q, k, v.to("cuda")), ["v", "cuda"]),
        (lambda q, k, v: flash_attention(q, k, v, key_mask=_t(np.ones(3, bool))), ["4 keys", "Tk"]),
        (lambda q, k, v: flash_attention(q.astype("int64"), k, v), ["q", "int64"]),
    ],
)
def test_refusals_name_the_argument_and_what_works(call, words):
    q, k, v = _qkv(np.random.default_rng(3), (2,), 4, 4)
    with pytest.raises(OpError) as e:
        call(q, k, v)
    assert e.value.op == "flash_attention" and e.value.hint
    assert all(w in str(e.value) for w in words), str(e.value)


def test_no_backward_so_inputs_that_need_gradients_are_refused():
    q, k, v = _qkv(np.random.default_rng(4), (1,), 3, 3)
    q.requires_grad = True
    with pytest.raises(OpError, match="requires grad") as e:
        flash_attention(q, k, v)
    assert "attention(q, k, v)" in e.value.hint
    with mt.no_grad():  # inference: allowed
        flash_attention(q, k, v)


def test_peak_memory_stays_linear_while_plain_attention_grows_with_t_squared():
    (t1, plain1, tiled1, _), (t2, plain2, tiled2, scores2) = flash.peak_kib((64, 256), heads=2)
    assert plain2 > scores2 and plain2 / plain1 > 10  # 4x T: 16x the scores
    assert tiled2 < scores2 / 10 and tiled2 / tiled1 < 5
