"""Dynamic shapes (exercises 9.7, 9.8): one trace serves every size of a dimension.

A dimension becomes *dynamic* when the user marks it (``minitorch.mark_dynamic(x, 0)``)
or, with ``CompileOptions(dynamic=True)`` (``minitorch.compile`` sets it), automatically
after a retrace caused only by that dimension's size (as ``torch.compile`` does). Its size is then a symbol (``s0``) in the guard:

* the guard (:class:`InputGuard`, checked by :func:`symbolic_guard_failures`) keeps
  rank, dtype, device and every static dimension, requires each symbol to be at least
  2 (sizes 0 and 1 broadcast and reduce differently, so they stay specialised) and
  requires dimensions sharing a symbol to be equal (shape inference relied on it:
  two inputs added together);
* a new size re-runs the registry's ``infer`` over the cached graph
  (:func:`respecialize`, no Python re-trace) and compiles that graph (passes,
  fusion, memory plan) once per size, kept in a small per-size cache.

A graph is only reused across sizes if Python did not bake the size into it (a
slice ``x[: x.shape[0] // 2]``, a division by ``x.shape[0]``). jit checks this by
comparing traces at other sizes: every size traced so far for the same Python
state, one at the smallest sizes the symbols admit and, for a marked input, one at
a larger size; each, re-specialised, must be the same program, constants and
attributes included. Otherwise the dimension stays static and the reason is kept
for ``explain``. A decision Python takes on a size (``if x.shape[0] > 1000``,
``min``, ``range``) is a *check* (``tracing/sizes.py``): the entry serves only sizes
where every check decides as when traced, and traces that decide otherwise are not
compared (another program, with its own entry).

A size kept in an attribute (``reshape(B, T, H, D)``, the ``expand`` a backward makes
to its input's shape) is not a number Python computed: when an entry equals a symbol's
size in every trace compared, or a whole multiple of one symbol or of two (``B * T`` of a
``reshape(-1, C)``), it becomes a template filled in per size. A compiled
training step (chapter 9's ``CompiledStep``) takes part through :class:`StepView`: its
probes trace the whole step, its per-size plans run with the step's write-back.
"""

from __future__ import annotations

import copy
import itertools
import logging
import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..core import capability
from ..core.errors import OpError
from ..core.registry import Spec, get_op  # noqa: F401  (exercise 9.8 uses get_op)
from ..core.tensor import Tensor
from ..exercises import exercise
from ..passes.rewrite import clone_graph  # noqa: F401  (exercise 9.8 uses it)
from ..tracing import sizes as size_checks
from ..tracing.graph import Graph
from .step import StepEntry, trace_step

log = logging.getLogger("minitorch.jit")

MIN_SIZE = 2  # a symbol stands for sizes >= 2: 0 and 1 are specialised
PER_SIZE_CACHE = 8  # compiled plans kept per dynamic graph (one per concrete size)
VERDICTS = 64  # size-check verdicts kept per dynamic graph (one per concrete size)
# Attributes that are sizes, one per output dim: a backward's ``expand`` to the input's
# shape, a ``reshape(B, T, H, D)``, a slice's backward (``pad_slice``) to its input's shape. An entry that equals a symbol's size in every trace
# compared (other sizes, distinct per symbol) follows that symbol at every size.
SIZED_ATTRS = {"expand": "shape", "reshape": "shape", "pad_slice": "shape"}


def mark_dynamic(x: Tensor, dim: int) -> Tensor:
    """Mark dimension ``dim`` of ``x`` dynamic: jit traces once for every size of it.

    Returns ``x``. Example: ``minitorch.mark_dynamic(batch, 0)`` before calling a
    jitted function on batches of changing size.
    """
    if not isinstance(x, Tensor):
        raise OpError("mark_dynamic", f"expects a Tensor, got {type(x).__name__}")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise OpError(
            "mark_dynamic",
            f"dim must be an int, got {type(dim).__name__} {dim!r}",
            hint=f"pass an int in [{-x.ndim}, {x.ndim}), e.g. mark_dynamic(x, 0)",
        )
    if not -x.ndim <= dim < x.ndim:
        raise OpError(
            "mark_dynamic",
            f"dim {dim!r} is out of range for a tensor with {x.ndim} dimension(s)",
            hint=f"pass an int in [{-x.ndim}, {x.ndim})",
        )
    x._dynamic_dims = getattr(x, "_dynamic_dims", frozenset()) | {dim % x.ndim}
    return x


