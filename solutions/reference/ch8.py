"""Reference solutions, Chapter 8 (Memory planning). Same names and signatures as the stubs."""

from __future__ import annotations

import bisect

import numpy as np

from minitorch.memory.planner import (
    ALIGNMENT,
    Buffer,
    is_elementwise,
    is_view,
    step_nbytes,
)


def liveness(plan):
    owner, buffers = {}, []
    for i, st in enumerate(plan.steps):
        for a in st.args:
            b = owner.get(a)
            if b is not None:
                b.end = i
        if is_view(st):
            b = owner.get(st.args[0]) if st.args else None
            if b is not None:
                owner[st.out] = b
                b.views.append(st.out)
            continue
        b = Buffer(st.out, step_nbytes(st), st.spec.dtype, i, i, [st.out])
        owner[st.out] = b
        buffers.append(b)
    for s in plan.outputs:
        b = owner.get(s)
        if b is not None:
            b.end = len(plan.steps)
    return buffers


def lower_bound(buffers, alignment=ALIGNMENT):
    delta = {}
    for b in buffers:
        size = align(b.nbytes, alignment)
        delta[b.start] = delta.get(b.start, 0) + size
        delta[b.end + 1] = delta.get(b.end + 1, 0) - size
    live = best = 0
    for t in sorted(delta):
        live += delta[t]
        best = max(best, live)
    return best


def align(nbytes, alignment=ALIGNMENT):
    return -(-nbytes // alignment) * alignment


def _place(order, alignment):
    """Place ``order`` one by one at the lowest offset free of placed buffers live at the same time."""
    starts, placed = [], []  # placed buffers sorted by start
    longest, top = 0, 0
    for b in order:
        size = align(b.nbytes, alignment)
        lo = bisect.bisect_left(starts, b.start - longest)
        hi = bisect.bisect_right(starts, b.end)
        busy = sorted(
            (p.offset, p.offset + align(p.nbytes, alignment))
            for p in placed[lo:hi]
            if p.end >= b.start
        )
        offset = 0
        for lo_p, hi_p in busy:
            if offset + size <= lo_p:
                break
            offset = max(offset, hi_p)
        b.offset = offset
        top = max(top, offset + size)
        k = bisect.bisect_right(starts, b.start)
        starts.insert(k, b.start)
        placed.insert(k, b)
        longest = max(longest, b.end - b.start)
    return top


def greedy_by_size(buffers, alignment=ALIGNMENT):
    order = sorted(buffers, key=lambda b: (-align(b.nbytes, alignment), b.start, b.slot))
    return _place(order, alignment)


def first_fit(buffers, alignment=ALIGNMENT):
    return _place(sorted(buffers, key=lambda b: (b.start, b.slot)), alignment)


def _fit(order, alignment, best):
    """Place ``order`` one by one: into the smallest gap that holds each buffer (``best``) or
    the lowest one, among placed buffers live at the same time; ``(arena, {slot: offset})``."""
    placed, offsets, top = [], {}, 0
    for b in order:
        size = align(b.nbytes, alignment)
        busy = sorted(
            (lo, hi) for start, end, lo, hi in placed if start <= b.end and b.start <= end
        )
        at, width, free = None, 0, 0
        for lo, hi in busy:
            if lo - free >= size and (at is None or lo - free < width):
                at, width = free, lo - free
                if not best:
                    break
            free = max(free, hi)
        at = free if at is None else at
        offsets[b.slot] = at
        if size:
            placed.append((b.start, b.end, at, at + size))
        top = max(top, at + size)
    return top, offsets


def _breadth(buffers, alignment):
    """For each buffer, the most bytes live at one step of its life (the TFLite "breadth")."""
    delta = {}
    for b in buffers:
        size = align(b.nbytes, alignment)
        delta[b.start] = delta.get(b.start, 0) + size
        delta[b.end + 1] = delta.get(b.end + 1, 0) - size
    steps, live, curve = sorted(delta), 0, []
    for t in steps:
        live += delta[t]
        curve.append(live)
    out = {}
    for b in buffers:
        i = bisect.bisect_right(steps, b.start) - 1
        out[b.slot] = max(curve[i : bisect.bisect_right(steps, b.end)])
    return out


def place_buffers(buffers, alignment=ALIGNMENT):
    if not buffers:
        return {}
    breadth = _breadth(buffers, alignment)

    def size(b):
        return align(b.nbytes, alignment)

    orders = [  # each ends in the slot, so every order is total and the result deterministic
        lambda b: (-size(b), b.start, b.slot),  # greedy by size
        lambda b: (-breadth[b.slot], -size(b), b.start, b.slot),  # the busiest step's first
        lambda b: (-size(b) * (b.end - b.start + 1), b.start, b.slot),  # by area
        lambda b: (b.start - b.end, -size(b), b.start, b.slot),  # longest life first
        lambda b: (b.start, -size(b), b.slot),  # execution order
        lambda b: (-b.end, -size(b), b.slot),  # reverse execution order
    ]
    best = None
    for key in orders:
        order = sorted(buffers, key=key)
        for fit in (False, True):
            top, offsets = _fit(order, alignment, fit)
            if best is None or top < best[0]:
                best = (top, offsets)
    return best[1]


def inplace_source(plan, index, owner):
    st = plan.steps[index]
    if not is_elementwise(st):
        return None
    nbytes, dtype = step_nbytes(st), np.dtype(st.spec.dtype)
    for a in st.args:
        b = owner.get(a)
        if b is None or a not in b.slots or b.end != index:
            continue
        if b.nbytes != nbytes or np.dtype(b.dtype) != dtype:
            continue
        if any(c != a and owner.get(c) is b for c in st.args):
            continue
        return a
    return None


def check_assignment(buffers, alignment=ALIGNMENT):
    bad = []
    for b in buffers:
        if b.offset is None or b.offset < 0 or b.offset % alignment:
            bad.append((b.slot, b.slot))
    ok = [b for b in buffers if (b.slot, b.slot) not in bad]
    for i, a in enumerate(ok):
        for b in ok[i + 1 :]:
            if a.start <= b.end and b.start <= a.end and a.nbytes and b.nbytes:
                if a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes:
                    bad.append((min(a.slot, b.slot), max(a.slot, b.slot)))
    return sorted(bad)


def bind_views(arena, buffers):
    views = {}
    for b in buffers:
        views[b.slot] = arena[b.offset : b.offset + b.nbytes].view(np.dtype(b.dtype))
    return views
