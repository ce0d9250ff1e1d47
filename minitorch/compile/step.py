"""Chapter 9, exercises 9.3-9.4: a training step as one pure graph, written back once per call.

A step function reads parameters (and optimizer state) and *changes* them:
``backward`` sets ``.grad``, ``opt.step()`` assigns new values, momentum
buffers are replaced. A graph cannot change anything: it maps inputs to
outputs. So the step is *functionalised*: while tracing, every write is
recorded as ``(target, node)`` instead of done; the graph returns the new
values as extra outputs; after each run one loop writes them into the Python
objects. Parameters, their gradients and optimizer buffers are graph inputs
(fed from the objects on every call), never constants, so an update never
forces a retrace.
"""

from __future__ import annotations

import sys
import time
import types
import warnings

import numpy as np

from ..core import creation
from ..core.errors import OpError  # noqa: F401  (what exercise 9.4 raises)
from ..core.tensor import Tensor, is_grad_enabled
from ..exercises import exercise
from ..nn.module import Module, Parameter
from ..nn.optim import Optimizer
from ..tensor.data import TensorData
from ..tracing import guards
from ..tracing.graph import Node, _unflatten
from ..tracing.jit import EXPLAIN_HOOKS, JitFunction, _Store, cache_key, jit, wrap_report
from ..tracing.tracer import GraphBreakError, Tracer, flatten_output
from .backward import StepTrace


@exercise("9.3")
def step_outputs(
    leaves: list[Node], updates: list[tuple[tuple, Node | None]]
) -> tuple[list[Node], list[tuple[tuple, int | None]]]:
    """The outputs of a functionalised step graph and where each write-back reads from.

    ``leaves`` are the output nodes of what the step function returned.
    ``updates`` are the writes it made while tracing, in order: ``(target,
    node)`` with ``target = (kind, obj, key)`` (for example ``("data", param, None)``,
    ``("grad", param, None)``, ``("item", state_dict, "velocity")``) and
    ``node`` the new value (``None``: set to None, as ``zero_grad`` does).

    ``leaves`` and ``updates`` are read, not changed. Return the pair ``(outputs, writes)``:

    * ``outputs`` starts with ``leaves`` (in order), followed by the nodes the
      writes need that are not outputs yet, each node at most once among the
      added ones;
    * ``writes`` has one ``(target, index)`` per target: only its **last**
      update counts (``backward`` twice, ``step`` twice); ``index`` is the
      position of that node in ``outputs``, or ``None`` for a None update.
      Two targets are the same when ``kind`` and ``key`` are equal and ``obj`` is
      the same object; the targets keep the order they were first written in.

    Example:
        >>> outs, writes = step_outputs([loss], [(("grad", w, None), g1),
        ...                                      (("grad", w, None), g2),
        ...                                      (("data", w, None), w2)])
        >>> outs == [loss, g2, w2], [i for _, i in writes]
        (True, [1, 2])
    """
    raise NotImplementedError("Exercise 9.3: step_outputs")


@exercise("9.4")
def write_back(writes: list[tuple[tuple, int | None]], values: list[Tensor]) -> None:
    """Apply one run's results: for each ``((kind, obj, key), index)`` of ``writes``.

    ``value = values[index]`` (``None`` when ``index is None``); then by ``kind``:

    * ``"data"``: a parameter's new values, ``obj._data = value._data`` (the same
      Parameter object stays in the model; ``value`` is never None here);
    * ``"grad"``: ``obj.grad = value`` (None allowed: ``zero_grad``);
    * ``"item"``: optimizer state, ``obj[key] = value``.

    Any other kind raises ``OpError("compile", ...)`` naming it.

    Example:
        >>> write_back([(("grad", w, None), 0), (("data", w, None), 1)], [g, w2])
        >>> w.grad is g, w.numpy() == w2.numpy()
    """
    raise NotImplementedError("Exercise 9.4: write_back")


# ---------------------------------------------------------------- finding the state


