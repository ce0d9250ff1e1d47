"""Known-wrong implementations of Chapter 11 (a small transformer)."""

from __future__ import annotations

import math

import numpy as np

import minitorch
import minitorch.cuda  # noqa: F401  (chooses the simulator before numba.cuda loads)

# isort: split
import numba
from numba import cuda

from minitorch.core.creation import where
from minitorch.core.errors import OpError
from minitorch.core.registry import dispatch
from solutions.reference import ch11 as ref

from . import (  # noqa: F401  (the parts of their own: 11.8-11.20)
    ch11_bpe,
    ch11_flash,
    ch11_generate,
    ch11_model,
    ch11_train,
    mutant,
)

# ---------------------------------------------------------------- 11.1 scatter_add_rows


def _check(grad, ids, num_rows):
    if grad.ndim != 2 or ids.ndim != 1 or grad.shape[0] != ids.shape[0]:
        raise OpError("embedding_grad", f"grad {grad.shape} and ids {ids.shape}", "one id per row")
    if ids.size and (ids.min() < 0 or ids.max() >= num_rows):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise OpError("embedding_grad", f"id {bad} is outside [0, {num_rows})", "an id per row")


@mutant("11.1", "out[ids] += grad: a repeated id keeps only one row")
def scatter_add_fancy(grad, ids, num_rows):
    _check(grad, ids, num_rows)
    out = np.zeros((num_rows, grad.shape[1]), grad.dtype)
    out[ids] += grad
    return out


@mutant("11.1", "no range check: a negative id wraps to the last row")
def scatter_add_unchecked(grad, ids, num_rows):
    out = np.zeros((num_rows, grad.shape[1]), grad.dtype)
    np.add.at(out, ids, grad)
    return out


@mutant("11.1", "always float64: the dtype of grad is lost")
def scatter_add_float64(grad, ids, num_rows):
    _check(grad, ids, num_rows)
    out = np.zeros((num_rows, grad.shape[1]))
    np.add.at(out, ids, grad)
    return out


# ---------------------------------------------------------------- 11.2 layer_norm_vjp


def _ln_parts(grad, x, weight, eps):
    lead = tuple(range(x.ndim - 1))
    xc = x - x.mean(axis=-1, keepdims=True)
    inv = ((xc * xc).mean(axis=-1, keepdims=True) + eps).sqrt().recip()
    xhat = xc * inv
    return lead, inv, xhat, grad * weight


@mutant("11.2", "the mean's dependence on x forgotten: no -mean(g) term")
def layer_norm_vjp_no_mean_term(grad, x, weight, eps):
    lead, inv, xhat, gh = _ln_parts(grad, x, weight, eps)
    gx = (gh - xhat * (gh * xhat).mean(axis=-1, keepdims=True)) * inv
    return gx, (grad * xhat).sum(axis=lead), grad.sum(axis=lead)


@mutant("11.2", "the variance's dependence on x forgotten: no xhat * mean(g xhat) term")
def layer_norm_vjp_no_var_term(grad, x, weight, eps):
    lead, inv, xhat, gh = _ln_parts(grad, x, weight, eps)
    gx = (gh - gh.mean(axis=-1, keepdims=True)) * inv
    return gx, (grad * xhat).sum(axis=lead), grad.sum(axis=lead)


@mutant("11.2", "weight and bias gradients summed over axis 0 only")
def layer_norm_vjp_axis0(grad, x, weight, eps):
    lead, inv, xhat, gh = _ln_parts(grad, x, weight, eps)
    gx = (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
    ) * inv
    gw, gb = grad * xhat, grad
    if x.ndim > 1:
        gw, gb = gw.sum(axis=0), gb.sum(axis=0)
    return gx, gw, gb


@mutant("11.2", "the weight gradient uses x instead of xhat")
def layer_norm_vjp_raw_x(grad, x, weight, eps):
    lead, inv, xhat, gh = _ln_parts(grad, x, weight, eps)
    gx = (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
    ) * inv
    return gx, (grad * x).sum(axis=lead), grad.sum(axis=lead)


# ---------------------------------------------------------------- 11.3 attention


def _att_checks(q, k, v, key_mask):
    for t in (q, k, v):
        if t.ndim < 2:
            raise OpError("attention", f"shape {t.shape}", "(T, D)")
    if q.shape[-1] != k.shape[-1]:
        raise OpError("attention", f"q {q.shape} and k {k.shape}", "same D")
    if k.shape[-2] != v.shape[-2]:
        raise OpError("attention", f"k {k.shape} and v {v.shape}", "same Tk")
    if key_mask is not None and key_mask.dtype != np.bool_:
        raise OpError("attention", f"key_mask is {key_mask.dtype.name}", "bool")


