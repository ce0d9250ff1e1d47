"""Reference solutions, Chapter 3 (fast CPU kernels). Same names and signatures as the stubs.

These are plain Python functions: the Numba backend compiles them
(``minitorch/fast/compile.py``), so they only use what Numba supports.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from minitorch.fast.indexing import broadcast_index, index_to_position, to_index


def tensor_map(fn, out, out_shape, out_strides, a, a_shape, a_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    same = len(a_shape) == nd
    for d in range(nd):
        if not same or a_shape[d] != out_shape[d] or a_strides[d] != out_strides[d]:
            same = False
    contiguous = same
    run = 1
    for d in range(nd - 1, -1, -1):
        if out_shape[d] != 1 and out_strides[d] != run:
            contiguous = False
        run *= out_shape[d]
    if contiguous:  # fast path: element k of both sits at k
        for k in prange(size):
            out[k] = fn(a[k])
        return
    # Strided path: one row (the last dimension) per iteration; positions
    # are computed once per row and the inner loop only adds strides.
    inner = out_shape[nd - 1] if nd else 1
    rows = size // inner if inner else 0
    o_step = out_strides[nd - 1] if nd else 0
    na = len(a_shape)
    a_step = a_strides[na - 1] if na and a_shape[na - 1] != 1 else 0
    for r in prange(rows):
        o_index = np.empty(nd, np.int64)
        a_index = np.empty(na, np.int64)
        to_index(r * inner, out_shape, o_index)
        broadcast_index(o_index, out_shape, a_shape, a_index)
        o = index_to_position(o_index, out_strides)
        p = index_to_position(a_index, a_strides)
        for j in range(inner):
            out[o + j * o_step] = fn(a[p + j * a_step])


def tensor_zip(fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides):
    nd = len(out_shape)
    size = 1
    for d in range(nd):
        size *= out_shape[d]
    contiguous = len(a_shape) == nd and len(b_shape) == nd
    run = 1
    for d in range(nd - 1, -1, -1):
        if contiguous and out_shape[d] != 1:
            if out_strides[d] != run or a_strides[d] != run or b_strides[d] != run:
                contiguous = False
            if a_shape[d] != out_shape[d] or b_shape[d] != out_shape[d]:
                contiguous = False
        run *= out_shape[d]
    if contiguous:
        for k in prange(size):
            out[k] = fn(a[k], b[k])
        return
    inner = out_shape[nd - 1] if nd else 1
    rows = size // inner if inner else 0
    o_step = out_strides[nd - 1] if nd else 0
    na, nb = len(a_shape), len(b_shape)
    a_step = a_strides[na - 1] if na and a_shape[na - 1] != 1 else 0
    b_step = b_strides[nb - 1] if nb and b_shape[nb - 1] != 1 else 0
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
            out[o + j * o_step] = fn(a[p + j * a_step], b[q + j * b_step])


def tensor_reduce(fn, start, out, out_shape, out_strides, a, a_shape, a_strides, axis):
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
        p = index_to_position(index, a_strides)  # index[axis] == 0 here
        acc = start
        if step == 1:  # contiguous fast path: the compiler can vectorise this loop
            for j in range(n):
                acc = fn(acc, a[p + j])
        else:
            for j in range(n):
                acc = fn(acc, a[p + j * step])
        out[o] = acc


def matmul_simple(out, a, b):
    batch, n, m = out.shape
    depth = a.shape[2]
    zero = np.zeros(1, dtype=out.dtype)[0]
    for t in prange(batch * n):
        bi = t // n
        i = t % n
        ai = bi if a.shape[0] > 1 else 0
        bj = bi if b.shape[0] > 1 else 0
        row = out[bi, i]
        row[:] = zero
        # i-k-j: the inner loop adds a multiple of row k of b to row i of out,
        # both contiguous, so it vectorises; b is read row by row.
        for k in range(depth):
            x = a[ai, i, k]
            y = b[bj, k]
            for j in range(m):
                row[j] += x * y[j]


def matmul_tile(out, a, bt, i, j, k0, k1):
    y0, y1, y2, y3 = bt[j, k0:k1], bt[j + 1, k0:k1], bt[j + 2, k0:k1], bt[j + 3, k0:k1]
    zero = np.zeros(1, dtype=out.dtype)[0]  # accumulate in out's precision
    # two rows at a time: 8 sums and 6 loaded vectors fit AVX2's 16 vector registers,
    # where 16 sums and 8 loads spill to memory
    for r in range(i, i + 4, 2):
        x0, x1 = a[r, k0:k1], a[r + 1, k0:k1]
        c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = zero
        for k in range(k1 - k0):
            p0, p1 = x0[k], x1[k]
            q0, q1, q2, q3 = y0[k], y1[k], y2[k], y3[k]
            c00 += p0 * q0
            c01 += p0 * q1
            c02 += p0 * q2
            c03 += p0 * q3
            c10 += p1 * q0
            c11 += p1 * q1
            c12 += p1 * q2
            c13 += p1 * q3
        out[r, j] += c00
        out[r, j + 1] += c01
        out[r, j + 2] += c02
        out[r, j + 3] += c03
        out[r + 1, j] += c10
        out[r + 1, j + 1] += c11
        out[r + 1, j + 2] += c12
        out[r + 1, j + 3] += c13


def matmul(tile, out, a, b):
    batch, n, m = out.shape
    depth = a.shape[2]
    nb = b.shape[0]
    # Pack b transposed: bt[bj, j] is column j of b[bj], contiguous, so each
    # dot product below reads both operands at unit stride and vectorises.
    # 16 k at a time, so that each run of writes fills one cache line of bt.
    kb = (depth + 15) // 16
    bt = np.empty((nb, m, depth), dtype=out.dtype)
    for t in prange(nb * kb):
        bj = t // kb
        k0 = (t % kb) * 16
        for j in range(m):
            for k in range(k0, min(k0 + 16, depth)):
                bt[bj, j, k] = b[bj, k, j]
    # A task is a group of 64 rows of out. It walks bt in panels of 128 columns
    # by 1024 k (they stay in L2); each 4-row strip of a (in L1) meets every
    # 4-column strip of the panel in the tile.
    cols, deep, group = 128, 1024, 64
    groups = (n + group - 1) // group
    zero = np.zeros(1, dtype=out.dtype)[0]
    for t in prange(batch * groups):
        bi = t // groups
        g0 = (t % groups) * group
        g1 = min(g0 + group, n)
        x = a[bi if a.shape[0] > 1 else 0]
        y = bt[bi if nb > 1 else 0]
        o = out[bi]
        o[g0:g1, :] = zero
        for j0 in range(0, m, cols):
            j1 = min(j0 + cols, m)
            j4 = j0 + (j1 - j0) // 4 * 4  # end of the full 4-column strips
            for k0 in range(0, depth, deep):
                k1 = min(k0 + deep, depth)
                i4 = g0 + (g1 - g0) // 4 * 4  # end of the full 4-row strips
                for i in range(g0, i4, 4):
                    for j in range(j0, j4, 4):
                        tile(o, x, y, i, j, k0, k1)
                # edges: one dot product per element
                for r in range(g0, g1):
                    for j in range(j0 if r >= i4 else j4, j1):
                        s = zero
                        for k in range(k0, k1):
                            s += x[r, k] * y[j, k]
                        o[r, j] += s


def conv2d(out, x, w, stride, padding):
    n_batch, n_out, oh_n, ow_n = out.shape
    n_in, h_n, w_n = x.shape[1], x.shape[2], x.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    if out.size == 0:
        return
    hp, wp = h_n + 2 * padding, w_n + 2 * padding
    # each (n, c) plane zero-padded and flattened: the window of weight (kh, kw) is then
    # one contiguous run starting at kh * wp + kw, a loop that compiles to vector code
    xp = np.zeros((n_batch, n_in, hp * wp), dtype=x.dtype)
    for t in prange(n_batch * n_in):
        n = t // n_in
        c = t % n_in
        for i in range(h_n):
            row = xp[n, c, (i + padding) * wp + padding :]
            for j in range(w_n):
                row[j] = x[n, c, i, j]
    # output (oh, ow) sits at oh * stride * wp + ow * stride of a plane as wide as xp's rows
    span = (oh_n - 1) * stride * wp + (ow_n - 1) * stride + 1
    for t in prange(n_batch * n_out):
        n = t // n_out
        o = t % n_out
        wide = np.zeros(span, dtype=out.dtype)
        for c in range(n_in):
            for kh in range(kh_n):
                for kw in range(kw_n):
                    wv = w[o, c, kh, kw]
                    run = xp[n, c, kh * wp + kw :]
                    for i in range(span):
                        wide[i] += wv * run[i]
        for oh in range(oh_n):
            for ow in range(ow_n):
                out[n, o, oh, ow] = wide[oh * stride * wp + ow * stride]


def max_pool2d(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    for t in prange(n_batch * n_chan):
        n = t // n_chan
        c = t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                best = x[n, c, oh * sh, ow * sw]
                for i in range(kh):
                    for j in range(kw):
                        v = x[n, c, oh * sh + i, ow * sw + j]
                        if v > best or v != v:
                            best = v
                out[n, c, oh, ow] = best


def avg_pool2d(out, x, kh, kw, sh, sw):
    n_batch, n_chan, oh_n, ow_n = out.shape
    scale = 1.0 / (kh * kw)
    for t in prange(n_batch * n_chan):
        n = t // n_chan
        c = t % n_chan
        for oh in range(oh_n):
            for ow in range(ow_n):
                total = 0.0
                for i in range(kh):
                    for j in range(kw):
                        total += x[n, c, oh * sh + i, ow * sw + j]
                out[n, c, oh, ow] = total * scale


def softmax(out, x):
    rows, n = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(n):
            if x[r, j] > m:
                m = x[r, j]
        total = 0.0
        for j in range(n):
            e = np.exp(x[r, j] - m)
            out[r, j] = e
            total += e
        for j in range(n):
            out[r, j] = out[r, j] / total


def logsumexp(out, x):
    rows, n = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(n):
            if x[r, j] > m or x[r, j] != x[r, j]:
                m = x[r, j]
        if m == -np.inf or m == np.inf or m != m:
            out[r] = m
            continue
        total = 0.0
        for j in range(n):
            total += np.exp(x[r, j] - m)
        out[r] = m + np.log(total)
