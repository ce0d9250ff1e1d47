"""Dependency-parallel scheduling (exercises 9.9, 9.10): independent steps run at once.

A plan is a list of steps; step ``i`` depends on the steps that produced its
arguments (:func:`producers`). Steps whose producers are done can run together:
two branches of a model, the two matmuls of an attention head. A thread pool runs
them concurrently; that only pays because the kernels release the GIL while they
compute (numpy's ufuncs and BLAS do, Numba kernels compiled ``nogil=True`` do).

``jit(fn, options=CompileOptions(parallel=True))`` installs :class:`ParallelRunner`
as the plan's runner. Every step writes its own slot, so the only order that
matters is "after its producers"; results are the sequential runner's, bit for bit.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ..exercises import exercise
from ..passes.pipeline import Stage, register_stage
from ..passes.plan import Plan, run_plan

WORKERS = int(os.environ.get("MINITORCH_THREADS", "2"))


def producers(plan: Plan) -> list[list[int]]:
    """For each step, the indices of the earlier steps whose results it reads (sorted)."""
    made_by = {st.out: i for i, st in enumerate(plan.steps)}
    return [sorted({made_by[a] for a in st.args if a in made_by}) for st in plan.steps]


@exercise("9.9")
def step_levels(deps: list[list[int]]) -> list[list[int]]:
    """Group steps into topological levels: level 0 needs nothing, level k waits for level k-1.

    ``deps[i]`` lists the steps step ``i`` reads from (all ``< i``: the plan is in
    execution order). The level of a step is ``0`` without deps, else
    ``1 + max(level of its deps)``. Return one list per level, level 0 first, each
    list in increasing step order. Steps of one level are independent of each
    other; the number of levels is the critical path (in steps).

    Example:
        >>> step_levels([[], [], [0], [1], [2, 3]])   # two branches joined at the end
        [[0, 1], [2, 3], [4]]
    """
    raise NotImplementedError("Exercise 9.9: step_levels")


@exercise("9.10")
def run_parallel(plan: Plan, inputs: list, pool) -> list:
    """Run ``plan`` as :func:`~minitorch.passes.plan.run_plan` does, steps on ``pool`` when ready.

    Return what ``run_plan(plan, inputs)`` returns (the output slots' values). Every
    step runs exactly once, as ``pool.submit(step.kernel, *args, out=step.spec,
    **step.attrs)`` with its argument slots' values. A step is *ready* when every
    step it depends on (``producers(plan)``) has finished, and:

    * no step is submitted before it is ready;
    * a step is submitted as soon as it is ready (steps that become ready together
      in increasing index order), so independent steps run at the same time;
    * a slow step holds back only the steps that need it (a ready queue, not a
      barrier between levels).

    A kernel's exception propagates.

    Example:
        >>> with ThreadPoolExecutor(2) as pool:
        ...     run_parallel(p, [x._data], pool)[0].to_numpy()   # same as run_plan
        array([2., 4.], dtype=float32)
    """
    raise NotImplementedError("Exercise 9.10: run_parallel")


_pool: list = []
_pool_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """One process-wide pool of ``WORKERS`` threads (``MINITORCH_THREADS``, default 2)."""
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(WORKERS, thread_name_prefix="minitorch"))
        return _pool[0]


class ParallelRunner:
    """A ``CompiledPlan.runner``: :func:`run_parallel` on the shared pool.

    Threads pay only when there is something to overlap: plans with fewer than
    ``min_width`` steps per level, or whose steps produce fewer than
    ``min_elements`` values in all (each hand-off to a thread costs tens of
    microseconds), run sequentially.
    """

    def __init__(self, min_width: float = 1.5, min_elements: int = 1 << 16):
        self.min_width, self.min_elements = min_width, min_elements
        self._shape: dict[int, tuple] = {}

    def width(self, plan: Plan) -> float:
        return self._measure(plan)[0]

    def _measure(self, plan: Plan) -> tuple:
        m = self._shape.get(id(plan))
        if m is None:
            levels = step_levels(producers(plan))
            work = sum(st.spec.size for st in plan.steps)
            m = self._shape[id(plan)] = (len(plan.steps) / max(len(levels), 1), work)
        return m

    def __call__(self, plan: Plan, inputs: list) -> list:
        width, work = self._measure(plan)
        if width < self.min_width or work < self.min_elements:
            return run_plan(plan, inputs)
        return run_parallel(plan, inputs, pool())


def install(unit) -> None:
    """The parallel stage: the plan's independent steps run on the thread pool, when they can.

    Numba's default threading layer must not be entered from two threads at once, so
    plans on the numba backend stay sequential; so do plans a memory-planning runner
    (chapter 8) runs in a shared arena (planned for one order of the steps).
    """
    compiled = unit.compiled
    if compiled.runner is not run_plan:
        unit.skipped["parallel"] = "the plan runs in an arena planned for one order of its steps"
        return
    from ..backends import base as backends

    if (compiled.backend or backends.current("cpu").name) == "numba":
        unit.skipped["parallel"] = "the plan runs on numba (one thread enters it at a time)"
        return
    compiled.runner = ParallelRunner()


register_stage(
    Stage(
        "parallel",
        60,
        install,
        wanted=lambda options: options.parallel,
        needs=("6.9", "6.10", "9.9", "9.10"),
        explain=lambda unit: _explain(unit),
    )
)


def _explain(unit) -> list[str]:
    c = unit.compiled
    if not isinstance(c.runner, ParallelRunner):
        return []
    s = schedule(c.plan)
    return [f"Parallel: {s['steps']} steps in {s['levels']} levels (width {s['width']:.2f})"]


def schedule(plan: Plan) -> dict:
    """Steps, levels (the critical path in steps) and their ratio, for explain and the book."""
    levels = step_levels(producers(plan))
    n = len(plan.steps)
    return {"steps": n, "levels": len(levels), "width": n / max(len(levels), 1)}