def _finish(scores, v, causal, key_mask):
    if causal:
        scores = dispatch("causal_mask", scores)
    if key_mask is not None:
        scores = where(key_mask, scores, -math.inf)
    return dispatch("softmax", scores, axis=-1) @ v


@mutant("11.3", "scores not scaled by 1/sqrt(D)")
def attention_unscaled(q, k, v, causal=True, key_mask=None):
    _att_checks(q, k, v, key_mask)
    return _finish(q @ k.transpose(-2, -1), v, causal, key_mask)


@mutant("11.3", "scaled by 1/D instead of 1/sqrt(D)")
def attention_over_d(q, k, v, causal=True, key_mask=None):
    _att_checks(q, k, v, key_mask)
    return _finish((q @ k.transpose(-2, -1)) * (1.0 / q.shape[-1]), v, causal, key_mask)


@mutant("11.3", "the key mask multiplies the probabilities after softmax (rows no longer sum to 1)")
def attention_mask_after(q, k, v, causal=True, key_mask=None):
    _att_checks(q, k, v, key_mask)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        scores = dispatch("causal_mask", scores)
    p = dispatch("softmax", scores, axis=-1)
    if key_mask is not None:
        p = p * key_mask.astype(p.dtype)
    return p @ v


@mutant("11.3", "no argument checks: mismatched shapes fail deep inside matmul")
def attention_unchecked(q, k, v, causal=True, key_mask=None):
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return _finish(scores, v, causal, key_mask)


# ---------------------------------------------------------------- 11.4, 11.5 fused kernels


def _row_kernel(threads, max_cols, kind, flaw, dtype):
    """One body for both fused kernels, with one deliberate flaw."""

    def kernel_body(out, x, w, b, rows, cols, eps):
        row_cache = cuda.shared.array(max_cols, dtype)
        part = cuda.shared.array(threads, dtype)
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x
        while row < rows:
            base = row * cols
            acc = dtype(-math.inf) if kind == "softmax" and flaw != "max_from_zero" else dtype(0)
            j = t
            while j < cols:
                v = x[base + j]
                row_cache[j] = v
                if kind == "softmax":
                    if v > acc and flaw != "no_max":
                        acc = v
                else:
                    acc += v
                j += threads
            if kind == "softmax" and flaw == "no_max":
                acc = dtype(0)
            part[t] = acc
            cuda.syncthreads()
            s = threads // 2
            while s > 0:
                if t < s:
                    if kind == "softmax":
                        part[t] = max(part[t], part[t + s])
                    else:
                        part[t] += part[t + s]
                cuda.syncthreads()
                s //= 2
            first = part[0] if kind == "softmax" else part[0] / cols
            if flaw == "masked_zero" and first == -math.inf:
                first = dtype(0)
            if flaw != "no_sync":  # without it, part[0] is overwritten before all have read it
                cuda.syncthreads()
            acc = dtype(0)
            j = t
            while j < cols:
                c = x[base + j] if flaw == "reread" else row_cache[j]
                if kind == "softmax":
                    e = math.exp(c - first)
                    row_cache[j] = e
                    acc += e
                elif flaw == "one_pass":
                    acc += c * c
                else:
                    acc += (c - first) * (c - first)
                j += threads
            part[t] = acc
            cuda.syncthreads()
            s = threads // 2
            while s > (1 if flaw == "short_tree" else 0):
                if t < s:
                    part[t] += part[t + s]
                cuda.syncthreads()
                s //= 2
            second = part[0]
            if flaw == "one_pass":  # E[x^2] - E[x]^2, cancelling when |mean| >> spread
                second -= cols * first * first
            if flaw == "masked_zero" and second == 0:
                second = dtype(math.inf)  # with the -inf maximum below: a -inf row gives 0
            n = cols - 1 if flaw == "bessel" and cols > 1 else cols
            inv = 1.0 / (math.sqrt(second / n) + eps) if flaw == "eps_outside" else 0.0
            if flaw != "eps_outside":
                inv = 1.0 / math.sqrt(second / n + eps)
            j = t
            while j < cols:
                if kind == "softmax":
                    out[base + j] = row_cache[j] / second
                else:
                    out[base + j] = (row_cache[j] - first) * inv * w[j] + b[j]
                j += threads
            cuda.syncthreads()
            row += 1 if flaw == "no_row_stride" else cuda.gridDim.x
            if flaw == "no_row_stride":
                row = rows

    return kernel_body