def marked_dims(x) -> frozenset:
    return getattr(x, "_dynamic_dims", frozenset()) if isinstance(x, Tensor) else frozenset()


@dataclass(frozen=True)
class InputGuard:
    """What a graph input must be: ``dims`` holds an int (a static size) or a symbol name."""

    name: str
    dtype: np.dtype
    device: str
    dims: tuple


@exercise("9.7")
def symbolic_guard_failures(guard: list[InputGuard], specs: list[Spec]) -> list[str]:
    """Why ``specs`` (one per guarded input) do not fit ``guard``: one message per failure.

    For each input ``g`` and its spec ``s``, in order:

    * a different rank gives ``"x.rank changed from 2 to 3"`` and nothing more for
      that input; a different dtype ``"x.dtype changed from float32 to float64"``
      (names), a different device ``"x.device changed from cpu to cuda"``;
    * a static dim (an int in ``g.dims``) that differs:
      ``"x.shape[1] changed from 3 to 4"``;
    * a symbolic dim (a str such as ``"s0"``) smaller than ``MIN_SIZE`` (2):
      ``"x.shape[0] is 1 but s0 needs a size >= 2"``;
    * a symbol seen before (in this input or an earlier one) with another size:
      ``"y.shape[0] is 6 but x.shape[0] is 5; both are s0"`` (the first place
      the symbol was seen names the size it is bound to).

    A symbol is bound by its first occurrence whose size is valid (>= 2).
    Fitting specs give ``[]``.

    Example:
        >>> g = [InputGuard("x", f32, "cpu", ("s0", 3)), InputGuard("y", f32, "cpu", ("s0",))]
        >>> symbolic_guard_failures(g, [Spec((7, 3), f32), Spec((7,), f32)])
        []
        >>> symbolic_guard_failures(g, [Spec((7, 4), f32), Spec((6,), f32)])
        ['x.shape[1] changed from 3 to 4', 'y.shape[0] is 6 but x.shape[0] is 7; both are s0']
    """
    raise NotImplementedError("Exercise 9.7: symbolic_guard_failures")


@exercise("9.8")
def respecialize(graph: Graph, specs: list[Spec]) -> Graph:
    """A copy of ``graph`` whose inputs have ``specs`` and every other node a re-inferred spec.

    * ``len(specs)`` must equal ``len(graph.inputs)``, else raise
      ``OpError("respecialize", problem)`` naming both counts;
    * the result is a copy whose nodes (outputs included) are its own; ``graph``
      itself never changes: it is the cached trace every size starts from;
    * input ``k`` of the copy has ``specs[k]``; a ``const`` keeps its spec; every
      other node has the spec its op's ``infer`` gives for its inputs' new specs
      and its attrs (an ``OpError`` from ``infer`` propagates: this size does not
      fit the program);
    * a node whose op is not in the registry (``cond``, ``fused``: they hold
      subgraphs) raises ``OpError("respecialize", problem naming the node)``.

    No Python code of the user runs: this is why a new size costs no trace.

    Example:
        >>> g2 = respecialize(g, [Spec((7, 3), f32)])   # g traced for x of shape (4, 3)
        >>> [n.spec.shape for n in g2.nodes]             # x, x * 2, sum(axis=1)
        [(7, 3), (7, 3), (7,)]
    """
    raise NotImplementedError("Exercise 9.8: respecialize")


# ---------------------------------------------------------------- comparing two traces


def _same(a, b) -> bool:
    try:
        r = a == b
        return bool(r) if not isinstance(r, np.ndarray) else bool(r.all())
    except Exception:  # noqa: BLE001 - values that cannot be compared are different
        return a is b


