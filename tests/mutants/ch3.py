"""Known-wrong implementations of Chapter 3 (Numba kernels). Numba compiles them as written.

Each kernel here is the plain version of the exercise (one element at a time)
with one mistake; the storage a kernel gets starts at the tensor's offset.
Numba does not check bounds: where a mistake would read outside the storage,
the index is clamped (``min(..., a.size - 1)``) so that it gives wrong values
instead of a crash.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from minitorch.fast.indexing import broadcast_index, index_to_position, to_index

from . import mutant

# ---------------------------------------------------------------- 3.1 tensor_map


@mutant("3.1", "fast path whenever the shapes match: a's strides never checked")
def tensor_map(fn, out, out_shape, out_strides, a, a_shape, a_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    same = len(a_shape) == nd
    for d in range(nd):
        if not same or a_shape[d] != out_shape[d]:
            same = False
    if same:
        for k in prange(size):
            out[k] = fn(a[k])
        return
    for k in prange(size):
        oi = np.empty(nd, np.int64)
        ai = np.empty(len(a_shape), np.int64)
        to_index(k, out_shape, oi)
        broadcast_index(oi, out_shape, a_shape, ai)
        out[index_to_position(oi, out_strides)] = fn(a[index_to_position(ai, a_strides)])


@mutant("3.1", "reads a at the output's position (out's strides used for a)")
def tensor_map_out_strides(fn, out, out_shape, out_strides, a, a_shape, a_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    for k in prange(size):
        oi = np.empty(nd, np.int64)
        to_index(k, out_shape, oi)
        p = index_to_position(oi, out_strides)
        out[p] = fn(a[p])


@mutant("3.1", "contiguity judged by the last dimension's stride alone")
def tensor_map_last_stride(fn, out, out_shape, out_strides, a, a_shape, a_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    na = len(a_shape)
    last = np.int64(a.size - 1)
    if nd > 0 and na == nd and out_strides[nd - 1] == 1 and a_strides[na - 1] == 1:
        for k in prange(size):
            out[k] = fn(a[min(np.int64(k), last)])
        return
    for k in prange(size):
        oi = np.empty(nd, np.int64)
        ai = np.empty(na, np.int64)
        to_index(k, out_shape, oi)
        broadcast_index(oi, out_shape, a_shape, ai)
        out[index_to_position(oi, out_strides)] = fn(a[index_to_position(ai, a_strides)])


@mutant("3.1", "off by one: the last element is never written")
def tensor_map_short(fn, out, out_shape, out_strides, a, a_shape, a_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    for k in prange(size - 1):
        oi = np.empty(nd, np.int64)
        ai = np.empty(len(a_shape), np.int64)
        to_index(k, out_shape, oi)
        broadcast_index(oi, out_shape, a_shape, ai)
        out[index_to_position(oi, out_strides)] = fn(a[index_to_position(ai, a_strides)])


# ---------------------------------------------------------------- 3.2 tensor_zip


@mutant("3.2", "arguments swapped: fn(b, a)")
def tensor_zip(fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    for k in prange(size):
        oi = np.empty(nd, np.int64)
        ai = np.empty(len(a_shape), np.int64)
        bi = np.empty(len(b_shape), np.int64)
        to_index(k, out_shape, oi)
        broadcast_index(oi, out_shape, a_shape, ai)
        broadcast_index(oi, out_shape, b_shape, bi)
        x = a[index_to_position(ai, a_strides)]
        y = b[index_to_position(bi, b_strides)]
        out[index_to_position(oi, out_strides)] = fn(y, x)


@mutant("3.2", "b indexed with a's strides (assumes one layout for both)")
def tensor_zip_a_strides(
    fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides
):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    for k in prange(size):
        oi = np.empty(nd, np.int64)
        ai = np.empty(len(a_shape), np.int64)
        bi = np.empty(len(b_shape), np.int64)
        to_index(k, out_shape, oi)
        broadcast_index(oi, out_shape, a_shape, ai)
        broadcast_index(oi, out_shape, b_shape, bi)
        s = b_strides if len(a_shape) != len(b_shape) else a_strides
        x = a[index_to_position(ai, a_strides)]
        y = b[index_to_position(bi, s)]
        out[index_to_position(oi, out_strides)] = fn(x, y)


@mutant("3.2", "fast path when the shapes match, strides never checked")
def tensor_zip_shape_fast_path(
    fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides
):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    same = len(a_shape) == nd and len(b_shape) == nd
    for d in range(nd):
        if not same or a_shape[d] != out_shape[d] or b_shape[d] != out_shape[d]:
            same = False
    if same:
        for k in prange(size):
            out[k] = fn(a[k], b[k])
        return
    for k in prange(size):
        oi = np.empty(nd, np.int64)
        ai = np.empty(len(a_shape), np.int64)
        bi = np.empty(len(b_shape), np.int64)
        to_index(k, out_shape, oi)
        broadcast_index(oi, out_shape, a_shape, ai)
        broadcast_index(oi, out_shape, b_shape, bi)
        x = a[index_to_position(ai, a_strides)]
        y = b[index_to_position(bi, b_strides)]
        out[index_to_position(oi, out_strides)] = fn(x, y)


@mutant("3.2", "row loop, copy-paste slip: b steps along the row by a's step")
def tensor_zip_row_step(
    fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides
):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    inner = out_shape[nd - 1] if nd else 1
    rows = size // inner if inner else 0
    o_step = out_strides[nd - 1] if nd else 0
    na, nb = len(a_shape), len(b_shape)
    a_step = a_strides[na - 1] if na and a_shape[na - 1] != 1 else 0
    b_step = a_step
    for r in prange(rows):
        oi = np.empty(nd, np.int64)
        ai = np.empty(na, np.int64)
        bi = np.empty(nb, np.int64)
        to_index(r * inner, out_shape, oi)
        broadcast_index(oi, out_shape, a_shape, ai)
        broadcast_index(oi, out_shape, b_shape, bi)
        o = index_to_position(oi, out_strides)
        p = index_to_position(ai, a_strides)
        q = index_to_position(bi, b_strides)
        for j in range(inner):
            jb = min(j * b_step, b.size - 1 - q)  # stays inside b's storage
            out[o + j * o_step] = fn(a[p + j * a_step], b[q + jb])


# ---------------------------------------------------------------- 3.3 tensor_reduce


@mutant("3.3", "steps along the axis by 1, not by the axis stride")
def tensor_reduce(fn, start, out, out_shape, out_strides, a, a_shape, a_strides, axis):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    n = a_shape[axis]
    for k in prange(size):
        index = np.empty(nd, np.int64)
        to_index(k, out_shape, index)
        p = index_to_position(index, a_strides)
        acc = start
        for j in range(n):
            acc = fn(acc, a[min(p + j, a.size - 1)])
        out[index_to_position(index, out_strides)] = acc


@mutant("3.3", "the first element folded twice (acc starts at it, the loop from 0)")
def tensor_reduce_twice(fn, start, out, out_shape, out_strides, a, a_shape, a_strides, axis):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    n = a_shape[axis]
    step = a_strides[axis]
    for k in prange(size):
        index = np.empty(nd, np.int64)
        to_index(k, out_shape, index)
        p = index_to_position(index, a_strides)
        acc = a[p] if n else start
        for j in range(n):
            acc = fn(acc, a[p + j * step])
        out[index_to_position(index, out_strides)] = acc


@mutant("3.3", "the input position computed with the output's strides")
def tensor_reduce_out_strides(fn, start, out, out_shape, out_strides, a, a_shape, a_strides, axis):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    n = a_shape[axis]
    step = a_strides[axis]
    for k in prange(size):
        index = np.empty(nd, np.int64)
        to_index(k, out_shape, index)
        o = index_to_position(index, out_strides)
        acc = start
        for j in range(n):
            acc = fn(acc, a[min(o + j * step, a.size - 1)])
        out[o] = acc


@mutant("3.3", "off by one: the last element along the axis skipped")
def tensor_reduce_short(fn, start, out, out_shape, out_strides, a, a_shape, a_strides, axis):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    n = a_shape[axis]
    step = a_strides[axis]
    for k in prange(size):
        index = np.empty(nd, np.int64)
        to_index(k, out_shape, index)
        p = index_to_position(index, a_strides)
        acc = start
        for j in range(n - 1):
            acc = fn(acc, a[p + j * step])
        out[index_to_position(index, out_strides)] = acc


# ---------------------------------------------------------------- 3.4 matmul_simple


@mutant("3.4", "a's batch index always 0: a batched a is not used")
def matmul_simple(out, a, b):
    batch, n, m = out.shape
    for t in prange(batch * n):
        bi, i = t // n, t % n
        bj = bi if b.shape[0] > 1 else 0
        out[bi, i, :] = 0.0
        for k in range(a.shape[2]):
            for j in range(m):
                out[bi, i, j] += a[0, i, k] * b[bj, k, j]


@mutant("3.4", "i-k-j without zeroing the row first: adds to whatever out held")
def matmul_simple_no_zero(out, a, b):
    batch, n, m = out.shape
    for t in prange(batch * n):
        bi, i = t // n, t % n
        ai = bi if a.shape[0] > 1 else 0
        bj = bi if b.shape[0] > 1 else 0
        for k in range(a.shape[2]):
            for j in range(m):
                out[bi, i, j] += a[ai, i, k] * b[bj, k, j]


@mutant("3.4", "off by one: the last k of each dot product skipped")
def matmul_simple_short(out, a, b):
    batch, n, m = out.shape
    for t in prange(batch * n):
        bi, i = t // n, t % n
        ai = bi if a.shape[0] > 1 else 0
        bj = bi if b.shape[0] > 1 else 0
        out[bi, i, :] = 0.0
        for k in range(a.shape[2] - 1):
            for j in range(m):
                out[bi, i, j] += a[ai, i, k] * b[bj, k, j]


@mutant("3.4", "b's batch index always 0: a batched b is not used")
def matmul_simple_b_batch(out, a, b):
    batch, n, m = out.shape
    for t in prange(batch * n):
        bi, i = t // n, t % n
        ai = bi if a.shape[0] > 1 else 0
        out[bi, i, :] = 0.0
        for k in range(a.shape[2]):
            for j in range(m):
                out[bi, i, j] += a[ai, i, k] * b[0, k, j]


# ---------------------------------------------------------------- 3.5 matmul_tile


@mutant("3.5", "= for +=: the tile overwrites out instead of adding to it")
def matmul_tile(out, a, bt, i, j, k0, k1):
    for r in range(4):
        for c in range(4):
            s = 0.0
            for k in range(k0, k1):
                s += a[i + r, k] * bt[j + c, k]
            out[i + r, j + c] = s


@mutant("3.5", "sums kept in float32 whatever out's dtype (a float32 zero, narrowed each step)")
def matmul_tile_float32(out, a, bt, i, j, k0, k1):
    for r in range(4):
        for c in range(4):
            s = np.float32(0.0)
            for k in range(k0, k1):
                s = np.float32(s + a[i + r, k] * bt[j + c, k])
            out[i + r, j + c] += s


@mutant("3.5", "k counted from 0, not from k0: the wrong slice of the depth")
def matmul_tile_from_zero(out, a, bt, i, j, k0, k1):
    for r in range(4):
        for c in range(4):
            s = 0.0
            for k in range(k1 - k0):
                s += a[i + r, k] * bt[j + c, k]
            out[i + r, j + c] += s


@mutant("3.5", "the block written transposed: out[i + c, j + r]")
def matmul_tile_transposed(out, a, bt, i, j, k0, k1):
    for r in range(4):
        for c in range(4):
            s = 0.0
            for k in range(k0, k1):
                s += a[i + r, k] * bt[j + c, k]
            out[i + c, j + r] += s


@mutant("3.5", "a 4 x 3 tile: the fourth column of the block is never added")
def matmul_tile_three(out, a, bt, i, j, k0, k1):
    for r in range(4):
        for c in range(3):
            s = 0.0
            for k in range(k0, k1):
                s += a[i + r, k] * bt[j + c, k]
            out[i + r, j + c] += s


# ---------------------------------------------------------------- 3.6 matmul


@njit
def _blocked(tile, out, a, b, zero_first, edge_cols, all_k, a_batch):
    # the reference's structure with switches for the mistakes below
    batch, n, m = out.shape
    depth = a.shape[2]
    nb = b.shape[0]
    bt = np.empty((nb, m, depth), dtype=out.dtype)
    for bj in range(nb):
        for j in range(m):
            for k in range(depth):
                bt[bj, j, k] = b[bj, k, j]
    deep = 1024
    for bi in prange(batch):
        x = a[bi if a.shape[0] > 1 and a_batch else 0]
        y = bt[bi if nb > 1 else 0]
        o = out[bi]
        if zero_first:
            o[:, :] = 0.0
        n4, m4 = n // 4 * 4, m // 4 * 4
        for k0 in range(0, depth if all_k else 1, deep):
            k1 = min(k0 + deep, depth)
            for i in range(0, n4, 4):
                for j in range(0, m4, 4):
                    tile(o, x, y, i, j, k0, k1)
            for r in range(n):
                for j in range(0 if r >= n4 else m4, m if edge_cols else m4):
                    s = 0.0
                    for k in range(k0, k1):
                        s += x[r, k] * y[j, k]
                    o[r, j] += s


@mutant("3.6", "out never zeroed: the tiles add to whatever the buffer held")
def matmul(tile, out, a, b):
    _blocked(tile, out, a, b, False, True, True, True)


@mutant("3.6", "the columns after the last full 4-column strip are left out")
def matmul_no_edge_columns(tile, out, a, b):
    _blocked(tile, out, a, b, True, False, True, True)


@mutant("3.6", "only the first k-block of 1024 is summed")
def matmul_first_k_block(tile, out, a, b):
    _blocked(tile, out, a, b, True, True, False, True)


@mutant("3.6", "a's batch index always 0: a batched a is not used")
def matmul_a_batch(tile, out, a, b):
    _blocked(tile, out, a, b, True, True, True, False)


# ---------------------------------------------------------------- 3.7 conv2d


@mutant("3.7", "padding ignored when placing the window")
def conv2d(out, x, w, stride, padding):
    n_batch, n_out, oh_n, ow_n = out.shape
    n_in, h_n, w_n = x.shape[1], x.shape[2], x.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    for t in prange(n_batch * n_out):
        n, o = t // n_out, t % n_out
        for oh in range(oh_n):
            for ow in range(ow_n):
                s = 0.0
                for c in range(n_in):
                    for kh in range(kh_n):
                        for kw in range(kw_n):
                            ih, iw = oh * stride + kh, ow * stride + kw
                            if ih < h_n and iw < w_n:
                                s += w[o, c, kh, kw] * x[n, c, ih, iw]
                out[n, o, oh, ow] = s


@mutant("3.7", "stride ignored when placing the window")
def conv2d_no_stride(out, x, w, stride, padding):
    n_batch, n_out, oh_n, ow_n = out.shape
    n_in, h_n, w_n = x.shape[1], x.shape[2], x.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    for t in prange(n_batch * n_out):
        n, o = t // n_out, t % n_out
        for oh in range(oh_n):
            for ow in range(ow_n):
                s = 0.0
                for c in range(n_in):
                    for kh in range(kh_n):
                        for kw in range(kw_n):
                            ih, iw = oh - padding + kh, ow - padding + kw
                            if 0 <= ih < h_n and 0 <= iw < w_n:
                                s += w[o, c, kh, kw] * x[n, c, ih, iw]
                out[n, o, oh, ow] = s


@mutant("3.7", "the kernel flipped (a true convolution, not cross-correlation)")
def conv2d_flipped(out, x, w, stride, padding):
    n_batch, n_out, oh_n, ow_n = out.shape
    n_in, h_n, w_n = x.shape[1], x.shape[2], x.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    for t in prange(n_batch * n_out):
        n, o = t // n_out, t % n_out
        for oh in range(oh_n):
            for ow in range(ow_n):
                s = 0.0
                for c in range(n_in):
                    for kh in range(kh_n):
                        for kw in range(kw_n):
                            ih, iw = oh * stride - padding + kh, ow * stride - padding + kw
                            if 0 <= ih < h_n and 0 <= iw < w_n:
                                s += w[o, c, kh_n - 1 - kh, kw_n - 1 - kw] * x[n, c, ih, iw]
                out[n, o, oh, ow] = s


@mutant("3.7", "only the first input channel summed")
def conv2d_one_channel(out, x, w, stride, padding):
    n_batch, n_out, oh_n, ow_n = out.shape
    h_n, w_n = x.shape[2], x.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    for t in prange(n_batch * n_out):
        n, o = t // n_out, t % n_out
        for oh in range(oh_n):
            for ow in range(ow_n):
                s = 0.0
                for kh in range(kh_n):
                    for kw in range(kw_n):
                        ih, iw = oh * stride - padding + kh, ow * stride - padding + kw
                        if 0 <= ih < h_n and 0 <= iw < w_n:
                            s += w[o, 0, kh, kw] * x[n, 0, ih, iw]
                out[n, o, oh, ow] = s


# ---------------------------------------------------------------- 3.8 max_pool2d


@mutant("3.8", "the running maximum starts at 0: all-negative windows give 0")
def max_pool2d(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n, c = t // n_chan, t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                best = 0.0
                for i in range(kh):
                    for j in range(kw):
                        best = max(best, x[n, c, oh * sh + i, ow * sw + j])
                out[n, c, oh, ow] = best


@mutant("3.8", "square windows assumed: kh used for both sides")
def max_pool2d_square(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n, c = t // n_chan, t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                best = -np.inf
                for i in range(kh):
                    for j in range(min(kh, x.shape[3] - ow * sw)):
                        best = max(best, x[n, c, oh * sh + i, ow * sw + j])
                out[n, c, oh, ow] = best


@mutant("3.8", "the window moves by its size, not by the stride")
def max_pool2d_stride(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n, c = t // n_chan, t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                best = -np.inf
                for i in range(kh):
                    for j in range(kw):
                        ih = min(oh * kh + i, x.shape[2] - 1)
                        iw = min(ow * kw + j, x.shape[3] - 1)
                        best = max(best, x[n, c, ih, iw])
                out[n, c, oh, ow] = best


@mutant("3.8", "NaN ignored: v > best is never true for NaN")
def max_pool2d_nan(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n, c = t // n_chan, t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                best = x[n, c, oh * sh, ow * sw]
                for i in range(kh):
                    for j in range(kw):
                        v = x[n, c, oh * sh + i, ow * sw + j]
                        if v > best:
                            best = v
                out[n, c, oh, ow] = best


# ---------------------------------------------------------------- 3.9 avg_pool2d


@mutant("3.9", "divides by kh * kh (square windows assumed)")
def avg_pool2d(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n, c = t // n_chan, t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                total = 0.0
                for i in range(kh):
                    for j in range(kw):
                        total += x[n, c, oh * sh + i, ow * sw + j]
                out[n, c, oh, ow] = total / (kh * kh)


@mutant("3.9", "the window moves by its size, not by the stride")
def avg_pool2d_stride(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n, c = t // n_chan, t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                total = 0.0
                for i in range(kh):
                    for j in range(kw):
                        ih = min(oh * kh + i, x.shape[2] - 1)
                        iw = min(ow * kw + j, x.shape[3] - 1)
                        total += x[n, c, ih, iw]
                out[n, c, oh, ow] = total / (kh * kw)


@mutant("3.9", "the sum, not the mean")
def avg_pool2d_sum(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n, c = t // n_chan, t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                total = 0.0
                for i in range(kh):
                    for j in range(kw):
                        total += x[n, c, oh * sh + i, ow * sw + j]
                out[n, c, oh, ow] = total


# ---------------------------------------------------------------- 3.10 softmax


@mutant("3.10", "no max shift: exp overflows for large logits")
def softmax(out, x):
    rows, n = x.shape
    for r in prange(rows):
        total = 0.0
        for j in range(n):
            out[r, j] = np.exp(x[r, j])
            total += out[r, j]
        for j in range(n):
            out[r, j] = out[r, j] / total


@mutant("3.10", "shifts by the row's first value, not its maximum")
def softmax_first(out, x):
    rows, n = x.shape
    for r in prange(rows):
        m = x[r, 0]
        total = 0.0
        for j in range(n):
            out[r, j] = np.exp(x[r, j] - m)
            total += out[r, j]
        for j in range(n):
            out[r, j] = out[r, j] / total


@mutant("3.10", "the exponentials never divided by their sum")
def softmax_unnormalised(out, x):
    rows, n = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(n):
            m = max(m, x[r, j])
        for j in range(n):
            out[r, j] = np.exp(x[r, j] - m)


# ---------------------------------------------------------------- 3.11 logsumexp


@mutant("3.11", "no max shift: exp overflows for large inputs")
def logsumexp(out, x):
    rows, n = x.shape
    for r in prange(rows):
        total = 0.0
        for j in range(n):
            total += np.exp(x[r, j])
        out[r] = np.log(total)


@mutant("3.11", "the shift not added back: log(sum(exp(x - m)))")
def logsumexp_no_add_back(out, x):
    rows, n = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(n):
            m = max(m, x[r, j])
        total = 0.0
        for j in range(n):
            total += np.exp(x[r, j] - m)
        out[r] = np.log(total)


@mutant("3.11", "no guard for infinite maxima: -inf - -inf gives NaN")
def logsumexp_unguarded(out, x):
    rows, n = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(n):
            m = max(m, x[r, j])
        total = 0.0
        for j in range(n):
            total += np.exp(x[r, j] - m)
        out[r] = m + np.log(total)


@mutant("3.11", "NaN ignored when finding the max: an all-NaN row gives -inf")
def logsumexp_nan(out, x):
    rows, n = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(n):
            if x[r, j] > m:
                m = x[r, j]
        if m == -np.inf or m == np.inf:
            out[r] = m
            continue
        total = 0.0
        for j in range(n):
            total += np.exp(x[r, j] - m)
        out[r] = m + np.log(total)


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("3.1", "row walk: a's last-dim step is its stride even where a is broadcast there")
def tensor_map_last_dim_broadcast(fn, out, out_shape, out_strides, a, a_shape, a_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    inner = out_shape[nd - 1] if nd else 1
    rows = size // inner if inner else 0
    o_step = out_strides[nd - 1] if nd else 0
    na = len(a_shape)
    a_step = a_strides[na - 1] if na else 0
    for r in prange(rows):
        o_index = np.empty(nd, np.int64)
        a_index = np.empty(na, np.int64)
        to_index(r * inner, out_shape, o_index)
        broadcast_index(o_index, out_shape, a_shape, a_index)
        o = index_to_position(o_index, out_strides)
        p = index_to_position(a_index, a_strides)
        for j in range(inner):
            out[o + j * o_step] = fn(a[min(p + j * a_step, a.size - 1)])


@mutant("3.2", "row walk: b's last-dim step is its stride even where b is broadcast there")
def tensor_zip_last_dim_broadcast(
    fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides
):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    inner = out_shape[nd - 1] if nd else 1
    rows = size // inner if inner else 0
    o_step = out_strides[nd - 1] if nd else 0
    na, nb = len(a_shape), len(b_shape)
    a_step = a_strides[na - 1] if na and a_shape[na - 1] != 1 else 0
    b_step = b_strides[nb - 1] if nb else 0
    for r in prange(rows):
        o_index = np.empty(nd, np.int64)
        a_index = np.empty(na, np.int64)
        b_index = np.empty(nb, np.int64)
        to_index(r * inner, out_shape, o_index)
        broadcast_index(o_index, out_shape, a_shape, a_index)
        broadcast_index(o_index, out_shape, b_shape, b_index)
        o = index_to_position(o_index, out_strides)
        p = index_to_position(a_index, a_strides)
        q = index_to_position(b_index, b_strides)
        for j in range(inner):
            out[o + j * o_step] = fn(a[p + j * a_step], b[min(q + j * b_step, b.size - 1)])
