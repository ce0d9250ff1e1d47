"""The ``cuda`` backend: device storage and the chapter's kernels behind the Backend interface.

Storage is a 1-D Numba device array (a simulated one without a GPU). View ops
(permute, reshape, expand, getitem) only change metadata and work unchanged;
everything that computes launches a kernel built by an exercise of
:mod:`minitorch.cuda.kernels`:

* elementwise ops map their scalar formula (4.1), broadcasting ops zip it (4.2);
* ``sum`` over every axis uses the shared-memory block sum (4.3); other
  reductions fold one axis at a time (4.4); ``mean`` is a sum and a division;
* ``matmul`` is the tiled kernel (4.5).

The framework's own kernels load with the backend: ``fill`` and ``pad_slice`` here,
convolution and pooling (:mod:`.conv`), the row ops softmax, logsumexp and argmax
(:mod:`.rows`). None of them copies data to the host.

Compiled kernels are cached per (exercise, implementation, compile-time
arguments), so switching between learner and reference code recompiles.
Launch sizes are small on the simulator, where each thread runs in Python.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os

# The package's __init__ ran first and chose the simulator if there is no GPU.
import numba
import numpy as np
from numba import cuda
from numba.core import config

from ..backends.base import Backend, register_backend
from ..core.instrument import launch  # records launches while chapter 10 profiles
from ..core.registry import OpDef, OpKind, register_kernel
from ..exercises import implementation
from ..tensor.data import TensorData
from ..tensor.indexing import broadcast_shape, strides_from_shape
from ..tensor.views import slice_view
from . import (
    gpu_present,
    kernels,  # noqa: F401  (registers exercises 4.1-4.5)
    simulator,
)
from .device import MAX_DIMS, index_to_position, to_index

SIMULATOR = bool(config.ENABLE_CUDASIM)
if SIMULATOR:
    simulator.patch()  # a block's threads run as greenlets, not OS threads: far cheaper launches
# Launch configuration: tiny on the simulator (each simulated thread runs in Python).
THREADS = 32 if SIMULATOR else 256  # threads per block of map/zip/block-sum
MAX_BLOCKS = 4 if SIMULATOR else 4096  # grid-stride loops cover the rest
REDUCE_THREADS = 16 if SIMULATOR else 128  # threads per block folding one axis
TILE = 4 if SIMULATOR else 16  # matmul tile (blocks of TILE x TILE threads)

# Course kernels tuned for a real GPU (not exercises) serve the cases they cover there.
# On the simulator the learners' kernels run everywhere, because that is what grading
# measures (a stub must not pass through a course kernel); tests switch them on with
# ``tuned(True)`` to check both give the same answer. MINITORCH_CUDA_TUNED=0/1 overrides.
TUNED = os.environ.get("MINITORCH_CUDA_TUNED", "0" if SIMULATOR else "1") == "1"


@contextlib.contextmanager
def tuned(on: bool = True):
    """Within the block, the backend uses (or avoids) its tuned course kernels."""
    global TUNED
    old, TUNED = TUNED, bool(on)
    try:
        yield
    finally:
        TUNED = old

_kernels: dict = {}
_device_fns: dict = {}
_meta_cache: dict = {}


def compiled(ex_id: str, *args):
    """The compiled kernel that exercise ``ex_id``'s builder makes from ``args`` (cached)."""
    builder = implementation(ex_id)
    key = (ex_id, builder, args)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = cuda.jit(builder(*args))
    return k


_own: dict = {}


def own_kernel(body, *args):
    """``cuda.jit`` of the framework's kernel ``body`` (not an exercise), or of ``body(*args)``
    when it is a builder taking compile-time arguments (cached)."""
    key = (body, args)
    k = _own.get(key)
    if k is None:
        k = _own[key] = cuda.jit(body(*args) if args else body)
    return k


# Scalar formulas that do not compile for the device as written (try/except).
CUDA_SCALARS = {"pow": lambda a, b: a**b}


def device_fn(op: OpDef):
    """The op's scalar formula as a CUDA device function (cached per op)."""
    fn = _device_fns.get(op.name)
    if fn is None:
        scalar = CUDA_SCALARS.get(op.name, op.scalar)
        if not inspect.isfunction(scalar):  # builtins such as max or math.exp
            f = scalar
            scalar = (lambda x: f(x)) if op.kind is OpKind.ELEMENTWISE else (lambda x, y: f(x, y))
        fn = _device_fns[op.name] = cuda.jit(device=True)(scalar)
    return fn