def program_difference(a: Graph, b: Graph) -> str | None:
    """How two traces of one function differ as programs (None if they are the same)."""
    if len(a.nodes) != len(b.nodes) or len(a.inputs) != len(b.inputs):
        return f"the traces differ in length ({len(a.nodes)} and {len(b.nodes)} nodes)"
    index = {n: k for k, n in enumerate(a.nodes)}
    index_b = {n: k for k, n in enumerate(b.nodes)}
    for na, nb in zip(a.nodes, b.nodes):
        where = f"{na.op} ({na.where})" if na.where else na.op
        if na.op != nb.op or [index[i] for i in na.inputs] != [index_b[i] for i in nb.inputs]:
            return f"the program changed at {where}: {na.op} became {nb.op}"
        if na.spec != nb.spec:
            return (
                f"{where} is {na.spec} at one size and {nb.spec} at the other: the size "
                "was used as a Python number while tracing"
            )
        if na.attrs.keys() != nb.attrs.keys() or any(
            not _same(na.attrs[k], nb.attrs[k]) for k in na.attrs
        ):
            diff = [k for k in na.attrs if not _same(na.attrs[k], nb.attrs.get(k))]
            k = diff[0] if diff else "?"
            return (
                f"{where} has {k}={na.attrs.get(k)!r} at one size and {nb.attrs.get(k)!r} at "
                "the other: the size was used as a Python number while tracing"
            )
        if na.op == "const" and not (
            na.value.shape == nb.value.shape
            and np.array_equal(na.value.numpy(), nb.value.numpy(), equal_nan=True)
        ):
            return (
                f"a constant differs between the two sizes ({na.value.spec} and "
                f"{nb.value.spec}): it was computed from the size in Python"
            )
    if [index[o] for o in a.outputs] != [index_b[o] for o in b.outputs]:
        return "the outputs differ between the two sizes"
    return None


# ---------------------------------------------------------------- jit's dynamic entries


@dataclass
class DynamicEntry:
    """A trace reused for every size its guard admits, compiled once per concrete size."""

    trace: object  # a tracing.jit.Trace: its graph, feeds and state guards
    guard: list[InputGuard]  # one per graph input fed by an argument
    guarded: list[int]  # which graph inputs those are
    statics: tuple  # the cache key's non-tensor entries, grads and grad mode
    lines: list[str]  # for explain: which dims are dynamic and why
    plans: OrderedDict = field(default_factory=OrderedDict)
    compiled_sizes: int = 0
    templates: dict = field(default_factory=dict)  # node index -> (attr, sizes with symbols)
    checks: list = field(default_factory=list)  # the trace's checks on sizes (tracing.sizes)
    verdicts: OrderedDict = field(default_factory=OrderedDict)  # shapes -> failed checks

    def size_failures(self, values) -> list[str]:
        """Why Python would decide otherwise at these sizes (a branch on a size), or []."""
        if not self.checks:
            return []
        specs = self.specs(values)
        shapes = tuple(s.shape for s in specs)
        failed = self.verdicts.get(shapes)
        if failed is None:
            failed = self.verdicts[shapes] = check_failures(self, specs)
            while len(self.verdicts) > VERDICTS:
                self.verdicts.popitem(last=False)
        return failed

    def specs(self, values) -> list[Spec]:
        feeds = self.trace.feeds
        return [values[feeds[k]].spec for k in self.guarded]

    def compiled_for(self, jf, values):
        graph = self.trace.graph
        specs = [n.spec for n in graph.inputs]
        for k, s in zip(self.guarded, self.specs(values)):
            specs[k] = s
        shapes = tuple(s.shape for s in specs)
        plan = self.plans.get(shapes)
        if plan is None:
            if self.templates:
                graph = with_sizes(
                    graph, self.templates, symbol_sizes(self.guard, self.specs(values))
                )
            g = respecialize(graph, specs)
            plan = self.plans[shapes] = g.compile(passes=jf.passes, options=jf.options)
            self.compiled_sizes += 1
            while len(self.plans) > PER_SIZE_CACHE:
                self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(shapes)
        return plan


def check_failures(entry, specs: list[Spec]) -> list[str]:
    """How the size checks of ``entry`` (its graph, guard, templates) fail at ``specs``."""
    graph, guarded = entry.trace.graph, entry.guarded
    full = [n.spec for n in graph.inputs]
    for k, s in zip(guarded, specs):
        full[k] = s
    inputs = _input_positions(graph)
    other: list = []

    def dim(k, d):
        if k in inputs:
            return full[inputs[k]].shape[d]
        if not other:  # a size of a node inside the graph: infer it at these sizes
            g = graph
            if entry.templates:
                g = with_sizes(g, entry.templates, symbol_sizes(entry.guard, specs))
            other.append(respecialize(g, full))
        return other[0].nodes[k].spec.shape[d]

    try:
        return size_checks.failures(entry.checks, dim, _namer(graph, entry.guard, guarded))
    except OpError as e:
        return [str(e)]


