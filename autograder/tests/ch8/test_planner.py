"""Graded tests, chapter 8: liveness (8.1), the lower bound (8.2), alignment (8.3),
greedy-by-size (8.4), first-fit (8.5), in-place reuse (8.6) and the checker (8.7)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.harness import check, graded, text
from minitorch import Spec
from minitorch.memory import (
    Buffer,
    align,
    check_assignment,
    first_fit,
    greedy_by_size,
    inplace_source,
    liveness,
    lower_bound,
    no_reuse,
)
from minitorch.passes.plan import Plan, Step
from minitorch.tracing import Graph

from .util import (
    F32,
    UNIT,
    buffer_sets,
    compile_program,
    fresh,
    overlaps,
    programs,
    textbook,
)

F64 = np.dtype("float64")
I32 = np.dtype("int32")


def _plan(ops, outputs, n_in=1, shape=(2, 3)):
    """A plan from ``[(op, arg slots, shape or None, dtype or None)]``: inputs are slots
    0..n_in-1, step k writes slot n_in + k. Kernels are never called here."""
    g = Graph("p")
    nodes = [g.add_input(Spec(shape, F32), f"x{i}") for i in range(n_in)]
    plan = Plan(num_slots=n_in + len(ops), inputs=list(range(n_in)))
    for k, (op, args, sh, dt) in enumerate(ops):
        spec = Spec(sh or shape, dt or F32)
        node = g.add_node(op, [nodes[a] for a in args], attrs={}, spec=spec)
        nodes.append(node)
        plan.steps.append(Step(None, tuple(args), n_in + k, spec, {}, node))
    plan.outputs = list(outputs)
    return plan


def _lives(buffers):
    return {b.slot: (b.start, b.end, b.nbytes) for b in buffers}


def _oracle_lives(plan, view_ops=("permute", "reshape", "getitem", "expand", "contiguous")):
    """The grader's liveness: follow each view to its base, then look at every reader."""
    base, nbytes = {}, {}
    for s in plan.steps:
        if s.node.op in view_ops:
            if s.args[0] in base:
                base[s.out] = base[s.args[0]]
        else:
            base[s.out] = s.out
            nbytes[s.out] = s.spec.size * np.dtype(s.spec.dtype).itemsize
    lives = {}
    for k, s in enumerate(plan.steps):
        if base.get(s.out) == s.out:
            start = k
            readers = [
                j for j, t in enumerate(plan.steps) if any(base.get(a) == s.out for a in t.args)
            ]
            end = max([k] + readers)
            if any(base.get(o) == s.out for o in plan.outputs):
                end = len(plan.steps)
            lives[s.out] = (start, end, nbytes[s.out])
    return lives


# ---------------------------------------------------------------- 8.1 liveness


@graded("8.1", points=2)
def test_liveness_small_example():
    """
    contract: A view step makes no buffer
    contract: Inputs and constants never get a buffer
    contract: (its own or a view's) lives to ``len(plan.steps)``
    contract: s2 = reshape(s1); s3 = neg(s2); return s3
    """
    # x; s1 = exp(x); s2 = reshape(s1); s3 = neg(s2); s4 = add(s3, x); return s4, s1
    plan = _plan(
        [
            ("exp", [0], None, None),
            ("reshape", [1], (3, 2), None),
            ("neg", [2], (3, 2), None),
            ("add", [3, 0], (3, 2), None),
        ],
        outputs=[4],
    )
    got = liveness(plan)
    want = {1: (0, 2, 24), 3: (2, 3, 24), 4: (3, 4, 24)}
    check(
        _lives(got) == want,
        "8.1",
        "lives of a chain with a view",
        value=sorted((s, *v) for s, v in _lives(got).items()),
        got=got,
        expected=want,
    )
    check(
        [b.slot for b in got] == [1, 3, 4],
        "8.1",
        "buffers in execution order",
        value=[b.slot for b in got],
        got=got,
    )
    views = {b.slot: sorted(b.views) for b in got}
    check(
        views.get(1) == [2],
        "8.1",
        "the reshape (slot 2) is a view of slot 1",
        value=views.get(1),
        got=views,
    )
    fields = [(b.slot, b.slots, str(b.dtype)) for b in got]
    want = [(1, [1], "float32"), (3, [3], "float32"), (4, [4], "float32")]
    check(fields == want, "8.1", "each buffer's slots start with its own slot; its dtype is the step's",
          value=text(fields), got=fields, expected=want)  # fmt: skip
    plan.outputs = [2]  # returning the view keeps its base alive to the end
    got = liveness(plan)
    check(
        _lives(got)[1] == (0, 4, 24),
        "8.1",
        "a returned view keeps its base to the end",
        value=_lives(got)[1],
        got=got,
    )
    # x; s1 = exp(x); s2 = reshape(s1); s3 = permute(s2); s4 = reshape(x); s5 = add(s3, s4):
    # reading a view of a view (s3) reads s1; the view of the input (s4) belongs to no buffer
    plan = _plan(
        [
            ("exp", [0], (2, 3), None),
            ("reshape", [1], (3, 2), None),
            ("permute", [2], (2, 3), None),
            ("reshape", [0], (2, 3), None),
            ("add", [3, 4], (2, 3), None),
        ],
        outputs=[5],
    )
    got = _lives(liveness(plan))
    want = {1: (0, 4, 24), 5: (4, 5, 24)}
    check(got == want, "8.1", "a view of a view is read as its base; a view of an input has no "
          "buffer", value=sorted((s, *v) for s, v in got.items()), got=got, expected=want)  # fmt: skip


