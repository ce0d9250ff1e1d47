"""Graded tests, chapter 9 (train): the reduce-overhead code generator (9.5), the autotune cache
(9.6), and both modes training as eager does."""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import check, graded, text
from minitorch import nn
from minitorch.compile import autotune_choice, build_function, plan_source
from minitorch.passes import kernel_for, lower, run_plan

from .train_util import batches, train


def _plan(fn, *args):
    graph = minitorch.jit(fn).trace(*args)
    return lower(graph, kernel_for(None))


# ---------------------------------------------------------------- 9.5


@graded("9.5", points=2)
def test_generated_function_runs_the_plan():
    w = nn.Parameter(minitorch.tensor([[1.0, -2.0], [0.5, 3.0]]))

    def f(x, y):
        h = (x @ w + y).relu()
        return h.sum(axis=1, keepdims=True), (h * 2.0).T

    x, y = minitorch.tensor([[1.0, 2.0], [3.0, -4.0]]), minitorch.tensor([0.5, -0.5])
    plan = _plan(f, x, y)
    check(plan.consts, "9.5", "(test setup) the plan holds w as a constant")
    src = plan_source(plan)
    check("def run(inputs):" in src and "slots" not in src, "9.5", "slots are locals", src=src)
    run = build_function(plan)
    for _ in range(2):
        got = run([x._data, y._data])
        want = run_plan(plan, [x._data, y._data])
        check(len(got) == len(want), "9.5", "one result per plan output", src=src)
        for a, b in zip(got, want):
            check(
                np.array_equal(a.to_numpy(), b.to_numpy()),
                "9.5",
                "the generated function differs from run_plan",
                value=a.to_numpy(),
                src=src,
            )
        w.assign_(w * 3.0)  # a constant's data changes between calls: read it at every call


@graded("9.5", points=1)
def test_one_input_and_attrs():
    x = minitorch.tensor([[1.0, 2.0, 3.0]])
    plan = _plan(lambda a: (a.sum(axis=1) * 2.0, a.exp()), x)
    src = plan_source(plan)
    got = build_function(plan)([x._data])
    want = run_plan(plan, [x._data])
    ok = all(np.array_equal(a.to_numpy(), b.to_numpy()) for a, b in zip(got, want))
    check(
        ok and len(got) == 2,
        "9.5",
        "one input, a reduction's attrs",
        value=np.concatenate([np.ravel(a.to_numpy()) for a in got]) if ok else (),
        src=src,
    )
    steps = [ln for ln in src.splitlines() if "= k" in ln]
    check(len(steps) == len(plan.steps), "9.5", "one line per step", src=src)
    # the documented source, line for line: a trailing comma only for one input, `**a<i>`
    # only for a step with attrs
    x = minitorch.tensor([1.0, 2.0])
    got = plan_source(_plan(lambda x: x * 2.0, x))
    want = "def run(inputs):\n    s0, = inputs\n    s1 = c1._data\n    s2 = k0(s0, s1, out=o0)\n"
    want += "    return [s2]\n"
    check(got == want, "9.5", "the docstring's example, exactly", got=got, expected=want)
    got = plan_source(_plan(lambda a, b: (a + b).sum(axis=0), x, x))
    want = "def run(inputs):\n    s0, s1 = inputs\n    s2 = k0(s0, s1, out=o0)\n"
    want += "    s3 = k1(s2, out=o1, **a1)\n    return [s3]\n"
    check(got == want, "9.5", "two inputs, a step with attrs", got=got, expected=want)
    # no inputs at all (a function of parameters only): nothing to unpack
    w = minitorch.tensor([1.0, -1.0])
    graph = minitorch.jit(lambda a: ((a * 2.0).exp(), a)).trace(w)
    held = graph.inputs.pop()  # the argument becomes a constant the plan holds
    held.op, held.value = "const", w
    plan = lower(graph, kernel_for(None))
    check(plan.inputs == [] and plan.steps, "9.5", "(test setup) a plan without inputs")
    src = plan_source(plan)
    try:
        got = build_function(plan)([])
    except SyntaxError as e:
        check(False, "9.5", "a plan without inputs unpacks nothing", src=src, error=str(e))
    want = run_plan(plan, [])
    ok = len(got) == 2 and all(
        np.array_equal(a.to_numpy(), b.to_numpy()) for a, b in zip(got, want)
    )
    check(ok, "9.5", "a plan without inputs", value=len(got), src=src)


