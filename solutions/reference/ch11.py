"""Reference solutions, Chapter 11 (a small transformer). Same names and signatures as the stubs."""

from __future__ import annotations

import math

import numpy as np

import minitorch.cuda  # noqa: F401  (chooses the simulator before numba.cuda loads)

# isort: split
from numba import cuda

from minitorch.core.creation import where
from minitorch.core.errors import OpError
from minitorch.core.registry import dispatch

from .ch11_bpe import *  # noqa: F401,F403  (the parts of their own)
from .ch11_flash import *  # noqa: F401,F403
from .ch11_generate import *  # noqa: F401,F403
from .ch11_model import *  # noqa: F401,F403
from .ch11_train import *  # noqa: F401,F403

# ---------------------------------------------------------------- 11.1


def scatter_add_rows(grad, ids, num_rows):
    if grad.ndim != 2 or ids.ndim != 1 or grad.shape[0] != ids.shape[0]:
        raise OpError(
            "embedding_grad",
            f"grad {grad.shape} needs one row per id, ids {ids.shape}",
            hint="grad is (N, C) and ids (N,)",
        )
    if ids.size and (ids.min() < 0 or ids.max() >= num_rows):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise OpError(
            "embedding_grad", f"id {bad} is outside [0, {num_rows})", hint="check the vocabulary"
        )
    out = np.zeros((num_rows, grad.shape[1]), dtype=grad.dtype)
    np.add.at(out, ids, grad)
    return out


# ---------------------------------------------------------------- 11.2


def layer_norm_vjp(grad, x, weight, eps):
    lead = tuple(range(x.ndim - 1))
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    inv = ((xc * xc).mean(axis=-1, keepdims=True) + eps).sqrt().recip()
    xhat = xc * inv
    gb = grad.sum(axis=lead) if lead else grad
    gw = (grad * xhat).sum(axis=lead) if lead else grad * xhat
    gh = grad * weight
    gx = (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
    ) * inv
    return gx, gw, gb


# ---------------------------------------------------------------- 11.3


def attention(q, k, v, causal=True, key_mask=None):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim < 2:
            raise OpError(
                "attention",
                f"{name} needs 2+ dims (..., T, D), got shape {t.shape}",
                hint="one sequence is (T, D): reshape a single vector to (1, D)",
            )
    if q.shape[-1] != k.shape[-1]:
        raise OpError(
            "attention",
            f"q {q.shape} and k {k.shape} have different feature sizes",
            hint="queries and keys must share the last dim D",
        )
    if k.shape[-2] != v.shape[-2]:
        raise OpError(
            "attention",
            f"k {k.shape} and v {v.shape} have different numbers of keys",
            hint="one value per key: k.shape[-2] == v.shape[-2]",
        )
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        scores = dispatch("causal_mask", scores)
    if key_mask is not None:
        if key_mask.dtype != np.bool_:
            raise OpError(
                "attention", f"key_mask must be bool, got {key_mask.dtype.name}", hint="mask == 1"
            )
        scores = where(key_mask, scores, -math.inf)
    return dispatch("softmax", scores, axis=-1) @ v


# ---------------------------------------------------------------- 11.4, 11.5


def softmax_kernel(threads, max_cols, dtype):
    def kernel(out, x, rows, cols):
        row_cache = cuda.shared.array(max_cols, dtype)
        part = cuda.shared.array(threads, dtype)
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x
        while row < rows:
            base = row * cols
            m = dtype(-math.inf)
            j = t
            while j < cols:
                v = x[base + j]
                row_cache[j] = v
                if v > m or v != v:
                    m = v
                j += threads
            part[t] = m
            cuda.syncthreads()
            s = threads // 2
            while s > 0:
                if t < s and (part[t + s] > part[t] or part[t + s] != part[t + s]):
                    part[t] = part[t + s]
                cuda.syncthreads()
                s //= 2
            m = part[0]
            cuda.syncthreads()
            total = dtype(0)
            j = t
            while j < cols:
                e = math.exp(row_cache[j] - m)
                row_cache[j] = e
                total += e
                j += threads
            part[t] = total
            cuda.syncthreads()
            s = threads // 2
            while s > 0:
                if t < s:
                    part[t] += part[t + s]
                cuda.syncthreads()
                s //= 2
            total = part[0]
            j = t
            while j < cols:
                out[base + j] = row_cache[j] / total
                j += threads
            cuda.syncthreads()
            row += cuda.gridDim.x

    return kernel