@graded("8.1", points=3)
@settings(max_examples=40)
@given(programs())
def test_liveness_matches_every_reader(prog):
    """
    contract: ``end`` is the last step that reads ``step.out`` or any view of it (``i`` if none)
    """
    plan = compile_program(prog, memory=False).plan
    got, want = _lives(liveness(plan)), _oracle_lives(plan)
    check(
        got == want,
        "8.1",
        "one buffer per computing step; life = writer .. last reader",
        value=sorted((s, *v) for s, v in got.items()),
        plan=plan.text(),
        got=got,
        expected=want,
    )


# ---------------------------------------------------------------- 8.2 lower bound


@graded("8.2", points=1)
def test_lower_bound_example():
    """
    contract: Return the maximum over ``t`` (0 for no buffers)
    contract: at every step ``t`` with ``b.start <= t <= b.end`` (both ends count)
    """
    bs = [
        Buffer(1, 64, F32, 0, 1, [1]),
        Buffer(2, 100, F32, 1, 2, [2]),
        Buffer(3, 64, F32, 2, 2, [3]),
    ]
    got = lower_bound(bs)
    check(
        got == 192,
        "8.2",
        "both ends of a life count; sizes are aligned",
        value=got,
        got=got,
        expected=192,
    )
    check(lower_bound([]) == 0, "8.2", "no buffers: 0", value=lower_bound([]), got=lower_bound([]))


@graded("8.2", points=2)
@settings(max_examples=60)
@given(buffer_sets(), st.sampled_from([64, 16]))
def test_lower_bound_random(buffers, alignment):
    """
    contract: A buffer takes ``align(b.nbytes, alignment)`` bytes
    """
    # The value is compared with the reference's by the grader (the oracle); computing it
    # here would put 8.2's answer in the learner's repository. What any answer satisfies:
    got, sizes = (
        lower_bound(buffers, alignment),
        [b.nbytes + -b.nbytes % alignment for b in buffers],
    )
    check(
        isinstance(got, int)
        and max(sizes, default=0) <= got <= sum(sizes)
        and got % alignment == 0,
        "8.2",
        "most aligned bytes live at one step: at least the largest buffer, at most all of them",
        value=got,
        buffers=buffers,
        alignment=alignment,
        got=got,
    )


# ---------------------------------------------------------------- 8.3 align


