"""The ``numba`` backend: the numpy backend's storage, with kernels compiled by Numba.

Elementwise ops, reductions (sum, max, min), matmul, conv2d, pooling, softmax
and logsumexp run as compiled parallel kernels built from the chapter-3
exercises; the gradient ops of conv and pooling are compiled in ``conv.py``.
``where`` is one compiled pass (``select.py``).
Everything else (casts, comparisons, integer math) falls back to the numpy
kernels: both backends keep tensors in the same host memory, so falling back
costs nothing.

``NUMBA_NUM_THREADS`` (or ``numba.set_num_threads``) sets the thread count.
"""

from __future__ import annotations

import contextlib
import os

# Threads that finish a parallel loop sleep instead of spinning: with active
# spinning, two threads on two busy cores take milliseconds to meet again.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba  # noqa: E402
import numpy as np  # noqa: E402

from ..backends.base import Backend, register_backend  # noqa: E402
from ..backends.numpy_backend import NumpyBackend, prepared_kernel  # noqa: E402
from ..core.registry import OpDef, OpKind, get_op, register_kernel  # noqa: E402
from ..tensor.data import TensorData  # noqa: E402
from . import compile as jit  # noqa: E402
from . import (
    conv,  # noqa: F401, E402  (convolution's and pooling's gradients, compiled)
    kernels,  # noqa: F401, E402  (registers exercises 3.1-3.11)
    select,  # noqa: F401, E402  (where, one compiled pass)
)
from .indexing import as_index_array  # noqa: E402
from .scalars import scalar_for  # noqa: E402

_numpy = NumpyBackend()


def _np_kernel(name: str):
    return _numpy.kernel(get_op(name))


def _args(x: TensorData):
    """(storage from the first element, shape, strides) as a kernel receives them.

    The kernels index from the first element up (their contract), so a view
    with a negative step, whose other elements sit *before* its first one, is
    copied to contiguous storage first.
    """
    if any(s < 0 for s, n in zip(x.strides, x.shape) if n > 1):
        x = TensorData.from_numpy(x.as_numpy_view())
    return x.storage[x.offset :], as_index_array(x.shape), as_index_array(x.strides)


SMALL = 1 << 15  # below this many elements one thread beats waking a second one


@contextlib.contextmanager
def threads_for(size: int):
    """Run small kernels on one thread (the parallel launch costs more than it saves)."""
    n = numba.get_num_threads()
    if size >= SMALL or n == 1:
        yield
        return
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(n)


_SERIAL: dict = {}


def runner(parallel, size: int):
    """``parallel`` (a ``prange`` kernel), or below ``SMALL`` elements the same loops on the
    calling thread: the same bits, without the ~1 us a parallel launch costs."""
    serial = _SERIAL.get(parallel)
    if serial is None:
        serial = _SERIAL[parallel] = numba.njit(parallel.py_func)
    if size < SMALL:
        return serial
    return lambda *args: (parallel if numba.get_num_threads() > 1 else serial)(*args)


def _floats(out, *inputs) -> bool:
    return out.dtype.kind == "f" and all(x.dtype == out.dtype for x in inputs) and out.size > 0


class NumbaBackend(Backend):
    name = "numba"

    def __init__(self):
        self._generic: dict[str, object] = {}  # op name -> generic kernel (built once)

    def kernel(self, op: OpDef):
        k = op.kernels.get(self.name) or op.kernels.get("*")
        if k is None:
            if op.name not in self._generic:
                self._generic[op.name] = self.generic(op)
            k = self._generic[op.name]
        return k or op.kernels.get("numpy") or _numpy.kernel(op)

    def generic(self, op: OpDef):
        scalar = scalar_for(op)
        fallback = _numpy.generic(op) or op.kernels.get("numpy")
        if scalar is None or fallback is None:
            return None
        if op.kind is OpKind.ELEMENTWISE:
            return _map_kernel(op.name, scalar, fallback)
        if op.kind is OpKind.BROADCAST and op.num_inputs == 2:
            return _zip_kernel(op.name, scalar, fallback)
        if op.kind is OpKind.REDUCE:
            return _reduce_kernel(op.name, scalar, fallback)
        return None

    def copy(self, data: TensorData) -> TensorData:
        return TensorData.from_numpy(data.as_numpy_view())


def _map_kernel(name, scalar, fallback):
    def kernel(a, out):
        if not _floats(out, a):
            return fallback(a, out=out)
        result = TensorData.empty(out.shape, out.dtype)
        with threads_for(out.size):
            jit.elementwise("3.1", name, scalar)(*_args(result), *_args(a))
        return result

    return kernel


def _zip_kernel(name, scalar, fallback):
    def kernel(a, b, out):
        if not _floats(out, a, b):
            return fallback(a, b, out=out)
        result = TensorData.empty(out.shape, out.dtype)
        with threads_for(out.size):
            jit.elementwise("3.2", name, scalar)(*_args(result), *_args(a), *_args(b))
        return result

    return kernel


def _reduce_kernel(name, scalar, fallback):
    def kernel(a, out, axis, keepdims):
        if not _floats(out, a) or a.size == 0:
            return fallback(a, out=out, axis=axis, keepdims=keepdims)
        start = out.dtype.type(get_op(name).identity)
        if len(axis) == a.ndim and a.is_contiguous() and a.ndim != 1:
            a = TensorData(a.storage, (a.size,), (1,), a.offset)  # fold everything in one pass
            axis = (0,)
        with threads_for(a.size):
            a = _fold(name, scalar, start, a, axis, out.dtype)
        return TensorData.contiguous(a.storage, out.shape)

    return kernel


