"""Graded tests, chapter 6: a rewrite pass of your own (6.11), graded on its outcome.

Any rewrite may be right, so nothing here compares with the reference's rewrites: the
compiled programs must give eager's bits, the count must say whether the graph changed,
and the points grow with how few ops are left on the suite (``open_suite.SUITE``).
"""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import check, graded, text
from minitorch.passes import DEFAULT_PIPELINE, MORE_PIPELINE, clone_graph, optimize, simplify_more

from .open_suite import SUITE, TRAPS
from .util import MODES_TOL, flat, users_consistent


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and values, NaN where eager has NaN, the sign of every zero."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not np.array_equal(a, b, equal_nan=True):
        return False
    return a.dtype.kind != "f" or np.array_equal(np.signbit(a) & (a == 0), np.signbit(b) & (b == 0))


def _as_list(out) -> list[np.ndarray]:
    out = out if isinstance(out, (tuple, list)) else [out]
    return [o.numpy() for o in out]


def _compiled(programs: dict) -> tuple[dict, list, list]:
    """Each program eager and compiled with MORE_PIPELINE: {name: why it differs}, the
    compiled outputs, and the names of the programs whose compile never ran 6.11."""
    differ, outs, skipped = {}, [], []
    for name, (fn, arrays) in programs.items():
        tensors = [minitorch.tensor(a) for a in arrays]
        want = _as_list(fn(*tensors))
        # traced and compiled here, not through jit's cache (shared by every jit of fn)
        compiled = minitorch.jit(fn).trace(*tensors).compile(passes=MORE_PIPELINE)
        got = _as_list(compiled(*tensors))
        if not any(s.name == "simplify_more" for s in compiled.stats):
            skipped.append(name)
        bad = [k for k, (g, w) in enumerate(zip(got, want)) if not _bits_equal(g, w)]
        if len(got) != len(want) or bad:
            differ[name] = f"output {bad[0] if bad else 'count'} differs from eager"
        outs += want if name in differ else got
    return differ, outs, skipped


def _remaining(passes) -> dict:
    """Ops (nodes other than inputs and constants) each suite program keeps after ``passes``,
    counted on what the outputs still reach."""
    left = {}
    for name, (fn, arrays) in SUITE.items():
        g = minitorch.jit(fn).trace(*[minitorch.tensor(a) for a in arrays])
        optimize(g, passes)
        seen, todo = set(), list(g.outputs)
        while todo:
            n = todo.pop()
            if id(n) not in seen:
                seen.add(id(n))
                todo += n.inputs
        left[name] = sum(1 for n in g.nodes if id(n) in seen and n.op not in ("input", "const"))
    return left


def _rewrites_something() -> int:
    """On how many traced suite programs the pass changed the graph (whatever it returns)."""
    changed = 0
    for fn, arrays in SUITE.values():
        g = minitorch.jit(fn).trace(*[minitorch.tensor(a) for a in arrays])
        before = g.text()
        simplify_more(g)
        changed += g.text() != before
    return changed


def _copies(fn, n: int, k: int):
    """``fn`` run on ``k`` independent sets of its ``n`` inputs, every output returned."""
    return minitorch.jit(lambda *xs: tuple(fn(*xs[i * n : (i + 1) * n]) for i in range(k)))


@graded("6.11", points=2)
def test_simplify_more_keeps_eager_bits():
    """
    contract: Any rewrite is allowed, on one condition: the compiled program must give eager's answer bit for bit on every input: NaN, inf, -inf and -0.0 (its sign) included, integer and bool dtypes, broadcasting, every output's shape and dtype.
    """
    made = _rewrites_something()
    check(made > 0, "6.11", "the pass rewrote nothing on the suite", got=made)
    programs = {**SUITE, **TRAPS}
    differ, outs, skipped = _compiled(programs)
    check(
        not skipped,
        "6.11",
        "simplify_more did not run in the MORE_PIPELINE compile (see minitorch.explain)",
        programs=skipped,
    )
    check(
        not differ,
        "6.11",
        "a compiled program differs from eager (NaN, inf, -0.0, ints and broadcasting count)",
        value=flat(outs),
        tol=MODES_TOL,
        differ=differ,
    )


@graded("6.11", points=1)
def test_simplify_more_counts_and_keeps_the_graph_sound():
    """
    contract: Rewrite ``graph`` in place so it computes the same with fewer ops; return how many rewrites.
    contract: Count one rewrite per node you replace (its uses rerouted to another node) or change in place; return 0 exactly when the graph is unchanged
    """
    made = _rewrites_something()
    check(made > 0, "6.11", "the pass rewrote nothing on the suite", got=made)
    wrong, broken = {}, {}
    for name, (fn, arrays) in {**SUITE, **TRAPS}.items():
        traced = minitorch.jit(fn).trace(*[minitorch.tensor(a) for a in arrays])
        for stage, g in (("traced", clone_graph(traced)), ("after", clone_graph(traced))):
            if stage == "after":
                optimize(g, MORE_PIPELINE)
            before = g.text()
            count = simplify_more(g)
            changed = g.text() != before
            if type(count) is not int or count < 0 or (count == 0) == changed:
                wrong[f"{name}/{stage}"] = (count, "changed" if changed else "unchanged")
            try:
                g.verify()
            except minitorch.OpError as e:
                broken[f"{name}/{stage}"] = str(e)
            if not users_consistent(g):
                broken[f"{name}/{stage}"] = "users lists disagree with inputs lists"
        # three independent copies of a program: three times the rewrites of one
        one = simplify_more(clone_graph(traced))
        copies = _copies(fn, len(arrays), 3).trace(*[minitorch.tensor(a) for a in arrays * 3])
        three = simplify_more(copies)
        if three != 3 * one:
            wrong[f"{name}/3 copies"] = (one, three)
    check(not broken, "6.11", "the rewritten graph is not well formed", broken=broken)
    check(
        not wrong,
        "6.11",
        "return the number of rewrites: 0 exactly when the graph is unchanged",
        value=text(sorted(wrong)),
        wrong=wrong,
    )


def _outcome(fraction: float) -> None:
    differ, outs, _ = _compiled(SUITE)
    check(not differ, "6.11", "a compiled program differs from eager", differ=differ)
    default, mine = _remaining(DEFAULT_PIPELINE), _remaining(MORE_PIPELINE)
    limit = int(fraction * sum(default.values()))
    check(
        sum(mine.values()) <= limit,
        "6.11",
        f"{sum(mine.values())} ops left on the suite; this tier needs {limit} or fewer "
        f"({fraction:.0%} of the default pipeline's {sum(default.values())})",
        value=flat(outs),
        tol=MODES_TOL,
        left=mine,
        default=default,
    )


@graded("6.11", points=2)
def test_simplify_more_outcome_removes_a_tenth():
    _outcome(0.9)


@graded("6.11", points=2)
def test_simplify_more_outcome_removes_two_fifths():
    _outcome(0.6)