def _input_positions(graph: Graph) -> dict:
    """Node index -> input position, for the graph's inputs."""
    at = {id(n): j for j, n in enumerate(graph.inputs)}
    return {k: at[id(n)] for k, n in enumerate(graph.nodes) if id(n) in at}


def _namer(graph: Graph, guard, guarded):
    """``name(k, d)``: dim ``d`` of node ``k`` as a message says it (``x.shape[0]``)."""
    inputs = _input_positions(graph)
    names = {j: g.name for j, g in zip(guarded, guard)}

    def name(k, d):
        j = inputs.get(k)
        if j is None:
            return f"%{graph.nodes[k].name}.shape[{d}]"
        return f"{names.get(j, graph.nodes[k].name)}.shape[{d}]"

    return name


def symbol_sizes(guard: list[InputGuard], specs: list[Spec]) -> dict:
    """Each symbol's size in ``specs`` (which fit ``guard``)."""
    return {
        x: n for g, s in zip(guard, specs) for x, n in zip(g.dims, s.shape) if isinstance(x, str)
    }


def sized_templates(graph: Graph, guard, guarded, traces) -> dict:
    """The size attributes of ``graph`` (:data:`SIZED_ATTRS`) whose entries follow a symbol.

    An entry follows symbol ``s`` when it equals ``s``'s size in ``graph`` and in every
    trace of ``traces`` (the same program at other sizes that fit ``guard``); failing
    that, the same multiple of one or two symbols' sizes (:func:`_products`) in each.
    Returns ``{node index: (attr, template)}``, the template's entries ints, symbols or
    ``(c, *symbols)``.
    """

    def sizes(g):
        return symbol_sizes(guard, [g.inputs[k].spec for k in guarded])

    others = [
        (t.graph, sizes(t.graph))
        for t in traces
        if len(t.graph.nodes) == len(graph.nodes)
        and not symbolic_guard_failures(guard, [t.graph.inputs[k].spec for k in guarded])
    ]
    if not others:
        return {}
    base, out = sizes(graph), {}
    for k, n in enumerate(graph.nodes):
        name = SIZED_ATTRS.get(n.op)
        shape = n.attrs.get(name) if name else None
        if not isinstance(shape, tuple):
            continue
        seen = [g.nodes[k].attrs.get(name) if g.nodes[k].op == n.op else None for g, _ in others]
        if any(not isinstance(o, tuple) or len(o) != len(shape) for o in seen):
            continue
        template = []
        for p, v in enumerate(shape):
            syms = [x for x, size in base.items() if size == v]
            if any(o[p] != v for o in seen):  # a multiple only where the size is seen to move
                syms += _products(v, base)
            syms = [
                x for x in syms if all(_size(x, sz) == o[p] for (_, sz), o in zip(others, seen))
            ]
            template.append(syms[0] if syms else v)
        if template != list(shape):
            out[k] = (name, tuple(template))
    return out


