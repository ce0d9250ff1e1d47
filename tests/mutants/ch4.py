"""Known-wrong implementations of Chapter 4 (CUDA kernels, graded on the simulator without a GPU)."""

from __future__ import annotations

import numba
from numba import cuda

from minitorch.cuda.device import MAX_DIMS, broadcast_index, index_to_position, to_index
from solutions.reference import ch4 as ref

from . import mutant

# ---------------------------------------------------------------- 4.1 map_kernel


@mutant("4.1", "a's offset ignored")
def map_kernel(fn):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            out[i] = fn(a[index_to_position(ai, a_strides, 0)])
            i += cuda.gridsize(1)

    return kernel


@mutant("4.1", "no grid-stride loop: elements past the launched threads are never written")
def map_kernel_no_grid_stride(fn):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        if i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            out[i] = fn(a[index_to_position(ai, a_strides, a_offset)])

    return kernel


@mutant("4.1", "reads the input element twice from global memory")
def map_kernel_reads_twice(fn):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            p = index_to_position(ai, a_strides, a_offset)
            if a[p] == a[p]:  # a NaN check that costs a second read
                out[i] = fn(a[p])
            else:
                out[i] = a[p]
            i += cuda.gridsize(1)

    return kernel


@mutant("4.1", "the output written at the input's position")
def map_kernel_out_position(fn):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            p = index_to_position(ai, a_strides, a_offset)
            out[min(p - a_offset, out_size - 1)] = fn(a[p])
            i += cuda.gridsize(1)

    return kernel


# ---------------------------------------------------------------- 4.2 zip_kernel


def _zip(fn, swap=False, b_offset_used=True, b_own_strides=True, grid_stride=True):
    def kernel(
        out, out_shape, out_size, a, a_shape, a_strides, a_offset, b, b_shape, b_strides, b_offset
    ):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        bi = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            broadcast_index(oi, out_shape, b_shape, bi)
            x = a[index_to_position(ai, a_strides, a_offset)]
            strides = b_strides if b_own_strides or len(a_shape) != len(b_shape) else a_strides
            q = index_to_position(bi, strides, b_offset if b_offset_used else 0)
            y = b[min(q, b.size - 1)]
            out[i] = fn(y, x) if swap else fn(x, y)
            i += cuda.gridsize(1) if grid_stride else out_size

    return kernel


@mutant("4.2", "b's offset ignored")
def zip_kernel(fn):
    return _zip(fn, b_offset_used=False)


@mutant("4.2", "arguments swapped: fn(b, a)")
def zip_kernel_swapped(fn):
    return _zip(fn, swap=True)


@mutant("4.2", "b indexed with a's strides")
def zip_kernel_a_strides(fn):
    return _zip(fn, b_own_strides=False)


@mutant("4.2", "no grid-stride loop")
def zip_kernel_no_grid_stride(fn):
    return _zip(fn, grid_stride=False)


# ---------------------------------------------------------------- 4.3 block_sum_kernel


@mutant("4.3", "no barrier in the tree: a thread reads a partner's slot before it is written")
def block_sum_kernel(threads, dtype):
    def kernel(out, a, size):
        cache = cuda.shared.array(threads, dtype)
        t = cuda.threadIdx.x
        acc = dtype(0)
        i = cuda.grid(1)
        while i < size:
            acc += a[i]
            i += cuda.gridsize(1)
        cache[t] = acc
        step = threads // 2
        while step > 0:
            if t < step:
                cache[t] += cache[t + step]
            step //= 2
        if t == 0:
            out[cuda.blockIdx.x] = cache[0]

    return kernel


@mutant("4.3", "no grid-stride loop: each thread loads one element")
def block_sum_kernel_one_load(threads, dtype):
    def kernel(out, a, size):
        cache = cuda.shared.array(threads, dtype)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        cache[t] = a[i] if i < size else 0
        step = threads // 2
        while step > 0:
            cuda.syncthreads()
            if t < step:
                cache[t] += cache[t + step]
            step //= 2
        cuda.syncthreads()
        if t == 0:
            out[cuda.blockIdx.x] = cache[0]

    return kernel