_GLOBAL_NAMES: dict = {}  # code -> the global names it (or a function inside it) reads


def find_state(fn, values: list) -> tuple[list[Tensor], list[Optimizer]]:
    """The parameters and optimizers a step function can reach.

    Looked for in the globals its code names, its closure, its arguments and
    ``self`` of a bound method or a module: every ``nn.Module`` (its
    parameters), ``Optimizer`` (its parameters and state) and leaf tensor with
    ``requires_grad``. Other tensors it reads are constants of the graph.
    """
    objs = list(values)
    target = fn
    if isinstance(fn, types.MethodType):
        objs.append(fn.__self__)
        target = fn.__func__
    elif isinstance(fn, Module):
        objs.append(fn)
        target = type(fn).forward
    code = getattr(target, "__code__", None)
    if code is not None:
        g = target.__globals__
        names = _GLOBAL_NAMES.get(code)
        if names is None:
            names = _GLOBAL_NAMES[code] = sorted(guards._names(code))
        objs += [g[n] for n in names if n in g]
        for cell in target.__closure__ or ():
            try:
                objs.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
    params, seen, opts = [], set(), []

    def add(p):
        if id(p) not in seen:
            seen.add(id(p))
            params.append(p)

    for o in objs:
        if isinstance(o, Module):
            for p in o.parameters():
                add(p)
        elif isinstance(o, Optimizer):
            if all(o is not x for x in opts):
                opts.append(o)
            for _, p in o.named_params():
                add(p)
        elif isinstance(o, Tensor) and o.requires_grad and o.is_leaf:
            add(o)
    return params, opts


def _counter(v: int) -> np.ndarray:
    return np.array(float(v))  # a step count as the graph reads it: a float64 scalar


def _is_counter(v) -> bool:
    """An int in optimizer state (Adam's step count): a graph input, not a guarded value."""
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_key(opt: Optimizer) -> tuple:
    # A None entry reads as a missing one (``state.get("velocity")``, SGD without
    # momentum): the state an optimizer creates on its first step then keys alike.
    state = tuple(
        (
            name,
            id(st),
            tuple(
                (k, "int" if _is_counter(v) else _value_key(v))
                for k, v in st.items()
                if v is not None
            ),
        )
        for name, st in opt.state.items()
        if any(v is not None for v in st.values())
    )
    defaults = tuple((k, _value_key(v)) for k, v in sorted(opt.defaults.items()))
    return (id(opt), type(opt), defaults, state)


def _layout(t: Tensor) -> tuple:
    """What a key needs of a tensor's spec, read without building a ``Spec`` (every call)."""
    d = t._data
    return d.shape, d.storage.dtype, t.device


def _value_key(v):
    if isinstance(v, Tensor):
        return ("tensor", _layout(v), v._requires_grad)
    if v is None or isinstance(v, (bool, int, float, str, tuple)):
        return guards.value_key(v)
    return ("object", id(v))


# ---------------------------------------------------------------- tracing one step


