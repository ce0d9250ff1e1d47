"""A result kept from an earlier call cannot earn a benchmark's figure.

A benchmark that times one fixed input throughout lets learner code keep a
result and return it again: right every time, and free (``tests/hostile/
bench_memo_*.py``). Here every graded benchmark's ``compare`` calls are read
from the source; each must vary its inputs between samples (``vary=``), or be
one whose kept result is wrong or earns nothing for a reason stated here:
derived from the call (``stateful``, only the course's sides, a fresh process,
not timed) or listed in ``FIXED`` (a known gap). The test fails when a
benchmark has no reason, or a listed one no longer needs it.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest

from autograder.grader.manifest import ROOT, chapters, graded_items

ITEMS = [i for c in chapters() for i in graded_items(c) if i.kind == "benchmark"]

# Benchmarks that still time one input a kept result is right for (no ``vary``): each a
# known gap, with why ``perturb`` cannot close it as it is.
FIXED = {
    "6.2": "compile() of one fixed graph: a compiled graph kept from an earlier call is right "
    "for any input values",
    "8.4": "the planner's input is a list of buffers, not an array perturb can change; the "
    "offsets it writes stay on the Buffers, so a plan can be kept",
}


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == name), None)


def _calls(item) -> list[ast.Call]:
    """The ``compare`` and ``fresh`` calls the benchmark makes, in its body or in a function of
    its module it calls (10.1's ``_best``)."""
    path, func = item.nodeid.split("::")
    tree = ast.parse((ROOT / path).read_text())
    found, todo, seen = [], [func], set()
    while todo:
        fn = _function(tree, todo.pop())
        if fn is None or fn.name in seen:
            continue
        seen.add(fn.name)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("compare", "fresh"):
                    found.append(node)
                else:
                    todo.append(node.func.id)
    return found


def _keyword(call: ast.Call, name: str):
    kw = next((k for k in call.keywords if k.arg == name), None)
    return None if kw is None else (kw.value.value if isinstance(kw.value, ast.Constant) else kw)


def _sides(call: ast.Call) -> set[str]:
    arg = call.args[0] if call.args else None
    keys = arg.keys if isinstance(arg, ast.Dict) else []
    return {k.value for k in keys if isinstance(k, ast.Constant)}


def _why_a_kept_result_fails(item, call: ast.Call) -> str:
    """Why a result kept from an earlier call of this ``compare`` earns nothing, or ""."""
    if call.func.id == "fresh":
        return "one call in a fresh process: nothing earlier to keep but the cache it measures"
    if _keyword(call, "vary") is not None:
        return "its inputs change before every sample"
    if _keyword(call, "stateful") is True:
        return "each call changes the next one's result, and every call is replayed"
    if _sides(call) and _sides(call) <= set(item.baseline):
        return "it times only the course's code"
    return ""


def _reason(item) -> str:
    if not item.formula:
        return "not timed by the parent"
    calls = _calls(item)
    assert calls, f"{item.nodeid}: a timed benchmark without compare or fresh"
    reasons = [_why_a_kept_result_fails(item, c) for c in calls]
    return "" if "" in reasons else "; ".join(sorted(set(reasons)))


@pytest.mark.parametrize("item", ITEMS, ids=lambda i: f"{i.exercise}-{i.name}")
def test_a_kept_result_cannot_earn_a_figure(item):
    reason = _reason(item)
    if item.exercise in FIXED and not reason:
        return
    assert reason, (
        f"{item.exercise} {item.name} times one fixed input: vary it, or say why in FIXED"
    )
    assert item.exercise not in FIXED, (
        f"{item.exercise} is varied now ({reason}): drop it from FIXED"
    )


def test_every_fixed_entry_is_a_graded_benchmark():
    assert set(FIXED) <= {i.exercise for i in ITEMS}


def test_a_stateful_step_never_returns_an_earlier_loss():
    """9.4 and 9.5 (``stateful=True``) compare the loss of every sample's last call with the
    course's replay of every call: a step that skipped its update and returned a kept loss
    would pass if consecutive losses were within the benchmarks' tolerance. Over 600 calls
    (a grading makes about 300 of a side) they never are."""
    from autograder.tests.ch9.bench_train import _mlp_steps

    eager, _, x, y = _mlp_steps("default")
    rtol, atol = 1e-4, 1e-5  # the benchmarks' tol
    losses = np.array([eager(x, y).item() for _ in range(600)])
    gap = np.abs(np.diff(losses)) - (atol + rtol * np.abs(losses[1:]))
    assert (gap > 0).all(), f"steps {int(np.argmin(gap))} and after agree within the tolerance"


def test_a_trace_kept_from_an_earlier_sample_computes_the_wrong_thing():
    """5.1 times ``trace()``, whose graph depends on the shapes, not the values: it redraws
    which op each step records before every sample, so a kept graph is wrong there."""
    import minitorch
    from autograder.tests.ch5.bench_tracing import _alternate, _chain, _inputs, _numpy_chain
    from minitorch.tracing import interpret

    xn, yn, x, y = _inputs(4, 4)
    kinds = _alternate(400)
    graph = minitorch.jit(_chain(400, kinds)).trace(x, y)
    kinds[:] = np.random.default_rng(1).integers(0, 2, len(kinds)).tolist()
    want = _numpy_chain(400, xn, yn, kinds)
    assert not np.allclose(interpret(graph, x, y).numpy(), want, rtol=1e-4, atol=1e-5)
    assert np.allclose(interpret(minitorch.jit(_chain(400, kinds)).trace(x, y), x, y).numpy(),
                       want, rtol=1e-4, atol=1e-5)  # fmt: skip
