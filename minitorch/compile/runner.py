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

import functools
import os
from typing import Callable

import numpy as np

from ..core.registry import OpKind, get_op
from ..exercises import exercise
from ..memory import ArenaRunner
from ..memory.planner import is_elementwise, is_view
from ..passes.pipeline import Stage, register_stage
from ..passes.plan import Plan
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape


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


def build_function(plan: Plan, dump: str | None = None, kernels=None) -> Callable[[list], list]:
    """Compile :func:`plan_source` with the plan's kernels, specs and constants as globals.

    ``kernels`` replaces the steps' kernels (chapter 8: the same kernels bound to
    their places in an arena).
    """
    source = plan_source(plan)
    env: dict = {}
    for i, st in enumerate(plan.steps):
        env[f"k{i}"], env[f"o{i}"], env[f"a{i}"] = st.kernel, st.spec, st.attrs
        if kernels is not None:
            env[f"k{i}"] = kernels[i]
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


def generated_runner(plan: Plan, inputs: list) -> list:
    """A ``CompiledPlan.runner``: the plan's generated function, made on first use."""
    fn = plan.__dict__.get("_generated")
    if fn is None:
        fn = plan._generated = build_function(plan)
    return fn(inputs)


class GeneratedArenaRunner(ArenaRunner):
    """The generated function running inside chapter 8's arena, kept between calls.

    Each kernel is bound once to its place in the arena and to the places its inputs
    always have (``kernel.bind``), so the generated lines stay ``s4 = k0(s0, s1,
    out=o0)`` while a call passes no layouts and wraps no arrays; outputs are copied
    out of the arena, as :class:`~minitorch.memory.ArenaRunner` does.
    """

    __name__ = "generated_runner"  # what explain prints: the generated function runs

    def __init__(self, inplace: bool, dump: str | None = None):
        super().__init__(inplace=inplace, keep=True)
        self.dump, self._fn, self._bound_to, self._plan = dump, None, None, None
        self._fns: dict = {}  # id(plan) -> (plan, its function bound to the arena, finish)

    def __call__(self, plan: Plan, inputs: list) -> list:
        if plan is self._plan and self.arena is not None:  # the steady state: no checks
            return self._finish(self._fn(self._take(inputs)))
        mp, owner = self._prepare(plan)
        dests = self._views(plan, mp, owner)
        if self._bound_to is not dests:  # a new arena: every function binds again
            self._fns, self._bound_to = {}, dests
        made = self._fns.get(id(plan))
        if made is None or made[0] is not plan:  # the plan, or its profiled copy (chapter 10)
            donate = donations(plan)
            owned = {j: np.empty(plan.steps[j].spec.size, plan.steps[j].spec.dtype) for j in donate}
            take, given = _taker(plan, donate, owned)
            kernels, fixed = bind_steps(plan, dests, owned, given)
            fn = build_function(plan, self.dump, kernels)
            made = self._fns[id(plan)] = (plan, fn, self._finisher(plan, fixed, mp), take)
            plan._generated = fn
        _, self._fn, self._finish, self._take = made
        self._plan = plan
        return self._finish(self._fn(self._take(inputs)))

    def _finisher(self, plan: Plan, fixed: dict, mp) -> Callable:
        """What happens to the outputs after each call, decided once from where they live."""
        outputs, made, arena = plan.outputs, {st.out: st for st in plan.steps}, self.arena
        # outputs in the arena are copied out (the caller keeps them); donated ones stay
        copy = [
            k
            for k, s in enumerate(outputs)
            if s in fixed and np.shares_memory(fixed[s].storage, arena)
        ]
        # a kernel that takes ``dest=`` allocates its result when given none; others may
        # return (a view of) an argument, which is checked on each call
        check = [
            k
            for k, s in enumerate(outputs)
            if s in made and s not in fixed and not getattr(made[s].kernel, "writes_into", False)
        ]
        nbytes = mp.arena_bytes + sum(
            made[s].spec.size * np.dtype(made[s].spec.dtype).itemsize
            for k, s in enumerate(outputs)
            if s in made and k not in check and (s not in fixed or k in copy)
        )

        def finish(outs: list) -> list:
            extra = 0
            for k in copy:  # the caller keeps outputs; the next call reuses the arena
                outs[k] = TensorData.from_numpy(outs[k].as_numpy_view())
            for k in check:
                d = outs[k]
                if d.storage.size and np.may_share_memory(d.storage, arena):
                    outs[k] = d = TensorData.from_numpy(d.as_numpy_view())
                extra += d.storage.nbytes
            self.peak_bytes = nbytes + extra
            return outs

        return finish


