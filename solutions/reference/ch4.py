"""Reference solutions, Chapter 4 (CUDA kernels). Same names and signatures as the stubs."""

from __future__ import annotations

import numba
from numba import cuda

from minitorch.cuda.device import MAX_DIMS, broadcast_index, index_to_position, to_index


def map_kernel(fn):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            out[i] = fn(a[index_to_position(ai, a_strides, a_offset)])
            i += step

    return kernel


def zip_kernel(fn):
    def kernel(
        out, out_shape, out_size, a, a_shape, a_strides, a_offset, b, b_shape, b_strides, b_offset
    ):
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        ai = cuda.local.array(MAX_DIMS, numba.int64)
        bi = cuda.local.array(MAX_DIMS, numba.int64)
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < out_size:
            to_index(i, out_shape, oi)
            broadcast_index(oi, out_shape, a_shape, ai)
            broadcast_index(oi, out_shape, b_shape, bi)
            x = a[index_to_position(ai, a_strides, a_offset)]
            y = b[index_to_position(bi, b_strides, b_offset)]
            out[i] = fn(x, y)
            i += step

    return kernel


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
            cuda.syncthreads()
            if t < step:
                cache[t] += cache[t + step]
            step //= 2
        cuda.syncthreads()
        if t == 0:
            out[cuda.blockIdx.x] = cache[0]

    return kernel


def reduce_kernel(fn, start, threads, dtype):
    def kernel(out, out_shape, out_size, a, a_shape, a_strides, a_offset, axis):
        cache = cuda.shared.array(threads, dtype)
        oi = cuda.local.array(MAX_DIMS, numba.int64)
        t = cuda.threadIdx.x
        n = a_shape[axis]
        stride = a_strides[axis]
        o = cuda.blockIdx.x
        while o < out_size:
            to_index(o, out_shape, oi)
            base = index_to_position(oi, a_strides, a_offset)
            acc = start
            j = t
            while j < n:
                acc = fn(acc, a[base + j * stride])
                j += threads
            cache[t] = acc
            step = threads // 2
            while step > 0:
                cuda.syncthreads()
                if t < step:
                    cache[t] = fn(cache[t], cache[t + step])
                step //= 2
            cuda.syncthreads()
            if t == 0:
                out[o] = cache[0]
            cuda.syncthreads()  # cache[0] is read before the next output reuses it
            o += cuda.gridDim.x

    return kernel


def matmul_kernel(tile, dtype):
    def kernel(out, a, a_strides, a_offset, b, b_strides, b_offset, n, k, m):
        a_tile = cuda.shared.array((tile, tile), dtype)
        b_tile = cuda.shared.array((tile, tile), dtype)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        z = cuda.blockIdx.z
        a_base = a_offset + z * a_strides[0]
        b_base = b_offset + z * b_strides[0]
        acc = dtype(0)
        for k0 in range(0, k, tile):
            # a tile: rows of this block, columns k0..; b tile: rows k0.., columns of this block
            if row < n and k0 + tx < k:
                a_tile[ty, tx] = a[a_base + row * a_strides[1] + (k0 + tx) * a_strides[2]]
            else:
                a_tile[ty, tx] = 0
            if k0 + ty < k and col < m:
                b_tile[ty, tx] = b[b_base + (k0 + ty) * b_strides[1] + col * b_strides[2]]
            else:
                b_tile[ty, tx] = 0
            cuda.syncthreads()
            for j in range(tile):
                acc += a_tile[ty, j] * b_tile[j, tx]
            cuda.syncthreads()
        if row < n and col < m:
            out[(z * n + row) * m + col] = acc

    return kernel
