"""Chapter 4, exercises 4.1-4.5: CUDA kernels, written as plain Python and compiled by Numba.

Each exercise is a *kernel builder*: it receives what must be fixed at compile
time (the op's scalar formula as a device function, the block size, the tile
size, the element dtype) and returns a Python function, the kernel body. The backend compiles that
body with ``numba.cuda.jit`` once per builder and arguments, and launches it as
``kernel[blocks, threads](*args)``. Inside the body:

* ``cuda.threadIdx.x``, ``cuda.blockIdx.x``, ``cuda.blockDim.x``, ``cuda.gridDim.x``
  say which thread this is; ``cuda.grid(1)`` is ``blockIdx.x * blockDim.x + threadIdx.x``
  and ``cuda.gridsize(1)`` the total number of threads in the launch;
* ``cuda.shared.array(shape, dtype)`` is memory shared by the threads of a block
  (``shape`` and ``dtype`` must be compile-time constants: use the builder's arguments);
* ``cuda.syncthreads()`` waits until every thread of the block reaches it;
* ``cuda.local.array(MAX_DIMS, numba.int64)`` is a small per-thread index array
  for the helpers of :mod:`minitorch.cuda.device` (``to_index``,
  ``broadcast_index``, ``index_to_position``).

Arrays are 1-D device arrays: storages, and shapes/strides as int64 arrays.
Outputs are fresh contiguous storages; inputs may be any strided view.

Precision: the builders of 4.3-4.5 also receive ``dtype``, the Numba type of the
result's elements (``numba.float32``, ``numba.int64``...), and compute in it: shared
arrays ``cuda.shared.array(n, dtype)``, accumulators ``acc = dtype(0)``. Consumer GPUs
(a T4, a GeForce card) run float64 arithmetic at 1/32 to 1/64 of their float32 rate,
and an int64 sum that goes through float64 is no longer exact past 2**53. Numba types
a float literal (``0.0``, ``-math.inf``) as float64, and float32 combined with float64
or with an int64 as float64, so ``acc = 0.0`` would widen a float32 kernel. (The
simulator computes with numpy scalars, where ``0.0 + float32`` stays float32: it
shows a float64 shared array, not every widening. ``python -m minitorch.cuda.lowering``
asks Numba's compiler what each of your kernels leaves in float64, without a GPU.)

The backend launches a *fixed* number of threads (few on the simulator), so
every kernel must cover any size with a grid-stride loop::

    i = cuda.grid(1)
    while i < size:
        ...
        i += cuda.gridsize(1)
"""

from __future__ import annotations

import numba  # noqa: F401  (numba.int64 inside kernel bodies)
from numba import cuda  # noqa: F401  (the kernel bodies use cuda.*)

from ..exercises import exercise
from .device import MAX_DIMS, broadcast_index, index_to_position, to_index  # noqa: F401


@exercise("4.1")
def map_kernel(fn):
    """Return the body of a CUDA kernel that applies the device function ``fn`` elementwise.

    The body's signature is::

        kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset)

    ``out`` is contiguous with shape ``out_shape`` (``out_size`` elements); ``a``
    is a strided view whose shape broadcasts to ``out_shape``. For every ordinal
    ``i`` of ``out``: ``out[i] = fn(a[broadcast(to_index(i))])``.

    One thread per output element, in a grid-stride loop (the launch may have
    fewer threads than elements). Each input element that is needed is read from
    global memory once per output element, each output written once.

    Example (what the backend does with it)::

        body = map_kernel(cuda.jit(device=True)(lambda x: -x))
        kernel = cuda.jit(body)
        kernel[4, 32](out, out_shape, n, a, a_shape, a_strides, 0)

    Hint: make two local index arrays, then ``to_index(i, out_shape, oi)``,
    ``broadcast_index(oi, out_shape, a_shape, ai)``,
    ``index_to_position(ai, a_strides, a_offset)``.
    """
    raise NotImplementedError("Exercise 4.1: map_kernel")


@exercise("4.2")
def zip_kernel(fn):
    """Return the body of a CUDA kernel that combines two tensors with the device function ``fn``.

    The body's signature is::

        kernel(out, out_shape, out_size,
               a, a_shape, a_strides, a_offset,
               b, b_shape, b_strides, b_offset)

    ``a`` and ``b`` broadcast to ``out_shape``; for every ordinal ``i`` of the
    contiguous ``out``: ``out[i] = fn(a[broadcast(i)], b[broadcast(i)])``.

    Example: ``a`` of shape (3, 1) and ``b`` of shape (4,) give ``out`` of shape
    (3, 4); ``fn = add`` computes an outer sum.

    Hint: exactly the map of 4.1 with a second input; keep the grid-stride loop.
    """
    raise NotImplementedError("Exercise 4.2: zip_kernel")