def bind_steps(plan: Plan, dests: list, donated=None, given=None) -> tuple[list, dict]:
    """Each step's kernel bound to its destination, and the slots whose data never changes.

    A slot is *fixed* when it holds the same ``TensorData`` on every call: a place in the
    arena or a donated buffer (``donated``: step index -> its 1-D array), or a view of
    one (computed here once); ``given`` adds input slots (a donated input is in its
    buffer on every call). A kernel with ``bind(dest, fixed)`` gets the fixed
    ``TensorData`` of each of its arguments (``None`` for the others).
    """
    fixed: dict = dict(given or {})
    kernels = []
    for j, (st, dest) in enumerate(zip(plan.steps, dests)):
        args = [fixed.get(a) for a in st.args]
        if is_view(st):
            kernels.append(_fixed_view(st, args, fixed))
            continue
        dest = (donated or {}).get(j, dest)
        kernels.append(_bind(st, dest, args))
        if dest is not None:
            shape = st.spec.shape
            fixed[st.out] = TensorData(dest, shape, tuple(strides_from_shape(shape)), 0)
    return kernels, fixed


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


def _taker(plan: Plan, donate: dict, owned: dict) -> tuple:
    """The inputs of a call with each donated one in its step's own buffer (and those
    inputs' ``TensorData``, the same on every call).

    After the first call the parameter (or optimizer buffer) already lives there: the
    write-back installed the output computed into it. Otherwise (the first call, or new
    values assigned since) its values are copied in once.
    """
    if not donate:
        return (lambda inputs: inputs), {}
    where = {s: k for k, s in enumerate(plan.inputs)}
    swaps, given = [], {}
    for j, (i, shape) in donate.items():
        buf = owned[j]
        td = given[i] = TensorData.contiguous(buf, shape)
        swaps.append((where[i], buf, td, buf.reshape(shape)))

    def take(inputs: list) -> list:
        for k, buf, td, target in swaps:
            d = inputs[k]
            if d.storage is not buf or d.offset or d.strides != td.strides:
                np.copyto(target, d.as_numpy_view().reshape(target.shape))
                inputs[k] = td
        return inputs

    return take, given


def _fixed_view(st, args: list, fixed: dict) -> Callable:
    """A view of fixed arguments is computed once, unless its kernel copied (``reshape``)."""
    if not args or any(a is None for a in args):
        return st.kernel
    r = st.kernel(*args, out=st.spec, **st.attrs)
    if not np.shares_memory(r.storage, args[0].storage):
        return st.kernel
    fixed[st.out] = r
    return lambda *_, out=None, **attrs: r


def _bind(st, dest, args: list):
    """``st.kernel`` writing its result into ``dest`` (its place in the arena), or as is."""
    bind = getattr(st.kernel, "bind", None)
    bound = bind(dest, args) if bind is not None else None
    if bound is not None or dest is None:
        return bound or st.kernel
    if getattr(st.kernel, "writes_into", False):
        return functools.partial(st.kernel, dest=dest)
    kernel, shape = st.kernel, st.spec.shape
    strides = tuple(strides_from_shape(shape))
    result = TensorData(dest, shape, strides, 0)
    target = dest.reshape(shape)

    def copy_into(*args, **kw):  # a kernel that allocates: its result is copied into place
        np.copyto(target, kernel(*args, **kw).as_numpy_view(), casting="unsafe")
        return result

    return copy_into


def install(unit) -> None:
    """The mode stage: the plan runs as one generated function (and, for max-autotune,
    with the matmul kernels measured fastest); inside the arena when chapter 8 planned one."""
    compiled = unit.compiled
    plan = compiled.plan
    if compiled.options.mode == "max-autotune":
        from .autotune import tune_plan

        tune_plan(plan)
    plan._generated = build_function(plan, unit.dump)
    if isinstance(compiled.runner, ArenaRunner):  # options.memory: keep the arena (chapter 8)
        compiled.runner = GeneratedArenaRunner(compiled.options.inplace, unit.dump)
    else:
        compiled.runner = generated_runner


def _needs(unit) -> tuple:
    extra = ("9.6",) if unit is not None and unit.options.mode == "max-autotune" else ()
    arena = unit is None or unit.options.memory  # donation happens in the arena only
    return ("6.9", "6.10", *(("9.5",) if arena else ()), *extra)


register_stage(
    Stage("mode", 50, install, wanted=lambda options: options.mode != "default", needs=_needs)
)
