"""The tracer: symbolic tensors that record ops into a graph instead of computing them.

A :class:`Proxy` is a :class:`Tensor` without data. Every op on it reaches
``dispatch``, which hands the call to ``Proxy.__minitorch_dispatch__`` and so to
:func:`record_op` (exercise 5.1), which appends a node and returns a new Proxy.

Reading a value (``bool``, ``if``, ``while``, ``.item()``, printing or formatting
the tensor) cannot be recorded: it is a *graph break*. With ``fullgraph=True`` that
is an error. Otherwise the tracer closes the current graph, computes the value for
real (from the concrete inputs it was given), lets Python decide, and starts a new
graph (:func:`split_at_break`, exercise 5.8) whose inputs are the values that flow
across the break. Results are always those of eager execution.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass

from ..core import dtypes as dt
from ..core import registry
from ..core.errors import OpError
from ..core.registry import OpDef, OpKind, Spec, get_op, register_kernel, register_op, register_vjp
from ..core.tensor import Tensor, enable_grad, is_grad_enabled
from ..exercises import exercise
from .graph import Graph, Node, user_location
from .interpreter import run_node
from .sizes import by_user, plain


class GraphBreakError(RuntimeError):
    """Python needed the value of a traced tensor while ``fullgraph=True``."""


@dataclass
class Break:
    reason: str
    where: str

    def __str__(self) -> str:
        return f"{self.reason} at {self.where}"


_active: list[Tracer] = []

# ``detach`` must be a node of the graph (eager detach cuts the gradient), so it is an
# op of the one registry: an identity view with no gradient. The interpreter runs it as
# ``Tensor.detach`` so that the result does not require grad, exactly as in eager mode.
register_op("detach", OpKind.VIEW, 1, lambda a: a, doc="the same values, cut from autograd")
register_kernel("detach", "*")(lambda a, out: a)
register_vjp("detach")(lambda grad, out, a: (None,))
_DETACH = get_op("detach")


def _record(tracer: Tracer, op: OpDef, inputs: tuple, attrs: dict) -> Proxy:
    out = record_op(tracer, op, inputs, attrs)
    # what eager would say: the tracer records grad mode and requires_grad as eager sets them
    grad = (
        is_grad_enabled()
        and dt.is_float(out.dtype)  # as eager: int and bool results carry no graph
        and any(getattr(x, "requires_grad", False) for x in inputs)
    )
    if tracer.training is not None:  # chapter 9: the step's own backward builds the gradients
        if grad:
            tracer.training.grad_nodes.add(out.node)
        out.requires_grad = grad
        return out
    if not is_grad_enabled() and tracer.grad_mode and op.name != "detach":
        # a no_grad block inside the function: the result has no history. (A call made
        # under no_grad needs none: grad mode is part of jit's cache key.)
        out = record_op(tracer, _DETACH, (out,), {})
    out.requires_grad = grad
    return out


# An op on state tensors alone (``self.w.T``, ``W * 2``) has no Proxy input, so dispatch
# would run it eagerly and bake the result in as a constant, stale after an optimizer
# step. While a jit trace runs, such an op is recorded too: its state inputs become graph
# inputs. Outside a trace this costs one check per op.
_plain_apply = registry._eager_apply


def _apply(op: OpDef, inputs: tuple, attrs: dict):
    if _active:
        tracer = _active[-1]
        if tracer.external and tracer.recording:
            if any(tracer.state_entry(x)[0] is not None for x in inputs):
                return _record(tracer, op, inputs, _attrs(tracer, attrs))
    return _plain_apply(op, inputs, attrs)


registry._eager_apply = _apply


def _attrs(tracer: Tracer, attrs: dict) -> dict:
    """An op's attributes as the graph keeps them: sizes watched by chapter 9 as ints."""
    return attrs if tracer.sizes is None else plain(attrs)


def _escaped(p: Proxy) -> OpError:
    return OpError(
        "jit",
        f"a traced value ({p._describe()}) of the trace of {p._tracer.name!r} was used after "
        "that trace ended (it escaped: stored in a global, an object or a list while tracing)",
        hint="return every tensor the caller needs from the jitted function (tuple, list, dict, "
        "namedtuple or dataclass); do not keep traced values outside it",
    )