def numba_type(dtype):
    """``dtype`` as the Numba type the kernel builders take (``numba.float32``, ``numba.int64``...)."""
    return numba.from_dtype(np.dtype(dtype))


def matmul_type(dtype):
    """What a matmul with a ``dtype`` result accumulates in: ``dtype``, except that a bool product
    (an OR of ANDs) counts in int64, and a nonzero count stores as True."""
    return numba_type(np.int64 if np.dtype(dtype) == np.bool_ else dtype)


def _identity(x):
    return x


def _div(x, y):
    return x / y


_builtin_fns = {}


def _named_fn(name, fn):
    if name not in _builtin_fns:
        _builtin_fns[name] = cuda.jit(device=True)(fn)
    return _builtin_fns[name]


def meta(values) -> object:
    """A shape or strides tuple as an int64 device array (cached: shapes repeat)."""
    values = tuple(int(v) for v in values)
    arr = _meta_cache.get(values)
    if arr is None:
        arr = _meta_cache[values] = cuda.to_device(np.array(values, dtype=np.int64))
    return arr


def _args(x: TensorData) -> tuple:
    """(storage, shape, strides, offset) kernel arguments; a 0-d tensor is shown as shape (1,)."""
    shape, strides = (x.shape, x.strides) if x.ndim else ((1,), (0,))
    return x.storage, meta(shape), meta(strides), x.offset


def _out_shape(shape) -> tuple:
    return tuple(shape) if len(shape) else (1,)


def _blocks(n: int, threads: int) -> int:
    return max(1, min(MAX_BLOCKS, math.ceil(n / threads)))


def _empty(shape, dtype) -> TensorData:
    size = int(np.prod(shape, dtype=np.int64))
    return TensorData.contiguous(cuda.device_array(size, dtype=dtype), tuple(shape))


def _fill(out, n, value):
    i = cuda.grid(1)
    while i < n:
        out[i] = value
        i += cuda.gridsize(1)


def fill(shape, dtype, value) -> TensorData:
    """A new contiguous tensor of ``shape`` holding ``value``, written on the device."""
    out = _empty(shape, dtype)
    if out.size:
        threads = min(THREADS, out.size)
        launch(own_kernel(_fill), _blocks(out.size, threads), threads,
               out.storage, out.size, out.dtype.type(value), name="fill")  # fmt: skip
    return out


def _copy_into(dst, shape, d_strides, d_offset, src, s_shape, s_strides, s_offset, n):
    index = cuda.local.array(MAX_DIMS, numba.int64)
    i = cuda.grid(1)
    while i < n:
        to_index(i, shape, index)
        dst[index_to_position(index, d_strides, d_offset)] = src[
            index_to_position(index, s_strides, s_offset)
        ]
        i += cuda.gridsize(1)


def copy_into(dst: TensorData, src: TensorData) -> None:
    """Write ``src`` into the strided view ``dst`` of the same shape, one thread per element."""
    if src.size:
        launch(own_kernel(_copy_into), _blocks(src.size, THREADS), THREADS,
               *_args(dst), *_args(src), src.size, name="copy_into")  # fmt: skip


def launch_map(fn, a: TensorData, shape, dtype) -> TensorData:
    out = _empty(shape, dtype)
    if out.size:
        k = compiled("4.1", fn)
        launch(
            k, _blocks(out.size, THREADS), THREADS,
            out.storage, meta(_out_shape(shape)), out.size, *_args(a), name="map",
        )  # fmt: skip
    return out


def launch_zip(fn, a: TensorData, b: TensorData, shape, dtype) -> TensorData:
    out = _empty(shape, dtype)
    if out.size:
        k = compiled("4.2", fn)
        launch(
            k, _blocks(out.size, THREADS), THREADS,
            out.storage, meta(_out_shape(shape)), out.size, *_args(a), *_args(b), name="zip",
        )  # fmt: skip
    return out