def _products(v: int, sizes: dict) -> list[tuple]:
    """``v`` as ``(c, s)`` or ``(c, s, t)``: ``c`` times the sizes of one or two symbols (a
    ``reshape(-1, C)`` that flattens a batch keeps ``B * T`` or, with ``B`` static, ``4 * T``)."""
    out = []
    for n in (1, 2):
        for syms in itertools.combinations(sizes, n):
            size = math.prod(sizes[x] for x in syms)
            if v and v % size == 0:
                out.append((v // size, *syms))
    return out


def _size(entry, sizes: dict) -> int:
    """A template entry's size: an int, a symbol's size or ``(c, *symbols)``, their product."""
    if isinstance(entry, tuple):
        return entry[0] * math.prod(sizes[x] for x in entry[1:])
    return sizes.get(entry, entry)


def with_sizes(graph: Graph, templates: dict, sizes: dict) -> Graph:
    """A copy of ``graph`` whose size attributes are its templates at ``sizes`` (symbol -> int)."""
    g = clone_graph(graph)
    for k, (name, template) in templates.items():
        node = g.nodes[k]
        node.attrs = {**node.attrs, name: tuple(_size(x, sizes) for x in template)}
    return g


def _statics(key) -> tuple:
    # a compiled step's key also holds its parameters' and optimizer's specs (key[3:])
    return tuple(e for e in key[0] if e and e[0] != "tensor"), key[1], key[2], *key[3:]


class StepView:
    """A compiled step's entry as a jit trace for this module: its traced graph, where its
    inputs come from (an int for an argument), its guards; a run writes back as the step does.
    """

    def __init__(self, entry, ctx):
        self.entry, self.ctx = entry, ctx
        self.compiled, self.graph = entry.compiled, entry.compiled.traced
        self.feeds = [f[1] if f[0] == "arg" else f for f in entry.feeds]
        self.breaks, self.eager = [], None
        self._sized: dict = {}  # id(plan) -> a copy of the entry running that size's plan

    def check(self, fn, values, ctx=None) -> list[str]:
        return self.entry.check(fn, values, ctx if ctx is not None else self.ctx)

    def run(self, jf, plan, values, ctx):
        sized = self._sized.get(id(plan))
        if sized is None or sized.compiled is not plan:
            sized = self._sized[id(plan)] = copy.copy(self.entry)
            sized.compiled = plan
        jf.last = sized
        return sized.run(values, *ctx)


def _view(entry, ctx):
    """What this module reads of a cache entry: a jit trace as it is, a step's through a view."""
    if isinstance(entry, StepEntry):
        return StepView(entry, ctx)
    return entry if hasattr(entry, "breaks") else None  # a step that ran eagerly: nothing


def find(jf, values, key, ctx=None):
    """The dynamic entry of ``jf`` that fits this call, or None and why none fits."""
    reasons = []
    for entry in reversed(jf.dynamic):
        if entry.statics != _statics(key):
            continue
        failed = symbolic_guard_failures(entry.guard, entry.specs(values))
        failed = failed or entry.trace.check(jf.fn, values, ctx) or entry.size_failures(values)
        if not failed:
            return entry, []
        reasons = reasons or failed
    return None, reasons


def run(jf, entry: DynamicEntry, values, ctx=None):
    compiled = entry.compiled_for(jf, values)
    if isinstance(entry.trace, StepView):
        return entry.trace.run(jf, compiled, values, ctx)
    return compiled.run(*entry.trace.inputs(jf.fn, values))


def _candidates(jf, names, values, key, prev, ctx) -> tuple[dict, str, object]:
    """Dims to make dynamic: marked ones, and those a retrace changed (only them)."""
    dims = {i: set(marked_dims(v)) for i, v in enumerate(values) if marked_dims(v)}
    why = {(i, d): "marked with mark_dynamic" for i in dims for d in dims[i]}
    other = None
    auto = jf.options is not None and jf.options.dynamic  # off by default: chapter 5 as it was
    if (
        auto
        and prev is not None
        and _statics(prev) == _statics(key)
        and len(prev[0]) == len(key[0])
    ):
        changed = {}
        for i, (a, b) in enumerate(zip(prev[0], key[0])):
            if a[0] == "tensor" and a[2:] == b[2:] and len(a[1]) == len(b[1]):
                changed.update({(i, d): 1 for d in range(len(a[1])) if a[1][d] != b[1][d]})
            elif a != b:
                changed = {}
                break
        old = [_view(e, ctx) for e in jf.store.entries.get(prev) or []]
        if changed and old and old[-1] is not None and old[-1].compiled is not None:
            other = old[-1]
            for i, d in changed:
                dims.setdefault(i, set()).add(d)
                why.setdefault((i, d), "automatically: a retrace was caused only by its size")
            earlier = [  # what an earlier entry made dynamic stays dynamic
                (e.trace.feeds[k], d)
                for e in jf.dynamic
                if e.statics == _statics(key)
                for k, g in zip(e.guarded, e.guard)
                for d, x in enumerate(g.dims)
                if isinstance(x, str)
            ]
            for i, d in earlier:
                dims.setdefault(i, set()).add(d)
                why.setdefault((i, d), "automatically: dynamic in an earlier trace")
    return dims, why, other


def after_trace(jf, names, values, bound, key, prev, trace, ctx=None) -> None:
    """After jit traced a call: make a dynamic entry if a dim is marked or just changed."""
    trace = _view(trace, ctx)
    if trace is None or trace.compiled is None or trace.eager is not None:
        return
    dims, why, other = _candidates(jf, names, values, key, prev, ctx)
    if not dims:
        return
    missing = capability.missing(("9.7", "9.8"))
    if missing:  # exercises 9.7/9.8 not done yet: sizes stay static
        entry, lines = None, [f"dynamic shapes are off: exercise {', '.join(missing)} not done yet"]
    else:
        entry, lines = build(jf, names, values, bound, key, trace, dims, why, other, ctx)
    if entry is not None:
        jf.dynamic.append(entry)
        del jf.dynamic[:-4]
    jf.dynamic_notes = lines


def build(jf, names, values, bound, key, trace, dims, why, other, ctx=None):
    """A :class:`DynamicEntry` for ``trace`` with ``dims`` symbolic, or None; and explain lines."""
    graph = trace.graph
    arg_of = {k: f for k, f in enumerate(trace.feeds) if isinstance(f, int)}
    guarded = [k for k in arg_of]
    cands, lines = [], []
    for k in guarded:
        i = arg_of[k]
        for d in sorted(dims.get(i, ())):
            size = values[i].shape[d]
            if size < MIN_SIZE:
                lines.append(f"{names[i]}.shape[{d}] kept static: size {size} is specialised")
            else:
                cands.append((k, d))
    if not cands:
        return None, lines

    def guard_for(symbols):
        out = []
        for k in guarded:
            s = graph.inputs[k].spec
            dd = tuple(symbols.get((k, d), n) for d, n in enumerate(s.shape))
            out.append(InputGuard(names[arg_of[k]], s.dtype, s.device, dd))
        return out

    def sizes_for(guard, scale):  # probe sizes: each symbol its own new size
        sym = sorted({x for g in guard for x in g.dims if isinstance(x, str)})
        size = {}
        for k, d in cands:
            size.setdefault(guard[guarded.index(k)].dims[d], graph.inputs[k].spec.shape[d])
        # scale 0: the smallest sizes the symbols admit (a Python branch on the size)
        new = {s: scale * size[s] + 1 + j if scale else MIN_SIZE + j for j, s in enumerate(sym)}
        specs = [n.spec for n in graph.inputs]
        for g, k in zip(guard, guarded):
            shape = tuple(new[x] if isinstance(x, str) else x for x in g.dims)
            specs[k] = Spec(shape, g.dtype, g.device)
        return specs

    untied = {c: f"s{j}" for j, c in enumerate(cands)}
    by_size: dict = {}
    for k, d in cands:
        by_size.setdefault(graph.inputs[k].spec.shape[d], f"s{len(by_size)}")
    tied = {(k, d): by_size[graph.inputs[k].spec.shape[d]] for k, d in cands}
    guard, problem, probes = None, None, []
    for symbols in (untied, tied):
        try:
            respecialize(graph, sizes_for(guard_for(symbols), 2))
            guard = guard_for(symbols)
            break
        except OpError as e:
            problem = str(e)
    sized = any(n.op in SIZED_ATTRS for n in graph.nodes)
    for symbols in (untied, tied) if guard is None and sized else ():
        # sizes in attributes (expand, reshape): a trace at other sizes shows which follow
        g = guard_for(symbols)
        probe, why_not = _probe(jf, names, values, bound, trace, guarded, sizes_for(g, 2), ctx)
        if probe is None:
            problem = problem if symbols is untied else why_not
            continue
        at = [probe.graph.inputs[k].spec for k in guarded]
        try:
            respecialize(
                with_sizes(graph, sized_templates(graph, g, guarded, [probe]), symbol_sizes(g, at)),
                [n.spec for n in probe.graph.inputs],
            )
            guard, probes = g, [probe]
            break
        except OpError as e:
            problem = str(e)
    if guard is None:
        return None, lines + [f"{_where(names, arg_of, cands)} kept static: {problem}"]
    static = f"{_where(names, arg_of, cands)} kept static"
    # Which decisions did Python take on the sizes (``if x.shape[0] > 12``, ``range(T)``)?
    # They become checks: the entry serves only sizes where each decides the same way.
    checks, problem = _watch_sizes(jf, names, values, bound, trace, ctx)
    if checks is None:
        return None, lines + [f"{static}: {problem}"]
    # Did Python bake the size in? Every size traced so far that decides alike, and
    # probes at other sizes, must give the same program, constants and attributes
    # included. A trace on the other side of a check is another program, not compared.
    others = [other] if other is not None else []
    family = _family(jf, key, values, ctx)
    others += [
        t for t in family if t.graph is not graph and (other is None or t.graph is not other.graph)
    ]
    others += probes
    others = [t for t in others if not _other_side(graph, checks, t)]
    scales = ([3] if other is None else []) + [0]
    for scale in scales + [2]:
        if scale == 2 and _compared(others, guard, guarded):
            break  # 2: only when every other size so far decided otherwise
        probe, problem = _probe(
            jf, names, values, bound, trace, guarded, sizes_for(guard, scale), ctx
        )
        if probe is None and not checks:
            return None, lines + [f"{static}: {problem}"]
        if probe is not None and not _other_side(graph, checks, probe):
            others.append(probe)
    if not _compared(others, guard, guarded):
        first = size_checks.text(checks[0], _namer(graph, guard, guarded))
        return None, lines + [
            f"{static}: every other size tried decides otherwise on a size ({first}), "
            "so nothing shows whether the size was baked in"
        ]
    templates = sized_templates(graph, guard, guarded, others)
    for other in others:
        problem = _differs(graph, other, guard, guarded, templates)
        if problem is not None:
            return None, lines + [f"{static}: {problem}"]
    for k, d in cands:
        sym = guard[guarded.index(k)].dims[d]
        lines.append(
            f"{names[arg_of[k]]}.shape[{d}] is dynamic ({sym} >= {MIN_SIZE}): {why[(arg_of[k], d)]}"
        )
    if templates:
        ops = sorted({f"{graph.nodes[k].op}.{a}" for k, (a, _) in templates.items()})
        lines.append(
            f"{len(templates)} size attribute(s) ({', '.join(ops)}) follow the symbols, "
            "the same in every trace compared"
        )
    entry = DynamicEntry(
        trace, guard, guarded, _statics(key), lines, templates=templates, checks=checks
    )
    if checks:
        shown = [size_checks.text(c, _namer(graph, guard, guarded)) for c in checks[:3]]
        more = f" and {len(checks) - 3} more" if len(checks) > 3 else ""
        lines.append(
            f"{len(checks)} check(s) on sizes guarded (a size deciding otherwise retraces): "
            + "; ".join(shown)
            + more
        )
    log.info("jit(%s): dynamic %s", jf.name, "; ".join(lines))
    return entry, lines


def _watch_sizes(jf, names, values, bound, trace, ctx=None):
    """The checks this call makes on sizes (``tracing/sizes.py``): the call traced once
    more, sizes watched, not run. ``(checks, None)``, or ``(None, why not)``."""
    log = size_checks.SizeLog()
    try:
        with size_checks.watching(log):
            again = _trace_again(jf, names, values, bound, trace, ctx, log)
        problem = program_difference(trace.graph, again.graph)
        checks = log.finish(again.graph.nodes)
    except Exception as e:  # noqa: BLE001 - any failure: the dim stays static
        return None, f"tracing with sizes watched failed ({type(e).__name__}: {e})"
    if problem is not None or again.breaks:
        return None, f"tracing again gave another program ({problem or 'a graph break'})"
    return checks, None


def _trace_again(jf, names, values, bound, trace, ctx, log):
    from ..tracing.jit import trace_call

    if isinstance(trace, StepView):
        return StepView(
            trace_step(jf.fn, jf._binder, names, list(values), bound, *ctx, jf.name,
                       jf.options, sizes=log),
            ctx,
        )  # fmt: skip
    return trace_call(
        jf.fn, jf._binder, names, list(values), bound, jf.fullgraph, jf.name,
        run=False, sizes=log,
    )  # fmt: skip


def _other_side(graph, checks, t) -> bool:
    """Whether the trace ``t`` (other sizes) decides a check of ``graph`` otherwise; its
    sizes are read from its own nodes (a node it does not share: another program)."""
    if not checks:
        return False
    nodes = t.graph.nodes

    def dim(k, d):
        if k >= len(nodes) or nodes[k].op != graph.nodes[k].op:
            raise LookupError(k)
        return nodes[k].spec.shape[d]

    try:
        return bool(size_checks.failures(checks, dim, lambda k, d: ""))
    except (LookupError, IndexError):
        return True


def _compared(others, guard, guarded) -> bool:
    """Whether some trace of ``others`` has sizes the guard admits (one to compare with)."""
    return any(
        not symbolic_guard_failures(guard, [t.graph.inputs[k].spec for k in guarded])
        for t in others
    )


def _differs(graph, other, guard, guarded, templates=None) -> str | None:
    """How the trace ``other`` (at other sizes) differs from ``graph`` re-specialised to them."""
    specs = [other.graph.inputs[k].spec for k in guarded]
    if symbolic_guard_failures(guard, specs):
        return None  # sizes the guard does not admit (1, or untied sizes): nothing to compare
    try:
        if templates:
            graph = with_sizes(graph, templates, symbol_sizes(guard, specs))
        mine = respecialize(graph, [n.spec for n in other.graph.inputs])
        return program_difference(mine, other.graph)
    except OpError as e:
        return str(e)


def _family(jf, key, values, ctx=None) -> list:
    """The traces of ``jf`` for the same static arguments, tensor ranks and Python state."""
    out = []
    for k, bucket in jf.store.entries.items():
        if _statics(k) != _statics(key) or len(k[0]) != len(key[0]):
            continue
        if all(
            a == b or (a[0] == b[0] == "tensor" and a[2:] == b[2:] and len(a[1]) == len(b[1]))
            for a, b in zip(k[0], key[0])
        ):
            views = [_view(t, ctx) for t in bucket]
            out += [
                t
                for t in views
                if t is not None
                and t.compiled is not None
                and not t.breaks
                and not t.check(jf.fn, values, ctx)
            ]
    return out


def _where(names, arg_of, cands) -> str:
    return ", ".join(f"{names[arg_of[k]]}.shape[{d}]" for k, d in cands)


def _probe(jf, names, values, bound, trace, guarded, specs, ctx=None):
    """Trace once more (not run, not counted) on zeros of other sizes, to compare programs."""
    from ..core import creation
    from ..tracing.jit import trace_call

    probe = list(values)
    for k in guarded:
        i, s = trace.feeds[k], specs[k]
        t = creation.zeros(*s.shape, dtype=s.dtype, device=s.device)
        t.requires_grad = values[i].requires_grad
        probe[i] = t
    try:  # ``bound`` only gives the call's structure: the values come from ``probe``
        if isinstance(trace, StepView):  # a step: forward, backward and update, not run
            other = StepView(
                trace_step(jf.fn, jf._binder, names, probe, bound, *ctx, jf.name, jf.options), ctx
            )
        else:
            other = trace_call(
                jf.fn, jf._binder, names, probe, bound, jf.fullgraph, jf.name, run=False
            )
    except Exception as e:  # noqa: BLE001 - any failure at another size: stay static
        return None, f"tracing at another size failed ({type(e).__name__}: {e})"
    if other.breaks or other.eager is not None or other.graph is None:
        return None, "the trace at another size has graph breaks"
    return other, None


def explain_lines(fn, names, values, bound, trace) -> list[str]:
    """For ``explain``: the dynamic dims of a jitted function, or of marked arguments."""
    from ..tracing.jit import JitFunction, jit

    lines = []
    if isinstance(fn, JitFunction):
        lines += [x for e in fn.dynamic for x in e.lines] or list(fn.dynamic_notes)
    dims = {i: set(marked_dims(v)) for i, v in enumerate(values) if marked_dims(v)}
    if dims and not lines and trace.compiled is not None and trace.eager is None:
        jf = fn if isinstance(fn, JitFunction) else jit(fn)
        why = {(i, d): "marked with mark_dynamic" for i in dims for d in dims[i]}
        key = jf._key(values)
        lines += build(jf, names, values, bound, key, trace, dims, why, None)[1]
    return lines


def _install() -> None:
    """Hook this module into jit (chapter 5 knows nothing of chapter 9)."""
    import sys

    from ..tracing.jit import DYNAMIC

    if not DYNAMIC:
        DYNAMIC.append(sys.modules[__name__])


_install()