def layer_norm_kernel(threads, max_cols, dtype):
    def kernel(out, x, w, b, rows, cols, eps):
        row_cache = cuda.shared.array(max_cols, dtype)
        part = cuda.shared.array(threads, dtype)
        n = dtype(cols)  # a float32 divided by an int is float64 in Numba
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x
        while row < rows:
            base = row * cols
            acc = dtype(0)
            j = t
            while j < cols:
                v = x[base + j]
                row_cache[j] = v
                acc += v
                j += threads
            part[t] = acc
            cuda.syncthreads()
            s = threads // 2
            while s > 0:
                if t < s:
                    part[t] += part[t + s]
                cuda.syncthreads()
                s //= 2
            mean = part[0] / n
            cuda.syncthreads()
            acc = dtype(0)
            j = t
            while j < cols:
                d = row_cache[j] - mean
                acc += d * d
                j += threads
            part[t] = acc
            cuda.syncthreads()
            s = threads // 2
            while s > 0:
                if t < s:
                    part[t] += part[t + s]
                cuda.syncthreads()
                s //= 2
            inv = dtype(1) / math.sqrt(part[0] / n + eps)
            j = t
            while j < cols:
                out[base + j] = (row_cache[j] - mean) * inv * w[j] + b[j]
                j += threads
            cuda.syncthreads()
            row += cuda.gridDim.x

    return kernel


# ---------------------------------------------------------------- 11.6


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise OpError(
            "bucket_batches",
            f"{name} must be a positive int, got {value!r}",
            hint=f"for example {name}=8",
        )


def bucket_batches(lengths, batch_size, multiple):
    _positive("batch_size", batch_size)
    _positive("multiple", multiple)
    buckets = {}
    for i, n in enumerate(lengths):
        if n < 1:
            raise OpError(
                "bucket_batches", f"sequence {i} has length {n}", hint="lengths are at least 1"
            )
        buckets.setdefault(-(-int(n) // multiple) * multiple, []).append(i)
    out = []
    for padded in sorted(buckets):
        idx = buckets[padded]
        out += [(padded, idx[s : s + batch_size]) for s in range(0, len(idx), batch_size)]
    return out


# ---------------------------------------------------------------- 11.7


def sample_next(logits, temperature, top_k, u):
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 1 or logits.size == 0:
        raise OpError(
            "sample_next",
            f"logits must be 1-D and non-empty, got shape {logits.shape}",
            hint="one logit per token: logits[0, -1] of the model's output",
        )
    if not temperature >= 0:
        raise OpError(
            "sample_next", f"temperature must be >= 0, got {temperature}", hint="0: greedy"
        )
    if top_k is not None and (
        isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1
    ):
        raise OpError(
            "sample_next",
            f"top_k must be None or a positive int, got {top_k!r}",
            hint="None keeps every token",
        )
    if not 0 <= u < 1:
        raise OpError(
            "sample_next", f"u must lie in [0, 1), got {u}", hint="rng.random() draws one"
        )
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits / temperature
    keep = np.ones(z.size, bool)
    if top_k is not None and top_k < z.size:
        keep[:] = False
        keep[np.argsort(-z, kind="stable")[:top_k]] = True
    e = np.where(keep, np.exp(z - z[keep].max()), 0.0)
    p = np.cumsum(e / e.sum())
    over = np.flatnonzero((p > u) & keep)
    return int(over[0]) if over.size else int(np.flatnonzero(keep)[-1])