@graded("8.3", points=2)
def test_align():
    """
    contract: ``nbytes`` rounded up to a multiple of ``alignment`` (0 stays 0)
    """
    cases = {
        (0, 64): 0,
        (1, 64): 64,
        (63, 64): 64,
        (64, 64): 64,
        (65, 64): 128,
        (128, 64): 128,
        (5, 8): 8,
        (16, 16): 16,
        (17, 16): 32,
        (1000, 64): 1024,
        # past 2**53 a float division rounds: integers only
        (2**60 + 1, 64): 2**60 + 64,
        (2**53 + 1, 8): 2**53 + 8,
        (2**62 - 3, 4): 2**62,
    }
    for (n, a), want in cases.items():
        got = align(n, a)
        check(
            got == want,
            "8.3",
            "round up to a multiple",
            value=got,
            nbytes=n,
            alignment=a,
            got=got,
            expected=want,
        )


# ---------------------------------------------------------------- 8.4 greedy-by-size


def _placed(size, buffers) -> list:
    """The arena's size and every non-empty buffer's offset: the visiting order and the
    lowest free offset fix them (an empty buffer takes no bytes, so it is left out)."""
    return [size] + [b.offset for b in buffers if b.nbytes]


@graded("8.4", points=2)
def test_greedy_meets_the_bound_on_the_textbook_example():
    bs = textbook()
    size = greedy_by_size(bs)
    check(
        size == 124 * UNIT,
        "8.4",
        "greedy-by-size meets the lower bound here",
        value=size,
        got=size // UNIT,
        expected=124,
    )
    check(not overlaps(bs), "8.4", "live buffers overlap", buffers=bs, bad=overlaps(bs))
    check(no_reuse(fresh(bs)) == 234 * UNIT, "8.4", "example")


@graded("8.4", points=2)
def test_greedy_order_and_lowest_offset():
    """
    contract: Give every buffer an ``offset``, largest first; return the arena's size in bytes
    contract: Each goes at the lowest offset where its aligned bytes do not overlap
    contract: a gap between placed buffers included
    contract: (ties: earlier ``start``, then smaller ``slot``)
    """
    bs = [
        Buffer(1, 128, F32, 0, 1, [1]),
        Buffer(2, 64, F32, 1, 2, [2]),
        Buffer(3, 128, F32, 2, 3, [3]),
    ]
    size = greedy_by_size(bs)
    offs = [b.offset for b in bs]
    check(
        (size, offs) == (192, [0, 128, 0]),
        "8.4",
        "largest first, lowest free offset",
        value=[size, *offs],
        got=(size, offs),
        expected=(192, [0, 128, 0]),
    )
    # a hole below a placed buffer must be used when the new one fits in it
    bs = [
        Buffer(1, 256, F32, 0, 3, [1]),
        Buffer(2, 64, F32, 0, 3, [2]),
        Buffer(3, 64, F32, 4, 5, [3]),
        Buffer(4, 200, F32, 2, 5, [4]),
    ]
    size = greedy_by_size(bs)
    offs = [b.offset for b in bs]
    check(
        (size, offs) == (576, [0, 512, 0, 256]),
        "8.4",
        "fill gaps between placed buffers",
        value=[size, *offs],
        got=(size, offs),
        expected=(576, [0, 512, 0, 256]),
    )
    # equal sizes: the earlier start goes first, then the smaller slot (not the slot alone)
    bs = [
        Buffer(1, 64, F32, 2, 3, [1]),
        Buffer(2, 64, F32, 0, 3, [2]),
        Buffer(3, 64, F32, 0, 1, [3]),
    ]
    size = greedy_by_size(bs)
    offs = [b.offset for b in bs]
    check(
        (size, offs) == (128, [64, 0, 64]),
        "8.4",
        "ties in size: earlier start first (slot 2 starts at 0, slot 1 at 2), then smaller slot",
        value=[size, *offs],
        got=(size, offs),
        expected=(128, [64, 0, 64]),
    )


@graded("8.4", points=2)
@settings(max_examples=60)
@given(buffer_sets(max_n=14), st.sampled_from([64, 32]))
def test_greedy_random_is_safe_and_tight(buffers, alignment):
    """
    contract: any already placed buffer *whose life overlaps its own*
    """
    size = greedy_by_size(buffers, alignment)
    bad = overlaps(buffers)
    check(not bad, "8.4", "buffers live at the same time overlap", buffers=buffers, bad=bad)
    check(
        all(b.offset % alignment == 0 for b in buffers), "8.4", "offsets aligned", buffers=buffers
    )
    top = max((b.offset + align(b.nbytes, alignment) for b in buffers), default=0)
    check(
        size == top,
        "8.4",
        "return the arena's size",
        value=_placed(size, buffers),
        got=size,
        expected=top,
    )
    check(
        max((b.nbytes + -b.nbytes % alignment for b in buffers), default=0)
        <= size
        <= no_reuse(fresh(buffers), alignment),
        "8.4",
        "between the largest buffer and no reuse",
        size=size,
    )