@mutant("4.3", "off by one: the tree stops at step 2, the last pair never added")
def block_sum_kernel_short_tree(threads, dtype):
    def kernel(out, a, size):
        cache = cuda.shared.array(threads, dtype)
        t = cuda.threadIdx.x
        acc = dtype(0)
        i = cuda.grid(1)
        while i < size:
            acc += a[i]
            i += cuda.gridsize(1)
        cache[t] = acc
        step = threads // 2
        while step > 1:
            cuda.syncthreads()
            if t < step:
                cache[t] += cache[t + step]
            step //= 2
        cuda.syncthreads()
        if t == 0:
            out[cuda.blockIdx.x] = cache[0]

    return kernel


@mutant("4.3", "thread 0 sums its block's elements from global memory, no shared memory")
def block_sum_kernel_serial(threads, dtype):
    def kernel(out, a, size):
        if cuda.threadIdx.x == 0:
            acc = dtype(0)
            start = cuda.blockIdx.x * threads
            while start < size:
                for j in range(start, min(start + threads, size)):
                    acc += a[j]
                start += cuda.gridsize(1)
            out[cuda.blockIdx.x] = acc

    return kernel


@mutant("4.3", "caches and adds in float64 whatever the dtype: slow on GPUs, inexact int64")
def block_sum_kernel_float64(threads, dtype):
    return ref.block_sum_kernel(threads, numba.float64)


# ---------------------------------------------------------------- 4.4 reduce_kernel


def _add(x, y):
    return x + y


def _reduce(
    fn,
    start,
    threads,
    dtype,
    offset=True,
    use_start=True,
    unit_step=False,
    one_thread=False,
    tree=None,
    idle_zero=False,
    c_order_stride=False,
):
    combine = fn if tree is None else tree

    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset, axis):
        cache = cuda.shared.array(threads, dtype)
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        t = cuda.threadIdx.x
        n = a_shape[axis]
        stride = 1 if unit_step else a_strides[axis]
        if c_order_stride:  # as if a were contiguous
            stride = 1
            for d in range(axis + 1, len(a_shape)):
                stride *= a_shape[d]
        o = cuda.blockIdx.x
        while o < out_size:
            to_index(o, out_shape, oi)
            base = index_to_position(oi, a_strides, a_offset if offset else 0)
            acc = start if use_start else dtype(0)
            if one_thread:
                if t == 0:
                    for j in range(n):
                        acc = fn(acc, a[base + j * stride])
                    out[o] = acc
                o += cuda.gridDim.x
                continue
            j = t
            while j < n:
                acc = fn(acc, a[min(base + j * stride, a.size - 1)])
                j += threads
            cache[t] = dtype(0) if idle_zero and t >= n else acc  # "an idle thread adds nothing"
            step = threads // 2
            while step > 0:
                cuda.syncthreads()
                if t < step:
                    cache[t] = combine(cache[t], cache[t + step])
                step //= 2
            cuda.syncthreads()
            if t == 0:
                out[o] = cache[0]
            cuda.syncthreads()
            o += cuda.gridDim.x

    return kernel


@mutant("4.4", "a's offset ignored")
def reduce_kernel(fn, start, threads, dtype):
    return _reduce(fn, start, threads, dtype, offset=False)


@mutant("4.4", "every thread starts from 0 instead of the start value")
def reduce_kernel_zero_start(fn, start, threads, dtype):
    return _reduce(fn, start, threads, dtype, use_start=False)


@mutant("4.4", "steps along the axis by 1, not by its stride")
def reduce_kernel_unit_step(fn, start, threads, dtype):
    return _reduce(fn, start, threads, dtype, unit_step=True)


@mutant("4.4", "thread 0 folds the whole axis alone, no shared memory")
def reduce_kernel_one_thread(fn, start, threads, dtype):
    return _reduce(fn, start, threads, dtype, one_thread=True)


@mutant("4.4", "the shared-memory tree adds partial results whatever the op")
def reduce_kernel_tree_adds(fn, start, threads, dtype):
    return _reduce(fn, start, threads, dtype, tree=cuda.jit(device=True)(_add))


@mutant("4.4", "caches in float64 whatever the dtype: slow on consumer GPUs, inexact int64")
def reduce_kernel_float64(fn, start, threads, dtype):
    return ref.reduce_kernel(fn, start, threads, numba.float64)


# ---------------------------------------------------------------- 4.5 matmul_kernel