class StepEntry:
    """One traced step: the compiled graph, where its inputs come from, what it writes."""

    def __init__(self, compiled, feeds, writes, tree, n_result, step_counts, py_writes):
        self.compiled, self.feeds, self.writes = compiled, feeds, writes
        self.py_writes = py_writes  # Python values of optimizer state
        self.counters: list = []  # int counters written back (Adam's step count)
        self.tree, self.n_result, self.step_counts = tree, n_result, step_counts
        # jit's guards over the Python state the step read (globals, closures, module
        # attributes and flags, the module tree's classes), checked on every call
        self.values: dict = {}
        self.sizes: dict = {}
        self.idents: dict = {}
        self._guard = None
        self.grad_deps: list = []  # (k, spec or None): .grad read before the step wrote it
        self.aliases: list = []  # roles that were one tensor when traced (grad is velocity)
        self.same_counts: list = []  # (counter, counter) paths equal when traced: one input
        self.names: list = []  # the parameters' names, for messages
        self.result = None  # the first call's result
        self.returned: list = []  # (result leaf, ("arg", slot) or ("param", k)): itself
        self.out_devices = [n.spec.device for n in compiled.graph.outputs]

    def check(self, fn, values: list, ctx) -> list[str]:
        """Why this entry does not fit the call now ([] if it does), as jit's guards say."""
        params, opts = ctx
        if self._guard is None:  # the guards as code, built on the first call (see guards)
            self._guard = guards.compile_check(self.values, self.sizes, self.idents, [])
        if self._guard(fn, values):
            reasons = []
        else:
            reasons = guards.check((fn, values), self.values, self.sizes, self.idents, [])
        for k, spec in self.grad_deps:
            g = params[k].grad
            now = None if g is None else g.spec
            if now != spec:
                was, now = ("None" if x is None else str(x) for x in (spec, now))
                reasons.append(f"{self.names[k]}.grad changed from {was} to {now}")
        for (a, b, c), (x, y, z) in self.same_counts:
            if opts[a].state[b].get(c) != opts[x].state[y].get(z):
                reasons.append(f"the step counts of {b} and {y} were equal when traced (one "
                               "input) and differ now")  # fmt: skip
        for group in self.aliases:
            first = _role(group[0], params, opts)
            if any(_role(r, params, opts) is not first for r in group[1:]):
                reasons.append(
                    " and ".join(_role_name(r, self.names) for r in group)
                    + " were one tensor when traced and are two now"
                )
        return reasons

    def run(self, values: list, params: list, opts: list):
        outs = self.compiled.run_data(self.datas(values, params, opts))
        if outs is None:
            outs = self.compiled.run(*self.gather(values, params, opts))
        else:
            make, devices = Tensor._make, self.out_devices
            outs = [make(d, dev) for d, dev in zip(outs, devices)]
        write_back(self.writes, outs)
        for state, key in self.counters:  # a counter goes back to being a Python int
            state[key] = int(round(float(state[key].numpy().flat[0])))
        for k, d in self.step_counts:
            opts[k].steps += d
        for state, key, v in self.py_writes:
            state[key] = v
        result = outs[: self.n_result]
        for j, (kind, a) in self.returned:
            result[j] = values[a] if kind == "arg" else params[a]
        return _unflatten(self.tree, result)

    def datas(self, values: list, params: list, opts: list) -> list:
        """What :meth:`gather` gives, as the plan reads it: each input's data."""
        out = []
        for kind, a, b, c in self.feeds:
            if kind == "arg":
                out.append(values[a]._data)
            elif kind == "param":
                out.append(params[a]._data)
            elif kind == "grad":
                out.append(params[a].grad._data)
            elif kind == "argrad":
                out.append(values[a].grad._data)
            elif kind == "counter":
                out.append(TensorData.from_numpy(_counter(opts[a].state[b][c])))
            else:
                t = opts[a].state[b][c]
                d = t._data
                if _count(t) > _ALONE:  # the caller kept this buffer; the write-back replaces
                    d = TensorData(d.storage, d.shape, d.strides, d.offset)  # it: never donated
                out.append(d)
        return out

    def gather(self, values: list, params: list, opts: list, autograd=False) -> list:
        """The graph's inputs now: arguments, parameters, gradients, optimizer buffers
        (with ``autograd``, as they are, so that the outputs record what they came from)."""
        inputs = []
        for kind, a, b, c in self.feeds:
            if kind == "arg":
                t = values[a]
            elif kind == "param":
                t = params[a]
            elif kind == "grad":
                t = params[a].grad
            elif kind == "argrad":
                t = values[a].grad
            elif kind == "counter":
                spec = self.compiled.specs[len(inputs)]
                inputs.append(Tensor(_counter(opts[a].state[b][c]), device=spec.device))
                continue
            else:
                t = opts[a].state[b][c]
            # a plain view of the data: the compiled plan runs only without autograd inputs
            inputs.append(
                Tensor._make(t._data, t.device) if t.requires_grad and not autograd else t
            )
        return inputs