class Proxy(Tensor):
    """A traced tensor: a node of a graph under construction, with no data."""

    def __init__(self, tracer: Tracer, node: Node):  # noqa: D107 - no super().__init__: no data
        self._tracer, self.node = tracer, node
        self.device = node.spec.device
        self.requires_grad, self.grad, self._node, self.name = False, None, None, None

    @property
    def shape(self):
        # while chapter 9 watches sizes (``sizes.py``), each dim remembers where it came from
        log = self._tracer.sizes
        if log is None or not log.live:
            return self.node.spec.shape
        return log.shape(self.node, self.node.spec.shape)

    @property
    def dtype(self):
        return self.node.spec.dtype

    @property
    def size(self) -> int:
        if self._tracer.sizes is None:
            return self.node.spec.size
        n = 1
        for d in self.shape:
            n = n * d
        return n

    def numel(self) -> int:
        return self.size

    def __len__(self) -> int:
        n = super().__len__()  # a Size while sizes are watched: len() would drop what it is
        return n._number("used as len()") if hasattr(n, "_number") else n

    @property
    def spec(self) -> Spec:
        return self.node.spec

    @property
    def strides(self):
        raise OpError(
            "strides",
            "a traced tensor has no memory layout yet",
            hint="layout is decided when the graph runs",
        )

    def is_contiguous(self) -> bool:
        return True

    @classmethod
    def __minitorch_dispatch__(cls, op: OpDef, inputs: tuple, attrs: dict):
        p = next(x for x in inputs if isinstance(x, Proxy))
        if not p._tracer.live:
            raise _escaped(p)
        return _record(p._tracer, op, inputs, _attrs(p._tracer, attrs))

    @property
    def _data(self):
        # Only code that bypasses dispatch (an in-place update such as Parameter.assign_)
        # reads the data of a tensor: it cannot be recorded.
        caller = sys._getframe(1).f_code.co_name
        return self._concrete(
            f"{caller}() reads the data of a traced tensor (in-place updates are not traced; "
            "compile training steps with Chapter 9)"
        )._data

    # ------------------------------------------------------------ data-dependent: breaks
    def _concrete(self, reason: str) -> Tensor:
        return self._tracer.graph_break(self, reason)

    def __bool__(self) -> bool:
        return bool(self._concrete("bool() of a traced tensor (an if/while on a tensor)"))

    def item(self):
        return self._concrete(".item() of a traced tensor").item()

    def numpy(self):
        return self._concrete(".numpy() of a traced tensor").numpy()

    def tolist(self):
        return self._concrete(".tolist() of a traced tensor").tolist()

    def __float__(self) -> float:
        return float(self._concrete("float() of a traced tensor"))

    def __int__(self) -> int:
        return int(self._concrete("int() of a traced tensor"))

    def __index__(self) -> int:
        return int(self._concrete("a traced tensor used as an index"))

    def __array__(self, dtype=None, copy=None):
        return self._concrete("numpy conversion of a traced tensor").numpy()

    # Printing or formatting shows the values eager would show: a graph break, so that
    # the text (and anything computed from it) is that of this call, not a placeholder.
    def __repr__(self) -> str:
        return self._text("repr() of a traced tensor", repr)

    def __str__(self) -> str:
        return self._text("str() or print() of a traced tensor", str)

    def __format__(self, spec: str) -> str:
        return self._text("formatting a traced tensor (f-string, format())", format, spec)

    def _text(self, reason: str, how, *spec) -> str:
        t = self._tracer
        # escaped, not being traced, or an op's error message naming its input
        if not (t.recording and t in _active) or not by_user(2):
            return self._describe()
        return how(self._concrete(reason), *spec)

    def _describe(self) -> str:
        """The placeholder's own text, for messages (no value, no break)."""
        return f"Proxy(%{self.node.name}: {self.node.spec})"

    def detach(self) -> Tensor:
        out = record_op(self._tracer, _DETACH, (self,), {}) if self._tracer.live else None
        if out is None:
            raise _escaped(self)
        return out

    def assign_(self, value: Tensor) -> Tensor:
        """An argument (a Parameter passed in) updated in place: not traced, a break."""
        target = self._concrete("assign_() of a traced tensor (in-place updates are not traced)")
        if not hasattr(target, "assign_"):
            raise OpError("assign_", "only a Parameter can be updated in place", hint="")
        return target.assign_(value)

    def backward(self, grad: Tensor | None = None) -> None:
        if self._tracer.training is not None:  # chapter 9: recorded into the step's graph
            return self._tracer.training.backward(self, grad)
        value = self._concrete("backward() inside a traced function (Chapter 9 compiles it)")
        value.backward(grad)

    def to(self, target) -> Tensor:
        if target in ("cpu", "cuda"):
            if target == self.device:
                return self
            raise OpError(
                "to",
                "moving a traced tensor between devices is not traced",
                hint="move the inputs before calling the jitted function",
            )
        return self.astype(target)


