"""Chapter 9, exercise 9.5: ``reduce-overhead``, one generated Python function per plan,
and which results may be written into the buffers of the inputs they replace.

Chapter 6's ``run_plan`` is a loop: per step it indexes the step tuple, builds
an argument tuple from a slot list and stores the result back into the list.
For a small model that loop *is* the step time. Here the plan is written out
as straight-line source, one line per kernel call, with every slot a local
variable and every kernel, spec and attribute dict a global of the generated
module; Python then runs it with fast local loads. The source is kept (and
dumped as ``runner.py`` next to the plan) so that it can be read.
"""

from __future__ import annotations

import os
from typing import Callable

from ..core.registry import OpKind, get_op
from ..exercises import exercise
from ..memory import Executor, Way
from ..memory.planner import is_elementwise
from ..passes.pipeline import Stage, register_stage
from ..passes.plan import Plan


def plan_source(plan: Plan) -> str:
    """Python source of ``def run(inputs):`` doing what ``run_plan(plan, inputs)`` does.

    Slot ``s`` is the local ``s{s}``; step ``i``'s kernel, spec and attrs are the
    globals ``k{i}``, ``o{i}`` and ``a{i}`` (see :func:`build_function`), a constant
    in slot ``s`` is ``c{s}``, its data read on every call (a parameter held as a
    constant changes between calls). For ``x * 2``::

        def run(inputs):
            s0, = inputs
            s1 = c1._data
            s2 = k0(s0, s1, out=o0)
            return [s2]
    """
    lines = ["def run(inputs):"]
    if plan.inputs:
        names = ", ".join(f"s{s}" for s in plan.inputs)
        lines.append(f"    {names}{',' if len(plan.inputs) == 1 else ''} = inputs")
    for slot, _ in plan.consts:
        lines.append(f"    s{slot} = c{slot}._data")
    for i, st in enumerate(plan.steps):
        args = "".join(f"s{a}, " for a in st.args)
        extra = f", **a{i}" if st.attrs else ""
        lines.append(f"    s{st.out} = k{i}({args}out=o{i}{extra})")
    lines.append(f"    return [{', '.join(f's{s}' for s in plan.outputs)}]")
    return "\n".join(lines) + "\n"


def build_function(plan: Plan, dump: str | None = None) -> Callable[[list], list]:
    """Compile :func:`plan_source` with the plan's kernels, specs and constants as globals.

    The executor passes its table: the plan with every kernel bound to its place in
    the arena (chapter 8), so the generated lines stay ``s4 = k0(s0, s1, out=o0)``.
    """
    source = plan_source(plan)
    env: dict = {}
    for i, st in enumerate(plan.steps):
        env[f"k{i}"], env[f"o{i}"], env[f"a{i}"] = st.kernel, st.spec, st.attrs
    for slot, tensor in plan.consts:
        env[f"c{slot}"] = tensor
    name = f"<minitorch plan {id(plan):x}>"
    if dump:
        os.makedirs(dump, exist_ok=True)
        name = os.path.join(dump, "runner.py")
        with open(name, "w", encoding="utf-8") as f:
            f.write(source)
    exec(compile(source, name, "exec"), env)  # noqa: S102 - our own generated source
    fn = env["run"]
    fn.source = source
    return fn


def _make_generated(table: Plan, plan: Plan, mp, dump: str | None) -> Callable[[list], list]:
    fn = build_function(table, dump)
    plan._generated = fn  # the function that runs (chapter 9's overhead benchmark times it)
    return fn


# The executor's way of running a bound table as one generated function.
GENERATED = Way("generated", _make_generated)


@exercise("9.5")
def donations(plan: Plan) -> dict:
    """Which steps may compute their result into a donated input's buffer (buffer donation).

    ``plan.donated`` maps an output slot to an input slot whose old value the caller
    drops (a parameter's new value replaces the parameter): the output *may* be written
    into that input's storage instead of a fresh buffer, when that is safe. The
    output's *computing step* is the step that makes the output slot, or, when that
    step is a view (:func:`~minitorch.memory.planner.is_view`), the step that makes
    the view's first argument, followed back through views. A step *reads* input slot
    ``i`` when one of its ``args`` is ``i`` or a view of ``i`` (views of views included).
    The donation of ``o -> i`` is safe, with ``j`` the index of ``o``'s computing step
    ``st`` and ``spec`` the output slot's own spec (the view's, when ``o`` is one), when:

    * ``o`` has a computing step (an output that is an input, a constant, or a view of
      one, has none);
    * no step after ``j`` reads ``i`` (its old values are dead once ``st`` runs);
    * ``st.spec`` has ``spec``'s size and dtype;
    * if ``st`` itself reads ``i``: every such argument is ``i`` itself (not a view of
      it), ``st`` reads in place (:func:`reads_in_place`: element ``k`` is read only to
      write element ``k``) and ``st.spec.shape == spec.shape``.

    Return ``{j: (i, spec.shape)}`` for each safe donation, in the order of
    ``plan.donated``; ``{}`` when nothing is donated. Leave ``plan`` unchanged.

    Example (an SGD update, ``w - 0.1 * g``, with ``w`` in slot 0 donated)::

        s3 = mul(s1, s2) ; s4 = sub(s0, s3)      plan.donated == {4: 0}
        donations(plan) == {1: (0, (3,))}        # step 1 may write into w's buffer
    """
    raise NotImplementedError("Exercise 9.5: donations")


def reads_in_place(st) -> bool:
    """Does step ``st`` read element ``k`` of each argument only to write element ``k``?

    True for an elementwise (or broadcasting) step, and for a fused group of them,
    unless the group reads an input through a view inside it (``x + x.T``).
    """
    return is_elementwise(st) and not _views_inside(st)


def _views_inside(st) -> bool:
    """A fused group that reads an input through a view (``x + x.T``): not elementwise in it."""
    sub = st.node.attrs.get("graph") if st.node is not None else None
    return sub is not None and any(get_op(n.op).kind is OpKind.VIEW for n in sub.ops)


def install(unit) -> None:
    """The mode stage: the plan runs as one generated function (and, for max-autotune,
    with the matmul kernels measured fastest); inside the arena, with the training
    step's buffers donated, when chapter 8 planned one."""
    compiled = unit.compiled
    if compiled.options.mode == "max-autotune":
        from .autotune import tune_plan

        tune_plan(compiled.plan)
    runner = compiled.runner
    if isinstance(runner, Executor) and runner.use_arena:  # options.memory (chapter 8)
        runner.way, runner.donate, runner.dump = GENERATED, donations, unit.dump
    else:
        compiled.runner = Executor(way=GENERATED, dump=unit.dump)


def _needs(unit) -> tuple:
    extra = ("9.6",) if unit is not None and unit.options.mode == "max-autotune" else ()
    arena = unit is None or unit.options.memory  # donation happens in the arena only
    return ("6.9", "6.10", *(("9.5",) if arena else ()), *extra)


def explain_lines(unit) -> list[str]:
    """``minitorch.explain``'s mode lines: max-autotune's kernel choices, by op and shapes."""
    chosen = getattr(unit.compiled.plan, "autotuned", None)
    if not chosen:
        return []
    lines = ["max-autotune's kernels (timed once, remembered in autotune.json):"]
    return lines + [
        f"  {key.split('|')[0]} {key.split('|')[1]}: {name}" for key, name in chosen.items()
    ]


register_stage(
    Stage(
        "mode",
        50,
        install,
        wanted=lambda options: options.mode != "default",
        needs=_needs,
        explain=explain_lines,
    )
)
