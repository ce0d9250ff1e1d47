"""Shared helpers of the chapter-10 graded tests: event lists and a brute-force self time."""

from __future__ import annotations

from hypothesis import strategies as st

from minitorch.profiler import Event

NAMES = ("matmul", "add", "relu", "step", "data")


@st.composite
def event_lists(draw, max_events: int = 14):
    """Events on up to two threads whose intervals nest or are disjoint (touching allowed),
    with positive durations, no two identical, in a shuffled order (as a profiler appends
    them: a parent after its children)."""
    accepted: list[Event] = []
    for _ in range(draw(st.integers(0, max_events))):
        tid = draw(st.integers(0, 1))
        a = draw(st.integers(0, 40))
        b = a + draw(st.integers(1, 40))
        ok = True
        for e in accepted:
            if e.tid != tid:
                continue
            same = (e.start, e.end) == (a, b)
            nested = (e.start <= a and b <= e.end) or (a <= e.start and e.end <= b)
            disjoint = b <= e.start or e.end <= a
            if same or not (nested or disjoint):
                ok = False
                break
        if ok:
            name = draw(st.sampled_from(NAMES))
            alloc = draw(st.sampled_from((0, 0, 16, 4096)))
            freed = draw(st.sampled_from((0, alloc)))
            accepted.append(Event(name, "op", tid, a, b, ((2, 3),), "numpy", alloc, freed))
    return draw(st.permutations(accepted))


def brute_self_times(events) -> list[int]:
    """Duration minus the durations of direct children, straight from the definition."""

    def inside(b, a):
        return a is not b and a.tid == b.tid and a.start <= b.start and b.end <= a.end

    out = []
    for a in events:
        kids = [b for b in events if inside(b, a)]
        direct = [b for b in kids if not any(inside(b, c) for c in kids)]
        out.append(a.duration - sum(b.duration for b in direct))
    return out