class Tracer:
    """Builds the graph(s) of one call.

    ``concrete`` are the real input tensors (needed only to evaluate values at a
    graph break); ``None`` traces from specs alone, where a break is an error.
    """

    def __init__(
        self, name: str = "graph", fullgraph: bool = False, concrete=None, why=None, sizes=None
    ):
        self.name = name
        self.sizes = sizes  # chapter 9: a SizeLog of the checks made on sizes, or None
        self.fullgraph = fullgraph or concrete is None
        # why a break is an error here: fullgraph=True, a cond branch, or tracing from specs
        self.why = why or ("fullgraph=True" if fullgraph else "tracing from shapes alone")
        self.live = True  # False once the `with` block that traced ends
        self.grad_mode = is_grad_enabled()  # at the start of the trace
        self.recording = True  # False while evaluating nodes at a graph break
        self.graph = Graph(name)
        self.graphs: list[Graph] = [self.graph]
        self.breaks: list[Break] = []
        self._concrete = concrete  # list of input tensors, matched to graphs[0].inputs
        self._values: dict[Node, Tensor] = {}
        self.crossing: dict[Node, Node] = {}  # node of an older graph -> input of the current
        self._sources: dict[Node, Node] = {}  # input of a later graph -> node it stands for
        self.broken: list[Node] = []  # nodes whose value Python read at a break
        # tensors read from outside the call (globals, closures, module attributes) that
        # become graph inputs: id -> (path, name, tensor), filled in by jit before tracing
        self.external: dict[int, tuple] = {}
        self.state_inputs: list[tuple[Node, tuple]] = []  # (input node, path) in order
        self._by_data: dict[int, tuple] = {}  # id of a state tensor's data -> its entry
        self._state: dict[tuple[int, int], Node] = {}
        self._state_values: dict[Node, Tensor] = {}
        self.training = None  # chapter 9: a step trace (backward and updates are recorded)

    # ------------------------------------------------------------ what record_op uses
    def lift(self, x) -> Node:
        """The node of the current graph for ``x``: a Proxy's node or a constant."""
        if isinstance(x, Proxy):
            if x._tracer is not self:
                raise OpError(
                    "trace",
                    f"a traced value from another trace ({x._describe()}) was used here",
                    hint="pass it in as an argument (cond operands, jit arguments)",
                )
            node = x.node
            if node.graph is self.graph:
                return node
            inner = self.crossing.get(node)
            if inner is None:  # a value flowing across a graph break
                inner = self.graph.add_input(node.spec)
                self.crossing[node] = inner
                self._sources[inner] = node
            return inner
        if isinstance(x, Tensor):
            if self.training is not None and id(x) in self.training.rebound:
                return self.training.rebound[id(x)].node  # a parameter updated in this step
            ext, detached = self.state_entry(x)
            if ext is None:
                return self.graph.add_const(x)  # made during the call: a constant
            t = ext[2]
            node = self._state.get((id(self.graph), id(t)))
            if node is None:
                taken = {n.name for n in self.graph.inputs}
                name = re.sub(r"\W+", "_", ext[1]).strip("_") or "state"
                while name in taken:
                    name += "_"
                node = self.graph.add_input(t.spec, name)
                self._state[(id(self.graph), id(t))] = node
                self._state_values[node] = t
                self.state_inputs.append((node, ext[0]))
                if self.training is not None and t.requires_grad:
                    self.training.grad_nodes.add(node)
            if detached:  # ``w.detach()`` of a state tensor: the same data, no history
                key = (id(self.graph), id(x))
                if key not in self._state:
                    self._state[key] = self.graph.add_node("detach", [node], {}, node.spec)
                return self._state[key]
            return node
        raise OpError(
            "trace",
            f"cannot record an op input of type {type(x).__name__}",
            hint="op inputs are Tensors; Python numbers are lifted by Tensor methods",
        )

    def set_external(self, tensors: dict) -> None:
        """The tensors read from outside the call (id -> (path, name, tensor)), see jit."""
        self.external = tensors
        self._by_data = {id(t._data): e for e in tensors.values() for t in (e[2],)}

    def state_entry(self, x: Tensor):
        """``(entry, detached)`` if ``x`` is a state tensor (or a detached alias of one)."""
        ext = self.external.get(id(x))
        if ext is not None and ext[2] is x:
            return ext, False
        if self._by_data and not isinstance(x, Proxy):
            ext = self._by_data.get(id(x._data))
            if ext is not None and ext[2]._data is x._data and ext[2].spec == x.spec:
                return ext, True
        return None, False

    def proxy(self, node: Node) -> Proxy:
        return Proxy(self, node)

    def input(self, spec: Spec, name: str | None = None) -> Proxy:
        return Proxy(self, self.graph.add_input(spec, name))

    # ------------------------------------------------------------ breaks
    def graph_break(self, p: Proxy, reason: str) -> Tensor:
        where = user_location()
        if p._tracer is not self or not self.live:
            raise _escaped(p)
        if self.fullgraph:
            if self.why.startswith("a cond branch"):
                hint = (
                    "cond branches must be traceable: compute with tensor ops only, and "
                    "move .item()/if on tensors/in-place updates out of the branch"
                )
            elif self.why == "fullgraph=True":
                hint = (
                    "use minitorch.cond(pred, true_fn, false_fn, *operands) for tensor-dependent "
                    "branches, or drop fullgraph=True to split the function into several graphs"
                )
            else:
                hint = (
                    "use minitorch.cond for tensor-dependent branches, or call the jitted function"
                )
            raise GraphBreakError(
                f"graph break at {where}: {reason} needs a value the trace does not have "
                f"({self.why}). Hint: {hint}"
            )
        return split_at_break(self, p, reason, where)

    def evaluate(self, node: Node) -> Tensor:
        """The concrete value of ``node``, computed from the concrete inputs (memoised)."""
        stack = [node]
        while stack:
            n = stack[-1]
            if n in self._values:
                stack.pop()
                continue
            if n.op == "input":
                src = self._sources.get(n)
                if n in self._state_values:
                    self._values[n] = self._state_values[n]
                    stack.pop()
                elif src is None:
                    self._values[n] = self._concrete[n.graph.inputs.index(n)]
                    stack.pop()
                elif src in self._values:
                    self._values[n] = self._values[src]
                    stack.pop()
                else:
                    stack.append(src)
                continue
            if n.op == "const":
                self._values[n] = n.value
                stack.pop()
                continue
            todo = [i for i in n.inputs if i not in self._values]
            if todo:
                stack.extend(todo)
                continue
            self.recording = False  # computing for real, not recording
            try:
                with enable_grad():  # no_grad regions were recorded as detach nodes
                    self._values[n] = run_node(n, [self._values[i] for i in n.inputs])
            finally:
                self.recording = True
            stack.pop()
        return self._values[node]

    def finish(self, leaves: list[Node]) -> list[Graph]:
        """Set each graph's outputs: the values later graphs, breaks or the result use."""
        needed: dict[Graph, list[Node]] = {g: [] for g in self.graphs}
        for n in list(self._sources.values()) + self.broken + leaves:
            if n.graph in needed and n not in needed[n.graph]:
                needed[n.graph].append(n)
        for g in self.graphs:
            g.set_outputs(needed[g])
        return self.graphs

    def __enter__(self) -> Tracer:
        _active.append(self)
        self.live = True
        return self

    def __exit__(self, *exc) -> None:
        _active.remove(self)
        self.live = False
        if self.sizes is not None:
            self.sizes.live = False


