"""Graded benchmarks, chapter 9 (train): a compiled training step against eager's.

Ratios of timings the grader takes in one run, in interleaved rounds of CPU
time (``harness.compare``); eager, the baseline, runs on the course's own code.
Each checks that the compiled step trains exactly as eager does before it times
anything, and a training step changes its model, so the grader replays every
timed step of the learner's on the course's code and compares the losses
(``stateful=True``).
"""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import benchmark, check, compare
from minitorch import nn
from minitorch.compile import find_state

from .train_util import batches, make_step


def _mlp_steps(mode):
    """Eager and compiled steps of two identical 64-128-10 MLPs (SGD with momentum)."""
    steps = []
    for compiled in (False, True):
        model = nn.mlp([64, 128, 10], seed=0)
        # lr 0.003: consecutive losses differ by 4x the benchmarks' tolerance or more over 600
        # steps, so a step that skips its update and returns a kept loss is caught at its next
        # check (at lr 0.05 the loss had settled by step 70, and two steps' agreed to 1e-5)
        opt = nn.SGD(model, lr=0.003, momentum=0.9)
        step = make_step(model, opt)
        steps.append(minitorch.compile(step, mode=mode) if compiled else step)
    ((x, y),) = batches(0, 1, 32, 64, 10)
    eager, compiled = steps
    for k in range(3):  # the same losses: trace, retrace with momentum buffers, cached
        a, b = eager(x, y).item(), compiled(x, y).item()
        check(abs(a - b) <= 1e-5 * max(1.0, abs(a)), "9.4", "the compiled step differs", k=k)
    check(compiled.eager_reason is None, "9.4", "the step must run compiled")
    return eager, compiled, x, y


@benchmark(
    "9.4",
    points=2,
    metric="speedup",
    bands=[(1.5, 1.0), (1.2, 0.5)],  # the issue: 1.5x
    formula="eager / compiled",
    baseline=("eager",),
)
def bench_compiled_mlp_training_step(report):
    eager, compiled, x, y = _mlp_steps("default")
    t = compare({"eager": lambda: eager(x, y), "compiled": lambda: compiled(x, y)}, rounds=9,
                stateful=True, tol=(1e-4, 1e-5)).best  # fmt: skip
    report(eager_ms=t["eager"] * 1e3, compiled_ms=t["compiled"] * 1e3)


@benchmark(
    "9.5",
    points=2,
    metric="overhead_ratio",
    bands=[(0.2, 1.0), (0.4, 0.5)],
    higher_is_better=False,
    formula="max(compiled - kernels, 0) / max(eager - kernels, 1e-9)",
    baseline=("eager", "kernels"),
)
def bench_reduce_overhead_python_per_step(report):
    """Per-step Python overhead: a step's time minus its kernels' time (the course's generated
    function alone, fed directly: a learner's, padded, would be subtracted and lower the
    figure), for eager and for reduce-overhead."""
    eager, compiled, x, y = _mlp_steps("reduce-overhead")
    entry = next(e for e in compiled.entries.values() if len(e.writes) > 8)
    plan = entry.compiled.plan
    check(hasattr(plan, "_generated"), "9.5", "reduce-overhead must run the generated function")
    params, opts = find_state(compiled.fn, [x, y])
    inputs = [t._data for t in entry.gather([x, y], params, opts)]
    fn = plan._generated

    def kernels():
        with np.errstate(all="ignore"):
            fn(inputs)

    t = compare({"eager": lambda: eager(x, y), "compiled": lambda: compiled(x, y)},
                rounds=9, stateful=True, tol=(1e-4, 1e-5),
                output={"eager": None, "compiled": lambda loss: loss.numpy()}).best  # fmt: skip
    # The generated function alone writes the donated parameters in place: timed after the
    # checked sides, so that it does not move the state their results are checked against.
    k = compare({"kernels": kernels}, rounds=9, output=None).best
    report(eager_ms=t["eager"] * 1e3, reduce_overhead_ms=t["compiled"] * 1e3,
           kernels_ms=k["kernels"] * 1e3)  # fmt: skip
