"""``minitorch.jit``: trace on the first call per input signature, run the cached graph after.

The cache key (exercise 5.7) describes every argument: a tensor by its shape,
dtype and device, anything else by its value (non-tensor arguments are
*static*: baked into the graph). When a key misses the cache but an older one
exists, the function is traced again and :func:`guard_failures` (exercise 5.8)
says why. After ``cache_limit`` (8) signatures the function runs eagerly, with
one warning.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import tempfile
import warnings
from dataclasses import dataclass, field

from ..core.errors import OpError  # noqa: F401  (the error the exercises raise)
from ..core.tensor import Tensor
from ..exercises import exercise
from .graph import Graph
from .tracer import Break, Proxy, Tracer, flatten_output, tracing

log = logging.getLogger("minitorch.jit")


@exercise("5.7")
def cache_key(args: tuple) -> tuple:
    """A hashable description of ``args`` that decides whether a cached graph fits.

    One entry per argument:

    * a Tensor -> ``("tensor", shape, dtype_name, device)``, e.g.
      ``("tensor", (2, 3), "float32", "cpu")`` (values do not matter);
    * anything else is static -> ``("static", type_name, value)`` with lists
      turned into tuples (recursively) so that the key is hashable, e.g.
      ``("static", "list", (1, 2))``. ``True`` and ``1`` differ by type name.
    * a Tensor inside a list/tuple, or a value that cannot be hashed, raises
      ``OpError("jit", problem, hint)`` naming the argument's position.

    Example:
        >>> cache_key((minitorch.ones(2, 3), 0.5))
        (('tensor', (2, 3), 'float32', 'cpu'), ('static', 'float', 0.5))

    Hint: ``hash(value)`` raises ``TypeError`` for unhashable values.
    """
    raise NotImplementedError("Exercise 5.7: cache_key")


@exercise("5.8")
def guard_failures(names: list[str], old: tuple, new: tuple) -> list[str]:
    """Why the cache key ``new`` does not match ``old``: one message per failed guard.

    ``names[i]`` is the name of argument ``i``. Compare entry by entry:

    * two tensors: for each of ``shape``, ``dtype``, ``device`` that differs,
      ``"x.shape changed from (2, 3) to (4, 3)"`` (``repr`` of the old and new
      shape tuple; dtype and device as their names, e.g. ``float32``);
    * two static values: ``"n changed from 3 to 4"`` (``repr`` of the values),
      or ``"n changed type from int to float"`` when the type names differ;
    * a tensor and a static value: ``"x changed from a tensor to a static int"``
      or ``"x changed from a static int to a tensor"``;
    * a different number of arguments: the single message
      ``"the number of arguments changed from 2 to 3"``.

    Equal keys give ``[]``.

    Example:
        >>> guard_failures(["x"], (("tensor", (2, 3), "float32", "cpu"),),
        ...                       (("tensor", (4, 3), "float32", "cpu"),))
        ['x.shape changed from (2, 3) to (4, 3)']
    """
    raise NotImplementedError("Exercise 5.8: guard_failures")


# ---------------------------------------------------------------- argument binding


class _Binder:
    """Flattens a call into named values (``*args`` expanded) and rebuilds it."""

    def __init__(self, fn):
        try:
            self.sig = inspect.signature(fn)
        except (TypeError, ValueError):
            self.sig = None

    def flatten(self, args, kwargs):
        if self.sig is None:
            return [f"arg{i}" for i in range(len(args))], list(args), None
        bound = self.sig.bind(*args, **kwargs)
        bound.apply_defaults()
        names, values = [], []
        for p in self.sig.parameters.values():
            v = bound.arguments[p.name]
            if p.kind is p.VAR_POSITIONAL:
                names += [f"{p.name}[{i}]" for i in range(len(v))]
                values += list(v)
            else:
                names.append(p.name)
                values.append(v)
        return names, values, bound

    def call(self, fn, values, bound):
        if bound is None:
            return fn(*values)
        pos, kw, k = [], {}, 0
        for p in self.sig.parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                n = len(bound.arguments[p.name])
                pos += values[k : k + n]
                k += n
                continue
            v = values[k]
            k += 1
            if p.kind is p.VAR_KEYWORD:
                kw.update(v)
            elif p.kind is p.KEYWORD_ONLY:
                kw[p.name] = v
            else:
                pos.append(v)
        return fn(*pos, **kw)


# ---------------------------------------------------------------- tracing one call


@dataclass
class Trace:
    """What one trace produced: the graphs, the breaks, and the result of that call."""

    graphs: list[Graph]
    breaks: list[Break]
    result: object = None
    compiled: object = None
    tensor_slots: list[int] = field(default_factory=list)

    @property
    def graph(self) -> Graph:
        return self.graphs[0]


def trace_call(
    fn, binder, names, values, bound, fullgraph: bool, name: str, run=True, passes=None, debug=False
) -> Trace:
    """Trace ``fn`` on concrete ``values``; breaks split the graph unless ``fullgraph``.

    With ``run`` the graph is also compiled and run on ``values`` (the result of this call).
    """
    slots = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    tracer = Tracer(name, fullgraph=fullgraph, concrete=[values[i] for i in slots])
    with tracer:
        call_values = list(values)
        for i in slots:
            call_values[i] = tracer.input(
                values[i].spec, names[i].replace("[", "").replace("]", "")
            )
        result = binder.call(fn, call_values, bound)
        if tracer.breaks:
            leaves: list = []

            def concrete(x):
                if isinstance(x, Proxy):
                    leaves.append(x.node)
                    return tracer.evaluate(x.node)
                if isinstance(x, (tuple, list)):
                    return type(x)(concrete(v) for v in x)
                return x

            out = concrete(result)
            tracer.finish(leaves)
            return Trace(tracer.graphs, tracer.breaks, out, None, slots)
        leaves, tree = flatten_output(tracer, result)
    tracer.graph.set_outputs(leaves, tree)
    if not run:
        return Trace([tracer.graph], [], None, None, slots)
    compiled = tracer.graph.compile(passes=passes, debug=debug)  # chapter 6 passes
    out = compiled.run(*(values[i] for i in slots))
    return Trace([tracer.graph], [], out, compiled, slots)


def _dump(graphs: list[Graph], debug: bool, tag: str) -> None:
    folder = os.environ.get("MINITORCH_DUMP_GRAPH")
    if not folder and not debug:
        return
    if debug:
        for g in graphs:
            print(g.text())
    folder = folder or os.path.join(tempfile.gettempdir(), "minitorch_graphs")
    os.makedirs(folder, exist_ok=True)
    for k, g in enumerate(graphs):
        base = os.path.join(folder, f"{tag}_{k}")
        with open(base + ".txt", "w", encoding="utf-8") as f:
            f.write(g.text() + "\n")
        with open(base + ".dot", "w", encoding="utf-8") as f:
            f.write(g.to_dot() + "\n")
        if debug:
            print(f"(written to {base}.txt and {base}.dot)")


class JitFunction:
    """A function that is traced per input signature and then runs its cached graph."""

    def __init__(self, fn, fullgraph=False, debug=False, cache_limit=8, passes=None):
        functools.update_wrapper(self, fn)
        self.passes = passes  # chapter 6: None runs the default pipeline
        self.fn, self.fullgraph, self.debug, self.cache_limit = fn, fullgraph, debug, cache_limit
        self._binder = _Binder(fn)
        self.cache: dict[tuple, Trace] = {}
        self.recompiles: list[str] = []  # why each retrace happened
        self.trace_count = 0
        self.fell_back = False
        self._last_key = None
        self._last_names: list[str] = []

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", "graph").replace("<lambda>", "lambda")

    def __call__(self, *args, **kwargs):
        names, values, bound = self._binder.flatten(args, kwargs)
        if tracing() and any(isinstance(v, Proxy) for v in values):
            return self.fn(*args, **kwargs)  # called inside another trace: inline it
        key = cache_key(tuple(values))
        entry = self.cache.get(key)
        if entry is not None:
            if entry.compiled is not None:
                return entry.compiled.run(*(values[i] for i in entry.tensor_slots))
            return self._trace(names, values, bound).result  # breaks: Python runs every call
        if self.fell_back:
            return self.fn(*args, **kwargs)
        if self.cache:
            if len(self.cache) >= self.cache_limit:
                self.fell_back = True
                warnings.warn(
                    f"jit({self.name}): traced {len(self.cache)} signatures (the cache limit); "
                    "new signatures now run eagerly. Hint: keep shapes fixed, or pass changing "
                    "numbers as tensors instead of Python values",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return self.fn(*args, **kwargs)
            reasons = guard_failures(names, self._last_key, key)
            reason = "; ".join(reasons) or "a new signature"
            self.recompiles.append(reason)
            log.info("jit(%s): retracing because %s", self.name, reason)
            if self.debug:
                print(f"jit({self.name}): retracing because {reason}")
        entry = self._trace(names, values, bound)
        self.cache[key] = entry
        self._last_key, self._last_names = key, names
        return entry.result

    def _trace(self, names, values, bound) -> Trace:
        t = trace_call(
            self.fn,
            self._binder,
            names,
            values,
            bound,
            self.fullgraph,
            self.name,
            passes=self.passes,
            debug=self.debug,
        )
        self.trace_count += 1
        _dump(t.graphs, self.debug, f"{self.name}_{self.trace_count}")
        return t

    def trace(self, *args, **kwargs) -> Graph:
        """The staged form: trace on example inputs and return the (single) graph."""
        names, values, bound = self._binder.flatten(args, kwargs)
        t = trace_call(self.fn, self._binder, names, values, bound, True, self.name, run=False)
        _dump(t.graphs, self.debug, f"{self.name}_staged")
        return t.graph

    @property
    def graphs(self) -> list[Graph]:
        """Every graph in the cache, oldest first."""
        return [g for t in self.cache.values() for g in t.graphs]

    def __repr__(self) -> str:
        return f"<jit {self.name}: {len(self.cache)} cached signature(s)>"


# One JitFunction per (function, options), kept on the function itself (so it dies
# with it), so that ``minitorch.jit(step)(x)`` inside an eager loop traces once.
_ATTR = "__minitorch_jit__"


def jit(fn=None, *, fullgraph=False, debug=False, cache_limit=8, passes=None):
    """Trace ``fn`` into a graph on first call per signature; run the cached graph afterwards.

    ``@minitorch.jit``, ``@minitorch.jit(fullgraph=True)`` and ``minitorch.jit(fn)(x)``
    all work; calling ``minitorch.jit`` again on the same function with the same
    options returns the same cached object. ``debug=True`` (or
    ``MINITORCH_DUMP_GRAPH=<dir>``) writes every graph as text and DOT. ``passes``
    chooses the graph passes (chapter 6; None: the default pipeline).
    """
    if fn is None:
        return lambda f: jit(
            f, fullgraph=fullgraph, debug=debug, cache_limit=cache_limit, passes=passes
        )
    passes = None if passes is None else tuple(passes)
    if isinstance(fn, JitFunction):
        fn = fn.fn
    options = (fullgraph, debug, cache_limit, passes)
    per_fn = getattr(fn, "__dict__", {}).get(_ATTR)
    if per_fn is None:
        per_fn = {}
        try:
            setattr(fn, _ATTR, per_fn)
        except (AttributeError, TypeError):  # a builtin or a bound method: no sharing
            pass
    jf = per_fn.get(options)
    if jf is None:
        jf = per_fn[options] = JitFunction(fn, *options)
    return jf


@dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    break_reasons: list[Break]
    graphs: list[Graph]
    out: object = None
    pass_stats: list = field(default_factory=list)  # chapter 6

    @property
    def op_count(self) -> int:
        return sum(len(g) for g in self.graphs)

    def __str__(self) -> str:
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Op count: {self.op_count}",
        ]
        for g in self.graphs:
            lines.append(f"  {g.name}: {len(g)} ops {g.op_names()}")
        if self.break_reasons:
            lines.append("Break reasons:")
            lines += [f"  {k + 1}. {b}" for k, b in enumerate(self.break_reasons)]
        if self.pass_stats:
            lines.append("Passes:")
            lines += [f"  {s}" for s in self.pass_stats]
        return "\n".join(lines)


def explain(fn):
    """``explain(fn)(*inputs)``: trace once, print and return graph and break counts."""
    inner = fn.fn if isinstance(fn, JitFunction) else fn
    binder = _Binder(inner)
    name = getattr(inner, "__name__", "graph").replace("<lambda>", "lambda")

    def run(*args, **kwargs) -> ExplainOutput:
        names, values, bound = binder.flatten(args, kwargs)
        t = trace_call(inner, binder, names, values, bound, False, name)
        graphs = [g for g in t.graphs if len(g)]
        out = ExplainOutput(len(graphs), len(t.breaks), list(t.breaks), graphs, t.result)
        out.pass_stats = list(getattr(t.compiled, "stats", []))
        print(out)
        return out

    return run