def tracing() -> bool:
    """True while some trace is being recorded."""
    return bool(_active)


@exercise("5.1")
def record_op(tracer: Tracer, op: OpDef, inputs: tuple, attrs: dict) -> Proxy:
    """The tracer's dispatch override: record one op call and return the Proxy of its result.

    ``dispatch`` calls this instead of a kernel whenever one of ``inputs`` is a
    :class:`Proxy` (see ``Proxy.__minitorch_dispatch__``). Design it from the
    tools at hand: :class:`Tracer` (``graph``, ``lift``, ``proxy``),
    :class:`~minitorch.tracing.graph.Graph` (``add_node``) and the registry's
    :class:`OpDef` (``bind``, ``infer``). The contract, which the tests check:

    * nothing is computed: no kernel runs and no value is read;
    * the current graph (``tracer.graph``, which changes at each graph break)
      gains exactly one node, for ``op``, whose inputs are the nodes *of that
      graph* standing for ``inputs``, in order: a Proxy from before a break
      and a plain Tensor (a constant, or a parameter read from outside the call)
      get one too;
    * the node's attributes are the complete, normalised ones eager's kernel
      would get (defaults filled in, ``axis=-1`` as ``(1,)``), so that two
      calls that mean the same thing record the same node;
    * its spec (shape, dtype, device) is what eager's result would have,
      inferred statically: a bad call raises eager's ``OpError`` at trace time;
    * the result is a Proxy of that node, so that the next op records too.

    Example:
        >>> t = Tracer(); x = t.input(Spec((2, 3), minitorch.float32))
        >>> y = record_op(t, get_op("sum"), (x,), {"axis": 1})
        >>> y.shape, t.graph.op_names()
        ((2,), ['sum'])
    """
    raise NotImplementedError("Exercise 5.1: record_op")


