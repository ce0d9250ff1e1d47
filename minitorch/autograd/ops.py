"""The one op chapter 2 adds: ``pad_slice``, the scatter that undoes ``getitem``.

``getitem`` picks a strided window out of a tensor; its backward rule must put
the incoming gradient back into that window of a zero tensor of the input's
shape. ``pad_slice(g, key=key, shape=shape)`` does exactly that, and is itself
differentiable (its VJP is ``getitem`` with the same key), so second
derivatives and the chapter-5 tracer see an ordinary registered op.
"""

from __future__ import annotations

import numpy as np

from ..backends.numpy_backend import prepared_kernel
from ..core.errors import OpError
from ..core.ops import _getitem_infer, _getitem_normalize
from ..core.registry import (
    REQUIRED,
    OpKind,
    Spec,
    dispatch,
    register_kernel,
    register_op,
    register_vjp,
)
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from ..tensor.loops import tensor_map
from ..tensor.views import slice_view


def _normalize(g: Spec, key, shape):
    shape = tuple(int(n) for n in shape)
    key = _getitem_normalize(Spec(shape, g.dtype, g.device), key)["key"]
    return {"key": key, "shape": shape}


def _infer(g: Spec, key, shape) -> Spec:
    window = _getitem_infer(Spec(shape, g.dtype, g.device), key).shape
    if window != g.shape:
        raise OpError(
            "pad_slice",
            f"the slice {key} of shape {shape} has shape {window}, but the values have shape {g.shape}",
            hint="pass values shaped like x[key] for an x of the target shape",
        )
    return Spec(shape, g.dtype, g.device)


register_op(
    "pad_slice",
    OpKind.OPAQUE,
    1,
    _infer,
    attrs={"key": REQUIRED, "shape": REQUIRED},
    normalize=_normalize,
    doc="zeros of `shape` with `values` written into the window `key` (the adjoint of getitem)",
)


@register_kernel("pad_slice", "numpy")
def pad_slice_numpy(g: TensorData, out: Spec, key, shape) -> TensorData:
    result = np.zeros(shape, dtype=out.dtype)
    result[key] = g.as_numpy_view()
    return TensorData.from_numpy(result)


def _pad_into(target, g, key, shape):
    target.fill(0)
    target[key] = g


# a compiled plan's step writes straight into its place in the arena (chapter 8)
pad_slice_numpy.prepare = lambda out, inputs: prepared_kernel(
    "pad_slice", out, inputs, _pad_into, contiguous=False
)


@register_kernel("pad_slice", "python")
def pad_slice_python(g: TensorData, out: Spec, key, shape) -> TensorData:
    # Zeros, then copy through the chapter-1 slice view of the window: no numpy indexing.
    result = TensorData.contiguous(np.zeros(int(np.prod(shape, dtype=np.int64)), out.dtype), shape)
    wshape, wstrides, woffset = slice_view(shape, tuple(strides_from_shape(shape)), 0, key)
    window = TensorData(result.storage, tuple(wshape), tuple(wstrides), woffset)
    if window.size:
        tensor_map(lambda x: x, window, g)
    return result


@register_kernel("pad_slice", "*")
def pad_slice_any(g: TensorData, out: Spec, key, shape) -> TensorData:
    # Any other backend without its own (Numba, whose storage is host memory already):
    # scatter with numpy. CUDA has a device kernel (minitorch/cuda/backend.py).
    from ..backends import base

    backend = base.current(out.device)
    result = np.zeros(shape, dtype=out.dtype)
    result[key] = backend.to_numpy(g)
    return backend.from_numpy(result)


@register_vjp("pad_slice")
def pad_slice_vjp(grad, out, g, key, shape):
    return (dispatch("getitem", grad, key=key),)


def pad_slice(values, key, shape):
    """``zeros(shape)`` with ``values`` written at ``[key]``, as one differentiable op."""
    return dispatch("pad_slice", values, key=key, shape=tuple(shape))