def _count(t) -> int:
    return sys.getrefcount(t)


def _alone() -> int:
    """What ``_count`` says in ``datas`` of a tensor only its state dict holds."""
    state = {"key": object()}
    t = state["key"]
    return _count(t)


_ALONE = _alone()


def _returned(x, call_values: list, slots: list, params: list) -> tuple:
    """``(argument slot, None)`` or ``(None, parameter index)`` when ``x`` is one, else Nones."""
    for i in slots:
        if x is call_values[i]:
            return i, None
    for k, p in enumerate(params):
        if x is p:
            return None, k
    return None, None


def _role(role: tuple, params, opts):
    """The tensor a step reads in ``role``: ("grad", k) or ("state", k, name, key)."""
    if role[0] == "grad":
        return params[role[1]].grad
    return opts[role[1]].state.get(role[2], {}).get(role[3])


def _role_name(role: tuple, names: list) -> str:
    return f"{names[role[1]]}.grad" if role[0] == "grad" else f"{role[3]}[{role[2]}]"


class _GradWatch:
    """While a step is traced: which parameters' ``.grad`` were read before being written.

    A step that calls ``zero_grad()`` first never reads the gradient it was called
    with, so whether it was None does not matter (no retrace on call 2); one that
    accumulates (no ``zero_grad``) reads it, and its presence and shape are guarded.
    """

    def __init__(self, params):
        self.first = {id(p): None for p in params}  # id -> "read" | "write"

    def __enter__(self):
        first = self.first

        def get(p):
            if first.get(id(p), "") is None:
                first[id(p)] = "read"
            return p.__dict__.get("grad")

        def put(p, value):
            if first.get(id(p), "") is None:
                first[id(p)] = "write"
            p.__dict__["grad"] = value

        Parameter.grad = property(get, put)
        return self

    def __exit__(self, *exc):
        del Parameter.grad

    def read(self, p) -> bool:
        return self.first.get(id(p)) == "read"


def _snapshot(params, opts):
    grads = [(p, p.grad, p._data) for p in params]
    states = [(o, {n: dict(s) for n, s in o.state.items()}, o.steps) for o in opts]
    return grads, states


def _restore(snap) -> None:
    grads, states = snap
    for p, g, d in grads:
        p.grad, p._data = g, d
    for o, st, steps in states:  # the same dict objects: write-backs target them
        for name, d in o.state.items():
            d.clear()
            d.update(st.get(name, {}))
        for name, d in st.items():
            o.state.setdefault(name, dict(d))
        o.steps = steps


