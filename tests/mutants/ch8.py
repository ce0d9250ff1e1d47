"""Known-wrong implementations of the chapter 8 exercises: each must lose points."""

from __future__ import annotations

import numpy as np

from minitorch.memory.planner import ALIGNMENT, Buffer, is_elementwise, is_view, step_nbytes
from solutions.reference import ch8 as ref

from . import mutant


def _al(n, a=ALIGNMENT):
    return -(-n // a) * a


# ---------------------------------------------------------------- 8.1 liveness


def _live(plan, views=True, outputs=True, reads=True, nbytes=None, nested=True, input_views=False):
    owner, buffers = {}, []
    for i, st in enumerate(plan.steps):
        if reads:
            for a in st.args:
                b = owner.get(a)
                if b is not None:
                    b.end = i
        if views and is_view(st):
            b = owner.get(st.args[0]) if st.args else None
            if b is not None and not nested and st.args[0] != b.slot:
                b = None  # only a buffer's own slot is followed
            if b is not None:
                owner[st.out] = b
                b.views.append(st.out)
            if b is not None or not input_views:
                continue
        size = nbytes(st) if nbytes else step_nbytes(st)
        b = Buffer(st.out, size, st.spec.dtype, i, i, [st.out])
        owner[st.out] = b
        buffers.append(b)
    if outputs:
        for s in plan.outputs:
            b = owner.get(s)
            if b is not None:
                b.end = len(plan.steps)
    return buffers


@mutant("8.1", "views get their own buffer: the base dies while the view is still read")
def liveness_views_are_buffers(plan):
    return _live(plan, views=False)


@mutant("8.1", "graph outputs die at their last reader instead of living to the end")
def liveness_outputs_die(plan):
    return _live(plan, outputs=False)


@mutant("8.1", "size counted in elements, not bytes")
def liveness_elements_not_bytes(plan):
    return _live(plan, nbytes=lambda st: st.spec.size)


@mutant("8.1", "a buffer's life ends at the step that writes it (reads ignored)")
def liveness_no_reads(plan):
    return _live(plan, reads=False)


@mutant("8.1", "the end is the first reader, not the last")
def liveness_first_reader(plan):
    bs = _live(plan, reads=False, outputs=False)
    owner = {s: b for b in bs for s in b.slots + b.views}
    first = {}
    for i, st in enumerate(plan.steps):
        for a in st.args:
            b = owner.get(a)
            if b is not None and b.slot not in first and i > b.start:
                first[b.slot] = i
                b.end = i
    for s in plan.outputs:
        if s in owner:
            owner[s].end = len(plan.steps)
    return bs


# ---------------------------------------------------------------- 8.2 lower bound


@mutant("8.2", "the end of a life is exclusive: buffers that touch at one step are not summed")
def lower_bound_exclusive_end(buffers, alignment=ALIGNMENT):
    delta = {}
    for b in buffers:
        size = _al(b.nbytes, alignment)
        delta[b.start] = delta.get(b.start, 0) + size
        delta[b.end] = delta.get(b.end, 0) - size
    live = best = 0
    for t in sorted(delta):
        live += delta[t]
        best = max(best, live)
    return best


@mutant("8.2", "raw sizes: alignment ignored")
def lower_bound_unaligned(buffers, alignment=ALIGNMENT):
    top = max((b.end for b in buffers), default=-1)
    return max(
        (sum(b.nbytes for b in buffers if b.start <= t <= b.end) for t in range(top + 1)),
        default=0,
    )


@mutant("8.2", "the largest buffer instead of the most bytes live at once")
def lower_bound_largest(buffers, alignment=ALIGNMENT):
    return max((_al(b.nbytes, alignment) for b in buffers), default=0)


@mutant("8.2", "only the steps where a buffer starts are looked at, ends processed first")
def lower_bound_ends_first(buffers, alignment=ALIGNMENT):
    events = []
    for b in buffers:
        size = _al(b.nbytes, alignment)
        events.append((b.start, 1, size))
        events.append((b.end, 0, -size))  # ends before starts at the same step
    live = best = 0
    for _, _, d in sorted(events):
        live += d
        best = max(best, live)
    return best


# ---------------------------------------------------------------- 8.3 align


@mutant("8.3", "always adds a block: an exact multiple grows")
def align_always_adds(nbytes, alignment=ALIGNMENT):
    return (nbytes // alignment + 1) * alignment


@mutant("8.3", "rounds down")
def align_rounds_down(nbytes, alignment=ALIGNMENT):
    return nbytes // alignment * alignment


@mutant("8.3", "ignores the alignment argument (always 64)")
def align_fixed_64(nbytes, alignment=ALIGNMENT):
    return -(-nbytes // 64) * 64


@mutant("8.3", "bit trick that only works for powers of two, applied with a mask of alignment")
def align_bad_mask(nbytes, alignment=ALIGNMENT):
    return (nbytes + alignment) & ~(alignment - 1)


# ---------------------------------------------------------------- 8.4 / 8.5 placement


def _place(order, alignment, time_overlap=True, sort_busy=True, gaps=True, size_of=None):
    placed, top = [], 0
    for b in order:
        size = size_of(b) if size_of else _al(b.nbytes, alignment)
        busy = [
            (p.offset, p.offset + _al(p.nbytes, alignment))
            for p in placed
            if not time_overlap or (p.start <= b.end and b.start <= p.end)
        ]
        if sort_busy:
            busy.sort()
        offset = 0
        if gaps:
            for lo, hi in busy:
                if offset + size <= lo:
                    break
                offset = max(offset, hi)
        else:
            offset = max((hi for _, hi in busy), default=0)
        b.offset = offset
        top = max(top, offset + size)
        placed.append(b)
    return top


def _by_size(buffers, alignment):
    return sorted(buffers, key=lambda b: (-_al(b.nbytes, alignment), b.start, b.slot))


def _by_start(buffers):
    return sorted(buffers, key=lambda b: (b.start, b.slot))


@mutant("8.4", "smallest first")
def greedy_smallest_first(buffers, alignment=ALIGNMENT):
    return _place(sorted(buffers, key=lambda b: (b.nbytes, b.start, b.slot)), alignment)


@mutant("8.4", "never fills a gap: always above every live buffer")
def greedy_no_gaps(buffers, alignment=ALIGNMENT):
    return _place(_by_size(buffers, alignment), alignment, gaps=False)


@mutant("8.4", "overlapping buffers not sorted by offset before the walk")
def greedy_unsorted_walk(buffers, alignment=ALIGNMENT):
    return _place(_by_size(buffers, alignment), alignment, sort_busy=False)


@mutant("8.4", "raw sizes: offsets not aligned")
def greedy_unaligned(buffers, alignment=ALIGNMENT):
    return _place(_by_size(buffers, alignment), alignment, size_of=lambda b: b.nbytes)


@mutant("8.4", "returns the sum of sizes instead of the arena's top")
def greedy_returns_sum(buffers, alignment=ALIGNMENT):
    _place(_by_size(buffers, alignment), alignment)
    return sum(_al(b.nbytes, alignment) for b in buffers)


@mutant("8.5", "greedy by size instead of execution order")
def first_fit_by_size(buffers, alignment=ALIGNMENT):
    return _place(_by_size(buffers, alignment), alignment)


@mutant("8.5", "ignores lives: every buffer avoids every placed one (no reuse)")
def first_fit_no_time(buffers, alignment=ALIGNMENT):
    return _place(_by_start(buffers), alignment, time_overlap=False)


@mutant("8.5", "raw sizes: offsets not aligned")
def first_fit_unaligned(buffers, alignment=ALIGNMENT):
    return _place(_by_start(buffers), alignment, size_of=lambda b: b.nbytes)


@mutant("8.5", "lives compared with an exclusive end")
def first_fit_exclusive_end(buffers, alignment=ALIGNMENT):
    placed, top = [], 0
    for b in _by_start(buffers):
        size = _al(b.nbytes, alignment)
        busy = sorted(
            (p.offset, p.offset + _al(p.nbytes, alignment))
            for p in placed
            if p.start < b.end and b.start < p.end
        )
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        b.offset = offset
        top = max(top, offset + size)
        placed.append(b)
    return top


# ---------------------------------------------------------------- 8.9 your own placement


def _offsets(order, alignment, live=None, size_of=None):
    """Lowest free offset for each buffer of ``order``: ``{slot: offset}``, buffers untouched."""
    live = live or (lambda a, b: a[0] <= b.end and b.start <= a[1])
    placed, out = [], {}
    for b in order:
        size = size_of(b) if size_of else _al(b.nbytes, alignment)
        offset = 0
        for lo, hi in sorted((lo, hi) for *life, lo, hi in placed if live(life, b)):
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        out[b.slot] = offset
        placed.append((b.start, b.end, offset, offset + size))
    return out


@mutant("8.9", "lives that touch at one step share bytes (an exclusive end)")
def place_exclusive_end(buffers, alignment=ALIGNMENT):
    return _offsets(
        _by_size(buffers, alignment), alignment, lambda a, b: a[0] < b.end and b.start < a[1]
    )


@mutant("8.9", "raw sizes: offsets not aligned")
def place_unaligned(buffers, alignment=ALIGNMENT):
    return _offsets(_by_size(buffers, alignment), alignment, size_of=lambda b: b.nbytes)


@mutant("8.9", "sets each buffer's offset, as greedy_by_size does: the input is changed")
def place_mutates_input(buffers, alignment=ALIGNMENT):
    out = _offsets(_by_size(buffers, alignment), alignment)
    for b in buffers:
        b.offset = out[b.slot]
    return out


@mutant("8.9", "empty buffers left out: they take no bytes, but every buffer needs an offset")
def place_drops_empty(buffers, alignment=ALIGNMENT):
    return _offsets(_by_size([b for b in buffers if b.nbytes], alignment), alignment)


@mutant("8.9", "a reused offset keeps its first occupant's end: a stale end frees it too soon")
def place_stale_end(buffers, alignment=ALIGNMENT):
    slots, out = [], {}  # [offset, size, free after this step], in execution order
    for b in _by_start(buffers):
        size = _al(b.nbytes, alignment)
        for s in slots:
            if s[2] < b.start and s[1] >= size:
                out[b.slot] = s[0]  # forgets to set s[2] = b.end
                break
        else:
            top = max((s[0] + s[1] for s in slots), default=0)
            slots.append([top, size, b.end])
            out[b.slot] = top
    return out


@mutant("8.9", "greedy by size copied: valid, but no better than 8.4")
def place_greedy_by_size(buffers, alignment=ALIGNMENT):
    return _offsets(_by_size(buffers, alignment), alignment)


@mutant("8.9", "first fit in execution order: valid, but looser than greedy by size")
def place_first_fit(buffers, alignment=ALIGNMENT):
    return _offsets(_by_start(buffers), alignment)


@mutant("8.9", "no reuse: every buffer its own bytes")
def place_no_reuse(buffers, alignment=ALIGNMENT):
    out, offset = {}, 0
    for b in _by_start(buffers):
        out[b.slot] = offset
        offset += _al(b.nbytes, alignment)
    return out


@mutant("8.9", "returns the arena's size and sets offsets, like greedy_by_size")
def place_returns_size(buffers, alignment=ALIGNMENT):
    return _place(_by_size(buffers, alignment), alignment)


# ---------------------------------------------------------------- 8.6 in place


def _inplace(
    plan,
    index,
    owner,
    elementwise=True,
    dies=True,
    views=True,
    size=True,
    other_views=True,
    inputs=False,
):
    st = plan.steps[index]
    if elementwise and not is_elementwise(st):
        return None
    for a in st.args:
        b = owner.get(a)
        if b is None:
            if inputs:
                return a
            continue
        if views and a not in b.slots:
            continue
        if dies and b.end != index:
            continue
        if size and (b.nbytes != step_nbytes(st) or np.dtype(b.dtype) != np.dtype(st.spec.dtype)):
            continue
        if other_views and any(c != a and owner.get(c) is b for c in st.args):
            continue
        return a
    return None


@mutant("8.6", "does not check that the input dies here")
def inplace_ignores_later_reads(plan, index, owner):
    return _inplace(plan, index, owner, dies=False)


@mutant("8.6", "writes into a view's memory (another layout)")
def inplace_into_views(plan, index, owner):
    return _inplace(plan, index, owner, views=False)


@mutant("8.6", "ignores size and dtype")
def inplace_any_size(plan, index, owner):
    return _inplace(plan, index, owner, size=False)


@mutant("8.6", "misses a transposed view of the same buffer among the other arguments")
def inplace_ignores_other_views(plan, index, owner):
    return _inplace(plan, index, owner, other_views=False)


@mutant("8.6", "any step may write in place (reductions, matmul)")
def inplace_any_kind(plan, index, owner):
    return _inplace(plan, index, owner, elementwise=False)


@mutant("8.6", "writes over graph inputs")
def inplace_over_inputs(plan, index, owner):
    return _inplace(plan, index, owner, inputs=True)


# ---------------------------------------------------------------- 8.7 checker


def _check(
    buffers,
    alignment=ALIGNMENT,
    exclusive=False,
    touching=False,
    aligned=True,
    adjacent_only=False,
    empty=True,
):
    bad = []
    if aligned:
        bad = [(b.slot, b.slot) for b in buffers if b.offset is None or b.offset % alignment]
    ok = [b for b in buffers if (b.slot, b.slot) not in bad]
    if adjacent_only:
        ok = sorted(ok, key=lambda b: b.offset)
    for i, a in enumerate(ok):
        others = ok[i + 1 : i + 2] if adjacent_only else ok[i + 1 :]
        for b in others:
            live = (
                (a.start < b.end and b.start < a.end)
                if exclusive
                else (a.start <= b.end and b.start <= a.end)
            )
            if empty and not (a.nbytes and b.nbytes):
                continue
            if touching:
                space = a.offset <= b.offset + b.nbytes and b.offset <= a.offset + a.nbytes
            else:
                space = a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes
            if live and space:
                bad.append((min(a.slot, b.slot), max(a.slot, b.slot)))
    return sorted(bad)


@mutant("8.7", "lives that touch at one step count as disjoint")
def check_exclusive_lives(buffers, alignment=ALIGNMENT):
    return _check(buffers, alignment, exclusive=True)


@mutant("8.7", "adjacent byte ranges reported as overlapping")
def check_touching_bytes(buffers, alignment=ALIGNMENT):
    return _check(buffers, alignment, touching=True)


@mutant("8.7", "misaligned offsets not reported")
def check_no_alignment(buffers, alignment=ALIGNMENT):
    return _check(buffers, alignment, aligned=False)


@mutant("8.7", "only neighbours in offset order compared")
def check_neighbours_only(buffers, alignment=ALIGNMENT):
    return _check(buffers, alignment, adjacent_only=True)


# ---------------------------------------------------------------- 8.8 bind_views


@mutant("8.8", "offset ignored: every buffer starts at byte 0")
def bind_views_no_offset(arena, buffers):
    return {b.slot: arena[: b.nbytes].view(np.dtype(b.dtype)) for b in buffers}


@mutant("8.8", "offset counted in elements of the buffer's dtype, not bytes")
def bind_views_element_offset(arena, buffers):
    out = {}
    for b in buffers:
        dt = np.dtype(b.dtype)
        whole = arena[: arena.size // dt.itemsize * dt.itemsize].view(dt)
        out[b.slot] = whole[b.offset : b.offset + b.nbytes // dt.itemsize]
    return out


@mutant("8.8", "copies the bytes instead of viewing them")
def bind_views_copies(arena, buffers):
    return {
        b.slot: arena[b.offset : b.offset + b.nbytes].copy().view(np.dtype(b.dtype))
        for b in buffers
    }


@mutant("8.8", "aligned size: the view is longer than the buffer")
def bind_views_aligned_length(arena, buffers):
    out = {}
    for b in buffers:
        n = -(-b.nbytes // ALIGNMENT) * ALIGNMENT
        out[b.slot] = arena[b.offset : b.offset + n].view(np.dtype(b.dtype))
    return out


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("8.7", "a negative offset passes, since -64 % 64 == 0")
def check_negative_offsets(buffers, alignment=ALIGNMENT):
    return _check(buffers, alignment)


@mutant("8.7", "reports a pair in the order the buffers come, not (smaller slot, larger slot)")
def check_pair_order(buffers, alignment=ALIGNMENT):
    out = []
    for p in ref.check_assignment(buffers, alignment):
        if p[0] != p[1]:
            a = next(b for b in buffers if b.slot in p)  # the one listed first
            p = (a.slot, p[0] + p[1] - a.slot)
        out.append(p)
    return sorted(out)


@mutant("8.7", "returns the misaligned buffers first, then the pairs, unsorted")
def check_unsorted(buffers, alignment=ALIGNMENT):
    got = ref.check_assignment(buffers, alignment)
    return [p for p in got if p[0] == p[1]] + [p for p in got if p[0] != p[1]]


# ---------------------------------------------------------------- issue 43: extremes, untried
# layouts and unchecked promises


@mutant("8.1", "a view of a view is not followed: reading it does not keep the base alive")
def liveness_one_view_level(plan):
    return _live(plan, nested=False)


@mutant("8.1", "a view returned as a graph output does not keep its base alive to the end")
def liveness_output_views_die(plan):
    buffers = _live(plan, outputs=False)
    for b in buffers:
        if b.slot in plan.outputs:
            b.end = len(plan.steps)
    return buffers


@mutant("8.1", "a view of an input gets a buffer of its own (inputs never get one)")
def liveness_input_views(plan):
    return _live(plan, input_views=True)


@mutant("8.2", "no buffers: max() of an empty sequence raises instead of returning 0")
def lower_bound_empty_raises(buffers, alignment=ALIGNMENT):
    steps = sorted({b.start for b in buffers})
    return max(
        sum(_al(b.nbytes, alignment) for b in buffers if b.start <= t <= b.end) for t in steps
    )


@mutant("8.2", "the alignment argument is ignored: sizes always rounded to 64")
def lower_bound_fixed_alignment(buffers, alignment=ALIGNMENT):
    return ref.lower_bound(buffers, ALIGNMENT)


@mutant("8.3", "float division: sizes past 2**53 round to the wrong multiple")
def align_float_division(nbytes, alignment=ALIGNMENT):
    import math

    return math.ceil(nbytes / alignment) * alignment


@mutant("8.3", "rounds up with (n // a + 1) * a unless n % a == 0, done in float")
def align_float_modulo(nbytes, alignment=ALIGNMENT):
    return int(nbytes if nbytes % alignment == 0 else (float(nbytes) // alignment + 1) * alignment)


@mutant("8.4", "ties in size broken by slot alone: the earlier start is not placed first")
def greedy_ties_by_slot(buffers, alignment=ALIGNMENT):
    return _place(sorted(buffers, key=lambda b: (-_al(b.nbytes, alignment), b.slot)), alignment)


@mutant("8.4", "lives compared with an exclusive end: buffers touching at one step share bytes")
def greedy_exclusive_end(buffers, alignment=ALIGNMENT):
    saved = [(b.start, b.end) for b in buffers]
    for b in buffers:  # shrink each life by one step, place, then restore
        b.end = max(b.start, b.end - 1) if b.end > b.start else b.end
    top = ref.greedy_by_size(buffers, alignment)
    for b, (s, e) in zip(buffers, saved):
        b.start, b.end = s, e
    return top


@mutant("8.4", "an empty buffer still takes one aligned block")
def greedy_empty_takes_a_block(buffers, alignment=ALIGNMENT):
    return _place(
        _by_size(buffers, alignment), alignment, size_of=lambda b: _al(max(b.nbytes, 1), alignment)
    )


@mutant("8.5", "never fills a gap: each buffer goes above every live one")
def first_fit_no_gaps(buffers, alignment=ALIGNMENT):
    return _place(_by_start(buffers), alignment, gaps=False)


@mutant("8.5", "ties in start broken by the larger buffer first, not the smaller slot")
def first_fit_ties_by_size(buffers, alignment=ALIGNMENT):
    return _place(sorted(buffers, key=lambda b: (b.start, -b.nbytes, b.slot)), alignment)


@mutant("8.6", "owner[a] for every argument: an input argument raises KeyError")
def inplace_owner_keyerror(plan, index, owner):
    st = plan.steps[index]
    if not is_elementwise(st):
        return None
    for a in st.args:
        owner[a]  # noqa: B018  (the learner's lookup; inputs are absent)
    return ref.inplace_source(plan, index, owner)


@mutant("8.6", "a == b.slot: a buffer already written in place (its second slot) never qualifies")
def inplace_own_slot_only(plan, index, owner):
    got = ref.inplace_source(plan, index, owner)
    return got if got is None or owner[got].slot == got else None


@mutant("8.6", "only the first argument is considered")
def inplace_first_arg_only(plan, index, owner):
    got = ref.inplace_source(plan, index, owner)
    st = plan.steps[index]
    return got if st.args and got == st.args[0] else None


@mutant("8.7", "the alignment argument is ignored: offsets checked against 64")
def check_fixed_alignment(buffers, alignment=ALIGNMENT):
    return ref.check_assignment(buffers, ALIGNMENT)


@mutant("8.7", "a misaligned buffer is still compared in pairs")
def check_misaligned_in_pairs(buffers, alignment=ALIGNMENT):
    bad = [
        (b.slot, b.slot)
        for b in buffers
        if b.offset is None or b.offset < 0 or b.offset % alignment
    ]
    ok = [b for b in buffers if b.offset is not None]
    pairs = [
        (min(a.slot, b.slot), max(a.slot, b.slot))
        for i, a in enumerate(ok)
        for b in ok[i + 1 :]
        if a.start <= b.end
        and b.start <= a.end
        and a.nbytes
        and b.nbytes
        and a.offset < b.offset + b.nbytes
        and b.offset < a.offset + a.nbytes
    ]
    return sorted(bad + pairs)


@mutant("8.8", "the view's length counted in 4-byte elements whatever the dtype")
def bind_views_float32_length(arena, buffers):
    return {
        b.slot: arena[b.offset : b.offset + b.nbytes].view(np.dtype(b.dtype))[: b.nbytes // 4]
        for b in buffers
    }


@mutant("8.8", "a view for every slot of the buffer and its views, not only its own slot")
def bind_views_every_slot(arena, buffers):
    out = ref.bind_views(arena, buffers)
    for b in buffers:
        for s in list(b.slots) + list(b.views):
            out[s] = out[b.slot]
    return out


@mutant(
    "8.9",
    "empty buffers put one byte past the top: they take no bytes, but the offset is misaligned",
)
def place_empty_on_top(buffers, alignment=ALIGNMENT):
    got = ref.place_buffers(buffers, alignment)
    top = max((got[b.slot] + _al(b.nbytes, alignment) for b in buffers), default=0)
    for b in buffers:
        if not b.nbytes:
            got[b.slot] = top + 1
    return got


@mutant("8.9", "offsets packed by raw nbytes, then each rounded up on its own: neighbours overlap")
def place_rounded_after(buffers, alignment=ALIGNMENT):
    got = ref.place_buffers(buffers, 1)
    return {s: _al(o, alignment) for s, o in got.items()}
