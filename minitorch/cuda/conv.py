"""Chapter 3's convolution and pooling ops on the ``cuda`` backend.

A convolution is im2col on the device followed by the backend's matmul (exercise 4.5's
tiled kernel), so speeding up matmul speeds up convolution too, and every sum of
products runs in one well-tested kernel:

* ``conv2d``: a gather kernel writes the columns ``(N, C*KH*KW, OH*OW)``, one thread per
  element (grid-stride); ``W (O, C*KH*KW) @ cols`` is then the output ``(N, O, OH*OW)``
  as it is laid out, with no transposing copy;
* ``conv2d_grad_weight``: the columns laid out ``(C*KH*KW, N*OH*OW)`` and the gradient
  as ``(O, N*OH*OW)`` (one copy), then ``g @ cols^T``: the sum over the batch is in the
  matmul;
* ``conv2d_grad_input``: ``W^T @ g`` spreads each output's gradient over its window,
  then col2im is a *gather*: one thread per input element sums the columns that cover
  it, in the numpy kernel's order. No atomics, so the result is deterministic.

Pools take one thread per output element. The max-pool gradient first finds each
window's first maximum (the numpy kernel's rule: ``v > best`` from -inf, so NaN never
wins), then one thread per input element gathers the gradients of the windows whose
maximum it is; the average-pool gradient is the same gather without the search, and
col2im too (one kernel, ``_gather``). Sums run in the output's dtype (typed zeros come
in as arguments): float32 stays float32.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import cuda

from ..core.instrument import launch
from ..core.registry import Spec, register_kernel
from ..tensor.data import TensorData
from . import backend as cb
from . import gemm, lowering, rows  # rows.nan_max: numpy's maximum, NaN wins


def _dense(x: TensorData, dtype) -> TensorData:
    """``x`` contiguous from offset 0 in ``dtype`` (a device copy only when it is not)."""
    if x.dtype == dtype and x.is_contiguous() and x.offset == 0:
        return x
    return cb.launch_map(cb._named_fn("identity", cb._identity), x, x.shape, dtype)


def _run(body, n: int, *args, name: str) -> None:
    if n:
        launch(cb.own_kernel(body), cb._blocks(n, cb.THREADS), cb.THREADS, *args, name=name)


def _matmul(a: TensorData, b: TensorData, dtype) -> TensorData:
    return cb.matmul(a, b, Spec((), np.dtype(dtype), "cuda"))  # the kernel reads out.dtype only


# ---------------------------------------------------------------- conv2d


def _im2col(cols, n, x, xs, offset, batch, ckk, height, width, kh, kw, oh, ow, stride, pad,
            batch_first):  # fmt: skip
    # element (image b, row r = (c, ki, kj), position q = (i, j)) of the columns, laid out
    # (batch, ckk, oh*ow) when batch_first, else (ckk, batch, oh*ow)
    e = cuda.grid(1)
    while e < n:
        q, rest = e % (oh * ow), e // (oh * ow)
        if batch_first:
            b, r = rest // ckk, rest % ckk
        else:
            b, r = rest % batch, rest // batch
        y = (q // ow) * stride - pad + (r // kw) % kh
        z = (q % ow) * stride - pad + r % kw
        if 0 <= y < height and 0 <= z < width:
            cols[e] = x[offset + b * xs[0] + (r // (kh * kw)) * xs[1] + y * xs[2] + z * xs[3]]
        else:
            cols[e] = 0
        e += cuda.gridsize(1)


def im2col(x: TensorData, kernel_hw, stride: int, padding: int, oh: int, ow: int, dtype,
           batch_first: bool) -> TensorData:  # fmt: skip
    batch, c, height, width = x.shape
    kh, kw = kernel_hw
    ckk = c * kh * kw
    shape = (batch, ckk, oh * ow) if batch_first else (ckk, batch * oh * ow)
    cols = cb._empty(shape, dtype)
    _run(_im2col, cols.size, cols.storage, cols.size, x.storage, cb.meta(x.strides), x.offset,
         batch, ckk, height, width, kh, kw, oh, ow, stride, padding, batch_first,
         name="im2col")  # fmt: skip
    return cols


@register_kernel("conv2d", "cuda")
def conv2d(x, w, out, stride, padding):
    if not out.size or not w.shape[1]:
        return cb.fill(out.shape, out.dtype, 0)
    return TensorData.contiguous(_conv_matmul(x, w, out, stride, padding).storage, out.shape)


def _conv_matmul(x, w, out, stride, padding, matmul=_matmul):
    """The convolution as ``matmul(W (O, CKK), columns (N, CKK, OH*OW), dtype)``, (N, O, OH*OW)."""
    n, o, oh, ow = out.shape
    cols = im2col(x, w.shape[2:], stride, padding, oh, ow, out.dtype, batch_first=True)
    w2 = _dense(w, out.dtype)
    w2 = TensorData.contiguous(w2.storage, (o, cols.shape[1]))
    return matmul(w2, cols, out.dtype)  # laid out as the output: no transposing copy


def conv2d_epilogue(x, w, out, stride, padding, epilogue, e: TensorData) -> TensorData:
    """``epilogue(conv2d(x, w), e)`` with the tuned matmul applying it at store (one kernel
    after the im2col gather); ``e`` broadcasts to ``out.shape``."""
    n, o, oh, ow = out.shape
    if not out.size:
        return cb._empty(out.shape, out.dtype)
    e = gemm.broadcast(e, out.shape)
    if oh > 1 and ow > 1 and e.strides[2] != e.strides[3] * ow:  # (OH, OW) not one axis
        e = cb._BACKEND.copy(e)
    s = e.strides
    e3 = TensorData(e.storage, (n, o, oh * ow), (s[0], s[1], s[3] if ow > 1 else s[2]), e.offset)

    def fused(a, b, dtype):
        return gemm.matmul(a, b, dtype, epilogue, e3)

    y = _conv_matmul(x, w, out, stride, padding, fused)
    return TensorData.contiguous(y.storage, out.shape)


def _as_matrix_batch(g: TensorData, dtype) -> TensorData:
    """``g`` (N, O, OH, OW) as a contiguous (N, O, OH*OW) batch of matrices."""
    g = _dense(g, dtype)
    return TensorData.contiguous(g.storage, (g.shape[0], g.shape[1], g.shape[2] * g.shape[3]))


@register_kernel("conv2d_grad_input", "cuda")
def conv2d_grad_input(g, w, out, stride, padding, input_hw):
    n, c, height, width = out.shape
    o, _, kh, kw = w.shape
    oh, ow = g.shape[2:]
    if not out.size or not g.size:
        return cb.fill(out.shape, out.dtype, 0)
    w2 = _dense(w, out.dtype)
    wt = TensorData(w2.storage, (c * kh * kw, o), (1, c * kh * kw), 0)  # W^T, a view
    spread = _matmul(wt, _as_matrix_batch(g, out.dtype), out.dtype)  # (N, CKK, OH*OW)
    # col2im: spread as (N, C, KH, KW, OH, OW), every window's value added where it sits
    strides = (c * kh * kw * oh * ow, kh * kw * oh * ow, kw * oh * ow, oh * ow, ow, 1)
    return _gather_windows(spread.storage, strides, 0, out, (oh, ow), (kh, kw), (stride, stride),
                           padding, name="col2im")  # fmt: skip


@register_kernel("conv2d_grad_weight", "cuda")
def conv2d_grad_weight(x, g, out, stride, padding, kernel_hw):
    n, o, oh, ow = g.shape
    if not out.size or not g.size:
        return cb.fill(out.shape, out.dtype, 0)
    cols = im2col(x, kernel_hw, stride, padding, oh, ow, out.dtype, batch_first=False)
    # g as (O, N*OH*OW): its batch and channel axes swapped, one copy
    gt = _dense(TensorData(g.storage, (o, n, oh, ow),
                           (g.strides[1], g.strides[0]) + g.strides[2:], g.offset), out.dtype)  # fmt: skip
    g2 = TensorData.contiguous(gt.storage, (o, n * oh * ow))
    ckk, p = cols.shape
    colst = TensorData(cols.storage, (p, ckk), (1, p), 0)
    dw = _matmul(g2, colst, out.dtype)  # (O, N*OH*OW) @ (N*OH*OW, CKK)
    return TensorData.contiguous(dw.storage, out.shape)


# ---------------------------------------------------------------- pooling


@cuda.jit(device=True)
def _window(e, xs, offset, c, oh, ow, sh, sw):
    """Storage position of the first element of output ``e``'s window (N, C, OH, OW order)."""
    j, i = e % ow, (e // ow) % oh
    ch, b = (e // (ow * oh)) % c, e // (ow * oh * c)
    return offset + b * xs[0] + ch * xs[1] + i * sh * xs[2] + j * sw * xs[3]


def _pool(out, n, x, xs, offset, c, oh, ow, kh, kw, sh, sw, is_max, start, div):
    e = cuda.grid(1)
    while e < n:
        base = _window(e, xs, offset, c, oh, ow, sh, sw)
        acc = start
        for ki in range(kh):  # the numpy kernel's order of offsets
            for kj in range(kw):
                v = x[base + ki * xs[2] + kj * xs[3]]
                acc = rows.nan_max(acc, v) if is_max else acc + v
        out[e] = acc if is_max else acc / div
        e += cuda.gridsize(1)


def _pool_launch(x, out, kernel_size, stride, is_max):
    result = cb._empty(out.shape, out.dtype)
    dtype = out.dtype.type
    _run(_pool, result.size, result.storage, result.size, x.storage, cb.meta(x.strides),
         x.offset, out.shape[1], out.shape[2], out.shape[3], *kernel_size, *stride, is_max,
         dtype(-np.inf if is_max else 0), dtype(kernel_size[0] * kernel_size[1]),
         name="max_pool2d" if is_max else "avg_pool2d")  # fmt: skip
    return result


@register_kernel("max_pool2d", "cuda")
def max_pool2d(x, out, kernel_size, stride):
    return _pool_launch(x, out, kernel_size, stride, True)  # NaN propagates (np.maximum)


@register_kernel("avg_pool2d", "cuda")
def avg_pool2d(x, out, kernel_size, stride):
    return _pool_launch(x, out, kernel_size, stride, False)


def _window_argmax(arg, n, x, xs, offset, c, oh, ow, kh, kw, sh, sw, lowest):
    # the offset t = ki * kw + kj of each window's first maximum; NaN never wins (v > best)
    e = cuda.grid(1)
    while e < n:
        base = _window(e, xs, offset, c, oh, ow, sh, sw)
        best, at = lowest, 0
        for ki in range(kh):
            for kj in range(kw):
                v = x[base + ki * xs[2] + kj * xs[3]]
                if v > best:
                    best, at = v, ki * kw + kj
        arg[e] = at
        e += cuda.gridsize(1)


def _gather(dx, n, src, ss, offset, arg, c, height, width, oh, ow, kh, kw, sh, sw, pad,
            is_max, zero, div):  # fmt: skip
    # one thread per input element: the values of the windows that cover it, in the numpy
    # kernels' order of offsets; src[b, ch, ki, kj, i, j] is window (i, j)'s value at offset
    # (ki, kj); a max window (is_max) gives its value to its argmax only
    e = cuda.grid(1)
    while e < n:
        z, y = e % width, (e // width) % height
        ch, b = (e // (width * height)) % c, e // (width * height * c)
        acc = zero
        for ki in range(kh):
            i = (y + pad - ki) // sh
            if y + pad >= ki and (y + pad - ki) % sh == 0 and i < oh:
                for kj in range(kw):
                    j = (z + pad - kj) // sw
                    if z + pad >= kj and (z + pad - kj) % sw == 0 and j < ow:
                        v = src[offset + b * ss[0] + ch * ss[1] + ki * ss[2] + kj * ss[3]
                                + i * ss[4] + j * ss[5]]  # fmt: skip
                        if not is_max:
                            acc += v / div
                        elif arg[((b * c + ch) * oh + i) * ow + j] == ki * kw + kj:
                            acc += v
        dx[e] = acc
        e += cuda.gridsize(1)


def _gather_windows(src, strides, offset, out, windows, kernel_size, stride, pad, arg=None,
                    div=1, name="gather"):  # fmt: skip
    """``out`` (N, C, H, W) gathered from the values of the (OH, OW) ``windows`` (see _gather)."""
    dx = cb._empty(out.shape, out.dtype)
    dtype = out.dtype.type
    is_max = arg is not None
    arg = arg if is_max else cb.meta((0,))  # not read
    _run(_gather, dx.size, dx.storage, dx.size, src, cb.meta(strides), offset, arg,
         out.shape[1], out.shape[2], out.shape[3], *windows, *kernel_size, *stride, pad, is_max,
         dtype(0), dtype(div), name=name)  # fmt: skip
    return dx


def _pool_grad_launch(g, x, out, kernel_size, stride, is_max):
    n, c, oh, ow = g.shape
    arg = None
    if is_max:
        arg = cb._empty(g.shape, np.int64).storage
        _run(_window_argmax, g.size, arg, g.size, x.storage, cb.meta(x.strides), x.offset,
             c, oh, ow, *kernel_size, *stride, out.dtype.type(-np.inf),
             name="window_argmax")  # fmt: skip
    # the gradient of window (i, j) is the same at every offset: strides 0 along (ki, kj)
    strides = g.strides[:2] + (0, 0) + g.strides[2:]
    div = 1 if is_max else kernel_size[0] * kernel_size[1]
    return _gather_windows(g.storage, strides, g.offset, out, (oh, ow), kernel_size, stride, 0,
                           arg, div, name="max_pool2d_grad" if is_max else "avg_pool2d_grad")  # fmt: skip


@register_kernel("max_pool2d_grad", "cuda")
def max_pool2d_grad(g, x, out, kernel_size, stride):
    return _pool_grad_launch(g, x, out, kernel_size, stride, True)


@register_kernel("avg_pool2d_grad", "cuda")
def avg_pool2d_grad(g, x, out, kernel_size, stride):
    return _pool_grad_launch(g, x, out, kernel_size, stride, False)


# What the kernels compute in on a GPU (``python -m minitorch.cuda.lowering``).
_I64, _META, _B = numba.int64, numba.int64[::1], numba.boolean


@lowering.register("conv im2col", ("float32",))
def _lowered_im2col(t):
    return _im2col, (t[::1], _I64, t[::1], _META, *[_I64] * 11, _B)


@lowering.register("conv/pool gather (col2im, pool gradients)", ("float32",))
def _lowered_gather(t):
    return _gather, (t[::1], _I64, t[::1], _META, _I64, _META, *[_I64] * 10, _B, t, t)


@lowering.register("pool max/avg", ("float32",))
def _lowered_pool(t):
    return _pool, (t[::1], _I64, t[::1], _META, *[_I64] * 8, _B, t, t)


@lowering.register("pool window argmax", ("float32",))
def _lowered_window_argmax(t):
    return _window_argmax, (_META, _I64, t[::1], _META, *[_I64] * 8, t)
