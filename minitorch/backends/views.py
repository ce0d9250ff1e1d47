"""View kernels, shared by every backend: they only compute new (shape, strides, offset)."""

from __future__ import annotations

from ..core.registry import register_kernel
from ..tensor.data import TensorData
from ..tensor.views import permute_view, reshape_view, slice_view
from . import base


@register_kernel("permute", "*")
def permute(a: TensorData, out, order) -> TensorData:
    shape, strides = permute_view(a.shape, a.strides, order)
    return TensorData(a.storage, tuple(shape), tuple(strides), a.offset)


@register_kernel("reshape", "*")
def reshape(a: TensorData, out, shape) -> TensorData:
    strides = reshape_view(a.shape, a.strides, shape)
    if strides is None:  # not expressible as a view: copy first
        a = contiguous(a, out)
        strides = reshape_view(a.shape, a.strides, shape)
    return TensorData(a.storage, tuple(shape), tuple(strides), a.offset)


@register_kernel("expand", "*")
def expand(a: TensorData, out, shape) -> TensorData:
    lead = len(shape) - a.ndim
    strides = (0,) * lead + tuple(
        0 if n != m else s for n, m, s in zip(shape[lead:], a.shape, a.strides)
    )
    return TensorData(a.storage, tuple(shape), strides, a.offset)


@register_kernel("getitem", "*")
def getitem(a: TensorData, out, key) -> TensorData:
    shape, strides, offset = slice_view(a.shape, a.strides, a.offset, key)
    return TensorData(a.storage, tuple(shape), tuple(strides), offset)


@register_kernel("contiguous", "*")
def contiguous(a: TensorData, out) -> TensorData:
    if a.is_contiguous():
        return a
    return base.current(out.device).copy(a)