def _fold(name, scalar, start, a, axis, dtype):
    if not axis:  # nothing to fold (axis=() or a 0-d view): a contiguous copy of the view
        return TensorData.from_numpy(a.as_numpy_view().astype(dtype))
    for ax in axis:  # one axis at a time, keeping dims
        shape = tuple(1 if d == ax else n for d, n in enumerate(a.shape))
        result = TensorData.empty(shape, dtype)
        jit.elementwise("3.3", name, scalar)(start, *_args(result), *_args(a), ax)
        a = result
    return a


register_backend(NumbaBackend())


# ---------------------------------------------------------------- anchors and friends


def _batched(x: np.ndarray, batch: tuple, rows: int, cols: int) -> np.ndarray:
    """``x`` as a C-contiguous (B, rows, cols) array, B = 1 when its batch is all ones."""
    if int(np.prod(x.shape[:-2], dtype=np.int64)) == 1:
        return np.ascontiguousarray(x.reshape(1, rows, cols))
    x = np.broadcast_to(x, batch + (rows, cols))  # copies only if the batch really broadcasts
    return np.ascontiguousarray(x).reshape(-1, rows, cols)


def simple_matmul(n: int, k: int, m: int) -> bool:
    """Whether the simple kernel (3.4) beats the blocked one (3.6) for an (n, k) x (k, m) product.

    Measured at one thread: the blocked kernel packs b (k * m copies) and pays
    off only when every row of a reuses it, over a depth worth a register tile.
    """
    return n * k * m < 1 << 21 or k < 128 or n < 16


@register_kernel("matmul", "numba")
def matmul(a, b, out):
    if not _floats(out, a, b) or a.shape[-1] == 0:
        return _np_kernel("matmul")(a, b, out=out)
    n, k, m = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = out.shape[:-2]
    a3 = _batched(a.as_numpy_view(), batch, n, k)
    b3 = _batched(b.as_numpy_view(), batch, k, m)
    result = np.empty((int(np.prod(batch, dtype=np.int64)), n, m), dtype=out.dtype)
    with threads_for(result.size * k):
        if simple_matmul(n, k, m):  # packing and tiles cost more than they save
            jit.compiled("3.4", fastmath=True)(result, a3, b3)
        else:
            jit.composed("3.6", "3.5", "out, a, b")(result, a3, b3)
    return TensorData.contiguous(result.reshape(-1), out.shape)


def _c(x: TensorData) -> np.ndarray:
    return np.ascontiguousarray(x.as_numpy_view())


@register_kernel("conv2d", "numba")
def conv2d(x, w, out, stride, padding):
    if not _floats(out, x, w):
        return _np_kernel("conv2d")(x, w, out=out, stride=stride, padding=padding)
    result = np.empty(out.shape, dtype=out.dtype)
    with threads_for(result.size * w.size // w.shape[0]):
        jit.compiled("3.7", fastmath=True)(result, _c(x), _c(w), stride, padding)
    return TensorData.contiguous(result.reshape(-1), out.shape)


def _pool(ex_id: str, op: str):
    def kernel(x, out, kernel_size, stride):
        if not _floats(out, x):
            return _np_kernel(op)(x, out=out, kernel_size=kernel_size, stride=stride)
        result = np.empty(out.shape, dtype=out.dtype)
        with threads_for(x.size):
            jit.compiled(ex_id)(result, _c(x), *kernel_size, *stride)
        return TensorData.contiguous(result.reshape(-1), out.shape)

    return kernel


register_kernel("max_pool2d", "numba")(_pool("3.8", "max_pool2d"))
register_kernel("avg_pool2d", "numba")(_pool("3.9", "avg_pool2d"))


def _rows(x: TensorData, axis: int) -> np.ndarray:
    """``x`` with ``axis`` moved last, as a C-contiguous 2-D array of rows."""
    v = np.moveaxis(x.as_numpy_view(), axis, -1)
    return np.ascontiguousarray(v).reshape(-1, v.shape[-1] if v.ndim else 1)


@register_kernel("softmax", "numba")
def softmax(x, out, axis):
    if not _floats(out, x):
        return _np_kernel("softmax")(x, out=out, axis=axis)
    rows = _rows(x, axis)
    result = np.empty_like(rows)
    with threads_for(rows.size):
        jit.compiled("3.10")(result, rows)
    moved = np.moveaxis(x.as_numpy_view(), axis, -1).shape
    back = np.moveaxis(result.reshape(moved), -1, axis)
    return TensorData.from_numpy(back)


def _softmax_into(target, x, axis):
    last = axis % x.ndim == x.ndim - 1
    rows = np.ascontiguousarray(x if last else np.moveaxis(x, axis, -1))
    into, n = target if last else np.empty_like(rows), rows.shape[-1]
    runner(jit.compiled("3.10"), rows.size)(into.reshape(-1, n), rows.reshape(-1, n))
    if into is not target:
        np.copyto(target, np.moveaxis(into, -1, axis))


def _prepare_softmax(out, inputs):  # chapter 8: a plan's step writes into the arena
    return prepared_kernel("softmax", out, inputs, _softmax_into, contiguous=False) if (
        _floats(out, *inputs)) else None  # fmt: skip


softmax.prepare = _prepare_softmax


@register_kernel("logsumexp", "numba")
def logsumexp(x, out, axis, keepdims):
    if not _floats(out, x):
        return _np_kernel("logsumexp")(x, out=out, axis=axis, keepdims=keepdims)
    rows = _rows(x, axis)
    result = np.empty(rows.shape[0], dtype=out.dtype)
    with threads_for(rows.size):
        jit.compiled("3.11")(result, rows)
    return TensorData.contiguous(result, out.shape)