def _wrap_softmax(threads, max_cols, dtype, flaw):
    body = cuda.jit(device=True)(_row_kernel(threads, max_cols, "softmax", flaw, dtype))

    def kernel(out, x, rows, cols):
        body(out, x, x, x, rows, cols, dtype(0))

    return kernel


def _wrap_ln(threads, max_cols, dtype, flaw):
    body = cuda.jit(device=True)(_row_kernel(threads, max_cols, "layer_norm", flaw, dtype))

    def kernel(out, x, w, b, rows, cols, eps):
        body(out, x, w, b, rows, cols, eps)

    return kernel


@mutant("11.4", "no row cache: the second pass reads x from global memory again")
def softmax_kernel_reread(threads, max_cols, dtype):
    return _wrap_softmax(threads, max_cols, dtype, "reread")


@mutant("11.4", "the maximum is not subtracted: exp overflows on large rows")
def softmax_kernel_no_max(threads, max_cols, dtype):
    return _wrap_softmax(threads, max_cols, dtype, "no_max")


@mutant("11.4", "one row per block: rows beyond the grid are never computed")
def softmax_kernel_no_row_stride(threads, max_cols, dtype):
    return _wrap_softmax(threads, max_cols, dtype, "no_row_stride")


@mutant("11.4", "the sum tree stops one level early: one partial sum is left out")
def softmax_kernel_short_tree(threads, max_cols, dtype):
    return _wrap_softmax(threads, max_cols, dtype, "short_tree")


@mutant("11.5", "variance with Bessel's correction (divides by cols - 1)")
def layer_norm_kernel_bessel(threads, max_cols, dtype):
    return _wrap_ln(threads, max_cols, dtype, "bessel")


@mutant("11.5", "no row cache: the variance pass reads x from global memory again")
def layer_norm_kernel_reread(threads, max_cols, dtype):
    return _wrap_ln(threads, max_cols, dtype, "reread")


@mutant("11.5", "one row per block: rows beyond the grid are never computed")
def layer_norm_kernel_no_row_stride(threads, max_cols, dtype):
    return _wrap_ln(threads, max_cols, dtype, "no_row_stride")


@mutant("11.5", "eps added outside the square root")
def layer_norm_kernel_eps_outside(threads, max_cols, dtype):
    return _wrap_ln(threads, max_cols, dtype, "eps_outside")


@mutant("11.4", "shared arrays and sums in float64 whatever the dtype: slow on consumer GPUs")
def softmax_kernel_float64(threads, max_cols, dtype):
    return ref.softmax_kernel(threads, max_cols, numba.float64)


@mutant("11.5", "shared arrays and sums in float64 whatever the dtype: slow on consumer GPUs")
def layer_norm_kernel_float64(threads, max_cols, dtype):
    return ref.layer_norm_kernel(threads, max_cols, numba.float64)


# ---------------------------------------------------------------- 11.6 bucket_batches


def _bucketed(lengths, batch_size, multiple, pad, keep_last=True):
    if (
        not isinstance(batch_size, int)
        or batch_size < 1
        or not isinstance(multiple, int)
        or multiple < 1
    ):
        raise OpError("bucket_batches", f"batch_size {batch_size} / multiple {multiple}")
    buckets = {}
    for i, n in enumerate(lengths):
        if n < 1:
            raise OpError("bucket_batches", f"sequence {i} has length {n}")
        buckets.setdefault(pad(n, multiple), []).append(i)
    out = []
    for p in sorted(buckets):
        idx = buckets[p]
        for s in range(0, len(idx), batch_size):
            if keep_last or s + batch_size <= len(idx):
                out.append((p, idx[s : s + batch_size]))
    return out


