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


def matmul(out, a, b):
    batch, n, m = out.shape
    depth = a.shape[2]
    # 4 x 256 tiles of out live in a local array (L1); a group of 64 rows
    # walks one 256 x 256 panel of b at a time, so the panel stays in L2.
    rows, cols, deep, group = 4, 256, 256, 16
    span = rows * group
    groups = (n + span - 1) // span
    for t in prange(batch * groups):
        bi = t // groups
        g0 = (t % groups) * span
        g1 = min(g0 + span, n)
        ai = bi if a.shape[0] > 1 else 0
        bj = bi if b.shape[0] > 1 else 0
        acc = np.empty((rows, cols), dtype=out.dtype)
        for j0 in range(0, m, cols):
            w = min(cols, m - j0)
            for k0 in range(0, depth, deep):
                k1 = min(k0 + deep, depth)
                for i0 in range(g0, g1, rows):
                    nrows = min(rows, g1 - i0)
                    if k0 == 0:
                        acc[:, :] = 0
                    else:
                        for r in range(nrows):
                            acc[r, :w] = out[bi, i0 + r, j0 : j0 + w]
                    if nrows == rows:
                        c0, c1, c2, c3 = acc[0], acc[1], acc[2], acc[3]
                        for k in range(k0, k1):
                            brow = b[bj, k, j0 : j0 + w]  # one row of b feeds four rows of out
                            a0, a1 = a[ai, i0, k], a[ai, i0 + 1, k]
                            a2, a3 = a[ai, i0 + 2, k], a[ai, i0 + 3, k]
                            for j in range(w):
                                v = brow[j]
                                c0[j] += a0 * v
                                c1[j] += a1 * v
                                c2[j] += a2 * v
                                c3[j] += a3 * v
                    else:
                        for k in range(k0, k1):
                            brow = b[bj, k, j0 : j0 + w]
                            for r in range(nrows):
                                x = a[ai, i0 + r, k]
                                crow = acc[r]
                                for j in range(w):
                                    crow[j] += x * brow[j]
                    for r in range(nrows):
                        out[bi, i0 + r, j0 : j0 + w] = acc[r, :w]


def conv2d(out, x, w, stride, padding):
    n_batch, n_out, oh_n, ow_n = out.shape
    n_in, h_n, w_n = x.shape[1], x.shape[2], x.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    for t in prange(n_batch * n_out):
        n = t // n_out
        o = t % n_out
        plane = np.zeros((oh_n, ow_n), dtype=out.dtype)
        for c in range(n_in):
            for kh in range(kh_n):
                for kw in range(kw_n):
                    wv = w[o, c, kh, kw]
                    for oh in range(oh_n):
                        ih = oh * stride - padding + kh
                        if ih < 0 or ih >= h_n:
                            continue
                        for ow in range(ow_n):
                            iw = ow * stride - padding + kw
                            if 0 <= iw < w_n:
                                plane[oh, ow] += wv * x[n, c, ih, iw]
        out[n, o] = plane


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