def launch_block_sum(a: TensorData, dtype) -> TensorData:
    """Sum every element of ``a`` with two launches of the block-sum kernel (4.3)."""
    if not a.is_contiguous():
        a = _BACKEND.copy(a)
    flat = a.storage[a.offset : a.offset + a.size]
    k = compiled("4.3", THREADS, numba_type(dtype))
    blocks = _blocks(a.size, THREADS)
    partial = cuda.device_array(blocks, dtype=dtype)
    launch(k, blocks, THREADS, partial, flat, a.size, name="block_sum")
    out = cuda.device_array(1, dtype=dtype)
    launch(k, 1, THREADS, out, partial, blocks, name="block_sum")
    return TensorData.contiguous(out, (1,))


def launch_reduce(op: OpDef, a: TensorData, ax: int, dtype) -> TensorData:
    """Fold axis ``ax`` of ``a`` (keeping it with size 1) with the reduce kernel (4.4)."""
    shape = tuple(1 if d == ax else n for d, n in enumerate(a.shape))
    out = _empty(shape, dtype)
    fold = _named_fn("add", lambda x, y: x + y) if op.name == "sum" else device_fn(op)
    k = compiled("4.4", fold, _start(op, dtype), REDUCE_THREADS, numba_type(dtype))
    blocks = max(1, min(MAX_BLOCKS, out.size))
    launch(
        k, blocks, REDUCE_THREADS, out.storage, meta(shape), out.size, *_args(a), ax, name="reduce"
    )
    return out


def _start(op: OpDef, dtype) -> object:
    """The fold's identity (``op.identity``) as a ``dtype`` scalar. An int or bool max starts at
    the dtype's least value, not at -inf: a float start would fold int64 in float64."""
    value = op.identity
    if math.isinf(value) and dtype.kind == "b":
        value = value > 0  # max starts at False, min at True
    elif math.isinf(value) and dtype.kind == "i":
        value = np.iinfo(dtype).max if value > 0 else np.iinfo(dtype).min
    return dtype.type(value)


class CudaBackend(Backend):
    name = "cuda"
    device = "cuda"

    def generic(self, op: OpDef):
        if op.scalar is None:
            return None
        if op.kind is OpKind.ELEMENTWISE:
            return lambda a, out: launch_map(device_fn(op), a, out.shape, out.dtype)
        if op.kind is OpKind.BROADCAST and op.num_inputs == 2:
            return lambda a, b, out: launch_zip(device_fn(op), a, b, out.shape, out.dtype)
        if op.kind is OpKind.REDUCE and op.name in ("sum", "max", "min"):
            return lambda a, out, axis, keepdims: reduce(op, a, out, axis)
        return None

    def from_numpy(self, array: np.ndarray) -> TensorData:
        flat = np.ascontiguousarray(array).reshape(-1)
        return TensorData.contiguous(cuda.to_device(flat), tuple(array.shape))

    def to_numpy(self, data: TensorData) -> np.ndarray:
        if data.size == 0:
            return np.empty(data.shape, dtype=data.dtype)
        host = data.storage.copy_to_host()
        return TensorData(host, data.shape, data.strides, data.offset).to_numpy()

    def copy(self, data: TensorData) -> TensorData:
        return launch_map(_named_fn("identity", _identity), data, data.shape, data.dtype)

    def synchronize(self) -> None:
        cuda.synchronize()


def reduce(op: OpDef, a: TensorData, out, axis) -> TensorData:
    if a.size == 0 or not axis:
        if a.size == 0:  # an empty sum (max/min of empty dims fail in infer)
            return fill(out.shape, out.dtype, 0)
        result = launch_map(_named_fn("identity", _identity), a, a.shape, out.dtype)
    elif op.name == "sum" and len(axis) == a.ndim:
        result = launch_block_sum(_as(a, out.dtype), out.dtype)
    else:
        result = _as(a, out.dtype)
        for ax in axis:
            result = launch_reduce(op, result, ax, out.dtype)
    return TensorData.contiguous(result.storage, out.shape)


def _as(a: TensorData, dtype) -> TensorData:
    """``a`` in ``dtype``: the kernels fold in the result's dtype (bools summed as int64, the mean
    of ints in float32), so the inputs the shape rules widen are cast first."""
    if a.dtype == dtype:
        return a
    return launch_map(_named_fn("identity", _identity), a, a.shape, dtype)


_BACKEND = register_backend(CudaBackend())


@register_kernel("cast", "cuda")
def cast(a, out, dtype):
    return launch_map(_named_fn("identity", _identity), a, out.shape, out.dtype)


