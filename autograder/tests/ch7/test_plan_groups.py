"""Graded tests, chapter 7: your own fusion plan (7.11), graded on the bytes it moves.

Any plan may be right, so nothing here compares with the reference's groups: every
group the plan proposes must be accepted by the fuse pass (the course's rules), the
compiled programs must give eager's answer, ``choose_groups`` must leave the graph as
it was, and the points grow with how few bytes the compiled plans move on the suite
(``plan_suite.SUITE``). The bytes are counted here, from the final graph's specs
(:func:`_bytes`), never through the learner's code.

Measured on the suite (mean over its 9 programs of bytes / the unfused plan's bytes):
the greedy fuser's groups (7.1-7.5) 0.640, the reference 0.466. On the five programs
where a chain is read by two groups (softmax, log_softmax, layer_norm, two_heads,
attention) recomputing it saves a quarter to a third of the greedy plan's bytes.
"""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import check, graded
from minitorch.core.registry import OPS, OpKind
from minitorch.fusion import PLANNED, choose_groups
from minitorch.passes import CompileOptions, optimize

from ..ch6.util import MODES_TOL, flat
from .plan_suite import SUITE, TRAPS

UNFUSED = CompileOptions()


def _bytes(graph) -> int:
    """Bytes the plan of ``graph`` moves: each kernel (a fused node, or an op that is not
    a view) reads each distinct input once and writes its output once; a value's bytes
    are its spec's size times its dtype's itemsize. Inputs, constants and views move
    nothing themselves."""
    total = 0
    for n in graph.nodes:
        op = OPS.get(n.op)
        if n.op in ("input", "const") or (op is not None and op.kind is OpKind.VIEW):
            continue
        for v in [n, *dict.fromkeys(n.inputs)]:
            total += v.spec.size * v.spec.dtype.itemsize
    return total


def _as_list(out) -> list[np.ndarray]:
    out = out if isinstance(out, (tuple, list)) else [out]
    return [o.numpy() for o in out]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Eager's answer: shape, dtype, NaN and infinities in place; integers and bools
    exactly, floats to the last bits (a fused reduction sums in another order)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    inf = np.isinf(want)
    if not np.array_equal(got[inf], want[inf]):
        return False
    return bool(np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True))


def _compile(fn, tensors, options):
    """``fn`` traced and compiled here, not through jit's cache: the compiled plan and
    why it failed ("" when it did not)."""
    traced = minitorch.jit(fn).trace(*tensors)
    try:
        return traced.compile(options=options), ""
    except minitorch.OpError as e:
        return None, str(e)


def _run(programs: dict) -> tuple[dict, list, dict]:
    """Each program compiled with ``PLANNED``: {name: what went wrong}, eager's outputs,
    and {name: (bytes of the plan, bytes unfused)} for the programs that compiled."""
    wrong, outs, figures = {}, [], {}
    for name, (fn, arrays) in programs.items():
        tensors = [minitorch.tensor(a) for a in arrays]
        want = _as_list(fn(*tensors))
        outs += want
        compiled, error = _compile(fn, tensors, PLANNED)
        if compiled is None:
            wrong[name] = f"the fuse pass refused the plan: {error}"
            continue
        unit = getattr(compiled, "unit", None)
        if unit is None or "fuse" in unit.skipped or unit.fusion is None:
            wrong[name] = "the fuse stage did not run choose_groups (see minitorch.explain)"
            continue
        got = _as_list(compiled(*tensors))
        bad = [k for k, (g, w) in enumerate(zip(got, want)) if not _same(g, w)]
        if len(got) != len(want) or bad:
            wrong[name] = f"output {bad[0] if bad else 'count'} differs from eager"
            continue
        unfused = _compile(fn, tensors, UNFUSED)[0]
        figures[name] = (_bytes(compiled.graph), _bytes(unfused.graph))
    return wrong, outs, figures


def _graph_of(fn, arrays):
    g = minitorch.jit(fn).trace(*[minitorch.tensor(a) for a in arrays])
    optimize(g)  # the passes run before the fuse stage
    return g


# ---------------------------------------------------------------- validity


@graded("7.11", points=2)
def test_plan_accepted_on_the_suite():
    """
    contract: Any partition is allowed as long as every group is legal
    contract: A group is a list of nodes of ``graph`` (ops, not inputs or constants)
    """
    wrong, outs, _ = _run(SUITE)
    check(
        not wrong,
        "7.11",
        "every group must be legal and the compiled programs must give eager's answer",
        value=flat(outs),
        tol=MODES_TOL,
        wrong=wrong,
    )


@graded("7.11", points=2)
def test_plan_accepted_on_hard_programs():
    """
    contract: the compiled program must give eager's answer
    contract: The course's rules decide the rest
    """
    # graph outputs inside chains, opaque ops, an anchor's computed operands, two
    # reductions, integers, views, reductions broadcast back; NaN, inf and -0.0
    wrong, outs, _ = _run(TRAPS)
    check(
        not wrong,
        "7.11",
        "every group must be legal and the compiled programs must give eager's answer",
        value=flat(outs),
        tol=MODES_TOL,
        wrong=wrong,
    )


@graded("7.11", points=1)
def test_plan_leaves_the_graph_unchanged():
    """
    contract: Decide only: leave ``graph`` unchanged
    """
    changed, shapes, outs = [], {}, []
    # and a graph with no ops at all (its output is its input): nothing to group
    no_ops = {"no ops": (lambda x: x, [np.arange(3.0, dtype=np.float32)])}
    for name, (fn, arrays) in {**SUITE, **TRAPS, **no_ops}.items():
        g = _graph_of(fn, arrays)
        before = g.text()
        plan = choose_groups(g)
        if g.text() != before:
            changed.append(name)
        nodes = set(g.nodes)
        if not isinstance(plan, list) or not all(
            isinstance(group, list) and all(n in nodes for n in group) for group in plan
        ):
            shapes[name] = type(plan).__name__
        outs += _as_list(fn(*[minitorch.tensor(a) for a in arrays]))
    check(
        not shapes,
        "7.11",
        "return a list of groups, each a list of nodes of the graph it was given",
        returned=shapes,
    )
    check(
        not changed,
        "7.11",
        "choose_groups changed the graph: decide only, the fuse pass builds the groups",
        value=flat(outs),
        tol=MODES_TOL,
        programs=changed,
    )


# ---------------------------------------------------------------- outcome


def _outcome(limit: float) -> None:
    wrong, outs, figures = _run(SUITE)
    check(not wrong, "7.11", "a plan was refused or differs from eager", wrong=wrong)
    ratios = {name: mine / unfused for name, (mine, unfused) in figures.items()}
    mean = sum(ratios.values()) / len(ratios)
    check(
        mean <= limit,
        "7.11",
        f"mean bytes moved / the unfused plan's over the suite {mean:.3f}; "
        f"this tier needs {limit} or less (the greedy fuser: 0.640)",
        value=flat(outs),
        tol=MODES_TOL,
        ratios="; ".join(f"{n} {r:.3f}" for n, r in ratios.items()),
    )


@graded("7.11", points=1)
def test_plan_outcome_fuses():
    _outcome(0.80)


@graded("7.11", points=1)
def test_plan_outcome_as_good_as_greedy():
    _outcome(0.66)


@graded("7.11", points=1)
def test_plan_outcome_beats_greedy():
    # greedy 0.640: recomputing the chains that two groups read is needed here
    _outcome(0.56)


@graded("7.11", points=2)
def test_plan_outcome_beats_greedy_by_a_quarter():
    # the reference 0.466: chains recomputed and the anchor's epilogue cut at the small value
    _outcome(0.49)
