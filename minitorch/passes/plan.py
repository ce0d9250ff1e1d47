"""Lowering to a prepared plan (exercises 6.9, 6.10) and the compiled form ``graph.compile()``.

Eager execution pays, on every op of every call, for ``dispatch`` (find the op,
bind its attributes), shape inference, the eager checks, choosing a kernel and
wrapping the result in a Tensor. A traced graph already knows all of that. A
:class:`Plan` keeps only what must happen at run time: for each node its
kernel, the slots its inputs live in, the slot of its result and its
pre-inferred spec. Running it is one flat loop of kernel calls.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from ..backends import base as backends
from ..core import instrument as profiler
from ..core.errors import OpError
from ..core.registry import Spec, get_op
from ..core.tensor import Tensor, is_grad_enabled
from ..exercises import exercise
from ..tracing.graph import Graph, Node
from ..tracing.interpreter import CompiledGraph, interpret
from .options import DEFAULT


class Step(NamedTuple):
    """One kernel call: ``slots[out] = kernel(*slots[args], out=spec, **attrs)``.

    A named tuple, so a loop can unpack it in one go (the plan's loop is the hot path).
    """

    kernel: Callable
    args: tuple
    out: int
    spec: Spec
    attrs: dict
    node: Node | None = None  # where it came from (for plan.txt and errors)


@dataclass
class Plan:
    """A flat program over numbered slots. ``consts`` are read at every run (a
    parameter's data changes between calls), ``inputs``/``outputs`` are slot numbers."""

    steps: list = field(default_factory=list)
    num_slots: int = 0
    consts: list = field(default_factory=list)  # (slot, Tensor)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    # output slot -> input slot whose storage it may be written into (chapter 9's
    # training steps donate the old parameters and optimizer buffers)
    donated: dict = field(default_factory=dict)
    # step -> earlier steps it must wait for besides its producers (an arena's reuse:
    # a step overwrites a buffer only after its earlier readers ran); for threads
    after: dict = field(default_factory=dict)

    def text(self) -> str:
        lines = [f"plan: {len(self.steps)} steps over {self.num_slots} slots"]
        lines += [f"  s{s} = const {t.spec}" for s, t in self.consts]
        lines.append(f"  inputs -> {', '.join(f's{s}' for s in self.inputs)}")
        for st in self.steps:
            name = st.node.op if st.node is not None else getattr(st.kernel, "__name__", "?")
            args = ", ".join(f"s{a}" for a in st.args)
            lines.append(f"  s{st.out} = {name}({args}) : {st.spec}")
        lines.append(f"  return ({', '.join(f's{s}' for s in self.outputs)})")
        return "\n".join(lines)


@exercise("6.9")
def lower(graph: Graph, kernel_for: Callable[[Node], Callable]) -> Plan:
    """Turn ``graph`` into a :class:`Plan`; every node gets one slot.

    Node ``k`` of ``graph.nodes`` lives in slot ``k`` (``num_slots =
    len(graph.nodes)``). In the plan:

    * ``plan.consts`` holds ``(slot, node.value)`` for each ``const`` node;
    * ``plan.steps`` holds, for each other non-``input`` node, in graph order,
      ``Step(kernel_for(node), args, slot, node.spec, node.attrs, node)`` where
      ``args`` is the tuple of its inputs' slots;
    * ``plan.inputs`` holds the slots of ``graph.inputs`` and ``plan.outputs``
      those of ``graph.outputs``, in order.

    ``kernel_for`` is called once per op node, in graph order, here, and never
    when the plan runs.

    Example:
        >>> p = lower(g, kernel_for)   # %x = input ; c1 = const 2.0 ; %2 = mul(%x, c1)
        >>> p.inputs, p.consts[0][0], p.steps[0].args, p.steps[0].out, p.outputs
        ([0], 1, (0, 1), 2, [2])

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.9: lower")


@exercise("6.10")
def run_plan(plan: Plan, inputs: list) -> list:
    """Run ``plan`` on ``inputs`` (one ``TensorData`` per graph input); return the outputs' data.

    Return one ``TensorData`` per entry of ``plan.outputs``, in order: what the
    graph computes. Every :class:`Step`, in order, is one call, ``kernel(*data
    of its args' slots, out=spec, **attrs)``, whose result is slot ``out``'s data.
    Constants are read when the plan runs, not when it was made
    (``tensor._data``: an optimizer may have replaced a parameter's data since).
    No ``dispatch``, no shape inference, no checks: the plan was checked once.

    Performance (graded): on a chain of 100 tiny ops a compiled call must cost
    at most 0.3 of eager's time (half credit at 0.5): only kernel calls remain.

    Example:
        >>> run_plan(p, [x._data])[0].to_numpy()     # x * 2
        array([2., 4.], dtype=float32)

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.10: run_plan")


def kernel_for(backend: str | None) -> Callable[[Node], Callable]:
    """The kernel a node runs with on ``backend`` (default: the device's current backend)."""

    def find(node: Node) -> Callable:
        b = backends.get_backend(backend) if backend else backends.current(node.spec.device)
        special = NODE_KERNELS.get(node.op)  # cond; chapter 7's fused nodes
        if special is not None:
            return special(node, b.name)
        op = get_op(node.op)
        k = b.kernel(op)  # raises, naming the op, when the backend has none
        # the backend's own kernel, specialised to the node's specs (numpy's take ``dest=``)
        return checked_kernel(node, b.prepare(op, node.spec, [i.spec for i in node.inputs]) or k)

    return find


def checked_kernel(node: Node, kernel: Callable) -> Callable:
    """``kernel`` preceded by the op's value checks (``OpDef.check``), as eager runs them.

    Every kernel a plan step gets passes through here (lowering, max-autotune's
    choice), so a numpy ``take`` never wraps a negative id around and no kernel
    reads out of bounds: compiled raises eager's ``OpError``. The wrapper keeps
    ``writes_into`` and ``bind`` (a bound kernel is checked too).
    """
    op = get_op(node.op)
    if not op.checks([i.spec for i in node.inputs]):
        return kernel
    device, names = node.spec.device, tuple(op.attrs)

    def guard(run: Callable) -> Callable:
        def checked(*args, **kw):
            op.check(*(Tensor._make(a, device) for a in args), **{k: kw[k] for k in names})
            return run(*args, **kw)

        checked.__name__ = getattr(kernel, "__name__", node.op)
        return checked

    wrapped = guard(kernel)
    wrapped.writes_into = getattr(kernel, "writes_into", False)
    bind = getattr(kernel, "bind", None)
    if bind is not None:
        wrapped.bind = lambda dest, fixed: (lambda b: b and guard(b))(bind(dest, fixed))
    return wrapped


def _cond_kernel(node: Node, backend: str = "") -> Callable:
    """``cond`` picks a branch from a value, so it runs its branch graph when called."""
    device = node.spec.device

    def cond(pred, *operands, out, **attrs):
        args = [Tensor._make(d, device) for d in (pred, *operands)]
        branch = node.attrs["true_graph"] if bool(args[0]) else node.attrs["false_graph"]
        return interpret(branch, *args[1:])._data

    return cond


# Nodes that are not registry ops, and how they run in a plan: ``make(node, backend_name)``.
# Chapter 7 adds "fused" (a generated kernel, or the subgraph interpreted).
NODE_KERNELS: dict[str, Callable] = {"cond": _cond_kernel}
# Chapter 8 puts its planner here: ``plan_memory(compiled) -> MemoryPlan``.
MEMORY_PLANNER: list = []


class CompiledPlan(CompiledGraph):
    """What ``graph.compile()`` returns: the optimised graph, its pass statistics and its plan.

    ``traced`` is the graph as traced (never modified), ``graph`` the optimised
    copy, ``stats`` one :class:`PassStat` per pass run. Calls with autograd
    recording (an input or a parameter requiring grad) interpret the optimised
    graph through ``dispatch`` so backward works; all others run the plan.
    """

    def __init__(self, traced: Graph, graph: Graph, backend, stats, options=DEFAULT):
        super().__init__(graph, backend)
        self.traced, self.stats, self.options = traced, stats, options
        # How a plan is executed: chapter 6's loop; chapter 8 (arena) and chapter 9
        # (one generated function, a thread pool) install their own runner here.
        self.runner: Callable[[Plan, list], list] = run_plan
        self.devices = sorted({n.spec.device for n in graph.nodes} or {"cpu"})
        self.grad_consts = any(n.value.requires_grad for n in graph.constants)
        self._plans: dict = {}
        self._out_devices = [n.spec.device for n in graph.outputs]
        self.interpreted = False  # True when lowering's exercises (6.9, 6.10) are not done
        self.donations: list = []  # (input, output) pairs, set by a training step
        # outputs that are inputs as traced (``lambda t: (t, p * t)``): the caller's own
        # tensor comes back, as in eager (the traced graph: ``t.detach()`` is an op there)
        ins = {id(n): k for k, n in enumerate(traced.inputs)}
        self.returned = [(j, ins[id(n)]) for j, n in enumerate(traced.outputs) if id(n) in ins]
        self._checked: list = []  # each input's data when its spec was last checked

    @property
    def plan(self) -> Plan:
        key = self.backend or tuple(backends.current(d).name for d in self.devices)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = lower(self.graph, kernel_for(self.backend))
            self._donate(plan)
        return plan

    def donate(self, pairs: list) -> None:
        """``(input k, output j)`` pairs: output ``j`` replaces input ``k``, whose old value
        the caller drops, so a runner may write it into input ``k``'s storage."""
        self.donations = list(pairs)
        for plan in self._plans.values():
            self._donate(plan)

    def _donate(self, plan: Plan) -> None:
        ins, outs, specs = plan.inputs, plan.outputs, self.specs
        out_specs = [n.spec for n in self.graph.outputs]
        plan.donated = {
            outs[j]: ins[k]
            for k, j in self.donations
            if outs.count(outs[j]) == 1 and ins.count(ins[k]) == 1 and ins[k] not in outs
            and specs[k] == out_specs[j] and specs[k].device == "cpu"
        }  # fmt: skip

    def run(self, *inputs):
        specs = self.specs
        if len(inputs) != len(specs):
            raise OpError("run", f"the graph takes {len(specs)} input(s), got {len(inputs)}")
        grad, checked = False, self._checked
        if len(checked) != len(specs):
            checked[:] = [None] * len(specs)
        for k, (x, s) in enumerate(zip(inputs, specs)):
            d = x._data
            # a parameter comes back with the same data on every call: its spec was checked
            if checked[k] is not d:
                if x.shape != s.shape or x.dtype != s.dtype or x.device != s.device:
                    return super().run(*inputs)  # raises the chapter-5 error
                checked[k] = d
            grad = grad or x.requires_grad
        if (grad or self.grad_consts) and is_grad_enabled() or self.interpreted:
            return super().run(*inputs)
        ctx = backends.use_backend(self.backend) if self.backend else contextlib.nullcontext()
        with ctx, np.errstate(all="ignore"):  # inf/nan follow IEEE, as in eager
            if profiler.enabled():  # chapter 10: the plan is one "plan" slice
                shapes = [x.shape for x in inputs]
                with profiler.kernel(self.graph.name, shapes, self.backend or "", cat="plan"):
                    outs = self.runner(self._profiled_plan(), [x._data for x in inputs])
            else:
                outs = self.runner(self.plan, [x._data for x in inputs])
        return self._results(outs, inputs)

    __call__ = run

    def _results(self, outs: list, inputs) -> object:
        make = Tensor._make
        outs = [make(d, dev) for d, dev in zip(outs, self._out_devices)]
        for j, k in self.returned:
            outs[j] = inputs[k]
        return self.graph.unflatten(outs)

    def run_checked(self, inputs: list):
        """:meth:`run` with autograd off, on inputs whose specs the caller's key and guards
        hold (jit's): the plan without redoing the checks (a decode step's 34 inputs)."""
        outs = self.run_data([x._data for x in inputs])
        return self.run(*inputs) if outs is None else self._results(outs, inputs)

    def run_data(self, datas: list) -> list | None:
        """The plan on raw data whose specs the caller guarantees (a compiled step's key and
        guards hold them), without autograd: the outputs' data, or ``None`` when only
        :meth:`run` can (interpreted, recorded by the profiler, another backend)."""
        if self.interpreted or self.backend or profiler.enabled():
            return None
        if self.grad_consts and is_grad_enabled():
            return None
        with np.errstate(all="ignore"):  # inf/nan follow IEEE, as in eager
            return self.runner(self.plan, datas)

    def _profiled_plan(self) -> Plan:
        """The plan whose kernels record events, made once (a runner binds it once too)."""
        plan = self.plan
        cached = self.__dict__.get("_profiled")
        if cached is None or cached[0] is not plan:
            cached = self._profiled = (plan, _profiled(plan))
        return cached[1]

    def memory_plan(self):
        """Chapter 8: where each buffer of the plan lives in the arena, and how good that is."""
        if not MEMORY_PLANNER:
            raise OpError("memory_plan", "memory planning (chapter 8) is not loaded")
        return MEMORY_PLANNER[0](self)

    def __repr__(self) -> str:
        return (
            f"<CompiledPlan {self.graph.name}: {len(self.traced)} ops traced, "
            f"{len(self.graph)} after passes>"
        )


def _profiled(plan: Plan) -> Plan:
    """A copy of ``plan`` whose kernels each record one "op" event (chapter 10's hook)."""

    def wrap(st: Step) -> Step:
        name = st.node.op if st.node is not None else getattr(st.kernel, "__name__", "kernel")

        def kernel(*args, out, **attrs):
            with profiler.kernel(name, [a.shape for a in args], out.device, cat="op"):
                return st.kernel(*args, out=out, **attrs)

        kernel.writes_into = getattr(st.kernel, "writes_into", False)  # chapter 8's dest=
        return st._replace(kernel=kernel)

    steps = [wrap(st) for st in plan.steps]
    return Plan(steps, plan.num_slots, plan.consts, plan.inputs, plan.outputs, plan.donated)