# ---------------------------------------------------------------- 8.5 first-fit


@graded("8.5", points=2)
def test_first_fit_examples():
    """
    contract: each buffer takes the lowest offset free of buffers live at the same time
    contract: Set each ``offset``; return the arena's size
    """
    bs = [
        Buffer(1, 64, F32, 0, 1, [1]),
        Buffer(2, 128, F32, 1, 2, [2]),
        Buffer(3, 128, F32, 2, 3, [3]),
    ]
    size = first_fit(bs)
    offs = [b.offset for b in bs]
    check(
        (size, offs) == (320, [0, 64, 192]),
        "8.5",
        "execution order, lowest free offset",
        value=[size, *offs],
        got=(size, offs),
        expected=(320, [0, 64, 192]),
    )
    bs = textbook()
    size = first_fit(bs)
    check(
        size == 160 * UNIT,
        "8.5",
        "first-fit on the textbook example",
        value=size,
        got=size // UNIT,
        expected=160,
    )


@graded("8.5", points=1)
@settings(max_examples=50)
@given(buffer_sets(max_n=14))
def test_first_fit_random_is_safe(buffers):
    size = first_fit(buffers)
    bad = overlaps(buffers)
    check(not bad, "8.5", "buffers live at the same time overlap", buffers=buffers, bad=bad)
    top = max((b.offset + align(b.nbytes) for b in buffers), default=0)
    check(
        size == top and all(b.offset % 64 == 0 for b in buffers),
        "8.5",
        "aligned offsets; return the arena's size",
        value=_placed(size, buffers),
        got=size,
        expected=top,
    )


# ---------------------------------------------------------------- 8.6 in place


def _owner(buffers):
    return {s: b for b in buffers for s in b.slots + b.views}


@graded("8.6", points=2)
def test_inplace_rules():
    """
    contract: inputs and constants are absent: the caller holds them, never write over them
    contract: Return the first qualifying argument slot in ``step.args`` order
    contract: ``a`` has an owner ``b`` and ``a in b.slots``
    """
    # s1 = exp(x); s2 = neg(s1): s1 dies at step 1 -> in place
    plan = _plan([("exp", [0], None, None), ("neg", [1], None, None)], outputs=[2])
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(
        got == 1,
        "8.6",
        "an elementwise step may write over an input dying there",
        value=got,
        got=got,
    )
    check(
        inplace_source(plan, 0, _owner(liveness(plan))) is None,
        "8.6",
        "never over a graph input (the caller holds it)",
    )
    # s1 still read later
    plan = _plan(
        [("exp", [0], None, None), ("neg", [1], None, None), ("add", [1, 2], None, None)],
        outputs=[3],
    )
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(got is None, "8.6", "s1 is read again at step 2: writing over it clobbers it", got=got)
    got = inplace_source(plan, 2, _owner(liveness(plan)))
    check(got == 1, "8.6", "the first qualifying argument", value=got, got=got, expected=1)
    # s4 = where(s3, s1, s2) with s3 = permute(s1): s1 is refused (s3, another argument, is
    # a view of its buffer) but the next argument, s2, still qualifies
    sq, bools = (3, 3), np.dtype(bool)
    plan = _plan(
        [
            ("gt", [0, 0], sq, bools),
            ("lt", [0, 0], sq, bools),
            ("permute", [1], sq, bools),
            ("where", [3, 1, 2], sq, bools),
        ],
        outputs=[4],
        shape=sq,
    )
    got = inplace_source(plan, 3, _owner(liveness(plan)))
    check(
        got == 2,
        "8.6",
        "an argument refused for a view of it among the others: try the next argument",
        value=text(got),
        got=got,
        expected=2,
    )
    # s1 = exp(x); s2 = neg(s1) written over s1; s3 = tanh(s2): s2 is the buffer's second
    # slot (computed into it in C order), so s3 may write over it too
    plan = _plan(
        [("exp", [0], None, None), ("neg", [1], None, None), ("tanh", [2], None, None)],
        outputs=[3],
    )
    b1, b2, b3 = liveness(plan)
    b1.slots, b1.end = b1.slots + b2.slots, b2.end  # what the runner does after 8.6 said 1
    owner = {1: b1, 2: b1, 3: b3}
    got = inplace_source(plan, 2, owner)
    check(got == 2, "8.6", "an argument in its buffer's slots (not only the first) qualifies",
          value=text(got), got=got, expected=2, slots=b1.slots)  # fmt: skip