def trace_step(
    fn, binder, names, values, bound, params, opts, name, options, debug=False, sizes=None
):
    """Trace one call of a training step into a graph; ``None`` if it trains nothing.

    ``sizes``, a ``SizeLog``, logs the checks the step makes on sizes (dynamic dims)."""
    t0 = time.perf_counter()
    before = guards.scan(fn, values, names)
    slots = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    tracer = Tracer(name, fullgraph=True, why="a compiled training step", sizes=sizes)
    external, roles = {}, {}
    for k, p in enumerate(params):
        external[id(p)] = (("param", k), f"p{k}", p)
        if p.grad is not None:
            external[id(p.grad)] = (("grad", k), f"p{k}_grad", p.grad)
            roles.setdefault(id(p.grad), []).append(("grad", k))
    for i in slots:  # an argument's .grad accumulates as in eager: it is an input too
        g = values[i].grad if values[i].requires_grad else None
        if g is not None and id(g) not in external:
            external[id(g)] = (("argrad", i), f"a{i}_grad", g)
    snap = _snapshot(params, opts)
    counters, shared, same_counts = [], {}, []
    for k, o in enumerate(opts):
        named = dict(o.named_params())
        for pname, st in o.state.items():
            for key, v in st.items():
                if isinstance(v, Tensor):
                    external[id(v)] = (("state", k, pname, key), f"{key}_{pname}", v)
                    roles.setdefault(id(v), []).append(("state", k, pname, key))
                elif _is_counter(v) and pname in named:
                    # traced as a float64 scalar, so that `beta ** t` is recorded, not baked
                    # in: computed once per step, in eager's precision (a Python float)
                    param = named[pname]  # on its device, as eager's buffers
                    path = (k, pname, key)
                    first = shared.get((v, param.device))
                    if first is not None:  # equal counts are one input: `beta ** t` once
                        st[key] = first[0]  # for all parameters (checked equal per call)
                        same_counts.append((first[1], path))
                        counters.append((st, key))
                        continue
                    t = st[key] = Tensor(np.array(float(v)), device=param.device)
                    t._weak = True  # and, as a Python number, it takes a tensor's kind
                    external[id(t)] = (("counter", *path), f"{key}_{pname}", t)
                    shared[(v, param.device)] = (t, path)
                    counters.append((st, key))
    tracer.set_external(external)
    st = tracer.training = StepTrace(tracer)
    rng = creation._rng[0]
    rng_state = rng.bit_generator.state
    old_assign = Parameter.assign_

    def assign_(p, value):  # inside this trace: recorded; anywhere else: as before
        return st.assign(p, value) if tracer.live else old_assign(p, value)

    Parameter.assign_ = assign_
    try:
        with tracer:
            call_values = list(values)
            for i in slots:
                p = tracer.input(values[i].spec, names[i].replace("[", "").replace("]", ""))
                p.requires_grad = values[i].requires_grad
                if p.requires_grad:
                    st.grad_nodes.add(p.node)
                    st.leaves[p.node] = values[i]
                call_values[i] = p
            with _GradWatch(params) as watch:
                result = binder.call(fn, call_values, bound)
            objects: list = []
            leaves, tree = flatten_output(tracer, result, objects)
            trained = st.backward_calls or st.updates
            if trained:
                _collect_writes(st, params, opts, snap)
    except BaseException:
        _restore(snap)
        raise
    finally:
        Parameter.assign_ = old_assign
    if creation._rng[0] is not rng or rng.bit_generator.state != rng_state:
        _restore(snap)
        creation._rng[0] = rng
        rng.bit_generator.state = rng_state  # eager draws them again, in the same order
        raise GraphBreakError(
            f"random numbers were drawn (rand/randn) while tracing {name}; a graph would "
            "freeze them. Hint: pass random tensors in as arguments"
        )
    outputs, writes = step_outputs(leaves, st.updates)
    py_writes = _python_writes(opts, snap)
    # the Python state goes back to how it was: the first run writes the real values
    step_counts = [(k, o.steps - s) for k, (o, _, s) in enumerate(snap[1]) if o.steps != s]
    _restore(snap)
    graph = tracer.graph
    graph.set_outputs(outputs)
    where = {n: (("arg", i, None, None)) for n, i in zip(graph.inputs, slots)}
    for node, path in tracer.state_inputs:
        where[node] = (path + (None, None, None))[:4]
    feeds = [where[n] for n in graph.inputs]
    t1 = time.perf_counter()
    compiled = graph.compile(debug=debug, options=options)
    compiled.donate(_donations(feeds, writes, params, opts))
    entry = StepEntry(compiled, feeds, writes, tree, len(leaves), step_counts, py_writes)
    # an argument or parameter returned as itself comes back as itself (eager's object,
    # updated in place by the write-back), not as a snapshot of its values
    entry.returned = [
        (j, ("arg", i) if i is not None else ("param", k))
        for j, x in enumerate(objects)
        for i, k in [_returned(x, call_values, slots, params)]
        if i is not None or k is not None
    ]
    after = guards.scan(fn, values, names)
    entry.values, entry.sizes, entry.idents = after.values, after.sizes, after.idents
    entry.side_effects = guards.side_effects(before, after)
    found = {id(t): n for _, n, t in before.tensors.values()}
    entry.names = [found.get(id(p)) or f"parameter {k} {p.spec}" for k, p in enumerate(params)]
    entry.grad_deps = [
        (k, None if g is None else g.spec) for k, (p, g, _) in enumerate(snap[0]) if watch.read(p)
    ]
    # a gradient the step overwrote before reading it (zero_grad) may alias anything
    read = [[r for r in rs if r[0] != "grad" or watch.read(params[r[1]])] for rs in roles.values()]
    entry.aliases = [tuple(rs) for rs in read if len(rs) > 1]
    entry.trained = bool(trained)
    entry.counters = [
        (state, key)
        for state, key in counters
        if any(t[0] == "item" and t[1] is state and t[2] == key for t, _ in writes)
    ]
    entry.same_counts = same_counts
    entry.times = {"trace": t1 - t0, "passes + lowering": time.perf_counter() - t1}
    nodes, n = graph.nodes, len(graph.nodes)
    b, u = st.marks.get("backward", n), st.marks.get("backward_end", n)

    def ops(seq) -> int:
        return sum(1 for x in seq if x.op not in ("input", "const"))

    entry.phases = {
        "forward": ops(nodes[:b]),
        "backward": ops(nodes[b:u]),
        "update": ops(nodes[u:]),
    }
    return entry


