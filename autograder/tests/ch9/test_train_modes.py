"""Graded tests, chapter 9 (train): buffer donation in the reduce-overhead arena (9.5), the autotune cache
(9.6), and both modes training as eager does."""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import check, graded, text
from minitorch.compile import autotune_choice, donations
from minitorch.compile.runner import GENERATED
from minitorch.passes import kernel_for, lower

from .train_util import batches, train


def _plan(fn, *args):
    graph = minitorch.jit(fn).trace(*args)
    return lower(graph, kernel_for(None))


# ---------------------------------------------------------------- 9.5


def _donating(fn, shapes, pairs):
    """The plan of ``fn`` on float32 inputs of ``shapes``, with output ``o`` donating into
    input ``k`` for each ``(o, k)`` of ``pairs`` (in that order)."""
    rng = np.random.default_rng(0)
    args = [minitorch.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    plan = _plan(fn, *args)
    plan.donated = {plan.outputs[o]: plan.inputs[k] for o, k in pairs}
    return plan


def _donated_rows(plan, got) -> list:
    """The learner's answer as ``[(step, input position, shape)]`` in its order (an input slot
    that is none is position -1), or its type's name when it is not a dict."""
    if not isinstance(got, dict):
        return [type(got).__name__]
    rows = []
    for j, v in got.items():
        try:
            i, shape = v
            k = plan.inputs.index(i) if i in plan.inputs else -1
            rows.append((j, k, tuple(shape)))
        except (TypeError, ValueError):
            rows.append((j, repr(v)))
    return rows


def _momentum(w, b, g):
    nb = b * 0.9 + g
    return w - 0.1 * nb, nb


def _view_read_late(w, g):
    v = w.reshape((3, 1))
    return w - g, v * 2.0


def _view_of_view_read_late(w, g):
    v = w.reshape((3, 1)).T
    return w - g, v * 2.0


# (what, fn, input shapes, donations (output, input), want [(step, input, shape)])
_DONATIONS = [
    ("an SGD update", lambda w, g: w - 0.1 * g, [(3,), (3,)], [(0, 0)], [(1, 0, (3,))]),
    ("the old value read after the update", lambda w, g: (w - 0.1 * g, w * 2.0),
     [(3,), (3,)], [(0, 0)], []),
    ("momentum: two donations, in plan.donated's order", _momentum, [(3,), (3,), (3,)],
     [(0, 0), (1, 1)], [(3, 0, (3,)), (1, 1, (3,))]),
    ("an output that is a view (detach) of the update", lambda w, g: (w - g).detach(),
     [(2, 2), (2, 2)], [(0, 0)], [(0, 0, (2, 2))]),
    ("a view of the input read after the update", _view_read_late, [(3,), (3,)], [(0, 0)], []),
    ("the update reads the input through a view", lambda w, g: w.T + g, [(2, 2), (2, 2)],
     [(0, 0)], []),
    ("a matmul reads the input", lambda w, g: w @ g, [(2, 2), (2, 2)], [(0, 0)], []),
    ("a broadcast add", lambda w, b: w + b, [(2, 3), (3,)], [(0, 0)], [(0, 0, (2, 3))]),
    ("an output that is a slice of its step's result (another size)",
     lambda w, g: (g * 2.0)[:3], [(3,), (6,)], [(0, 0)], []),
    ("the output's shape, not its step's", lambda w, g: (g * 0.5).reshape((3, 1)),
     [(3,), (3,)], [(0, 0)], [(0, 0, (3, 1))]),
    ("an output that is a view of a view of its step's result (followed back to the mul)",
     lambda w, g: (g * 0.5).reshape((3, 1)).T, [(3,), (3,)], [(0, 0)], [(0, 0, (1, 3))]),
    ("a step that reads the input in another shape", lambda w, g: (w - g).reshape((3, 1)),
     [(3,), (3,)], [(0, 0)], []),
    ("an output that is a view of an input", lambda w, g: (w.reshape((3, 1)), g * 2.0),
     [(3,), (3,)], [(0, 1)], []),
    ("a view of a view of the input read after the update", _view_of_view_read_late,
     [(3,), (3,)], [(0, 0)], []),
    # an unsafe donation does not end the search: the next one is still decided
    ("a view of an input, then a safe update", lambda w, v, g: (w.reshape((3, 1)), v - g),
     [(3,), (3,), (3,)], [(0, 0), (1, 1)], [(1, 1, (3,))]),
    ("an old value read late, then a safe update", lambda w, v, g: (w - g, w * 2.0, v - g),
     [(3,), (3,), (3,)], [(0, 0), (2, 1)], [(2, 1, (3,))]),
    ("a read through a view, then a safe update", lambda w, v, g: (w.T + g, v - g),
     [(2, 2), (2, 2), (2, 2)], [(0, 0), (1, 1)], [(2, 1, (2, 2))]),
]  # fmt: skip


@graded("9.5", points=2)
def test_donations_whole_outputs():
    """contract: ``plan.donated`` maps an output slot to an input slot
    contract: if ``st`` itself reads ``i``: every such argument is ``i`` itself
    contract: Return ``{j: (i, spec.shape)}`` for each safe donation
    """
    for what, fn, shapes, pairs, want in _DONATIONS:
        plan = _donating(fn, shapes, pairs)
        before = (plan.text(), dict(plan.donated))
        got = _donated_rows(plan, donations(plan))
        check(
            got == want,
            "9.5",
            f"{what}: (step, input, shape) per safe donation",
            value=text(got),
            got=got,
            expected=want,
            plan=plan.text(),
        )
        # a refused donation stays in plan.donated: the caller's plan is read, not pruned
        check((plan.text(), dict(plan.donated)) == before, "9.5",
              f"{what}: the plan was changed (plan.donated included): decide only",
              donated=text(dict(plan.donated)))  # fmt: skip


@graded("9.5", points=1)
def test_donations_nothing_donated_and_plan_unchanged():
    plan = _donating(lambda w, g: w - g, [(3,), (3,)], [])
    got = donations(plan)
    check(got == {}, "9.5", "nothing donated: {}", value=text(got))
    plan = _donating(_momentum, [(3,), (3,), (3,)], [(1, 1), (0, 0)])
    before = (plan.text(), dict(plan.donated), [list(st.args) for st in plan.steps])
    got = _donated_rows(plan, donations(plan))
    want = [(1, 1, (3,)), (3, 0, (3,))]
    check(got == want, "9.5", "momentum, donated the other way round", value=text(got),
          got=got, expected=want)  # fmt: skip
    after = (plan.text(), dict(plan.donated), [list(st.args) for st in plan.steps])
    check(after == before, "9.5", "the plan was changed: decide only")


@graded("9.5", points=2)
def test_reduce_overhead_training_with_donated_buffers_equals_eager():
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
    runner = entry.compiled.runner
    check(
        getattr(runner, "way", None) is GENERATED and runner.use_arena and bool(runner.donate),
        "9.5",
        "the generated function runs in the arena, with the parameters donated",
    )
    plan = entry.compiled.plan
    check(plan.donated, "9.5", "(test setup) the step donates its parameters and buffers")


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
    """contract: measuring only when the cache cannot say
    contract: If ``cache[key]`` names one of ``candidates``, return it and measure nothing
    contract: Otherwise call ``measure(fn)`` exactly once per candidate
    contract: pick the fastest (on a tie the first in ``candidates``' order)
    """
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
    # every candidate timed inf (each one failed): still a tie, the first one is chosen
    inf = float("inf")
    slow = autotune_choice(
        cache, "k3", _cands("blas", "numba"), _Timer({"blas": inf, "numba": inf})
    )
    check(slow == "blas" and cache.get("k3") == "blas", "9.6",
          "every candidate measured inf: a tie, the first candidate (stored in the cache)",
          value=text([slow, cache.get("k3")]))  # fmt: skip


@graded("9.6", points=1)
def test_stale_choice_and_no_candidates():
    """contract: A cached name that is not a candidate any more
    contract: No candidates: raise ``OpError("autotune", ...)`` naming ``key``
    """
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