@register_kernel("mean", "cuda")
def mean(a, out, axis, keepdims):
    from ..core.registry import get_op

    total = reduce(get_op("sum"), a, out, axis)
    count = int(np.prod([a.shape[d] for d in axis], dtype=np.int64))
    divisor = fill((1,), out.dtype, count)
    div = _named_fn("div", _div)
    return launch_zip(div, total, divisor, out.shape, out.dtype)


def _pick_a(c, a):
    return a if c else -0.0  # -0.0 is IEEE's additive identity: x + -0.0 == x, even for x = +0.0


def _pick_b(c, b):
    return -0.0 if c else b


def _pick_a_int(c, a):
    return a if c else a * 0  # an int zero keeps int64 exact (no detour through float64)


def _pick_b_int(c, b):
    return b * 0 if c else b


@register_kernel("where", "cuda")
def where(c, a, b, out):
    # Three inputs, but the chapter's kernels zip two: pick each side, then add them.
    kind = "" if out.dtype.kind == "f" else "_int"
    pick_a, pick_b = (_pick_a, _pick_b) if not kind else (_pick_a_int, _pick_b_int)
    ta = launch_zip(_named_fn("pick_a" + kind, pick_a), c, a, out.shape, out.dtype)
    tb = launch_zip(_named_fn("pick_b" + kind, pick_b), c, b, out.shape, out.dtype)
    return launch_zip(_named_fn("add", lambda x, y: x + y), ta, tb, out.shape, out.dtype)


@register_kernel("pad_slice", "cuda")
def pad_slice(g, out, key, shape):
    # Zeros, then g copied into the window view of them (chapter 1's slice_view), all on
    # the device: the "*" kernel scatters on the host.
    result = fill(out.shape, out.dtype, 0)
    wshape, wstrides, woffset = slice_view(out.shape, tuple(strides_from_shape(out.shape)), 0, key)
    copy_into(TensorData(result.storage, tuple(wshape), tuple(wstrides), woffset), g)
    return result


def _batched(x: TensorData, batch: tuple) -> TensorData:
    """``x`` as a (B, rows, cols) view: batch dims broadcast to ``batch``, then merged into one."""
    lead = len(batch) - (x.ndim - 2)
    dims = [
        (b, 0 if d < lead or x.shape[d - lead] != b else x.strides[d - lead])
        for d, b in enumerate(batch)
    ]
    dims = [(n, s) for n, s in dims if n != 1]  # size-1 dims do not move
    total = int(np.prod(batch, dtype=np.int64))
    if not dims:
        return TensorData(x.storage, (1,) + x.shape[-2:], (0,) + x.strides[-2:], x.offset)
    if all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1)):
        return TensorData(
            x.storage, (total,) + x.shape[-2:], (dims[-1][1],) + x.strides[-2:], x.offset
        )
    # Not expressible as one batch stride: copy the broadcast operand once.
    shape = tuple(n for n, _ in dims) + x.shape[-2:]
    strides = tuple(s for _, s in dims) + x.strides[-2:]
    x = _BACKEND.copy(TensorData(x.storage, shape, strides, x.offset))
    return TensorData(x.storage, (total,) + shape[-2:], (x.strides[-3],) + x.strides[-2:], 0)


def launch_matmul(kernel, a: TensorData, b: TensorData, block: int, dtype) -> TensorData:
    """Run a matmul ``kernel`` (one thread per output, ``block`` x ``block`` blocks) on a batch."""
    batch = tuple(broadcast_shape(a.shape[:-2], b.shape[:-2]))
    a3, b3 = _batched(a, batch), _batched(b, batch)
    n, k, m = a.shape[-2], a.shape[-1], b.shape[-1]
    result = _empty(batch + (n, m), dtype)
    if result.size:
        grid = (math.ceil(m / block), math.ceil(n / block), a3.shape[0])
        launch(
            kernel, grid, (block, block),
            result.storage, a3.storage, meta(a3.strides), a3.offset,
            b3.storage, meta(b3.strides), b3.offset, n, k, m, name="matmul",
        )  # fmt: skip
    return result


@register_kernel("matmul", "cuda")
def matmul(a, b, out):
    return launch_matmul(compiled("4.5", TILE, matmul_type(out.dtype)), a, b, TILE, out.dtype)


# The framework's own kernels beyond the exercises (they import this module).
from . import conv, rows  # noqa: E402, F401

__all__ = ["CudaBackend", "SIMULATOR", "THREADS", "TILE", "compiled", "gpu_present", "numba"]