def _matmul(
    tile,
    dtype,
    k_guard=True,
    second_barrier=True,
    offsets=True,
    shared=True,
    b_swap=False,
    out_guard=True,
    a_fill=True,
    contiguous_rows=False,
    skip_nan=False,
):
    def kernel(out, a, a_strides, a_offset, b, b_strides, b_offset, n, k, m):
        a_tile = cuda.shared.array((tile, tile), dtype)
        b_tile = cuda.shared.array((tile, tile), dtype)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        z = cuda.blockIdx.z
        a_base = (a_offset if offsets else 0) + z * a_strides[0]
        b_base = (b_offset if offsets else 0) + z * b_strides[0]
        acc = dtype(0)
        if not shared:
            if row < n and col < m:
                for j in range(k):
                    x = a[a_base + row * a_strides[1] + j * a_strides[2]]
                    acc += x * b[b_base + j * b_strides[1] + col * b_strides[2]]
                out[(z * n + row) * m + col] = acc
            return
        for k0 in range(0, k, tile):
            if row < n and (k0 + tx < k or not k_guard):
                p = a_base + row * a_strides[1] + (k0 + tx) * a_strides[2]
                if contiguous_rows:  # a's element (row, c) taken at base + row * k + c
                    p = a_base + row * k + k0 + tx
                a_tile[ty, tx] = a[min(p, a.size - 1)]
            elif a_fill:
                a_tile[ty, tx] = 0
            if (k0 + ty < k or not k_guard) and col < m:
                q = b_base + (k0 + ty) * b_strides[1] + col * b_strides[2]
                if b_swap:  # thread (ty, tx) loads b's element (k0 + tx, column of ty)
                    q = b_base + (k0 + tx) * b_strides[1] + (col - tx + ty) * b_strides[2]
                b_tile[ty, tx] = b[min(q, b.size - 1)]
            else:
                b_tile[ty, tx] = 0
            cuda.syncthreads()
            for j in range(tile):
                x = a_tile[ty, j] * b_tile[j, tx]
                if x == x or not skip_nan:  # "skip the padding's NaNs"
                    acc += x
            if second_barrier:
                cuda.syncthreads()
        if (row < n and col < m) or not out_guard:
            p = (z * n + row) * m + col
            if p < out.size:  # the simulator would raise past the end; a GPU writes there
                out[p] = acc

    return kernel


@mutant("4.5", "no bounds check on k when loading a tile: reads past the row")
def matmul_kernel(tile, dtype):
    return _matmul(tile, dtype, k_guard=False)


@mutant("4.5", "no barrier after the products: the next tile overwrites one still in use")
def matmul_kernel_one_barrier(tile, dtype):
    return _matmul(tile, dtype, second_barrier=False)


@mutant("4.5", "the operands' offsets ignored")
def matmul_kernel_no_offsets(tile, dtype):
    return _matmul(tile, dtype, offsets=False)


@mutant("4.5", "no shared tiles: every product reads global memory")
def matmul_kernel_global(tile, dtype):
    return _matmul(tile, dtype, shared=False)


@mutant("4.5", "b's tile loaded with threadIdx.x and threadIdx.y swapped")
def matmul_kernel_b_swapped(tile, dtype):
    return _matmul(tile, dtype, b_swap=True)


@mutant("4.5", "no bounds check on the output: threads past the edge write into the next row")
def matmul_kernel_unguarded_write(tile, dtype):
    return _matmul(tile, dtype, out_guard=False)


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("4.5", "a's tile past the edge of k is not zero-filled: it keeps the last tile's values")
def matmul_kernel_stale_edge(tile, dtype):
    return _matmul(tile, dtype, a_fill=False)


@mutant("4.5", "tiles and sums in float64 whatever the dtype: slow on consumer GPUs, inexact int64")
def matmul_kernel_float64(tile, dtype):
    return ref.matmul_kernel(tile, numba.float64)


# ---------------------------------------------------------------- issue 43: untried layouts,
# extremes and empty blocks


@mutant(
    "4.1", "a fast path: an input whose last stride is 1 and shape is out's is read at offset + i"
)
def map_kernel_last_stride_fast_path(fn):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        same = len(a_shape) == len(out_shape) and a_strides[len(a_strides) - 1] == 1
        for d in range(len(a_shape)):
            if a_shape[d] != out_shape[d]:
                same = False
        i = cuda.grid(1)
        while i < out_size:
            if same:  # "contiguous", judged by the last stride alone
                out[i] = fn(a[a_offset + i])
            else:
                to_index(i, out_shape, oi)
                broadcast_index(oi, out_shape, a_shape, ai)
                out[i] = fn(a[index_to_position(ai, a_strides, a_offset)])
            i += cuda.gridsize(1)

    return kernel


