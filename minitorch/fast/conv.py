"""Compiled kernels for convolution and pooling beyond the exercises.

The gradient ops of conv2d and pooling for the ``numba`` backend, and an im2col
convolution that chapter 9's ``max-autotune`` may choose (a registry *variant*).

The numpy kernels of these ops (``core/conv_ops.py``) make one strided numpy call per
kernel offset; on the small images of the course's CNN each call moves a few thousand
values, so the calls' overhead is most of the time (a 2 x 2 max-pool gradient of a
(32, 8, 8, 8) input: 14 calls, about 140 us). Here each is one compiled loop nest, and
the matmuls stay with BLAS. Not exercises: chapter 9's ``max-autotune`` measures these
against the numpy kernels per shape, and eager code on the ``numba`` backend uses the
gradients.
They give the numpy kernels' answers: the max-pool gradient goes to the first maximum
of each window (NaN never wins), overlapping windows add.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.registry import register_kernel, register_variant
from ..tensor.data import TensorData


def _result(out, dest) -> np.ndarray:
    """The kernel's result array: ``dest`` (its place in chapter 8's arena) or a new one."""
    if dest is None:
        return np.empty(out.shape, dtype=out.dtype)
    return dest.reshape(out.shape)


def _done(result: np.ndarray, out) -> TensorData:
    return TensorData.contiguous(result.reshape(-1), out.shape)


def _writes_into(kernel):
    kernel.writes_into = True  # chapter 8's protocol: accepts ``dest=``
    return kernel


@njit(cache=True, nogil=True)
def _max_pool_grad(dx, g, x, kh, kw, sh, sw):
    dx[...] = 0
    n, c, oh, ow = g.shape
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    best, bi, bj = -np.inf, i * sh, j * sw
                    for a in range(kh):
                        for e in range(kw):
                            v = x[b, ch, i * sh + a, j * sw + e]
                            if v > best:
                                best, bi, bj = v, i * sh + a, j * sw + e
                    dx[b, ch, bi, bj] += g[b, ch, i, j]


@njit(cache=True, nogil=True)
def _avg_pool_grad(dx, g, kh, kw, sh, sw):
    dx[...] = 0
    n, c, oh, ow = g.shape
    scale = 1.0 / (kh * kw)
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    v = g[b, ch, i, j] * scale
                    for a in range(kh):
                        for e in range(kw):
                            dx[b, ch, i * sh + a, j * sw + e] += v


@njit(cache=True, nogil=True)
def _im2col(cols, x, kh, kw, stride, pad, oh, ow, adjoint):
    """``cols[(c, a, e), (n, i, j)] = x[n, c, i*stride + a - pad, j*stride + e - pad]`` (0
    outside the image); with ``adjoint``, the other way: each column added back into ``x``
    where its window sat (col2im, a convolution's input gradient)."""
    n, c, h, w = x.shape
    for ch in range(c):
        for a in range(kh):
            for e in range(kw):
                r = (ch * kh + a) * kw + e
                for b in range(n):
                    for i in range(oh):
                        y = i * stride + a - pad
                        base = (b * oh + i) * ow
                        for j in range(ow):
                            xx = j * stride + e - pad
                            if 0 <= y < h and 0 <= xx < w:
                                if adjoint:
                                    x[b, ch, y, xx] += cols[r, base + j]
                                else:
                                    cols[r, base + j] = x[b, ch, y, xx]
                            elif not adjoint:
                                cols[r, base + j] = 0


def _as(x: TensorData, dtype) -> np.ndarray:
    return x.as_numpy_view().astype(dtype, copy=False)


def _source(x: TensorData, dtype) -> np.ndarray:
    """``x`` for im2col to read. Numba types both directions of ``_im2col``, so the image
    must be writable even to be read: a read-only view (a broadcast) is copied."""
    a = _as(x, dtype)
    return a if a.flags.writeable else a.copy()


@register_kernel("max_pool2d_grad", "numba")
@_writes_into
def max_pool2d_grad(g, x, out, kernel_size, stride, dest=None):
    dx = _result(out, dest)
    _max_pool_grad(dx, _as(g, out.dtype), x.as_numpy_view(), *kernel_size, *stride)
    return _done(dx, out)


@register_kernel("avg_pool2d_grad", "numba")
@_writes_into
def avg_pool2d_grad(g, x, out, kernel_size, stride, dest=None):
    dx = _result(out, dest)
    _avg_pool_grad(dx, _as(g, out.dtype), *kernel_size, *stride)
    return _done(dx, out)


def _positions(g: np.ndarray) -> np.ndarray:
    """``g`` (N, O, OH, OW) as (O, N*OH*OW): one row per output channel, as im2col's columns."""
    n, o, oh, ow = g.shape
    return g.transpose(1, 0, 2, 3).reshape(o, n * oh * ow)


@register_kernel("conv2d_grad_input", "numba")
@_writes_into
def conv2d_grad_input(g, w, out, stride, padding, input_hw, dest=None):
    gv, wv = _as(g, out.dtype), np.ascontiguousarray(_as(w, out.dtype))
    o, c, kh, kw = wv.shape
    oh, ow = gv.shape[2:]
    # (C*KH*KW, O) @ (O, N*OH*OW) by BLAS, then each column added back where its window sat
    spread = wv.reshape(o, c * kh * kw).T @ _positions(gv)
    dx = _result(out, dest)
    dx[...] = 0
    _im2col(spread, dx, kh, kw, stride, padding, oh, ow, True)
    return _done(dx, out)


@register_kernel("conv2d_grad_weight", "numba")
@_writes_into
def conv2d_grad_weight(x, g, out, stride, padding, kernel_hw, dest=None):
    gv = _as(g, out.dtype)
    n, o, oh, ow = gv.shape
    c, (kh, kw) = out.shape[1], kernel_hw
    cols = np.empty((c * kh * kw, n * oh * ow), dtype=out.dtype)
    _im2col(cols, _source(x, out.dtype), kh, kw, stride, padding, oh, ow, False)
    dw = _result(out, dest)
    # (O, N*OH*OW) @ (N*OH*OW, C*KH*KW): each window weighted by its position's gradient
    np.matmul(_positions(gv), cols.T, out=dw.reshape(o, c * kh * kw))
    return _done(dw, out)


@njit(cache=True, nogil=True)
def _to_nchw(y, cols_out):
    """``cols_out`` (O, N, P) into ``y`` (N, O, P): the matmul's rows back in batch order."""
    o, n, p = cols_out.shape
    for b in range(n):
        for ch in range(o):
            for k in range(p):
                y[b, ch, k] = cols_out[ch, b, k]


@register_variant("conv2d", "im2col")
@_writes_into
def conv2d_im2col(x, w, out, stride, padding, dest=None):
    """conv2d as numpy's kernel computes it (one BLAS matmul over im2col's columns), with
    the column gather and the transpose back compiled instead of strided numpy copies."""
    wv = np.ascontiguousarray(_as(w, out.dtype))
    n, o, oh, ow = out.shape
    c, kh, kw = wv.shape[1:]
    cols = np.empty((c * kh * kw, n * oh * ow), dtype=out.dtype)
    _im2col(cols, _source(x, out.dtype), kh, kw, stride, padding, oh, ow, False)
    y = wv.reshape(o, c * kh * kw) @ cols  # (O, N*OH*OW)
    result = _result(out, dest)
    _to_nchw(result.reshape(n, o, oh * ow), y.reshape(o, n, oh * ow))
    return _done(result, out)