def _donations(feeds: list, writes: list, params: list, opts: list) -> list:
    """``(input, output)`` pairs where the output is written back over that input's object:
    a parameter's new values, an optimizer buffer's. Their old values die with the call,
    so the step may compute the new ones in their storage (as PyTorch updates in place)."""
    where = {}
    for k, (kind, a, b, c) in enumerate(feeds):
        if kind == "param":
            where[("data", id(params[a]), None)] = k
        elif kind == "state":
            where[("item", id(opts[a].state[b]), c)] = k
    return [
        (where[(kind, id(obj), key)], j)
        for (kind, obj, key), j in writes
        if j is not None and (kind, id(obj), key) in where
    ]


def _python_writes(opts, snap) -> list:
    """Optimizer state that is not a tensor and changed while tracing (set again per run)."""
    out = []
    for o, old, _ in snap[1]:
        for name, state in o.state.items():
            for key, v in state.items():
                if isinstance(v, Tensor):
                    continue
                before = old.get(name, {}).get(key, _MISSING)
                if before is _MISSING or _value_key(before) != _value_key(v):
                    out.append((state, key, v))
    return out


_MISSING = object()


def _collect_writes(st: StepTrace, params, opts, snap) -> None:
    """The writes made by plain Python assignment (``.grad``, optimizer state): as updates."""
    tracer = st.tracer
    for p, old, _ in snap[0]:
        if p.grad is not old:
            node = None if p.grad is None else tracer.lift(p.grad)
            st.updates.append((("grad", p, None), node))
    for leaf in st.leaves.values():  # arguments with requires_grad get a .grad too, as in eager
        if not isinstance(leaf, Parameter) and all(leaf is not p for p in params):
            if leaf.grad is not None and hasattr(leaf.grad, "node"):
                st.updates.append((("grad", leaf, None), tracer.lift(leaf.grad)))
    for o in opts:
        for state in o.state.values():
            for key, v in state.items():
                if isinstance(v, Tensor) and hasattr(v, "node"):
                    st.updates.append((("item", state, key), tracer.lift(v)))
                elif isinstance(v, Tensor) and id(v) not in tracer.external:
                    # a tensor made while tracing (Adam's zeros): a constant of the graph
                    st.updates.append((("item", state, key), tracer.lift(v)))


class _Handed:
    """What ``_trace`` returns when no step graph runs (eager from now on, or plain jit)."""

    def __init__(self, result):
        self.result = result

    def check(self, fn, values, ctx) -> list[str]:
        return ["no step graph"]