@graded("9.5", points=2)
def test_reduce_overhead_training_equals_eager():
    data = batches(5, 6, 8, 6, 3)
    el, ep, _, _ = train((6, 10, 3), data, False, lr=0.1, momentum=0.9)
    cl, cp, _, f = train((6, 10, 3), data, True, mode="reduce-overhead", lr=0.1, momentum=0.9)
    check(
        np.allclose(cl, el, rtol=1e-5),
        "9.5",
        "losses differ from eager",
        value=cl,
        tol=(1e-5, 1e-8),
        eager=el,
        got=cl,
    )
    for a, b in zip(cp, ep):
        check(
            np.allclose(a, b, rtol=1e-4, atol=1e-6),
            "9.5",
            "parameters differ from eager",
            value=a,
            tol=(1e-4, 1e-6),
        )
    entry = next(iter(f.entries.values()))
    check(entry.compiled.runner.__name__ == "generated_runner", "9.5", "the generated runner runs")


# ---------------------------------------------------------------- 9.6


class _Timer:
    def __init__(self, times):
        self.times, self.calls = times, []

    def __call__(self, fn):
        name = fn()
        self.calls.append(name)
        return self.times[name]


def _cands(*names):
    return {n: (lambda n=n: n) for n in names}


@graded("9.6", points=2)
def test_measures_each_once_and_caches_the_fastest():
    cache = {}
    timer = _Timer({"blas": 2e-3, "numba": 1e-3, "loops": 5e-3})
    got = autotune_choice(cache, "k", _cands("blas", "numba", "loops"), timer)
    check(
        got == "numba" and cache == {"k": "numba"},
        "9.6",
        "pick and store the fastest",
        value=text([got, cache]),
        got=got,
    )
    check(
        sorted(timer.calls) == ["blas", "loops", "numba"],
        "9.6",
        "measure each exactly once",
        value=text(sorted(timer.calls)),
    )
    timer.calls.clear()
    again = autotune_choice(cache, "k", _cands("blas", "numba", "loops"), timer)
    check(
        again == "numba" and timer.calls == [],
        "9.6",
        "a cache hit measures nothing",
        value=text([again, timer.calls]),
    )
    other = autotune_choice(cache, "k2", _cands("blas", "numba"), _Timer({"blas": 1, "numba": 1}))
    check(other == "blas", "9.6", "a tie goes to the first candidate", value=text(other), got=other)


@graded("9.6", points=1)
def test_stale_choice_and_no_candidates():
    cache = {"k": "removed"}
    timer = _Timer({"a": 3.0, "b": 1.0})
    got = autotune_choice(cache, "k", _cands("a", "b"), timer)
    check(
        got == "b" and cache["k"] == "b",
        "9.6",
        "a cached name that is no candidate: measure",
        value=text([got, cache]),
    )
    try:
        autotune_choice({}, "matmul|x", {}, timer)
    except minitorch.OpError as e:
        check(
            "matmul|x" in str(e),
            "9.6",
            "name the key",
            value=text([e.op, "matmul|x" in str(e)]),  # OpError("autotune", ...) naming the key
            error=str(e),
        )
    else:
        check(False, "9.6", "no candidates must raise OpError")


@graded("9.6", points=1)
def test_max_autotune_trains_as_eager_and_writes_its_choice(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("MINITORCH_CACHE_DIR", str(tmp_path))
    data = batches(6, 3, 4, 5, 3)
    el, ep, _, _ = train((5, 3), data, False, lr=0.1)
    cl, cp, _, f = train((5, 3), data, True, mode="max-autotune", lr=0.1)
    check(
        np.allclose(cl, el, rtol=1e-5),
        "9.6",
        "losses differ from eager",
        value=cl,
        tol=(1e-5, 1e-8),
        eager=el,
        got=cl,
    )
    cache = json.loads((tmp_path / "autotune.json").read_text())
    check(any(k.startswith("matmul|") for k in cache), "9.6", "the choice is on disk", got=cache)
