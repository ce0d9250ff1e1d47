"""Known-wrong implementations of chapter 11 (flash): tiled attention, 11.19 and 11.20.

Each is the reference with one flaw, chosen by a number (Numba compiles the flag as a
constant; the CUDA bodies run on the simulator)."""

from __future__ import annotations

import math

import numba
import numpy as np

import minitorch.cuda  # noqa: F401  (chooses the simulator before numba.cuda loads)

# isort: split
from numba import cuda

from . import mutant

# ---------------------------------------------------------------- 11.19 flash_rows

MAX_AT_ZERO, NO_RESCALE, CAUSAL_OFF_BY_ONE, EMPTY_IS_ZERO, NO_EMPTY_TILE_GUARD, LAST_TILE_DROPPED = range(6)  # fmt: skip


@numba.njit
def _rows(out, q, k, v, keep, causal, scale, tile, flaw):
    nb, tq, d = q.shape
    tk, dv = k.shape[1], v.shape[2]
    for r in range(nb * tq):
        b, i = r // tq, r % tq
        last = min(tk, i + tk - tq + 1) if causal else tk
        if causal and flaw == CAUSAL_OFF_BY_ONE:
            last = min(tk, i + tk - tq)
        s = np.empty(tile, np.float64)
        acc = np.zeros(dv, np.float64)
        m = 0.0 if flaw == MAX_AT_ZERO else -math.inf
        total = 0.0
        stop = max(last, 0)
        if flaw == LAST_TILE_DROPPED:
            stop = max(last - tile + 1, 0)
        for j0 in range(0, stop, tile):
            n = min(tile, last - j0)
            tmax = -math.inf
            for c in range(n):
                s[c] = -math.inf
                if keep[b, j0 + c]:
                    dot = 0.0
                    for x in range(d):
                        dot += q[b, i, x] * k[b, j0 + c, x]
                    s[c] = dot * scale
                    if s[c] > tmax or s[c] != s[c]:
                        tmax = s[c]
            if tmax == -math.inf and flaw != NO_EMPTY_TILE_GUARD:
                continue
            new = tmax if tmax > m or tmax != tmax or m == -math.inf else m
            grow = 1.0 if flaw == NO_RESCALE else math.exp(m - new)
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
            if total != 0.0:
                out[b, i, y] = acc[y] / total
            else:
                out[b, i, y] = 0.0 if flaw == EMPTY_IS_ZERO else math.nan


@mutant("11.19", "the running maximum starts at 0: scores far below 0 make every exp 0")
def flash_rows_max_at_zero(out, q, k, v, keep, causal, scale, tile):
    _rows(out, q, k, v, keep, causal, scale, tile, MAX_AT_ZERO)


@mutant("11.19", "the sums are not rescaled when a later tile raises the maximum")
def flash_rows_no_rescale(out, q, k, v, keep, causal, scale, tile):
    _rows(out, q, k, v, keep, causal, scale, tile, NO_RESCALE)


@mutant("11.19", "causal hides key i + Tk - Tq too (j < i + Tk - Tq)")
def flash_rows_causal_off_by_one(out, q, k, v, keep, causal, scale, tile):
    _rows(out, q, k, v, keep, causal, scale, tile, CAUSAL_OFF_BY_ONE)


@mutant("11.19", "a query that sees no key gets 0, not NaN")
def flash_rows_empty_is_zero(out, q, k, v, keep, causal, scale, tile):
    _rows(out, q, k, v, keep, causal, scale, tile, EMPTY_IS_ZERO)


@mutant("11.19", "a tile of -inf scores is summed: exp(-inf - -inf) makes the row NaN")
def flash_rows_no_empty_tile_guard(out, q, k, v, keep, causal, scale, tile):
    _rows(out, q, k, v, keep, causal, scale, tile, NO_EMPTY_TILE_GUARD)


@mutant("11.19", "the last, partial tile is dropped (T not a multiple of the tile)")
def flash_rows_last_tile_dropped(out, q, k, v, keep, causal, scale, tile):
    _rows(out, q, k, v, keep, causal, scale, tile, LAST_TILE_DROPPED)


# ---------------------------------------------------------------- 11.20 flash_kernel

K_FROM_GLOBAL, DEAD_THREADS_SKIP_LOAD, NO_SECOND_SYNC, CAUSAL_FIRST_QUERY, KERNEL_MAX_AT_ZERO, CAUSAL_LOADS_ALL = range(6)  # fmt: skip


def _kernel(tile, max_d, dtype, flaw):
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
            m = dtype(0) if flaw == KERNEL_MAX_AT_ZERO else dtype(-math.inf)
            total = dtype(0)
            last = tk
            if causal and flaw != CAUSAL_LOADS_ALL:
                extra = 1 if flaw == CAUSAL_FIRST_QUERY else tile
                last = min(tk, first + extra + tk - tq)
            j0 = 0
            while j0 < last:
                j = j0 + t
                if j < tk and (live or flaw != DEAD_THREADS_SKIP_LOAD):
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
                                kx = k[(b * tk + j0 + c) * d + x] if flaw == K_FROM_GLOBAL else ks[c * max_d + x]  # fmt: skip
                                dot += qi[x] * kx
                            if dot * scale > tmax or dot != dot:
                                tmax = dot * scale
                    if tmax != dtype(-math.inf):
                        new = m
                        if tmax > m or tmax != tmax or m == dtype(-math.inf):
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
                if flaw != NO_SECOND_SYNC:
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


@mutant("11.20", "scores read k from global memory for every query: no shared tile")
def flash_kernel_k_from_global(tile, max_d, dtype):
    return _kernel(tile, max_d, dtype, K_FROM_GLOBAL)


@mutant("11.20", "a thread without a query skips loading its part of the tile")
def flash_kernel_dead_threads_skip_load(tile, max_d, dtype):
    return _kernel(tile, max_d, dtype, DEAD_THREADS_SKIP_LOAD)


@mutant("11.20", "no sync after a tile: the next load overwrites keys still being read")
def flash_kernel_no_second_sync(tile, max_d, dtype):
    return _kernel(tile, max_d, dtype, NO_SECOND_SYNC)


@mutant("11.20", "causal: the block loads only the keys its first query sees")
def flash_kernel_causal_first_query(tile, max_d, dtype):
    return _kernel(tile, max_d, dtype, CAUSAL_FIRST_QUERY)


@mutant("11.20", "the running maximum starts at 0: scores far below 0 make every exp 0")
def flash_kernel_max_at_zero(tile, max_d, dtype):
    return _kernel(tile, max_d, dtype, KERNEL_MAX_AT_ZERO)


@mutant("11.20", "causal: every query block loads every tile, also those no query of it sees")
def flash_kernel_causal_loads_all(tile, max_d, dtype):
    return _kernel(tile, max_d, dtype, CAUSAL_LOADS_ALL)
