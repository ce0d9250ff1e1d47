"""Dependency-parallel scheduling (exercises 9.9, 9.10): independent steps run at once.

A plan is a list of steps; step ``i`` depends on the steps that produced its
arguments (:func:`producers`). Steps whose producers are done can run together:
two branches of a model, the two matmuls of an attention head. A thread pool runs
them concurrently; that only pays because the kernels release the GIL while they
compute (numpy's ufuncs and BLAS do, Numba kernels compiled ``nogil=True`` do).

``jit(fn, options=CompileOptions(parallel=True))`` makes the pool the executor's way
of running the plan. Every step writes its own slot, so the only order that matters
is "after its producers" (and, in an arena, after the earlier users of the buffer a
step reuses); results are the sequential loop's, bit for bit.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from ..exercises import exercise
from ..memory import LOOP, Executor, Way
from ..memory.planner import is_view
from ..passes.pipeline import Stage, register_stage
from ..passes.plan import Plan, run_plan

WORKERS = int(os.environ.get("MINITORCH_THREADS", "2"))


def producers(plan: Plan) -> list[list[int]]:
    """For each step, the indices of the earlier steps it waits for (sorted): those whose
    results it reads, and ``plan.after``'s (in an arena, the earlier users of its buffer)."""
    made_by, after = {st.out: i for i, st in enumerate(plan.steps)}, plan.after
    return [
        sorted({made_by[a] for a in st.args if a in made_by}.union(after.get(i, ())))
        for i, st in enumerate(plan.steps)
    ]


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


def hazards(plan: Plan, mp) -> dict:
    """``plan.after`` for a plan run in an arena: a step that writes a buffer waits for every
    earlier step that read or wrote bytes of it (the arena reuses bytes in the plan's order)."""
    owner = {s: b for b in mp.buffers for s in b.slots + b.views}
    overlaps = {
        b.slot: [c.slot for c in mp.buffers if c.offset < b.offset + b.nbytes
                 and b.offset < c.offset + c.nbytes]
        for b in mp.buffers
    }  # fmt: skip
    touched: dict = {}  # buffer -> earlier steps that read or wrote it
    after = {}
    for i, st in enumerate(plan.steps):
        b = owner.get(st.out)
        if b is not None and not is_view(st):
            after[i] = {j for c in overlaps[b.slot] for j in touched.get(c, ())}
        for s in {*st.args, st.out}:
            if s in owner:
                touched.setdefault(owner[s].slot, []).append(i)
    return {i: sorted(js - {i}) for i, js in after.items() if js - {i}}


class Parallel(Way):
    """The executor's way of running a table on the thread pool, when that pays.

    Threads pay only when there is something to overlap: plans with fewer than
    ``min_width`` steps per level, or whose steps produce fewer than ``min_elements``
    values in all (each hand-off to a thread costs tens of microseconds), run in
    chapter 6's loop.
    """

    def __init__(self, min_width: float = 1.5, min_elements: int = 1 << 16):
        super().__init__("run_parallel")
        self.min_width, self.min_elements = min_width, min_elements

    def make(self, table: Plan, plan: Plan, mp, dump) -> Callable[[list], list]:
        if mp is not None:
            table.after = hazards(table, mp)
        s = schedule(table)
        work = sum(st.spec.size for st in table.steps)
        if s["width"] < self.min_width or work < self.min_elements:
            return functools.partial(run_plan, table)
        return lambda inputs: run_parallel(table, inputs, pool())


def install(unit) -> None:
    """The parallel stage: the plan's independent steps run on the thread pool, when they can.

    Numba's default threading layer must not be entered from two threads at once, so
    plans on the numba backend stay sequential; so does a plan run as one generated
    function. In an arena, a step waits for the earlier readers of the buffer it reuses.
    """
    from ..backends import base as backends

    compiled = unit.compiled
    if (compiled.backend or backends.current("cpu").name) == "numba":
        unit.skipped["parallel"] = "the plan runs on numba (one thread enters it at a time)"
        return
    runner = compiled.runner
    if not isinstance(runner, Executor):
        compiled.runner = Executor(way=PARALLEL)
    elif runner.way is LOOP:
        runner.way = PARALLEL
    else:
        unit.skipped["parallel"] = f"the plan runs as {runner.way.name}"


PARALLEL = Parallel()


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
    if not isinstance(getattr(c.runner, "way", None), Parallel):
        return []
    s = schedule(c.plan)
    return [f"Parallel: {s['steps']} steps in {s['levels']} levels (width {s['width']:.2f})"]


def schedule(plan: Plan) -> dict:
    """Steps, levels (the critical path in steps) and their ratio, for explain and the book."""
    levels = step_levels(producers(plan))
    n = len(plan.steps)
    return {"steps": n, "levels": len(levels), "width": n / max(len(levels), 1)}
