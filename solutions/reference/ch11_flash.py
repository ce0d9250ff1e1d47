"""Reference solutions, chapter 11 (flash): tiled attention with an online softmax, 11.19-11.20."""

from __future__ import annotations

import math

import numpy as np
from numba import prange

import minitorch.cuda  # noqa: F401  (chooses the simulator before numba.cuda loads)

# isort: split
from numba import cuda

# ---------------------------------------------------------------- 11.19


def flash_rows(out, q, k, v, keep, causal, scale, tile):
    nb, tq, d = q.shape
    tk, dv = k.shape[1], v.shape[2]
    for r in prange(nb * tq):
        b, i = r // tq, r % tq
        last = min(tk, i + tk - tq + 1) if causal else tk  # keys j < last may be seen
        s = np.empty(tile, np.float64)
        acc = np.zeros(dv, np.float64)
        m, total = -math.inf, 0.0
        for j0 in range(0, last, tile):
            n = min(tile, last - j0)
            tmax = -math.inf
            for c in range(n):
                if keep[b, j0 + c]:
                    dot = 0.0
                    for x in range(d):
                        dot += q[b, i, x] * k[b, j0 + c, x]
                    s[c] = dot * scale
                    if s[c] > tmax or s[c] != s[c]:
                        tmax = s[c]
                else:
                    s[c] = -math.inf
            if tmax == -math.inf:  # nothing seen here: it would add exp(-inf - -inf)
                continue
            new = tmax if tmax > m or tmax != tmax else m  # a NaN stays
            grow = math.exp(m - new)
            total *= grow
            for y in range(dv):
                acc[y] *= grow
            for c in range(n):
                p = math.exp(s[c] - new)
                total += p
                for y in range(dv):
                    acc[y] += p * v[b, j0 + c, y]
            m = new
        for y in range(dv):
            out[b, i, y] = acc[y] / total if total != 0.0 else math.nan


# ---------------------------------------------------------------- 11.20


def flash_kernel(tile, max_d, dtype):
    size = tile * max_d  # a shared array's size must be a constant of the kernel

    def kernel(out, q, k, v, keep, batch, tq, tk, d, dv, causal, scale):
        ks = cuda.shared.array(size, dtype)
        vs = cuda.shared.array(size, dtype)
        seen = cuda.shared.array(tile, dtype)
        qi = cuda.local.array(max_d, dtype)
        acc = cuda.local.array(max_d, dtype)
        t = cuda.threadIdx.x
        per_batch = (tq + tile - 1) // tile
        work = cuda.blockIdx.x
        while work < batch * per_batch:
            b = work // per_batch
            first = (work % per_batch) * tile
            i = first + t
            live = i < tq
            if live:
                for x in range(d):
                    qi[x] = q[(b * tq + i) * d + x]
            for y in range(dv):
                acc[y] = dtype(0)
            m = dtype(-math.inf)
            total = dtype(0)
            last = tk
            if causal:  # the block's last query sees keys up to first + tile - 1 + tk - tq
                last = min(tk, first + tile + tk - tq)
            j0 = 0
            while j0 < last:
                j = j0 + t
                if j < tk:
                    for x in range(d):
                        ks[t * max_d + x] = k[(b * tk + j) * d + x]
                    for y in range(dv):
                        vs[t * max_d + y] = v[(b * tk + j) * dv + y]
                    seen[t] = dtype(1) if keep[b * tk + j] else dtype(0)
                cuda.syncthreads()
                if live:
                    n = min(tile, tk - j0)
                    if causal:
                        n = min(n, i + tk - tq + 1 - j0)
                    tmax = dtype(-math.inf)
                    for c in range(n):
                        if seen[c] != 0:
                            dot = dtype(0)
                            for x in range(d):
                                dot += qi[x] * ks[c * max_d + x]
                            sc = dot * scale
                            if sc > tmax or sc != sc:
                                tmax = sc
                    if tmax != dtype(-math.inf):
                        new = m
                        if tmax > m or tmax != tmax:  # a NaN stays
                            new = tmax
                        grow = math.exp(m - new)
                        total *= grow
                        for y in range(dv):
                            acc[y] *= grow
                        for c in range(n):
                            if seen[c] != 0:
                                dot = dtype(0)
                                for x in range(d):
                                    dot += qi[x] * ks[c * max_d + x]
                                p = math.exp(dot * scale - new)
                                total += p
                                for y in range(dv):
                                    acc[y] += p * vs[c * max_d + y]
                        m = new
                cuda.syncthreads()
                j0 += tile
            if live:
                for y in range(dv):
                    if total != dtype(0):
                        out[(b * tq + i) * dv + y] = acc[y] / total
                    else:
                        out[(b * tq + i) * dv + y] = dtype(math.nan)
            work += cuda.gridDim.x

    return kernel
