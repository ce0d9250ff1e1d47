"""Graded tests, chapter 6: the pass manager (6.8), lowering (6.9) and running a plan (6.10)."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import given, settings

import minitorch
from autograder.harness import check, graded, text
from minitorch.core import registry
from minitorch.passes import kernel_for, lower, optimize, run_plan, run_to_fixed_point
from minitorch.passes.plan import Plan

from .util import MODES_TOL, cases, check_pass, flat, outputs, same_outputs

# ---------------------------------------------------------------- 6.8


def _scripted(name, changes, calls):
    it = iter(changes)

    def p(graph):
        calls.append(name)
        return next(it, 0)

    return name, p


@graded("6.8", points=2)
def test_fixed_point_counts_rounds_and_reports_each_pass():
    """
    contract: Run ``passes`` (a list of ``(name, fn)``) in order, round after round; return the rounds run.
    contract: A round runs every pass once, in list order, ``changes = fn(graph)``, and after each pass calls ``after_pass(name, round_index, changes, seconds)``
    contract: ``seconds`` is a float, that pass's own run time, from ``time.perf_counter()``, not the time since the round began).
    contract: Return the number of rounds run.
    """
    calls, log = [], []
    passes = [_scripted("a", [2, 0, 0], calls), _scripted("b", [0, 1, 0], calls)]
    rounds = run_to_fixed_point(None, passes, 10, lambda *args: log.append(args))
    check(
        rounds == 3,
        "6.8",
        "b changed something in round 1, so round 2 runs",
        value=rounds,
        got=rounds,
    )
    check(calls == ["a", "b"] * 3, "6.8", "run every pass in order each round", got=calls)
    check(
        [(n, r, c) for n, r, c, _ in log]
        == [("a", 0, 2), ("b", 0, 0), ("a", 1, 0), ("b", 1, 1), ("a", 2, 0), ("b", 2, 0)],
        "6.8",
        "after_pass(name, round, changes, seconds) once per pass run",
        value=[(r, c) for _, r, c, _ in log],
        got=log,
    )
    check(all(isinstance(s, float) and s >= 0 for *_, s in log), "6.8", "seconds must be >= 0")
    # seconds is each pass's own time: a slow pass is not charged to the quick one after it
    slow = ("slow", lambda g: time.sleep(0.05) or 0)
    quick = ("quick", lambda g: 0)
    log.clear()
    run_to_fixed_point(None, [slow, quick], 3, lambda *args: log.append(args))
    check([n for n, *_ in log] == ["slow", "quick"] and log[1][3] < log[0][3] and log[0][3] >= 0.05,
          "6.8", "seconds is the pass's own time, not the time since the round began",
          got=log)  # fmt: skip
    calls.clear()
    forever = [_scripted("loop", [1] * 100, calls)]
    rounds = run_to_fixed_point(None, forever, 4, lambda *a: None)
    check(
        rounds == 4 and len(calls) == 4,
        "6.8",
        "stop after max_rounds",
        value=(rounds, len(calls)),
        rounds=rounds,
    )


@graded("6.8", points=2)
@settings(max_examples=15)
@given(cases(redundancy=True, consts=True))
def test_pipeline_preserves_outputs_and_is_idempotent(case):
    graph, inputs = case
    g, stats = check_pass("6.8", graph, inputs, lambda g: optimize(g, debug=True))
    check(len(g) < len(graph), "6.8", "the planted redundancy was not removed", graph=str(g))
    again = optimize(g)
    changes = sum(s.changes for s in again)
    check(
        changes == 0, "6.8", "the pipeline did not reach a fixed point", value=changes, stats=again
    )


# ---------------------------------------------------------------- 6.9


@graded("6.9", points=2)
def test_lower_numbers_slots_and_resolves_kernels_once():
    """
    contract: ``kernel_for`` is called once per op node, in graph order, here, and never when the plan runs.
    """
    x = minitorch.tensor([1.0, 2.0])
    g = minitorch.jit(lambda x: (x * 2.0).exp() + x).trace(x)
    asked, given = [], []
    find = kernel_for(None)
    plan = lower(g, lambda n: asked.append(n) or given.append(find(n)) or given[-1])
    check(isinstance(plan, Plan), "6.9", "return a Plan")
    check(asked == g.ops, "6.9", "call kernel_for once per op node, in order", got=asked)
    check(len(plan.steps) == len(given) and all(s.kernel is k for s, k in zip(plan.steps, given)),
          "6.9", "each step holds the kernel kernel_for returned, resolved now: the plan never "
          "calls kernel_for when it runs")  # fmt: skip
    slot = {n: k for k, n in enumerate(g.nodes)}
    check(
        plan.num_slots == len(g.nodes),
        "6.9",
        "one slot per node",
        value=plan.num_slots,
        got=plan.num_slots,
    )
    check(
        plan.inputs == [0] and plan.outputs == [slot[g.outputs[0]]],
        "6.9",
        "wrong in/out slots",
        value=(plan.inputs, plan.outputs),
    )
    check(plan.consts == [(slot[c], c.value) for c in g.constants], "6.9", "wrong const slots")
    want = [(tuple(slot[i] for i in n.inputs), slot[n], n.spec) for n in g.ops]
    got = [(s.args, s.out, s.spec) for s in plan.steps]
    check(
        got == want,
        "6.9",
        "each step reads its inputs' slots and writes its own",
        value=[out for _, out, _ in got],
        got=got,
    )
    check(
        [s.node for s in plan.steps] == g.ops
        and [s.attrs for s in plan.steps] == [n.attrs for n in g.ops],
        "6.9",
        "each step carries its node's attrs and the node itself (step.node: plan.txt and errors)",
        value=text([s.node.op if s.node is not None else None for s in plan.steps]),
        got=[(s.node, s.attrs) for s in plan.steps],
    )
    # several outputs: one output slot each, in order, duplicates and inputs included
    g = minitorch.jit(lambda x: ((y := x.exp()), x, y)).trace(x)
    plan = lower(g, kernel_for(None))
    slot = {n: k for k, n in enumerate(g.nodes)}
    want = [slot[o] for o in g.outputs]
    check(len(g.outputs) == 3 and plan.outputs == want, "6.9",
          "one output slot per graph output, in order, a repeated output repeated",
          value=plan.outputs, got=plan.outputs, expected=want)  # fmt: skip


@graded("6.9", points=2)
@settings(max_examples=15)
@given(cases(redundancy=True))
def test_lowered_plans_give_eager_results(case):
    graph, inputs = case
    plan = lower(graph, kernel_for(None))
    with np.errstate(all="ignore"):  # as CompiledPlan.run does
        datas = run_plan(plan, [x._data for x in inputs])
    got = [minitorch.Tensor._make(d).numpy() for d in datas]
    check(
        same_outputs(outputs(graph, inputs), got),
        "6.9",
        "the plan computes something else",
        value=flat(got),
        tol=MODES_TOL,
    )


# ---------------------------------------------------------------- 6.10


@graded("6.10", points=2)
def test_run_plan_skips_dispatch_and_reads_parameters_each_call(monkeypatch):
    """
    contract: Run ``plan`` on ``inputs`` (one ``TensorData`` per graph input); return the outputs' data.
    contract: Constants are read when the plan runs, not when it was made
    """
    w = minitorch.tensor([1.0, 2.0], requires_grad=True)
    x = minitorch.tensor([3.0, 4.0])
    g = minitorch.jit(lambda x: (x * w).tanh() + x).trace(x)
    plan = lower(g, kernel_for(None))

    def no_dispatch(*a, **k):
        raise AssertionError("dispatch called")

    monkeypatch.setattr(registry, "_eager_apply", no_dispatch)
    out = run_plan(plan, [x._data])
    check(len(out) == 1, "6.10", "one output per graph output", value=len(out), got=out)
    want = np.tanh(np.float32([3.0, 8.0])) + np.float32([3.0, 4.0])
    check(np.allclose(out[0].to_numpy(), want), "6.10", "wrong result", got=out[0].to_numpy())
    w._data = minitorch.tensor([0.0, 0.0])._data  # what an optimizer step does
    out = run_plan(plan, [x._data])
    want = np.float32([3.0, 4.0])
    check(
        np.allclose(out[0].to_numpy(), want),
        "6.10",
        "read a constant's data at run time",
        got=out[0].to_numpy(),
        expected=want,
    )


@graded("6.10", points=2)
@settings(max_examples=15)
@given(cases(redundancy=True, consts=True))
def test_compiled_calls_match_eager(case):
    """
    contract: Return one ``TensorData`` per entry of ``plan.outputs``, in order: what the graph computes.
    """
    graph, inputs = case
    compiled = graph.compile()
    got = compiled(*inputs)
    got = got if isinstance(got, (tuple, list)) else [got]
    check(not compiled.interpreted, "6.10", "the call must run the plan", graph=str(compiled.graph))
    got = [t.numpy() for t in got]
    check(
        same_outputs(outputs(graph, inputs), got),
        "6.10",
        "graph.compile() computes something else",
        value=flat(got),
        tol=MODES_TOL,
        graph=str(compiled.graph),
    )
