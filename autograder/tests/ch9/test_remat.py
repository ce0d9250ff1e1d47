"""Graded tests, chapter 9 (remat): recompute or save (9.11), graded on peak memory.

Any choice may be right, so nothing here compares with the reference's nodes: every choice
must be a list of forward ops of its graph (``rematerialize`` accepts it), must leave the
graph as it was, must keep the recomputation within the work budget (a quarter of the
forward's work), and the points grow with how low the rematerialized steps' peaks are on
the suite (``remat_suite.SUITE``: eight training steps, traced by the course's code and
frozen). Peaks and work are counted here, from the graphs' specs (:func:`_peak`,
:func:`_work`), never through the learner's code.

Measured on the suite (mean over its 8 steps of peak / the peak when everything is saved):
saving everything 1.000, recomputing every cheap forward op (no matmul) 0.865, every cheap
op the backward reads 0.881, the reference 0.807. Recomputing the whole forward costs as
much work as the forward: over the budget.
"""

from __future__ import annotations

from autograder.harness import check, graded
from minitorch.compile.remat import choose_recompute, rematerialize
from minitorch.core.errors import OpError
from minitorch.core.registry import OPS, OpKind

from .remat_suite import SUITE, build

BUDGET = 0.25  # recomputation may cost this share of the forward's work


def _view(n) -> bool:
    op = OPS.get(n.op)
    return op is not None and op.kind is OpKind.VIEW


def _peak(graph) -> int:
    """Most bytes alive at once in node order: an op's values (``size * itemsize``, a view's
    are its base's) from its node to the last node reading them; outputs to the end."""
    pos = {n: i for i, n in enumerate(graph.nodes)}
    base, end = {}, {}
    for i, n in enumerate(graph.nodes):
        if n.op in ("input", "const"):
            base[n] = None
        elif _view(n):
            base[n] = base.get(n.inputs[0])
        else:
            base[n], end[n] = n, i
        for x in n.inputs:
            if base.get(x) is not None:
                end[base[x]] = max(end[base[x]], i)
    for o in graph.outputs:
        if base.get(o) is not None:
            end[base[o]] = len(graph.nodes)
    events = sorted(
        [(pos[b], b.spec.size * b.spec.dtype.itemsize) for b in end]
        + [(e + 1, -b.spec.size * b.spec.dtype.itemsize) for b, e in end.items()],
        key=lambda ev: (ev[0], ev[1] > 0),  # what dies at a step frees before what is born
    )
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    return peak


def _work(n) -> int:
    if n.op in ("input", "const") or _view(n):
        return 0
    if n.op == "matmul":
        return n.spec.size * n.inputs[0].spec.shape[-1]
    return max([n.spec.size] + [i.spec.size for i in n.inputs])


def _baseline() -> list:
    """Per step: (peak when everything is saved, forward work): the values sent."""
    out = []
    for name in SUITE:
        g, k = build(name)
        out += [_peak(g), sum(_work(n) for n in g.nodes[:k])]
    return out


def _run() -> tuple[dict, dict]:
    """Each step's choice rematerialized: {name: what went wrong} and
    {name: (peak, peak saving everything, recomputed work, forward work)}."""
    wrong, figures = {}, {}
    for name in SUITE:
        g, k = build(name)
        before = g.text()
        try:
            chosen = choose_recompute(g, k)
        except Exception as e:  # noqa: BLE001 - the learner's error, reported per step
            wrong[name] = f"choose_recompute raised {type(e).__name__}: {e}"
            continue
        if g.text() != before:
            wrong[name] = "choose_recompute changed the graph: decide only"
            continue
        try:
            r = rematerialize(g, k, chosen)
        except OpError as e:
            wrong[name] = f"rematerialize refused the choice: {e}"
            continue
        n_copies = len(r.nodes) - len(g.nodes)
        copies = r.nodes[k:]
        copies = [c for c in copies if c.name.endswith("_r")]
        if len(copies) != n_copies:
            wrong[name] = "the rematerialized graph is not the choice's"
            continue
        forward = sum(_work(n) for n in g.nodes[:k])
        figures[name] = (_peak(r), _peak(g), sum(_work(c) for c in copies), forward)
    return wrong, figures


