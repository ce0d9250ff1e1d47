"""Memory planning over a chapter-6 :class:`~minitorch.passes.plan.Plan` (exercises 8.1-8.7 and 8.9).

Eager execution allocates every intermediate when its op runs and frees it when
Python drops the last reference. A plan knows, before it runs, the step that
writes each buffer and the last step that reads it. So all buffers can live in
one arena at offsets chosen ahead of time, and two buffers whose lives do not
overlap can share bytes.

A *buffer* is the result of one step that computes (a view step only makes
another name for its input's buffer). Inputs and constants belong to the caller
and never enter the arena. Lives are inclusive step intervals ``[start, end]``;
a graph output lives to ``len(plan.steps)``, past the last step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.registry import OPS, OpKind
from ..exercises import exercise

ALIGNMENT = 64  # bytes: a cache line, and what SIMD loads like


@dataclass
class Buffer:
    """One block of the arena: written by the step with result ``slot``, read until ``end``."""

    slot: int  # the slot of the step that writes it (the buffer's name)
    nbytes: int  # bytes its values take (before alignment)
    dtype: np.dtype
    start: int  # index of the step that writes it
    end: int  # index of the last step that reads it (or a view of it)
    slots: list = field(default_factory=list)  # slots computed into it, in C order: its own first
    views: list = field(default_factory=list)  # slots of view steps that alias it
    offset: int | None = None  # where it starts in the arena, once assigned

    def __repr__(self) -> str:
        at = "" if self.offset is None else f" @{self.offset}"
        return f"Buffer(s{self.slot}, {self.nbytes}B, [{self.start},{self.end}]{at})"


def _kind_of(op: str):
    d = OPS.get(op)
    return d.kind if d is not None else None


def _kind(step):
    node = step.node
    if node is None:
        return None
    if node.op == "fused":  # chapter 7: a fused group says what it is
        sub = node.attrs.get("graph")
        if sub is not None and any(_kind_of(n.op) is OpKind.VIEW for n in sub.nodes):
            return OpKind.OPAQUE  # it reads an input through a view (permute): not in C order
        return {"elementwise": OpKind.ELEMENTWISE}.get(node.attrs.get("kind"), OpKind.OPAQUE)
    op = OPS.get(node.op)
    return op.kind if op is not None else OpKind.OPAQUE


def is_view(step) -> bool:
    """Does ``step`` only give its first input's values a new shape (no new buffer)?

    ``contiguous`` and ``reshape`` may copy a non-contiguous input; counting them as views
    is safe: the copy then lives outside the arena, and the base lives a little longer.
    """
    return _kind(step) is OpKind.VIEW or getattr(step.kernel, "is_view", False)


def is_elementwise(step) -> bool:
    """Does ``step`` compute ``out[i]`` from element ``i`` of each input alone?"""
    return _kind(step) in (OpKind.ELEMENTWISE, OpKind.BROADCAST)


def step_nbytes(step) -> int:
    return step.spec.size * np.dtype(step.spec.dtype).itemsize


@exercise("8.1")
def liveness(plan) -> list:
    """One :class:`Buffer` per computing step of ``plan``, in execution order, with its life.

    Step ``i`` that is not a view (``is_view(step)``) has the buffer
    ``Buffer(step.out, step_nbytes(step), step.spec.dtype, i, end, [step.out])``, where
    ``end`` is the last step that reads ``step.out`` or any view of it (``i`` if none).
    A view step makes no buffer: its ``out`` is one of the ``views`` of the buffer its
    first argument lives in (views of views too), and reading it reads that buffer. A
    view of an input or constant belongs to no buffer. A buffer holding a slot of
    ``plan.outputs`` (its own or a view's) lives to ``len(plan.steps)``. Inputs and
    constants never get a buffer.

    Example (``x`` input; s1 = exp(x); s2 = reshape(s1); s3 = neg(s2); return s3):
        >>> liveness(p)
        [Buffer(s1, 24B, [0,2]), Buffer(s3, 24B, [2,3])]
    """
    raise NotImplementedError("Exercise 8.1: liveness")


@exercise("8.2")
def lower_bound(buffers: list, alignment: int = ALIGNMENT) -> int:
    """The most bytes live at any one step: no placement of ``buffers`` can use less.

    A buffer takes ``align(b.nbytes, alignment)`` bytes at every step ``t`` with
    ``b.start <= t <= b.end`` (both ends count). Return the maximum over ``t``
    (0 for no buffers). Aim for O(n log n) in the number of buffers, however long
    their lives are.

    Example:
        >>> lower_bound([Buffer(1, 64, f32, 0, 1), Buffer(2, 100, f32, 1, 2), Buffer(3, 64, f32, 2, 2)])
        192
    """
    raise NotImplementedError("Exercise 8.2: lower_bound")


@exercise("8.3")
def align(nbytes: int, alignment: int = ALIGNMENT) -> int:
    """``nbytes`` rounded up to a multiple of ``alignment`` (0 stays 0).

    Every offset in the arena is a multiple of ``alignment``, so each buffer takes
    its size rounded up.

    Example:
        >>> align(1), align(64), align(65), align(0)
        (64, 64, 128, 0)
    """
    raise NotImplementedError("Exercise 8.3: align")


@exercise("8.4")
def greedy_by_size(buffers: list, alignment: int = ALIGNMENT) -> int:
    """Give every buffer an ``offset``, largest first; return the arena's size in bytes.

    Buffers are placed one at a time by decreasing ``align(nbytes)`` (ties: earlier
    ``start``, then smaller ``slot``). Each goes at the lowest offset where its
    aligned bytes do not overlap any already placed buffer *whose life overlaps its
    own* (``a.start <= b.end and b.start <= a.end``), a gap between placed buffers
    included. The arena's size is the largest ``offset + align(nbytes)``.

    Example: lives [0,1] 128B, [1,2] 64B, [2,3] 128B -> offsets 0, 128, 0 and size 192.

    Benchmarked (graded): the cost should grow like n log n in the number of buffers (full
    credit: 8000 short-lived buffers take at most 30x the time the course's planner takes
    for 1000; it takes about 12x, a quadratic planner hundreds).
    """
    raise NotImplementedError("Exercise 8.4: greedy_by_size")


@exercise("8.5")
def first_fit(buffers: list, alignment: int = ALIGNMENT) -> int:
    """Like :func:`greedy_by_size`, but visit buffers in execution order (``start``, then ``slot``).

    This is what an allocator does when it only sees requests as they come: each
    buffer takes the lowest offset free of buffers live at the same time. Set each
    ``offset``; return the arena's size.

    Example: lives [0,1] 64B, [1,2] 128B, [2,3] 128B -> offsets 0, 64, 192 and size 320
    (greedy-by-size places the two 128B buffers first and needs 192).
    """
    raise NotImplementedError("Exercise 8.5: first_fit")


@exercise("8.9")
def place_buffers(buffers: list, alignment: int = ALIGNMENT) -> dict:
    """Your own placement heuristic: an offset for every buffer, ``{slot: offset}``.

    The open problem of the chapter: any strategy is allowed. A valid answer
    has a key for every buffer of ``buffers`` (empty ones included), each offset
    a non-negative multiple of ``alignment``; two buffers whose lives overlap
    (``a.start <= b.end and b.start <= a.end``) have disjoint bytes
    ``[offset, offset + nbytes)``; ``buffers`` is left as it came (set no
    ``offset``, reorder nothing); the same input gives the same answer.

    Graded on outcome: the arena, the largest ``offset + align(nbytes)``, over
    the lower bound (8.2) on a fixed suite of buffer sets (training steps of the
    course's models, and synthetic sets); the closer to 1, the more points. Beating
    :func:`greedy_by_size` is possible, and the bound is not always reachable.

    Example: lives [2,3] 192B, [0,0] 256B, [3,5] 256B, [0,2] 192B -> for instance
    ``{1: 0, 2: 0, 3: 192, 4: 256}``, an arena of 448 bytes (the bound; greedy-by-size: 640).
    """
    raise NotImplementedError("Exercise 8.9: place_buffers")


def no_reuse(buffers: list, alignment: int = ALIGNMENT) -> int:
    """Every buffer its own bytes, one after the other: what a plan costs without planning."""
    offset = 0
    for b in sorted(buffers, key=lambda b: (b.start, b.slot)):
        b.offset = offset
        offset += align(b.nbytes, alignment)
    return offset


@exercise("8.6")
def inplace_source(plan, index: int, owner: dict) -> int | None:
    """The argument slot whose buffer step ``index`` may write its result over, or ``None``.

    ``owner`` maps every slot living in a buffer to its :class:`Buffer` (inputs and
    constants are absent: the caller holds them, never write over them). Only an
    elementwise step (``is_elementwise(step)``) reads element ``i`` before writing
    element ``i``, so only it may write in place. An argument slot ``a`` qualifies when:

    * ``a`` has an owner ``b`` and ``a in b.slots`` (computed into ``b`` in C order; not
      one of ``b.views``: a transposed read of the memory being written is clobbered);
    * ``b.end == index``: nobody reads it (or any view of it) after this step;
    * ``b.nbytes == step_nbytes(step)`` and ``b.dtype == step.spec.dtype``;
    * no *other* argument slot of this step is a view of ``b`` (``add(x, x.T)``
      reads ``x`` in another order while its bytes are overwritten).

    Return the first qualifying argument slot in ``step.args`` order.

    Example: ``s2 = exp(s1)`` where ``s1`` is read last here -> ``1``;
    ``s3 = add(s1, s2)`` with ``s2 = transpose(s1)`` -> ``None``.
    """
    raise NotImplementedError("Exercise 8.6: inplace_source")


@exercise("8.7")
def check_assignment(buffers: list, alignment: int = ALIGNMENT) -> list:
    """Everything wrong with the offsets of ``buffers``; ``[]`` when the plan is safe.

    Report ``(a.slot, b.slot)`` with ``a.slot < b.slot`` for every pair whose lives
    overlap (``a.start <= b.end and b.start <= a.end``) and whose bytes
    ``[offset, offset + nbytes)`` overlap (empty buffers overlap nothing); report
    ``(b.slot, b.slot)`` for a buffer whose offset is ``None``, negative or not a
    multiple of ``alignment``; such a buffer is in no pair. Return the list sorted.

    Example:
        >>> check_assignment([Buffer(1, 64, f32, 0, 1, offset=0), Buffer(2, 64, f32, 1, 2, offset=0)])
        [(1, 2)]

    Quadratic time is fine: this runs in tests, and compiling skips it.
    """
    raise NotImplementedError("Exercise 8.7: check_assignment")
