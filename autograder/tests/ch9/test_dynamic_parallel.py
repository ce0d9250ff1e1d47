"""Graded tests, chapter 9: topological levels (9.9) and the dependency-parallel runner (9.10)."""

from __future__ import annotations

import threading
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch.compile.parallel import run_parallel, step_levels
from minitorch.passes.plan import Plan, Step

WAIT = 8.0  # seconds: only a guard against a deadlock; a right answer never waits this long


@st.composite
def dags(draw, max_steps: int = 12):
    """``deps[i]``: a random sorted list of earlier steps (joins, forks, independent chains)."""
    n = draw(st.integers(0, max_steps))
    deps = []
    for i in range(n):
        if i == 0:
            deps.append([])
            continue
        k = draw(st.integers(0, min(i, 3)))
        deps.append(sorted(set(draw(st.lists(st.integers(0, i - 1), min_size=k, max_size=k)))))
    return deps


def levels_oracle(deps):
    depth = {}
    for i, d in enumerate(deps):  # deps point backwards
        depth[i] = 0 if not d else 1 + max(depth[j] for j in d)
    out = {}
    for i in range(len(deps)):
        out.setdefault(depth[i], []).append(i)
    return [out[k] for k in sorted(out)]


def _flat(levels) -> list | tuple:
    """Levels as one list of numbers, each level's size then its steps (``()`` if not lists)."""
    try:
        return [x for level in levels for x in (len(level), *level)]
    except TypeError:
        return ()


# ---------------------------------------------------------------- 9.9


@graded("9.9", points=1)
def test_levels_of_small_graphs():
    cases = [
        ([[], [], [0], [1], [2, 3]], [[0, 1], [2, 3], [4]]),
        ([[], [0], [1], [2]], [[0], [1], [2], [3]]),
        ([[], [], [], []], [[0, 1, 2, 3]]),
        ([], []),
        ([[], [0], [], [1, 2], [0]], [[0, 2], [1, 4], [3]]),
        ([[], [0], [0, 1], []], [[0, 3], [1], [2]]),
    ]
    for deps, want in cases:
        got = step_levels(deps)
        check(got == want, "9.9", "levels", value=_flat(got), deps=deps, got=got, expected=want)


@graded("9.9", points=2)
@settings(max_examples=60)
@given(dags(max_steps=16))
def test_levels_of_random_dags(deps):
    """contract: Return one list per level, level 0 first"""
    got = step_levels(deps)
    want = levels_oracle(deps)
    check(
        got == want,
        "9.9",
        "a step's level is 1 + its deepest dependency's",
        value=_flat(got),
        deps=deps,
        got=got,
    )


# ---------------------------------------------------------------- 9.10


@st.composite
def plans(draw):
    """A plan over numbered slots (shuffled), its step kernels non-commutative int formulas."""
    n_in, n_const, deps = draw(st.integers(1, 3)), draw(st.integers(0, 2)), draw(dags(10))
    n_slots = n_in + n_const + len(deps)
    order = draw(st.permutations(range(n_slots)))
    in_slots, const_slots = order[:n_in], order[n_in : n_in + n_const]
    step_slots = order[n_in + n_const :]
    steps = []
    for i, d in enumerate(deps):
        sources = [step_slots[j] for j in d]
        if sources and draw(st.booleans()):  # one producer read twice (y * y)
            sources.append(sources[0])
        extra = draw(st.lists(st.sampled_from(list(in_slots) + list(const_slots)), max_size=2))
        args = sources + extra
        args = draw(st.permutations(args)) if args else [in_slots[0]]
        steps.append((tuple(args), step_slots[i], draw(st.integers(1, 9))))
    outs = draw(st.lists(st.sampled_from(order), min_size=1, max_size=3))
    return n_in, list(in_slots), list(const_slots), steps, outs


class Recorder:
    def __init__(self):
        self.events, self.lock = [], threading.Lock()

    def note(self, what, i):
        with self.lock:
            self.events.append((what, i))


def build(case, rec: Recorder):
    n_in, in_slots, const_slots, steps, outs = case
    consts = [(s, types.SimpleNamespace(_data=100 + k)) for k, s in enumerate(const_slots)]
    plan = Plan([], len(in_slots) + len(const_slots) + len(steps), consts, in_slots, outs)
    for i, (args, out, mult) in enumerate(steps):

        def kernel(*xs, out, i=i, mult=mult, **attrs):
            rec.note("start", i)
            v = attrs["bias"]
            for x in xs:  # order matters: the arguments are not interchangeable
                v = (v * 31 + x * mult) % 1000003
            rec.note("end", i)
            return v

        plan.steps.append(Step(kernel, args, out, None, {"bias": i}))
    return plan


_POOL = ThreadPoolExecutor(2)