@graded("8.6", points=2)
def test_inplace_refusals():
    """
    contract: so only it may write in place
    contract: not one of ``b.views``: a transposed read of the memory being written is clobbered
    contract: ``b.end == index``: nobody reads it
    contract: ``b.nbytes == step_nbytes(step)`` and ``b.dtype == step.spec.dtype``
    contract: no *other* argument slot of this step is a view of ``b``
    """
    sq = (3, 3)
    # s2 = permute(s1); s3 = add(s1, s2): the transposed read would see overwritten values
    plan = _plan(
        [("exp", [0], sq, None), ("permute", [1], sq, None), ("add", [1, 2], sq, None)],
        outputs=[3],
        shape=sq,
    )
    got = inplace_source(plan, 2, _owner(liveness(plan)))
    check(
        got is None,
        "8.6",
        "never under a live view of another layout",
        value=text(got),
        got=got,
    )
    plan = _plan(
        [("exp", [0], sq, None), ("permute", [1], sq, None), ("neg", [2], sq, None)],
        outputs=[3],
        shape=sq,
    )
    got = inplace_source(plan, 2, _owner(liveness(plan)))
    check(
        got is None,
        "8.6",
        "not into a view's memory: its layout is not C order",
        value=text(got),
        got=got,
    )
    plan = _plan([("exp", [0], None, None), ("cast", [1], None, I32)], outputs=[2])
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(got is None, "8.6", "same bytes, another dtype: no", value=text(got), got=got)
    plan = _plan([("exp", [0], None, None), ("cast", [1], (2, 3), F64)], outputs=[2])
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(got is None, "8.6", "a larger result cannot fit", value=text(got), got=got)
    plan = _plan([("exp", [0], (2, 3), None), ("sum", [1], (1, 3), None)], outputs=[2])
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(got is None, "8.6", "only elementwise steps write in place", value=text(got), got=got)
    plan = _plan([("exp", [0], sq, None), ("matmul", [1, 0], sq, None)], outputs=[2], shape=sq)
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(
        got is None,
        "8.6",
        "matmul reads a whole row while writing: never in place",
        value=text(got),
        got=got,
    )
    plan = _plan([("exp", [0], (1, 3), None), ("add", [1, 0], (2, 3), None)], outputs=[2])
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(
        got is None,
        "8.6",
        "a smaller input cannot hold a broadcast result",
        value=text(got),
        got=got,
    )
    plan = _plan([("exp", [0], None, None), ("neg", [1], None, None)], outputs=[1, 2])
    got = inplace_source(plan, 1, _owner(liveness(plan)))
    check(got is None, "8.6", "never over a graph output", value=text(got), got=got)


@graded("8.6", points=2)
@settings(max_examples=40)
@given(programs())
def test_inplace_never_clobbers(prog):
    from .util import as_list

    planned = compile_program(prog, memory=True, inplace=True)
    plain = compile_program(prog, memory=False)
    n, inputs, _, _ = prog
    import minitorch

    xs = [minitorch.tensor(a) for a in inputs]
    before = [a.copy() for a in inputs]
    got, want = as_list(planned(*xs)), as_list(plain(*xs))
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))
    check(
        same,
        "8.6",
        "in-place reuse changed a result",
        value=text(planned.memory_plan().inplace),
        plan=planned.plan.text(),
        memory=planned.memory_plan().text(),
    )
    check(
        all(np.array_equal(x.numpy(), b, equal_nan=True) for x, b in zip(xs, before)),
        "8.6",
        "an input was written over",
    )