class CompiledStep(JitFunction):
    """``minitorch.compile(step)``: jit whose tracer also records backward and updates.

    The front end is jit's: the same binder, cache (a store of entries under a key),
    guards on the Python state the step reads, retrace reasons, cache limit and
    ``explain``. What a step adds: the call's context (the parameters and optimizer
    it reaches), their specs and ``requires_grad`` and the optimizer's Python state
    in the key, and an entry that writes its results back after each run.
    """

    def __init__(self, fn, options, fullgraph=False, debug=False, cache_limit=8):
        super().__init__(fn, fullgraph=fullgraph, debug=debug, cache_limit=cache_limit)
        self.options = options
        self.store = _Store()  # a step's entries write into its own objects: not shared
        self.eager_reason: str | None = None
        self._jit = None  # a step that trains nothing is plain jit's business
        self.last: StepEntry | None = None
        self._created: list = []  # this call's (optimizer, steps, buffers made, dicts made)
        self._parked: dict = {}  # id(optimizer) -> (it, its state dicts kept out of .state)

    @property
    def entries(self) -> dict:
        """The step graphs traced so far, by (key, number)."""
        return {
            (k, i): e
            for k, es in self.store.entries.items()
            for i, e in enumerate(es)
            if isinstance(e, StepEntry)
        }

    def __call__(self, *args, **kwargs):
        if self._jit is not None:
            return self._jit(*args, **kwargs)
        if self.eager_reason is not None:
            return self.fn(*args, **kwargs)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            self._drop_unused_state()

    def _context(self, values):
        params, opts = find_state(self.fn, values)
        self._created = []
        for o in opts:  # the buffers of the first step exist before it: one trace, not two
            if o.steps:  # it has stepped: eager has made its buffers too
                o.init_state()
                continue
            kept = self._parked.pop(id(o), None)
            parked = kept[1] if kept is not None and kept[0] is o else {}
            for name, d in parked.items():  # the same dicts: the key holds their ids
                o.state.setdefault(name, d)
            had = {n: set(d) for n, d in o.state.items() if n not in parked}
            o.init_state()
            made = [(d, [k for k in d if k not in had.get(n, ())]) for n, d in o.state.items()]
            self._created.append((o, o.steps, made, [n for n in o.state if n not in had]))
        return params, opts

    def _drop_unused_state(self) -> None:
        """Eager creates an optimizer's buffers in its ``step()``: a call that did not
        step it (it only zeroed gradients, or updated by hand) leaves none behind."""
        for o, steps, made, names in self._created:
            if o.steps != steps:
                continue
            for d, keys in made:
                for k in keys:
                    d.pop(k, None)
            parked = {n: o.state.pop(n) for n in names if n in o.state and not o.state[n]}
            if parked:
                self._parked[id(o)] = (o, parked)
        self._created = []

    def _key(self, values, ctx=None) -> tuple:
        params, opts = ctx if ctx is not None else find_state(self.fn, values)
        # an argument's .grad, when it has one, is added to (backward accumulates)
        grads = tuple(
            (v.requires_grad, None if v.grad is None else _layout(v.grad))
            for v in values
            if isinstance(v, Tensor)
        )
        return (
            guards.by_bits(cache_key(tuple(values))),
            grads,
            is_grad_enabled(),
            tuple((id(p), _layout(p), p._requires_grad) for p in params),
            tuple(_opt_key(o) for o in opts),
        )

    _PARTS = ("the parameters (or their requires_grad)", "the optimizer state")

    def _arg_reasons(self, names, key) -> list[str]:
        reasons = super()._arg_reasons(names, key)
        old = self._last_key
        if old is not None and not reasons:
            changed = [p for p, a, b in zip(self._PARTS, old[3:], key[3:]) if a != b]
            reasons = [" and ".join(changed) + " changed"] if changed else []
        return reasons

    def _run(self, entry, names, values, bound, args, kwargs, ctx=None):
        self.last = entry
        return entry.run(values, *ctx)

    def _trace(self, names, values, bound, key, ctx=None):
        params, opts = ctx
        try:
            entry = trace_step(
                self.fn, self._binder, names, values, bound, params, opts, self.name,
                self.options, self.debug,
            )  # fmt: skip
        except GraphBreakError as e:
            if self.fullgraph:
                raise
            self.eager_reason = str(e)
            warnings.warn(
                f"compile({self.name}): runs eagerly from now on: {e}", RuntimeWarning, stacklevel=4
            )
            return _Handed(self._binder.call(self.fn, list(values), bound))
        self.trace_count += 1
        self.store.trace_count += 1
        if not entry.trained:  # no backward, no update: an inference function, plain jit's
            self._jit = jit(self.fn, fullgraph=self.fullgraph, options=self.options)
            # this call (Python ran once): with autograd, as jit runs it from now on
            out = entry.compiled.run(*entry.gather(values, params, opts, autograd=True))
            return _Handed(_unflatten(entry.tree, list(out)))
        self._warn_side_effects(entry.side_effects, "compile")
        t0 = time.perf_counter()
        entry.result = entry.run(values, params, opts)
        entry.times["first run"] = time.perf_counter() - t0
        self.last = entry
        return entry

    def explain_call(self, *args, **kwargs):
        """``minitorch.explain(compiled_step)(*args)``: run one step and describe what ran."""
        self.last = None
        out = self(*args, **kwargs)
        report = StepReport(self, self.last, out)
        print(report)
        return report

    def __repr__(self) -> str:
        return f"<compiled step {self.name}: {len(self.entries)} graph(s), {self.options}>"


