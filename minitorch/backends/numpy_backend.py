"""The ``numpy`` backend: every kernel is one numpy call on a zero-copy strided view.

It is the eager baseline that the compiled mode of later chapters must beat.
"""

from __future__ import annotations

import numpy as np

from ..core.ops import NUMPY_FUNCS
from ..core.registry import OpDef, OpKind, register_kernel
from ..tensor.data import TensorData
from .base import Backend, register_backend


def _wrap(array, out) -> TensorData:
    return TensorData.wrap(np.asarray(array, dtype=out.dtype))


class NumpyBackend(Backend):
    name = "numpy"

    def generic(self, op: OpDef):
        fn = NUMPY_FUNCS.get(op.name)
        if fn is None:
            return None
        if op.kind is OpKind.REDUCE:

            def reduce_kernel(a, out, axis, keepdims):
                return _wrap(fn(a.as_numpy_view(), axis=axis, keepdims=keepdims), out)

            return reduce_kernel

        def kernel(*inputs, out):
            arrays = [x.as_numpy_view() for x in inputs]
            if op.kind is OpKind.ELEMENTWISE and out.dtype.kind == "f":
                # compute in the result dtype: numpy's exp of a bool array is float16
                arrays = [x.astype(out.dtype, copy=False) for x in arrays]
            with np.errstate(all="ignore"):  # inf/nan follow IEEE, as on every backend
                return _wrap(fn(*arrays), out)

        return kernel

    def copy(self, data: TensorData) -> TensorData:
        return TensorData.from_numpy(data.as_numpy_view())


register_backend(NumpyBackend())


def _np(x: TensorData) -> np.ndarray:
    return x.as_numpy_view()


@register_kernel("sigmoid", "numpy")
def sigmoid(a, out):
    x = _np(a).astype(out.dtype, copy=False)  # bool and int inputs compute in float
    e = np.exp(-np.abs(x))
    return _wrap(np.where(x >= 0, 1 / (1 + e), e / (1 + e)), out)


@register_kernel("relu", "numpy")
def relu(a, out):
    return _wrap(np.maximum(_np(a), 0), out)


@register_kernel("cast", "numpy")
def cast(a, out, dtype):
    return _wrap(_np(a).astype(dtype), out)


@register_kernel("where", "numpy")
def where(c, a, b, out):
    return _wrap(np.where(_np(c), _np(a), _np(b)), out)


@register_kernel("argmax", "numpy")
def argmax(a, out, axis, keepdims):
    return _wrap(np.argmax(_np(a), axis=axis[0], keepdims=keepdims), out)


@register_kernel("matmul", "numpy")
def matmul(a, b, out):
    return _wrap(np.matmul(_np(a), _np(b)), out)
