"""The arena: a memory plan for a whole Plan, and its buffers' views (exercise 8.8).

``plan_memory`` computes lives, merges in-place steps, assigns offsets
(greedy-by-size) and checks the result. With ``CompileOptions(memory=True)`` the
executor (``executor.py``) runs a plan in one arena per call (or one for the
compiled object's whole life when ``keep=True``), every planned step writing
straight into its view of it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import OpError
from ..exercises import exercise
from .planner import (
    ALIGNMENT,
    align,
    check_assignment,
    first_fit,
    greedy_by_size,
    inplace_source,
    is_view,
    liveness,
    lower_bound,
    no_reuse,
)


@dataclass
class MemoryPlan:
    """Where every buffer of a plan lives, and how good that is."""

    buffers: list  # Buffer, with offsets
    arena_bytes: int  # greedy-by-size
    lower_bound: int  # most bytes live at one step (after in-place merges)
    first_fit: int | None  # bytes; None: computed when first read (first_fit_bytes)
    no_reuse_bytes: int
    num_steps: int
    inplace: list = field(default_factory=list)  # (step index, slot written over)
    copied: list = field(default_factory=list)  # slots whose kernel allocates: copied in
    alignment: int = ALIGNMENT

    @property
    def first_fit_bytes(self) -> int:
        """First-fit's arena for the same buffers: a comparison for reports, computed
        only when read, so planning (8.4's work) never runs exercise 8.5."""
        if self.first_fit is None:
            unplaced = [copy.copy(b) for b in self.buffers]
            for b in unplaced:
                b.offset = None
            self.first_fit = first_fit(unplaced, self.alignment)
        return self.first_fit

    @property
    def ratio(self) -> float:
        """Arena over lower bound (1.0 is optimal)."""
        return self.arena_bytes / self.lower_bound if self.lower_bound else 1.0

    def live_curve(self) -> list:
        """Bytes live at each step 0..num_steps (aligned sizes)."""
        curve = [0] * (self.num_steps + 1)
        for b in self.buffers:
            for t in range(b.start, min(b.end, self.num_steps) + 1):
                curve[t] += align(b.nbytes, self.alignment)
        return curve

    def summary(self) -> str:
        return (
            f"arena {self.arena_bytes} B for {len(self.buffers)} buffers; lower bound "
            f"{self.lower_bound} B ({self.ratio:.3f}x); first-fit {self.first_fit_bytes} B; "
            f"no reuse {self.no_reuse_bytes} B; {len(self.inplace)} in place"
        )

    def text(self) -> str:
        lines = ["memory plan: " + self.summary().replace("; first-fit", "\n  first-fit")]
        lines.append(f"  {'buffer':>8} {'bytes':>10} {'offset':>10}  life     slots")
        for b in sorted(self.buffers, key=lambda b: (b.start, b.slot)):
            views = ",".join([f"s{s}" for s in b.slots] + [f"s{s}(view)" for s in b.views])
            lines.append(
                f"  {'s' + str(b.slot):>8} {b.nbytes:>10} {b.offset:>10}  "
                f"[{b.start},{b.end}]".ljust(46)
                + f" {views}"
            )
        for i, s in self.inplace:
            lines.append(f"  step {i} writes in place over s{s}")
        if self.copied:
            copied = ", ".join(f"s{s}" for s in self.copied)
            lines.append(f"  kernels that allocate (result copied into the arena): {copied}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<MemoryPlan {self.summary()}>"


def _merge_inplace(plan, buffers) -> list:
    """Let elementwise steps write over an argument that dies there (exercise 8.6 decides)."""
    owner = {s: b for b in buffers for s in b.slots + b.views}
    outputs = set(plan.outputs)
    merged = []
    for i, st in enumerate(plan.steps):
        mine = owner.get(st.out)
        if mine is None or mine.slot != st.out or st.out in outputs:  # outputs: outside
            continue
        src = inplace_source(plan, i, owner)
        if src is None:
            continue
        base = owner[src]
        base.end = max(base.end, mine.end)
        base.slots.extend(mine.slots)
        base.views.extend(mine.views)
        for s in mine.slots + mine.views:
            owner[s] = base
        mine.slots = []
        merged.append((i, src))
    return merged, [b for b in buffers if b.slots]


def plan_memory(plan, inplace: bool = True, alignment: int = ALIGNMENT) -> MemoryPlan:
    """Lives, in-place merges, greedy-by-size offsets, and the comparisons the reports show."""
    buffers = liveness(plan)
    merged = []
    if inplace:
        merged, buffers = _merge_inplace(plan, buffers)
    # An output is made outside the arena (the caller keeps it, and a training step
    # returns every parameter): it takes no place there. A view of a buffer that is
    # returned keeps that buffer, and is copied out at the end.
    outputs = set(plan.outputs)
    buffers = [b for b in buffers if b.slot not in outputs]
    bound = lower_bound(buffers, alignment)
    nr = no_reuse([copy.copy(b) for b in buffers], alignment)
    size = greedy_by_size(buffers, alignment)
    bad = check_assignment(buffers, alignment)
    if bad:
        raise OpError("memory", f"the planned arena overlaps live buffers: {bad[:5]}")
    planned = {s for b in buffers for s in b.slots}
    copied = [
        st.out
        for st in plan.steps
        if st.out in planned and not is_view(st) and not getattr(st.kernel, "writes_into", False)
    ]
    return MemoryPlan(buffers, size, bound, None, nr, len(plan.steps), merged, copied, alignment)


@exercise("8.8")
def bind_views(arena: np.ndarray, buffers: list) -> dict:
    """One typed view of ``arena`` per buffer: ``{b.slot: 1-D array of b.dtype}``.

    ``arena`` is a 1-D ``uint8`` array; buffer ``b`` owns bytes
    ``[b.offset, b.offset + b.nbytes)`` of it. Its view must have exactly
    ``b.nbytes // itemsize`` elements of ``b.dtype`` and share memory with the
    arena (no copy): a kernel writing into it writes into the arena. Only the
    buffer's own slot gets a view (its view steps make theirs when they run).

    Example:
        >>> v = bind_views(np.zeros(128, np.uint8), [Buffer(3, 8, float32, 0, 1, [3], offset=64)])
        >>> v[3].dtype, v[3].shape, np.shares_memory(v[3], arena)
        (dtype('float32'), (2,), True)
    """
    raise NotImplementedError("Exercise 8.8: bind_views")


def new_arena(nbytes: int, alignment: int = ALIGNMENT) -> np.ndarray:
    """``nbytes`` of uint8 whose first byte sits on an ``alignment`` boundary."""
    raw = np.empty(nbytes + alignment, np.uint8)
    shift = (-raw.ctypes.data) % alignment
    return raw[shift : shift + nbytes]