def _runner_name(runner) -> str:
    """What runs the plan: chapter 6's loop, or how the executor runs it."""
    describe = getattr(runner, "describe", None)
    if describe is not None:
        return describe()
    return "run_plan (chapter 6)" if runner is None else getattr(runner, "__name__", "?")


class StepReport:
    """What ``explain`` says about a compiled step: mode, graph, phases, writes, stage times."""

    def __init__(self, step: CompiledStep, entry: StepEntry | None, out):
        self.step, self.entry, self.out = step, entry, out

    def __str__(self) -> str:
        s, e = self.step, self.entry
        lines = [f"compile({s.name}): mode {s.options.mode} [{s.options}]"]
        if s._jit is not None:
            return lines[0] + "\n  trains nothing: a jit function (see minitorch.explain(fn))"
        if s.eager_reason:
            return lines[0] + f"\n  runs eagerly: {s.eager_reason}"
        lines.append(f"  graphs: {len(s.entries)} (traced {s.trace_count} times)")
        if e is None:
            return "\n".join(lines)
        c = e.compiled
        lines.append(
            f"  step graph: {len(c.traced.ops)} ops traced "
            + ", ".join(f"{k} {v}" for k, v in e.phases.items())
            + f"; {len(c.graph.ops)} after passes; runner {_runner_name(c.runner)}"
        )
        kinds: dict[str, int] = {}
        for (kind, _, _), _i in e.writes:
            kinds[kind] = kinds.get(kind, 0) + 1
        names = {"data": "parameters", "grad": "gradients", "item": "optimizer buffers"}
        lines.append(
            "  written back per call: "
            + ", ".join(f"{v} {names.get(k, k)}" for k, v in kinds.items())
        )
        lines.append(
            "  time per stage: "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in getattr(e, "times", {}).items())
        )
        if s.recompiles:
            lines.append("  retraced: " + "; ".join(s.recompiles))
        dynamic = [x for d in s.dynamic for x in d.lines] or s.dynamic_notes
        if dynamic:  # chapter 9's dynamic dims: which sizes are symbols, or why not
            lines += ["  dynamic dims:"] + [f"    {x}" for x in dynamic]
        lines += [f"  {line}" for hook in EXPLAIN_HOOKS for line in hook(c)]  # every stage's
        return "\n".join(wrap_report(lines))