@exercise("5.8")
def split_at_break(tracer: Tracer, p: Proxy, reason: str, where: str) -> Tensor:
    """Split the trace where Python needs the value of ``p`` (a graph break).

    ``Proxy.__bool__``, ``.item()`` and the like call this (through
    ``Tracer.graph_break``, which has already refused breaks under
    ``fullgraph=True``). Return the concrete value of ``p`` and leave the
    tracer recording into a fresh graph, so that one call yields a sequence of
    graphs that together compute what eager computes. The contract:

    * the value: ``tracer.evaluate(node)`` computes any node from the call's
      real inputs (memoised); return ``p``'s value as a Tensor;
    * the record: append ``Break(reason, where)`` to ``tracer.breaks``, and add
      ``p``'s node to ``tracer.broken`` (the values Python read: ``finish``
      makes them outputs of their graph);
    * the cut: the ops after the break go into a new ``Graph`` named
      ``f"{tracer.name}_{k}"`` with ``k`` its position in ``tracer.graphs``
      (append it there and make it ``tracer.graph``). A value of an older graph
      that a later op uses enters the new graph as an input, once per graph:
      ``tracer.lift`` does that through ``tracer.crossing`` (older node ->
      input of the current graph), so that map must describe the current graph;
    * eager's order of effects: Python code after the break may update state
      in place (an optimizer step, ``assign_``). Every value of the graph being
      closed must already be what eager computed before that code ran.

    Example: tracing ``y = x * 2; if y.sum() > 0: y = y + 1`` gives two graphs,
    ``[mul, sum]`` and ``[add]``, the second with one input (``y``).
    """
    raise NotImplementedError("Exercise 5.8: split_at_break")


def trace_function(fn, specs: list[Spec], names=None, name=None, why=None) -> Graph:
    """Trace ``fn`` on inputs described by ``specs`` alone (no data: breaks are errors)."""
    names = names or [f"x{i}" for i in range(len(specs))]
    tracer = Tracer(name or getattr(fn, "__name__", "graph"), fullgraph=True, why=why)
    with tracer:
        args = [tracer.input(s, n) for s, n in zip(specs, names)]
        result = fn(*args)
        leaves, tree = flatten_output(tracer, result)
    tracer.graph.set_outputs(leaves, tree)
    return tracer.graph


def flatten_output(tracer: Tracer, result, objects: list | None = None):
    """The output nodes of ``result`` and the tree that packs them back (see ``Graph.unflatten``).

    Tensors may be nested in tuples, lists, dicts, namedtuples and dataclasses; any
    other value is returned as it was at trace time, so it must not hold a traced tensor.
    ``objects``, if given, receives the tensor objects of the leaves, in order.
    """
    leaves: list[Node] = []

    def walk(x):
        if isinstance(x, Tensor):
            if objects is not None:
                objects.append(x)
            leaves.append(tracer.lift(x))
            return ("leaf", len(leaves) - 1)
        if isinstance(x, tuple) and hasattr(type(x), "_fields"):
            return ("namedtuple", (type(x), [walk(v) for v in x]))
        if type(x) in (tuple, list):
            return (type(x).__name__, [walk(v) for v in x])
        if type(x) is dict:
            return ("dict", (tuple(x), [walk(v) for v in x.values()]))
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            names = [f.name for f in dataclasses.fields(x)]
            return ("dataclass", (type(x), names, [walk(getattr(x, n)) for n in names]))
        hidden = _find_proxy(x)
        if hidden is not None:
            raise OpError(
                "jit",
                f"the result holds a traced tensor inside a {type(x).__name__} ({hidden}); "
                "it would keep the first call's value",
                hint="return tensors in a tuple, list, dict, namedtuple or dataclass",
            )
        return ("static", x)

    return leaves, walk(result)


def _find_proxy(x, depth: int = 3):
    """Where a Proxy hides in a non-container result (attributes, sets, nested), or None."""
    if isinstance(x, Proxy):
        return x._describe()
    if depth == 0:
        return None
    if isinstance(x, dict):
        items = list(x.items())
    elif isinstance(x, (list, tuple, set, frozenset)):
        items = list(enumerate(x))
    elif hasattr(x, "__dict__") and not isinstance(x, type):
        items = list(vars(x).items())
    else:
        return None
    for k, v in items:
        found = _find_proxy(v, depth - 1)
        if found is not None:
            return f"{k}: {found}"
    return None


__all__ = [
    "Break",
    "GraphBreakError",
    "Proxy",
    "Tracer",
    "record_op",
    "split_at_break",
    "trace_function",
    "tracing",
]