@mutant("4.1", "broadcast_index skipped when a has out's rank: a size-1 axis is read at index > 0")
def map_kernel_same_rank_no_broadcast(fn):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            if len(a_shape) == len(out_shape):
                p = index_to_position(oi, a_strides, a_offset)
            else:
                broadcast_index(oi, out_shape, a_shape, ai)
                p = index_to_position(ai, a_strides, a_offset)
            out[i] = fn(a[min(p, a.size - 1)])
            i += cuda.gridsize(1)

    return kernel


@mutant(
    "4.2", "a fast path: inputs whose last stride is 1 and shape is out's are read at offset + i"
)
def zip_kernel_last_stride_fast_path(fn):
    def kernel(
        out, out_shape, out_size, a, a_shape, a_strides, a_offset, b, b_shape, b_strides, b_offset
    ):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        bi = cuda.local.array(MAX_DIMS, numba.int64)
        same = len(a_shape) == len(out_shape) and len(b_shape) == len(out_shape)
        same = same and a_strides[len(a_shape) - 1] == 1 and b_strides[len(b_shape) - 1] == 1
        for d in range(len(out_shape)):
            if same and (a_shape[d] != out_shape[d] or b_shape[d] != out_shape[d]):
                same = False
        i = cuda.grid(1)
        while i < out_size:
            if same:
                out[i] = fn(a[a_offset + i], b[b_offset + i])
            else:
                to_index(i, out_shape, oi)
                broadcast_index(oi, out_shape, a_shape, ai)
                broadcast_index(oi, out_shape, b_shape, bi)
                x = a[index_to_position(ai, a_strides, a_offset)]
                out[i] = fn(x, b[index_to_position(bi, b_strides, b_offset)])
            i += cuda.gridsize(1)

    return kernel


@mutant("4.2", "b's index taken from a's: b broadcast like a (right only when the shapes agree)")
def zip_kernel_b_like_a(fn):
    def kernel(
        out, out_shape, out_size, a, a_shape, a_strides, a_offset, b, b_shape, b_strides, b_offset
    ):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            x = a[index_to_position(ai, a_strides, a_offset)]
            if len(b_shape) == len(a_shape):
                q = index_to_position(ai, b_strides, b_offset)
            else:
                q = index_to_position(oi, b_strides, b_offset)
            out[i] = fn(x, b[min(q, b.size - 1)])
            i += cuda.gridsize(1)

    return kernel


@mutant("4.3", "a block with no elements writes nothing: its out[b] keeps whatever was there")
def block_sum_kernel_skips_empty_blocks(threads, dtype):
    def kernel(out, a, size):
        cache = cuda.shared.array(threads, dtype)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        acc = dtype(0)
        while i < size:
            acc += a[i]
            i += cuda.gridsize(1)
        cache[t] = acc
        step = threads // 2
        while step > 0:
            cuda.syncthreads()
            if t < step:
                cache[t] += cache[t + step]
            step //= 2
        cuda.syncthreads()
        if t == 0 and cuda.blockIdx.x * threads < size:  # "only blocks that had data"
            out[cuda.blockIdx.x] = cache[0]

    return kernel


@mutant("4.4", "threads past the end of the axis put 0 in the cache, not the start value")
def reduce_kernel_idle_zero(fn, start, threads, dtype):
    return _reduce(fn, start, threads, dtype, idle_zero=True)


@mutant("4.4", "the axis's elements found with C-order strides (contiguous assumed)")
def reduce_kernel_c_order_stride(fn, start, threads, dtype):
    return _reduce(fn, start, threads, dtype, c_order_stride=True)


@mutant("4.5", "rows assumed contiguous: a's element (r, c) read at base + r * k + c")
def matmul_kernel_contiguous_rows(tile, dtype):
    return _matmul(tile, dtype, contiguous_rows=True)


@mutant(
    "4.5", "NaN products skipped (meant for the zero-filled padding): inf * 0 and NaN inputs vanish"
)
def matmul_kernel_nan_skip(tile, dtype):
    return _matmul(tile, dtype, skip_nan=True)