# ---------------------------------------------------------------- 8.7 checker


@graded("8.7", points=1)
def test_checker_example():
    """
    contract: Report ``(a.slot, b.slot)`` with ``a.slot < b.slot``
    contract: (empty buffers overlap nothing)
    contract: negative or not a multiple of ``alignment``; such a buffer is in no pair
    contract: Return the list sorted.
    """
    bs = [Buffer(1, 64, F32, 0, 1, [1], offset=0), Buffer(2, 64, F32, 1, 2, [2], offset=0)]
    got = check_assignment(bs)
    check(got == [(1, 2)], "8.7", "lives touch at step 1 and bytes coincide", value=got, got=got)
    bs[1].offset = 64
    check(
        check_assignment(bs) == [],
        "8.7",
        "adjacent bytes do not overlap",
        value=check_assignment(bs),
        got=check_assignment(bs),
    )
    bs[0].offset, bs[1].offset = 64, 0  # the same, listed the other way round
    check(
        check_assignment(bs) == [],
        "8.7",
        "adjacent bytes do not overlap: [offset, offset + nbytes) is half-open",
        value=check_assignment(bs),
        got=check_assignment(bs),
    )
    bs[0].offset = 0
    bs[1].offset = 32
    check(
        check_assignment(bs) == [(2, 2)],
        "8.7",
        "a misaligned offset is reported as (s, s)",
        value=check_assignment(bs),
        got=check_assignment(bs),
    )
    bs = [Buffer(1, 64, F32, 0, 1, [1], offset=0), Buffer(2, 0, F32, 0, 1, [2], offset=0)]
    check(
        check_assignment(bs) == [],
        "8.7",
        "an empty buffer overlaps nothing",
        value=check_assignment(bs),
        got=check_assignment(bs),
    )
    # pairs are (smaller slot, larger slot) whatever order the buffers come in; the list is
    # sorted; a negative or missing offset is reported like a misaligned one
    bs = [
        Buffer(7, 64, F32, 0, 3, [7], offset=0),
        Buffer(4, 64, F32, 2, 3, [4], offset=0),
        Buffer(2, 64, F32, 0, 1, [2], offset=-64),
        Buffer(5, 64, F32, 0, 1, [5], offset=None),
        Buffer(9, 64, F32, 1, 2, [9], offset=32),
        Buffer(1, 64, F32, 0, 0, [1], offset=0),
    ]
    got = check_assignment(bs)
    want = [(1, 7), (2, 2), (4, 7), (5, 5), (9, 9)]
    check(
        got == want,
        "8.7",
        "sorted (smaller, larger) pairs; negative and None offsets are reported as (s, s)",
        value=got,
        got=got,
        expected=want,
    )
    # the alignment argument decides: offset 32 is fine at 16 and 32, misaligned at 64
    bs = [Buffer(1, 16, F32, 0, 1, [1], offset=0), Buffer(2, 16, F32, 0, 1, [2], offset=32)]
    got = {a: check_assignment(bs, a) for a in (16, 32, 64)}
    want = {16: [], 32: [], 64: [(2, 2)]}
    check(
        got == want,
        "8.7",
        "an offset is checked against the alignment given, not always 64",
        value=text(got),
        got=got,
        expected=want,
    )


@graded("8.7", points=2)
@settings(max_examples=60)
@given(buffer_sets(max_n=8, max_step=5), st.data())
def test_checker_random(buffers, data):
    """
    contract: for every pair whose lives overlap
    contract: Quadratic time is fine: this runs in tests
    """
    for b in buffers:
        b.offset = 64 * data.draw(st.integers(0, 6))
    for b in buffers[:1]:
        b.offset += data.draw(st.sampled_from([0, 0, 8]))
    want = sorted(
        [(b.slot, b.slot) for b in buffers if b.offset % 64]
        + [tuple(sorted(p)) for p in overlaps([b for b in buffers if b.offset % 64 == 0])]
    )
    got = check_assignment(buffers)
    check(
        got == want,
        "8.7",
        "every overlapping pair, every misaligned buffer",
        value=got,
        buffers=buffers,
        got=got,
        expected=want,
    )