# ---------------------------------------------------------------- validity


@graded("9.11", points=2)
def test_recompute_choice_accepted():
    """contract: Return a list of forward ops
    contract: Any choice is allowed and gives the same values
    """
    wrong, _ = _run()
    check(
        not wrong,
        "9.11",
        "return a list of forward ops of the graph (not inputs, constants or backward nodes)",
        value=_baseline(),
        wrong=wrong,
    )


def _unoptimised(name):
    """Suite step ``name`` with a forward op nobody reads (``exp`` of the first forward op)
    at the end of its forward: a graph no pass has cleaned, as a caller may hand over."""
    g, k = build(name)
    src = next(n for n in g.nodes[:k] if n.op not in ("input", "const"))
    dead = g.add_node("exp", [src], {}, src.spec)
    g.nodes.remove(dead)
    g.nodes.insert(k, dead)
    return g, k + 1


@graded("9.11", points=1)
def test_recompute_leaves_the_graph_unchanged():
    """contract: Decide only: leave ``graph`` unchanged"""
    changed, shapes, sizes = [], {}, []
    cases = [(name, lambda name=name: build(name)) for name in SUITE]
    cases += [(f"{name} (with a dead op)", lambda name=name: _unoptimised(name))
              for name in list(SUITE)[:2]]  # fmt: skip
    for name, make in cases:
        g, k = make()
        before = g.text()
        chosen = choose_recompute(g, k)
        if g.text() != before:
            changed.append(name)
        forward = {n for n in g.nodes[:k] if n.op not in ("input", "const")}
        if not isinstance(chosen, (list, tuple, set, frozenset)) or not all(
            n in forward for n in chosen
        ):
            shapes[name] = type(chosen).__name__
        sizes.append(len(g.nodes))
    check(
        not shapes,
        "9.11",
        "return a list of forward ops of the graph it was given",
        returned=shapes,
    )
    check(
        not changed,
        "9.11",
        "choose_recompute changed the graph: decide only, rematerialize builds the copies",
        value=sizes,
        steps=changed,
    )


@graded("9.11", points=2)
def test_recompute_within_the_work_budget():
    wrong, figures = _run()
    check(not wrong, "9.11", "a choice was refused or changed its graph", wrong=wrong)
    over = {
        name: f"{work / forward:.3f}"
        for name, (_, _, work, forward) in figures.items()
        if work > BUDGET * forward
    }
    check(
        not over,
        "9.11",
        f"the copies may cost at most {BUDGET} of the forward's work (a matmul is m*n*k: "
        "recompute cheap ops, or a matmul of a layer or two)",
        value=_baseline(),
        over_budget=over,
    )


# ---------------------------------------------------------------- outcome


def _outcome(limit: float) -> None:
    wrong, figures = _run()
    check(not wrong, "9.11", "a choice was refused or changed its graph", wrong=wrong)
    over = [n for n, (_, _, work, forward) in figures.items() if work > BUDGET * forward]
    check(not over, "9.11", f"over the work budget ({BUDGET} of the forward)", steps=over)
    ratios = {name: peak / saved for name, (peak, saved, _, _) in figures.items()}
    mean = sum(ratios.values()) / len(ratios)
    check(
        mean <= limit,
        "9.11",
        f"mean peak / the peak saving everything over the suite {mean:.3f}; "
        f"this tier needs {limit} or less (recomputing every cheap op: 0.865)",
        value=_baseline(),
        ratios="; ".join(f"{n} {r:.3f}" for n, r in ratios.items()),
    )


@graded("9.11", points=1)
def test_recompute_outcome_lowers_the_peak():
    _outcome(0.97)


@graded("9.11", points=2)
def test_recompute_outcome_a_tenth_lower():
    _outcome(0.90)


@graded("9.11", points=2)
def test_recompute_outcome_beats_recomputing_every_cheap_op():
    # every cheap op 0.865; the reference 0.807: a layer's matmul recomputed where the
    # budget allows, and ops left saved where recomputing them keeps their inputs alive
    _outcome(0.84)