@exercise("4.3")
def block_sum_kernel(threads, dtype):
    """Return the body of a block-level sum reduction through shared memory.

    The body's signature is ``kernel(out, a, size)``: ``a`` is contiguous with
    ``size`` elements of ``dtype`` (a Numba type: ``numba.float32``, ``numba.int64``...),
    ``out`` has ``dtype`` too; the launch has ``threads`` threads per block (a power of
    two) and any number of blocks. Block ``b`` writes one partial sum to
    ``out[b]``; the sum of all partial sums is ``a.sum()`` (the backend launches
    the kernel again on the partials, with one block, to finish).

    Steps, for a thread ``t`` of block ``b``:

    1. accumulate in a register ``acc = dtype(0)`` the elements ``cuda.grid(1)``,
       ``cuda.grid(1) + cuda.gridsize(1)``, ... below ``size``;
    2. store it in ``cache[t]``, a ``cuda.shared.array(threads, dtype)``;
    3. tree reduction: for ``step = threads // 2, threads // 4, ..., 1``:
       ``syncthreads()``, then threads ``t < step`` add ``cache[t + step]``
       into ``cache[t]``;
    4. after a last ``syncthreads()``, thread 0 writes ``cache[0]`` to ``out[b]``.

    Every element of ``a`` is read from global memory exactly once; the
    additions of step 3 only touch shared memory. The traffic test checks both.

    Everything is in ``dtype``, never float64 by default: a float32 sum adds float32
    numbers (consumer GPUs run float64 at 1/32-1/64 of that rate) and an int64 sum
    stays exact (in float64 it would not, past 2**53). With the tree, float32's rounding
    error grows with one thread's share plus log2(threads), rather than with ``size``.

    Example: ``size=100``, ``threads=32``, 2 blocks: ``out[0] + out[1] == a.sum()``;
    ``block_sum_kernel(32, numba.float32)`` sums float32 tensors.

    Hint: ``syncthreads()`` must be reached by every thread of the block, so call
    it outside the ``if t < step`` branch.
    """
    raise NotImplementedError("Exercise 4.3: block_sum_kernel")


@exercise("4.4")
def reduce_kernel(fn, start, threads, dtype):
    """Return the body of a kernel that folds one axis with the device function ``fn``.

    The body's signature is::

        kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset, axis)

    ``out`` is contiguous with ``out_shape`` = ``a_shape`` with size 1 at
    ``axis``. For every ordinal ``o`` of ``out``:
    ``out[o] = fn(...fn(fn(start, a[o's index, axis=0]), a[..., axis=1])...)``.
    ``fn`` is associative and commutative (add, max, min), so the order may change.

    ``a`` and ``out`` hold elements of ``dtype`` (a Numba type, as in 4.3) and the fold
    computes in it; ``start`` is ``fn``'s identity as a ``dtype`` scalar (the backend
    passes ``-inf`` for a float max, the least int64 for an int64 max: a float start
    would fold int64 in float64, inexact past 2**53).

    One *block* per output element, in a block-stride loop
    (``o = blockIdx.x, blockIdx.x + gridDim.x, ...``): the block's ``threads``
    threads fold the axis together. Thread ``t`` folds the elements
    ``t, t + threads, ...`` of the axis into a register (starting at ``start``),
    then the block combines the ``threads`` values with a tree reduction in
    ``cuda.shared.array(threads, dtype)``, like 4.3, and thread 0 writes ``out[o]``.

    Example: ``a`` of shape (2, 3), ``axis=1``, ``fn=add``, ``start=np.float32(0)``,
    ``dtype=numba.float32`` gives ``out`` of shape (2, 1) holding the row sums.

    Hint: the position of element ``j`` along the axis is
    ``index_to_position(index_of_o, a_strides, a_offset) + j * a_strides[axis]``.
    Put a ``syncthreads()`` at the end of each ``o`` iteration so that no thread
    overwrites the shared array while another still reads it.
    """
    raise NotImplementedError("Exercise 4.4: reduce_kernel")


@exercise("4.5")
def matmul_kernel(tile, dtype):
    """Return the body of a batched matrix multiply tiled through shared memory.

    The body's signature is::

        kernel(out, a, a_strides, a_offset, b, b_strides, b_offset, n, k, m)

    ``a`` is a (batch, n, k) strided view (``a_strides`` has 3 entries), ``b`` a
    (batch, k, m) view, ``out`` contiguous (batch, n, m). The launch has blocks of
    ``(tile, tile)`` threads and a grid of ``(ceil(m / tile), ceil(n / tile), batch)``:
    block ``(bx, by, bz)`` computes the output tile of rows ``by*tile ...`` and
    columns ``bx*tile ...`` of batch ``bz``; thread ``(tx, ty)`` owns
    ``out[bz, by*tile + ty, bx*tile + tx]``.

    Tiling: walk ``k`` in steps of ``tile``. At each step every thread loads one
    element of the ``a`` tile and one of the ``b`` tile into two
    ``cuda.shared.array((tile, tile), dtype)`` arrays (0 outside the matrices),
    ``syncthreads()``, adds its ``tile`` products from shared memory into its
    accumulator (``dtype(0)`` at first), and ``syncthreads()`` again before the
    next step overwrites the tiles. So each global element is read ``ceil(n / tile)`` or ``ceil(m / tile)`` times, not ``n``
    or ``m`` times as in the naive kernel (the traffic test checks this).

    ``dtype`` is the Numba type the tiles and the sum are in: the result's, so a float32
    matmul multiplies and adds float32 (consumer GPUs run float64 at 1/32-1/64 of that
    rate) and an int64 one stays exact; a bool result counts in ``numba.int64`` (the
    backend's choice: a nonzero count stores as True).

    Example: ``n = k = m = 8`` with ``tile = 4``: a 2x2x1 grid of 4x4 blocks, two
    tile steps per block.

    Hint: threads outside the output (when ``n`` or ``m`` is not a multiple of
    ``tile``) still load tiles and reach every ``syncthreads()``; only the final
    write is guarded. Let ``threadIdx.x`` run along columns so that neighbouring
    threads read neighbouring addresses (coalescing).
    """
    raise NotImplementedError("Exercise 4.5: matmul_kernel")
