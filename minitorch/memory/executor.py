"""The one executor of compiled plans: bind every step once, then run the table.

A :class:`~minitorch.passes.plan.Plan` says what to call; the executor decides where
each result goes. It binds every step to its *destination* (its place in chapter 8's
arena, a buffer donated by chapter 9's training step, or none: the kernel allocates)
and to the arguments that hold the same data on every call. The result is a *table*,
a plan of the same shape whose kernels are bound. How the table runs is a *way*:
chapter 6's loop (``run_plan``) by default; chapter 9 adds one generated function
and a thread pool. Arena, donation and way are independent choices, so they combine.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable

import numpy as np

from ..core.instrument import LAUNCHES
from ..passes.plan import Plan, run_plan
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from .arena import MemoryPlan, bind_views, new_arena, plan_memory
from .planner import is_view


class Way:
    """How a bound table runs: ``make(table, plan, mp, dump)`` returns ``run(inputs) -> outputs``.

    ``plan`` is the unbound plan the table came from, ``mp`` the memory plan (``None``
    without an arena): a way that reorders steps must respect the arena's reuse.
    """

    def __init__(self, name: str, make: Callable | None = None):
        self.name, self._make = name, make

    def make(self, table: Plan, plan: Plan, mp, dump) -> Callable[[list], list]:
        return self._make(table, plan, mp, dump)

    def __repr__(self) -> str:
        return f"<way {self.name}>"


LOOP = Way("run_plan", lambda table, plan, mp, dump: functools.partial(run_plan, table))


class HostMemory:
    """Where an arena lives and how results get there: host memory (``Executor.mem``;
    ``device.py`` has the cuda device's twin)."""

    name = "cpu"
    donates = True
    new_arena = staticmethod(new_arena)
    views = staticmethod(bind_views)
    shares = staticmethod(np.shares_memory)
    may_share = staticmethod(np.may_share_memory)

    @staticmethod
    def address(a) -> int:
        return a.__array_interface__["data"][0]

    @staticmethod
    def copy_out(d: TensorData) -> TensorData:
        return TensorData.from_numpy(d.as_numpy_view())

    @staticmethod
    def plan(plan: Plan, inplace: bool) -> MemoryPlan:
        return plan_memory(plan, inplace=inplace)

    @staticmethod
    def bind(st, dest, args):
        return _bind(st, dest, args)


HOST = HostMemory()


def memory_for(device: str):
    """The executor's memory operations for plans on ``device``."""
    if device == "cpu":
        return HOST
    from .device import DeviceMemory

    return DeviceMemory()


class Executor:
    """``CompiledPlan.runner`` from chapter 8 on: one object whatever the options.

    ``arena``: results live in one planned arena (fresh per call, or kept for the
    compiled object's life with ``keep``); outputs never alias it (their kernels
    allocate them; one that is a view into the arena is copied out), so the caller
    may keep them. ``donate(plan) -> {step: (input slot, shape)}`` (chapter 9, in an
    arena only): those steps compute into a buffer the input then lives in.
    """

    def __init__(
        self, arena=False, inplace=True, keep=False, way=LOOP, donate=None, dump=None, device="cpu"
    ):
        self.use_arena, self.inplace, self.keep = arena, inplace, keep
        self.mem = memory_for(device)  # host or device arena
        self.launches = 0  # CUDA kernels the last call launched
        self.way, self.donate, self.dump = way, donate, dump
        self.arena = None  # the current arena (kept between calls when ``keep``)
        self.allocations = 0  # arenas allocated so far (stays 1 with ``keep``)
        self.peak_bytes = 0  # last call: arena + results made outside it + outputs copied out
        self._mp_key = self._mp = self._layout = self._dests = None
        self._plan = self._made = None
        self._tables: dict = {}  # id(plan) -> (plan, dests, run, take, finish)
        self._plain: dict = {}  # the same without donation, built when the caller holds one
        self._extra = 0  # bytes of views that had to copy, this call

    def describe(self) -> str:
        where = " in a device arena" if self.mem is not HOST else " in an arena"
        return self.way.name + (where if self.use_arena else "")

    def memory(self, plan: Plan) -> MemoryPlan:
        """The arena this executor uses for ``plan`` (planned once per plan)."""
        key = tuple(id(st.node) if st.node is not None else id(st.kernel) for st in plan.steps)
        if key != self._mp_key:
            self._mp = self.mem.plan(plan, self.inplace)
            self._mp_key, self.arena, self._layout, self._tables = key, None, None, {}
        return self._mp

    def __call__(self, plan: Plan, inputs: list) -> list:
        made = self._made
        if plan is self._plan and made is not None:  # the steady state: no checks
            return self._run(made, inputs)
        mp = self.memory(plan) if self.use_arena else None
        dests = self._destinations(plan, mp) if mp is not None else None
        made = self._tables.get(id(plan))
        if made is None or made[0] is not plan or made[1] is not dests:
            made = (plan, dests, *self._build(plan, mp, dests))
            if self.keep or mp is None:
                self._tables[id(plan)] = made
        if self.keep or mp is None:
            self._plan, self._made = plan, made
        try:
            return self._run(made, inputs)
        finally:
            if not (self.keep or mp is None):  # the arena dies with the call
                self.arena = self._dests = None

    def _run(self, made: tuple, inputs: list) -> list:
        launched = LAUNCHES[0]
        try:
            return self._run_table(made, inputs)
        finally:
            self.launches = LAUNCHES[0] - launched

    def _run_table(self, made: tuple, inputs: list) -> list:
        taken = made[3](inputs)
        if taken is None:  # the caller still sees a donated buffer: this call donates none
            plan, dests = made[0], made[1]
            plain = self._plain.get(id(plan))
            if plain is None or plain[0] is not plan or plain[1] is not dests:
                plain = (plan, dests, *self._build(plan, self._mp, dests, donate=False))
                self._plain = {id(plan): plain}
            made, taken = plain, inputs
        return made[4](made[2](taken), inputs)

    # ---------------------------------------------------------------- the arena

    def _destinations(self, plan: Plan, mp: MemoryPlan) -> list:
        """Each step's place in the arena (``None``: views, outputs, unplanned steps)."""
        if self.arena is not None and self.keep:
            return self._dests
        arena = self.mem.new_arena(mp.arena_bytes, mp.alignment)
        self.arena, self.allocations = arena, self.allocations + 1
        if self._layout is not None:  # the same plan again: re-slice the new arena
            self._dests = [
                None if e is None else arena[e[0] : e[0] + e[1]].view(e[2]) for e in self._layout
            ]
            return self._dests
        views = self.mem.views(arena, mp.buffers)
        owner = {s: b for b in mp.buffers for s in b.slots + b.views}
        dests, layout, outputs = [], [], set(plan.outputs)
        base = self.mem.address(arena)
        for st in plan.steps:
            b = owner.get(st.out)
            # an output is made outside the arena, since the caller keeps it (a training
            # step returns every parameter: copying them out would cost more than it saves)
            if b is None or is_view(st) or st.out in outputs:
                dests.append(None)
                layout.append(None)
            else:  # its own buffer, or one it writes over in place
                d = _typed(views[b.slot], st)
                dests.append(d)
                layout.append((self.mem.address(d) - base, d.nbytes, d.dtype))
        self._dests, self._layout = dests, layout
        return dests

    def _build(self, plan: Plan, mp, dests, donate=True) -> tuple:
        """``(run, take, finish)`` for one plan and one set of destinations (``donate``:
        with the donations ``self.donate`` finds, else none)."""
        if mp is None:  # nothing to bind: the plan is the table
            return self.way.make(plan, plan, None, self.dump), _same, _outputs
        donate = donate and self.donate is not None and self.mem.donates
        donate = self.donate(plan) if donate else {}
        owned = {j: np.empty(plan.steps[j].spec.size, plan.steps[j].spec.dtype) for j in donate}
        take, given = _taker(plan, donate, owned)
        kernels, fixed = bind_steps(plan, dests, owned, given, count=self._count, mem=self.mem)
        table = Plan(
            [st._replace(kernel=k) for st, k in zip(plan.steps, kernels)],
            plan.num_slots, plan.consts, plan.inputs, plan.outputs, plan.donated,
        )  # fmt: skip
        run = self.way.make(table, plan, mp, self.dump)
        return run, take, self._finisher(plan, fixed, mp)

    def _count(self, nbytes: int) -> None:
        self._extra += nbytes

    def _finisher(self, plan: Plan, fixed: dict, mp: MemoryPlan) -> Callable:
        """What happens to the outputs after each call, decided once from where they live."""
        outputs, made, arena = plan.outputs, {st.out: st for st in plan.steps}, self.arena
        mem = self.mem
        # outputs in the arena are copied out (the caller keeps them); donated ones stay
        copy = [
            k for k, s in enumerate(outputs) if s in fixed and mem.shares(fixed[s].storage, arena)
        ]
        # the others stay where they are (a donated buffer), each call in a new TensorData:
        # what the caller holds is then counted on the buffer (see ``_seen_outside``)
        fresh = [k for k, s in enumerate(outputs) if s in fixed and k not in copy]
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

        def finish(outs: list, inputs: list) -> list:
            extra, self._extra = self._extra, 0
            for k in copy:  # the caller keeps outputs; the next call reuses the arena
                outs[k] = mem.copy_out(outs[k])
            for k in fresh:
                d = outs[k]
                outs[k] = TensorData(d.storage, d.shape, d.strides, d.offset)
            for k in check:
                d = outs[k]
                if d.storage.size and mem.may_share(d.storage, arena):
                    outs[k] = d = mem.copy_out(d)
                elif any(d.storage is x.storage for x in inputs):
                    continue  # a view of an input: nothing new
                extra += d.storage.nbytes
            self.peak_bytes = nbytes + extra
            return outs

        return finish


def _same(inputs: list) -> list:
    return inputs


def _outputs(outs: list, inputs: list) -> list:
    return outs


def _typed(view: np.ndarray, st) -> np.ndarray:
    """The first ``out.size`` elements of ``view`` as the step's dtype (in place: same bytes)."""
    dtype = np.dtype(st.spec.dtype)
    if view.dtype != dtype:
        view = view.view(np.uint8).view(dtype)
    return view[: st.spec.size]


# ---------------------------------------------------------------- binding


def bind_steps(plan: Plan, dests: list, donated=None, given=None, count=None, mem=HOST) -> tuple:
    """Each step's kernel bound to its destination, and the slots whose data never changes.

    A slot is *fixed* when it holds the same ``TensorData`` on every call: a place in the
    arena or a donated buffer (``donated``: step index -> its 1-D array), or a view of
    one (computed here once); ``given`` adds input slots (a donated input is in its
    buffer on every call). A kernel with ``bind(dest, fixed)`` gets the fixed
    ``TensorData`` of each of its arguments (``None`` for the others). ``count(nbytes)``
    is told of each view that had to copy (it lives outside the arena). ``mem``: the
    arena's memory (host, or the cuda device's).
    """
    fixed: dict = dict(given or {})
    kernels = []
    for j, (st, dest) in enumerate(zip(plan.steps, dests)):
        args = [fixed.get(a) for a in st.args]
        if is_view(st):
            kernels.append(_fixed_view(st, args, fixed, count, mem))
            continue
        dest = (donated or {}).get(j, dest)
        kernels.append(mem.bind(st, dest, args))
        if dest is not None:
            shape = st.spec.shape
            fixed[st.out] = TensorData(dest, shape, tuple(strides_from_shape(shape)), 0)
    return kernels, fixed


def _fixed_view(st, args: list, fixed: dict, count=None, mem=None) -> Callable:
    """A view of fixed arguments is computed once, unless its kernel copied (``reshape``)."""
    if args and all(a is not None for a in args):
        r = st.kernel(*args, out=st.spec, **st.attrs)
        if (mem or HOST).shares(r.storage, args[0].storage):
            fixed[st.out] = r
            return lambda *_, out=None, **attrs: r
    if count is None:
        return st.kernel
    kernel = st.kernel

    def counted(*args, **kw):  # a view that may copy: a copy is counted outside the arena
        r = kernel(*args, **kw)
        if not any(r.storage is a.storage for a in args):
            count(r.storage.nbytes)
        return r

    return counted


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


def _taker(plan: Plan, donate: dict, owned: dict) -> tuple:
    """The inputs of a call with each donated one in its step's own buffer (and those
    inputs' ``TensorData``, the same on every call).

    After the first call the parameter (or optimizer buffer) already lives there: the
    write-back installed the output computed into it. Otherwise (the first call, or new
    values assigned since) its values are copied in once. ``take`` returns ``None``
    when the caller can still see a buffer (:func:`_seen_outside`): writing into it
    would change what the caller holds, so that call runs a table that donates
    nothing (its results are new arrays, as eager's); once the caller lets go,
    donation resumes (the input is copied into the buffer once).
    """
    if not donate:
        return _same, {}
    where = {s: k for k, s in enumerate(plan.inputs)}
    swaps, given = [], {}
    for j, (i, shape) in donate.items():
        buf = owned[j]
        td = given[i] = TensorData.contiguous(buf, shape)
        swaps.append((where[i], buf, td, buf.reshape(shape)))
    base: list = []  # per buffer, the references the runner holds (counted on call 1)
    local = _local_refs()

    def take(inputs: list) -> list | None:
        first = not base
        for n, (k, buf, td, target) in enumerate(swaps):
            d = inputs[k]
            of_d, of_buf = _holders(d, buf)
            if first:
                base.append(of_buf)
            elif _seen_outside(d, buf, of_d - local, of_buf - base[n]):
                return None
            if d.storage is not buf or d.offset or d.strides != td.strides:
                np.copyto(target, d.as_numpy_view().reshape(target.shape))
                inputs[k] = td
        return inputs

    return take, given


def _holders(d, buf) -> tuple:
    return sys.getrefcount(d), sys.getrefcount(buf)


def _local_refs() -> int:
    """What ``_holders`` counts in ``take`` for a value held by one list and one local."""
    held = [object()]
    d = held[0]
    return _holders(d, None)[0]


def _seen_outside(d: TensorData, buf: np.ndarray, of_d: int, of_buf: int) -> bool:
    """Can anything but the input ``d`` (held by its tensor) see the donated ``buf``?

    Eager never writes into the storage a tensor holds (``assign_`` and the optimizers
    install new storage), so what a caller kept keeps its values: ``p.detach()``
    (which shares ``p``'s ``TensorData``), a view or a row of it (which hold ``buf``),
    an optimizer buffer replaced since. A donated buffer is written only
    while its one holder outside the runner is the input it replaces. ``of_d`` and
    ``of_buf`` count references beyond the call's own and the runner's (CPython's
    reference counts; the outputs the runner hands out hold fresh ``TensorData``).
    """
    inside = d.storage is buf
    return of_buf > inside or (inside and of_d > 1)