@mutant("11.6", "rounds down: a length of 17 pads to 16 and is cut")
def bucket_batches_floor(lengths, batch_size, multiple):
    return _bucketed(lengths, batch_size, multiple, lambda n, m: max(m, n // m * m))


@mutant("11.6", "off by one: a length that is already a multiple moves up a bucket")
def bucket_batches_off_by_one(lengths, batch_size, multiple):
    return _bucketed(lengths, batch_size, multiple, lambda n, m: (n // m + 1) * m)


@mutant("11.6", "drops each bucket's last, smaller batch")
def bucket_batches_drop_last(lengths, batch_size, multiple):
    return _bucketed(lengths, batch_size, multiple, lambda n, m: -(-n // m) * m, keep_last=False)


# ---------------------------------------------------------------- 11.7 sample_next


def _sampled(logits, temperature, top_k, u, scale=None, extra=0, ge=False, shift=True):
    logits = np.asarray(logits, np.float64)
    if logits.ndim != 1 or logits.size == 0:
        raise OpError("sample_next", f"logits shape {logits.shape}")
    if temperature < 0 or (top_k is not None and (not isinstance(top_k, int) or top_k < 1)):
        raise OpError("sample_next", f"temperature {temperature} or top_k {top_k}")
    if not 0 <= u < 1:
        raise OpError("sample_next", f"u {u}")
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits * temperature if scale == "mul" else logits / temperature
    keep = np.ones(z.size, bool)
    if top_k is not None and top_k + extra < z.size:
        keep[:] = False
        keep[np.argsort(-z, kind="stable")[: top_k + extra]] = True
    with np.errstate(all="ignore"):
        e = np.where(keep, np.exp(z - (z[keep].max() if shift else 0.0)), 0.0)
        p = np.cumsum(e / e.sum())
    over = np.flatnonzero(p >= u if ge else p > u)
    return int(over[0]) if over.size else int(np.flatnonzero(keep)[-1])


@mutant("11.7", ">= instead of >: u = 0 picks a token of probability 0")
def sample_next_ge(logits, temperature, top_k, u):
    return _sampled(logits, temperature, top_k, u, ge=True)


@mutant("11.7", "top-k keeps one token too many")
def sample_next_top_k_plus_one(logits, temperature, top_k, u):
    return _sampled(logits, temperature, top_k, u, extra=1)


@mutant("11.7", "multiplies by the temperature instead of dividing")
def sample_next_times_temperature(logits, temperature, top_k, u):
    return _sampled(logits, temperature, top_k, u, scale="mul")


@mutant("11.7", "no maximum subtracted: exp(1000) overflows to NaN")
def sample_next_no_shift(logits, temperature, top_k, u):
    return _sampled(logits, temperature, top_k, u, shift=False)


@mutant("11.4", "the running maximum starts at 0: a row of large negative values gives 0 / 0")
def softmax_kernel_max_from_zero(threads, max_cols, dtype):
    return _wrap_softmax(threads, max_cols, dtype, "max_from_zero")


@mutant("11.4", "a fully masked row (all -inf) gives zeros, not NaN as numpy does")
def softmax_kernel_masked_zero(threads, max_cols, dtype):
    return _wrap_softmax(threads, max_cols, dtype, "masked_zero")


@mutant("11.5", "one-pass variance E[x^2] - mean^2: rows far from 0 with a small spread lose it")
def layer_norm_kernel_one_pass(threads, max_cols, dtype):
    return _wrap_ln(threads, max_cols, dtype, "one_pass")


@mutant("11.1", "a one-hot matrix product: an inf or NaN in one row spreads to every row (0 * inf)")
def scatter_add_one_hot(grad, ids, num_rows):
    _check(grad, ids, num_rows)
    one_hot = (ids[None, :] == np.arange(num_rows)[:, None]).astype(grad.dtype)
    return one_hot @ grad


@mutant("11.1", "returns grad itself when every id is its own row (the identity case aliases)")
def scatter_add_alias(grad, ids, num_rows):
    _check(grad, ids, num_rows)
    if grad.shape[0] == num_rows and (ids == np.arange(num_rows)).all():
        return grad
    out = np.zeros((num_rows, grad.shape[1]), grad.dtype)
    np.add.at(out, ids, grad)
    return out


@mutant("11.2", "one-pass variance mean(x*x) - mean(x)^2: rows far from 0 with a small spread")
def layer_norm_vjp_one_pass(grad, x, weight, eps):
    lead = tuple(range(x.ndim - 1))
    mean = x.mean(axis=-1, keepdims=True)
    inv = ((x * x).mean(axis=-1, keepdims=True) - mean * mean + eps).sqrt().recip()
    xhat = (x - mean) * inv
    gh = grad * weight
    gx = (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
    ) * inv
    return gx, (grad * xhat).sum(axis=lead), grad.sum(axis=lead)


@mutant("11.2", "computed in numpy and wrapped back: not traced, and always on the cpu")
def layer_norm_vjp_numpy(grad, x, weight, eps):
    g, xa, w = grad.numpy(), x.numpy(), weight.numpy()
    lead = tuple(range(xa.ndim - 1))
    xc = xa - xa.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xhat = xc * inv
    gh = g * w
    gx = (gh - gh.mean(-1, keepdims=True) - xhat * (gh * xhat).mean(-1, keepdims=True)) * inv
    return (
        minitorch.tensor(gx),
        minitorch.tensor((g * xhat).sum(axis=lead)),
        minitorch.tensor(g.sum(axis=lead)),
    )


@mutant("11.3", "only q's rank is checked: a 1-D key or value fails inside matmul")
def attention_q_rank_only(q, k, v, causal=True, key_mask=None):
    if q.ndim < 2:
        raise OpError("attention", f"q shape {q.shape}", hint="(T, D)")
    if q.shape[-1] != k.shape[-1]:
        raise OpError("attention", f"q {q.shape} and k {k.shape}", hint="same D")
    if k.shape[-2] != v.shape[-2]:  # an IndexError when k or v is 1-D
        raise OpError("attention", f"k {k.shape} and v {v.shape}", hint="same Tk")
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return _finish(scores, v, causal, key_mask)


@mutant("11.3", "hidden keys get -1e9 instead of -inf: visible scores below -1e9 lose to them")
def attention_mask_big_negative(q, k, v, causal=True, key_mask=None):
    _att_checks(q, k, v, key_mask)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        scores = dispatch("causal_mask", scores)
    if key_mask is not None:
        scores = where(key_mask, scores, -1e9)
    return dispatch("softmax", scores, axis=-1) @ v


@mutant("11.3", "softmax written as exp(s) / sum(exp(s)): no maximum subtracted")
def attention_plain_exp(q, k, v, causal=True, key_mask=None):
    _att_checks(q, k, v, key_mask)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        scores = dispatch("causal_mask", scores)
    if key_mask is not None:
        scores = where(key_mask, scores, -math.inf)
    e = scores.exp()
    return (e / e.sum(axis=-1, keepdims=True)) @ v


@mutant("11.6", "no argument check when there are no lengths: bucket_batches([], 0, 4) is []")
def bucket_batches_empty_unchecked(lengths, batch_size, multiple):
    if not lengths:
        return []
    return ref.bucket_batches(lengths, batch_size, multiple)


@mutant("11.6", "multiple checked for > 0 only: a float multiple gives float padded lengths")
def bucket_batches_float_multiple(lengths, batch_size, multiple):
    if isinstance(multiple, float) and multiple > 0:
        return _bucketed(lengths, batch_size, 1, lambda n, m: -(-n // multiple) * multiple)
    return ref.bucket_batches(lengths, batch_size, multiple)


@mutant("11.7", "removed tokens get -1e9, not probability 0: with logits below -1e9 they win")
def sample_next_big_negative(logits, temperature, top_k, u):
    ref.sample_next(logits, temperature, top_k, u)  # its argument checks
    z = np.asarray(logits, np.float64)
    if temperature > 0 and top_k is not None and top_k < z.size and z.ndim == 1:
        kept = np.argsort(-z, kind="stable")[:top_k]
        z = np.where(np.isin(np.arange(z.size), kept), z, -1e9 * temperature)
    return ref.sample_next(z, temperature, None if temperature > 0 else top_k, u)


@mutant("11.7", "when rounding leaves the total below u, returns the last token, kept or not")
def sample_next_last_token(logits, temperature, top_k, u):
    got = ref.sample_next(logits, temperature, top_k, u)
    if temperature > 0 and top_k is not None and top_k < len(logits):
        z = np.asarray(logits, np.float64) / temperature
        keep = np.argsort(-z, kind="stable")[:top_k]
        e = np.exp(z[keep] - z[keep].max())
        if np.cumsum(e / e.sum())[-1] <= u:
            return len(logits) - 1
    return got


@mutant("11.4", "no barrier after reading the maximum: the sum's partials overwrite it first")
def softmax_kernel_no_sync(threads, max_cols, dtype):
    return _wrap_softmax(threads, max_cols, dtype, "no_sync")


@mutant("11.5", "no barrier after reading the mean: the variance's partials overwrite it first")
def layer_norm_kernel_no_sync(threads, max_cols, dtype):
    return _wrap_ln(threads, max_cols, dtype, "no_sync")


@mutant("11.1", "accumulates in float32 and casts back: a float64 grad loses digits")
def scatter_add_float32_sum(grad, ids, num_rows):
    _check(grad, ids, num_rows)
    out = np.zeros((num_rows, grad.shape[1]), np.float32)
    np.add.at(out, ids, grad.astype(np.float32))
    return out.astype(grad.dtype)
