"""Chapter 3's op set: convolution, pooling, softmax and logsumexp (registered for every backend).

Each op has its shape rule here and a vectorised numpy kernel (the eager
baseline). The Numba backend (``minitorch/fast/backend.py``) adds compiled
kernels. Backward rules are written with registered ops, so they run on any
backend and can be traced; the gradients of conv2d and the pools are ops of
their own (``conv2d_grad_input``, ``conv2d_grad_weight``, ``max_pool2d_grad``,
``avg_pool2d_grad``).
"""

from __future__ import annotations

import numpy as np

from ..tensor.data import TensorData
from . import dtypes as dt
from .args import as_bool
from .errors import OpError
from .ops import normalize_axis, reduced_shape
from .registry import OpKind, Spec, dispatch, register_kernel, register_op, register_vjp

# ---------------------------------------------------------------- helpers


def _pair(op: str, name: str, value) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and v > 0 for v in pair):
        raise OpError(op, f"{name} must be a positive int or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def conv_out_size(op: str, size: int, k: int, stride: int, padding: int, dim: str) -> int:
    n = (size + 2 * padding - k) // stride + 1
    if size + 2 * padding < k:
        raise OpError(
            op,
            f"the window ({k}) is larger than the padded input {dim} ({size} + 2*{padding})",
            hint="use a smaller kernel, more padding, or a larger input",
        )
    return n


def _need_4d(op: str, what: str, s: Spec) -> None:
    if s.ndim != 4:
        raise OpError(
            op,
            f"{what} must be 4-D (N, C, H, W), got shape {s.shape}",
            hint="add a batch or channel axis with reshape(1, ...)",
        )


def _np(x: TensorData) -> np.ndarray:
    return x.as_numpy_view()


def _wrap(array, out: Spec) -> TensorData:
    array = np.ascontiguousarray(array, dtype=out.dtype)
    return TensorData.contiguous(array.reshape(-1), out.shape)


def _float(op: str, *specs: Spec) -> np.dtype:
    dtype = specs[0].dtype
    for s in specs[1:]:
        dtype = dt.promote(dtype, s.dtype)
    if not dt.is_float(dtype):
        raise OpError(
            op,
            f"needs float inputs, got {', '.join(s.dtype.name for s in specs)}",
            hint="cast first with .float()",
        )
    return dtype


# ---------------------------------------------------------------- conv2d


def _conv_normalize(x: Spec, w: Spec, stride, padding):
    if not isinstance(stride, (int, np.integer)) or stride < 1:
        raise OpError("conv2d", f"stride must be a positive int, got {stride!r}")
    if not isinstance(padding, (int, np.integer)) or padding < 0:
        raise OpError("conv2d", f"padding must be a non-negative int, got {padding!r}")
    return {"stride": int(stride), "padding": int(padding)}


def _conv_infer(x: Spec, w: Spec, stride, padding) -> Spec:
    _need_4d("conv2d", "the input", x)
    _need_4d("conv2d", "the weight (O, C, KH, KW)", w)
    if x.shape[1] != w.shape[1]:
        raise OpError(
            "conv2d",
            f"input {x.shape} has {x.shape[1]} channels but weight {w.shape} expects {w.shape[1]}",
            hint="weight is (out_channels, in_channels, KH, KW)",
        )
    dtype = _float("conv2d", x, w)
    oh = conv_out_size("conv2d", x.shape[2], w.shape[2], stride, padding, "height")
    ow = conv_out_size("conv2d", x.shape[3], w.shape[3], stride, padding, "width")
    return Spec((x.shape[0], w.shape[0], oh, ow), dtype, x.device)


register_op(
    "conv2d",
    OpKind.ANCHOR,
    2,
    _conv_infer,
    attrs={"stride": 1, "padding": 0},
    normalize=_conv_normalize,
)


def _windows(h: int, w: int, k: tuple[int, int], s: tuple[int, int]):
    """Every kernel offset (kh, kw) with the strided slices of the input it touches."""
    for i in range(k[0]):
        for j in range(k[1]):
            yield (
                i,
                j,
                (slice(i, i + s[0] * (h - 1) + 1, s[0]), slice(j, j + s[1] * (w - 1) + 1, s[1])),
            )


def _channels_first(x: np.ndarray, p: int, dtype) -> np.ndarray:
    """``x`` (N, C, H, W) as a zero-padded (C, N, H + 2p, W + 2p) array: one copy.

    Channels first, so that im2col below and the matmuls read whole rows."""
    n, c, h, w = x.shape
    xp = np.zeros((c, n, h + 2 * p, w + 2 * p), dtype)
    xp[:, :, p : p + h, p : p + w] = x.transpose(1, 0, 2, 3)
    return xp


def _columns(xp: np.ndarray, k, stride: int, oh: int, ow: int) -> np.ndarray:
    """im2col: one row per (channel, kh, kw), one column per output position (n, oh, ow).

    The windows are a strided view of the padded input; the reshape copies them once
    (rows of ``ow`` values), so a convolution is one BLAS matmul instead of one per offset.
    """
    c, n = xp.shape[:2]
    sc, sn, sh, sw = xp.strides
    view = np.lib.stride_tricks.as_strided(
        xp, (c, *k, n, oh, ow), (sc, sh, sw, sn, sh * stride, sw * stride), writeable=False
    )
    return view.reshape(c * k[0] * k[1], n * oh * ow)


@register_kernel("conv2d", "numpy")
def conv2d_numpy(x, w, out, stride, padding):
    n, o, oh, ow = out.shape
    wv = _np(w).astype(out.dtype, copy=False)
    cols = _columns(_channels_first(_np(x), padding, out.dtype), wv.shape[2:], stride, oh, ow)
    # (O, C*K*K) @ (C*K*K, N*OH*OW): the whole convolution in one BLAS call
    y = wv.reshape(o, cols.shape[0]) @ cols
    return _wrap(y.reshape(o, n, oh, ow).transpose(1, 0, 2, 3), out)


def _grad_input_infer(g: Spec, w: Spec, stride, padding, input_hw) -> Spec:
    return Spec(
        (g.shape[0], w.shape[1]) + tuple(input_hw), _float("conv2d_grad_input", g, w), g.device
    )


def _grad_weight_infer(x: Spec, g: Spec, stride, padding, kernel_hw) -> Spec:
    return Spec(
        (g.shape[1], x.shape[1]) + tuple(kernel_hw), _float("conv2d_grad_weight", x, g), x.device
    )


register_op(
    "conv2d_grad_input",
    OpKind.ANCHOR,
    2,
    _grad_input_infer,
    attrs={"stride": 1, "padding": 0, "input_hw": None},
)
register_op(
    "conv2d_grad_weight",
    OpKind.ANCHOR,
    2,
    _grad_weight_infer,
    attrs={"stride": 1, "padding": 0, "kernel_hw": None},
)


@register_kernel("conv2d_grad_input", "numpy")
def conv2d_grad_input_numpy(g, w, out, stride, padding, input_hw):
    gv, wv = _np(g).astype(out.dtype, copy=False), _np(w).astype(out.dtype, copy=False)
    n, c, h, wd = out.shape
    o, _, kh, kw = wv.shape
    oh, ow = gv.shape[2:]
    # each output position's gradient spread over its window, per kernel offset:
    # (KH*KW*C, O) @ (O, N*OH*OW), then added where each offset's window sits
    spread = wv.transpose(2, 3, 1, 0).reshape(kh * kw * c, o) @ gv.transpose(1, 0, 2, 3).reshape(
        o, n * oh * ow
    )
    spread = spread.reshape(kh, kw, c, n, oh, ow)
    dxp = np.zeros((c, n, h + 2 * padding, wd + 2 * padding), dtype=out.dtype)
    for i, j, (sh, sw) in _windows(oh, ow, (kh, kw), (stride, stride)):
        dxp[:, :, sh, sw] += spread[i, j]  # windows overlap, so add
    dx = dxp[:, :, padding : padding + h, padding : padding + wd]
    return _wrap(dx.transpose(1, 0, 2, 3), out)


@register_kernel("conv2d_grad_weight", "numpy")
def conv2d_grad_weight_numpy(x, g, out, stride, padding, kernel_hw):
    gv = _np(g).astype(out.dtype, copy=False)
    n, o, oh, ow = gv.shape
    xp = _channels_first(_np(x), padding, out.dtype)
    cols = _columns(xp, kernel_hw, stride, oh, ow)
    # (O, N*OH*OW) @ (N*OH*OW, C*K*K): every position's window weighted by its gradient
    dw = gv.transpose(1, 0, 2, 3).reshape(o, n * oh * ow) @ cols.T
    return _wrap(dw.reshape(out.shape), out)


@register_vjp("conv2d")
def conv2d_vjp(grad, out, x, w, stride, padding):
    gx = dispatch(
        "conv2d_grad_input", grad, w, stride=stride, padding=padding, input_hw=tuple(x.shape[2:])
    )
    gw = dispatch(
        "conv2d_grad_weight", x, grad, stride=stride, padding=padding, kernel_hw=tuple(w.shape[2:])
    )
    return gx, gw


# ---------------------------------------------------------------- pooling


def _pool_normalize(op: str):
    def normalize(x: Spec, kernel_size, stride):
        k = _pair(op, "kernel_size", kernel_size)
        s = k if stride is None else _pair(op, "stride", stride)
        return {"kernel_size": k, "stride": s}

    return normalize


def _pool_infer(op: str):
    def infer(x: Spec, kernel_size, stride) -> Spec:
        _need_4d(op, "the input", x)
        _float(op, x)
        oh = conv_out_size(op, x.shape[2], kernel_size[0], stride[0], 0, "height")
        ow = conv_out_size(op, x.shape[3], kernel_size[1], stride[1], 0, "width")
        return Spec(x.shape[:2] + (oh, ow), x.dtype, x.device)

    return infer


for _op in ("max_pool2d", "avg_pool2d"):
    register_op(
        _op,
        OpKind.OPAQUE,
        1,
        _pool_infer(_op),
        attrs={"kernel_size": 2, "stride": None},
        normalize=_pool_normalize(_op),
    )


@register_kernel("max_pool2d", "numpy")
def max_pool2d_numpy(x, out, kernel_size, stride):
    xv = _np(x)
    best = None
    for _, _, (sh, sw) in _windows(out.shape[2], out.shape[3], kernel_size, stride):
        v = xv[:, :, sh, sw]
        best = v.copy() if best is None else np.maximum(best, v)  # NaN propagates
    return _wrap(best, out)


@register_kernel("avg_pool2d", "numpy")
def avg_pool2d_numpy(x, out, kernel_size, stride):
    xv = _np(x)
    total = np.zeros(out.shape, dtype=out.dtype)
    for _, _, (sh, sw) in _windows(out.shape[2], out.shape[3], kernel_size, stride):
        total += xv[:, :, sh, sw]
    return _wrap(total / (kernel_size[0] * kernel_size[1]), out)


def _pool_grad_infer(g: Spec, x: Spec, kernel_size, stride) -> Spec:
    return x


register_op(
    "max_pool2d_grad",
    OpKind.OPAQUE,
    2,
    _pool_grad_infer,
    attrs={"kernel_size": (2, 2), "stride": (2, 2)},
)
register_op(
    "avg_pool2d_grad",
    OpKind.OPAQUE,
    2,
    _pool_grad_infer,
    attrs={"kernel_size": (2, 2), "stride": (2, 2)},
)


@register_kernel("max_pool2d_grad", "numpy")
def max_pool2d_grad_numpy(g, x, out, kernel_size, stride):
    # The gradient goes to the first maximum of each window (ties are not split).
    gv, xv = _np(g), _np(x)
    best = np.full(gv.shape, -np.inf, dtype=out.dtype)
    arg = np.zeros(gv.shape, dtype=np.int64)
    wins = list(_windows(gv.shape[2], gv.shape[3], kernel_size, stride))
    for t, (_, _, (sh, sw)) in enumerate(wins):
        v = xv[:, :, sh, sw]
        better = v > best
        best = np.where(better, v, best)
        arg = np.where(better, t, arg)
    dx = np.zeros(out.shape, dtype=out.dtype)
    for t, (_, _, (sh, sw)) in enumerate(wins):
        dx[:, :, sh, sw] += np.where(arg == t, gv, 0)
    return _wrap(dx, out)


@register_kernel("avg_pool2d_grad", "numpy")
def avg_pool2d_grad_numpy(g, x, out, kernel_size, stride):
    gv = _np(g) / (kernel_size[0] * kernel_size[1])
    dx = np.zeros(out.shape, dtype=out.dtype)
    for _, _, (sh, sw) in _windows(gv.shape[2], gv.shape[3], kernel_size, stride):
        dx[:, :, sh, sw] += gv
    return _wrap(dx, out)


@register_vjp("max_pool2d")
def max_pool2d_vjp(grad, out, x, kernel_size, stride):
    return (dispatch("max_pool2d_grad", grad, x, kernel_size=kernel_size, stride=stride),)


@register_vjp("avg_pool2d")
def avg_pool2d_vjp(grad, out, x, kernel_size, stride):
    return (dispatch("avg_pool2d_grad", grad, x, kernel_size=kernel_size, stride=stride),)


# ---------------------------------------------------------------- softmax, logsumexp


def _one_axis(op: str):
    def normalize(x: Spec, axis, **rest):
        if not isinstance(axis, (int, np.integer)):
            raise OpError(op, f"axis must be one int, got {axis!r}", hint="e.g. axis=-1")
        if x.ndim == 0:
            raise OpError(op, "needs at least one dimension", hint="reshape(1) first")
        (ax,) = normalize_axis(op, int(axis), x.ndim)
        return {"axis": ax, **rest}

    return normalize


def _softmax_infer(x: Spec, axis) -> Spec:
    return Spec(x.shape, _float("softmax", x), x.device)


def _lse_infer(x: Spec, axis, keepdims) -> Spec:
    if x.shape[axis] == 0:
        raise OpError("logsumexp", f"cannot reduce the empty axis {axis} of shape {x.shape}")
    return Spec(reduced_shape(x.shape, (axis,), keepdims), _float("logsumexp", x), x.device)


register_op(
    "softmax", OpKind.OPAQUE, 1, _softmax_infer, attrs={"axis": -1}, normalize=_one_axis("softmax")
)
register_op(
    "logsumexp",
    OpKind.OPAQUE,
    1,
    _lse_infer,
    attrs={"axis": -1, "keepdims": False},
    normalize=lambda x, axis, keepdims: _one_axis("logsumexp")(
        x, axis, keepdims=as_bool("logsumexp", "keepdims", keepdims)
    ),
)


@register_kernel("softmax", "numpy")
def softmax_numpy(x, out, axis):
    xv = _np(x)
    with np.errstate(all="ignore"):
        e = xv - xv.max(axis=axis, keepdims=True)
        np.exp(e, out=e)  # in place: one temporary instead of three, the same bits
        e /= e.sum(axis=axis, keepdims=True)
        return _wrap(e, out)


def _softmax_into(target, x, axis):
    with np.errstate(all="ignore"):  # softmax_numpy's steps, the last one into ``target``
        e = x - x.max(axis=axis, keepdims=True)
        np.exp(e, out=e)
        np.divide(e, e.sum(axis=axis, keepdims=True), out=target)


def _prepare_softmax(out, inputs):
    from ..backends.numpy_backend import prepared_kernel  # the backends load after the ops

    if inputs[0].dtype != out.dtype:
        return None  # softmax of integers: numpy's own promotion, as eager
    return prepared_kernel("softmax", out, inputs, _softmax_into, contiguous=False)


softmax_numpy.prepare = _prepare_softmax


@register_kernel("logsumexp", "numpy")
def logsumexp_numpy(x, out, axis, keepdims):
    xv = _np(x)
    with np.errstate(all="ignore"):
        m = xv.max(axis=axis, keepdims=True)
        shift = np.where(np.isfinite(m), m, 0)
        r = np.log(np.exp(xv - shift).sum(axis=axis, keepdims=True)) + shift
    return _wrap(r if keepdims else np.squeeze(r, axis=axis), out)


@register_vjp("softmax")
def softmax_vjp(grad, out, x, axis):
    gs = grad * out
    return (gs - out * gs.sum(axis=axis, keepdims=True),)


@register_vjp("logsumexp")
def logsumexp_vjp(grad, out, x, axis, keepdims):
    if not keepdims:
        shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape))
        grad, out = grad.reshape(shape), out.reshape(shape)
    return ((x - out).exp() * grad,)