@graded("9.10", points=2)
@settings(max_examples=40)
@given(plans())
def test_parallel_run_equals_sequential_and_keeps_every_dependency(case):
    """contract: Return what ``run_plan(plan, inputs)`` returns"""
    rec = Recorder()
    plan = build(case, rec)
    inputs = [7 + 5 * k for k in range(len(plan.inputs))]
    got = run_parallel(plan, inputs, _POOL)
    # The values are compared with the reference's by the grader (the oracle): a runner
    # computing them here would be 6.10's answer in the learner's repository.
    check(
        isinstance(got, list) and len(got) == len(plan.outputs),
        "9.10",
        "results must be the sequential runner's: one value per output, in a list",
        value=got,
        got=got,
    )
    # an output slot that is an input or a constant holds that value (no step makes it)
    given = dict(zip(plan.inputs, inputs)) | {s: t._data for s, t in plan.consts}
    for k, s in enumerate(plan.outputs):
        if s in given and isinstance(got, list) and len(got) == len(plan.outputs):
            check(got[k] == given[s], "9.10",
                  f"output {k} is slot {s}, an input or constant: its value {given[s]}",
                  value=got[k] if isinstance(got[k], int) else -1)  # fmt: skip
    starts = [i for what, i in rec.events if what == "start"]
    check(
        sorted(starts) == list(range(len(plan.steps))),
        "9.10",
        "run each step once",
        value=sorted(starts),
        got=starts,
    )
    made_by = {s.out: i for i, s in enumerate(plan.steps)}
    pos = {e: k for k, e in enumerate(rec.events)}
    for i, s in enumerate(plan.steps):
        for a in s.args:
            if a in made_by:
                j = made_by[a]
                check(
                    pos[("end", j)] < pos[("start", i)],
                    "9.10",
                    f"step {i} started before step {j}, whose result it reads, finished",
                    events=rec.events,
                )


@graded("9.10", points=2)
def test_independent_steps_run_at_the_same_time():
    """contract: a step is submitted as soon as it is ready"""
    barrier = threading.Barrier(2, timeout=WAIT)

    def meet(x, out):
        barrier.wait()  # both branches must be running at once to get past this
        return x + 1

    joined = minitorch.Spec((), np.dtype("int64"))  # what join's step says it makes

    def join(a, b, out):  # the contract: kernel(*args, out=step.spec, **attrs)
        return a * 10 + b if out is joined else f"join was called with out={out!r}"

    plan = Plan(
        [
            Step(meet, (0,), 1, None, {}),
            Step(meet, (0,), 2, None, {}),
            Step(join, (1, 2), 3, joined, {}),
        ],
        4,
        [],
        [0],
        [3],
    )
    try:
        got = run_parallel(plan, [1], ThreadPoolExecutor(2))
    except threading.BrokenBarrierError:
        got = "the two independent steps never ran concurrently"
    check(
        got == [22],
        "9.10",
        "submit independent steps together to the pool",
        value=text(got),  # the outputs (or the reason there are none): no timing
        got=got,
    )


@graded("9.10", points=1)
def test_a_slow_step_holds_back_only_the_steps_that_need_it():
    """contract: a slow step holds back only the steps that need it"""
    ready = threading.Event()

    def slow(x, out):  # level 0; finishes only once step 2 (level 1, another chain) ran
        if not ready.wait(WAIT):
            raise RuntimeError("step 2 did not run while step 0 was still running")
        return x

    def fast(x, out):
        return x + 1

    def signal(x, out):
        ready.set()
        return x * 2

    plan = Plan(
        [
            Step(slow, (0,), 1, None, {}),
            Step(fast, (0,), 2, None, {}),
            Step(signal, (2,), 3, None, {}),
        ],
        4,
        [],
        [0],
        [1, 3],
    )
    try:
        got = run_parallel(plan, [5], ThreadPoolExecutor(2))
    except RuntimeError as e:
        got = str(e)
    check(
        got == [5, 12],
        "9.10",
        "a ready queue, not a barrier between levels",
        value=text(got),  # the outputs (or the step that never ran): no timing
        got=got,
    )


@graded("9.10", points=1)
def test_parallel_jit_on_a_two_branch_model_equals_eager():
    rng = np.random.default_rng(3)
    w1, w2 = (minitorch.tensor(rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(2))

    def model(x, c):
        a = (x @ w1).relu() * c
        b = (x @ w2).tanh() - c
        return (a + b).sum(1), (a * b).mean()

    jf = minitorch.jit(model, options=minitorch.CompileOptions(parallel=True))
    for k in range(3):
        x = minitorch.tensor(rng.standard_normal((5, 8)).astype(np.float32))
        c = minitorch.tensor(rng.standard_normal(8).astype(np.float32))
        got = jf(x, c)
        with minitorch.no_grad():
            want = model(x, c)
        for g_, w_ in zip(got, want):
            assert_close(g_.numpy(), w_.numpy(), "9.10", rtol=1e-5, atol=1e-6, call=k)
    err = None
    try:
        run_parallel(
            Plan([Step(lambda x, out: 1 / 0, (0,), 1, None, {})], 2, [], [0], [1]), [1], _POOL
        )
    except ZeroDivisionError as e:
        err = e
    check(err is not None, "9.10", "a kernel's exception must propagate")
