"""The tracer: symbolic tensors that record ops into a graph instead of computing them.

A :class:`Proxy` is a :class:`Tensor` without data. Every op on it reaches
``dispatch``, which hands the call to ``Proxy.__minitorch_dispatch__`` and so to
:func:`record_op` (exercise 5.1): infer the output spec with the registry's shape
function, append a node, return a new Proxy.

Reading a value (``bool``, ``if``, ``while``, ``.item()``) cannot be recorded: it is
a *graph break*. With ``fullgraph=True`` that is an error. Otherwise the tracer
closes the current graph, computes the value for real (from the concrete inputs it
was given), lets Python decide, and starts a new graph whose inputs are the values
that flow across the break. Results are always those of eager execution.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import OpError
from ..core.registry import OpDef, Spec
from ..core.tensor import Tensor
from ..exercises import exercise
from .graph import Graph, Node, user_location
from .interpreter import run_node


class GraphBreakError(RuntimeError):
    """Python needed the value of a traced tensor while ``fullgraph=True``."""


@dataclass
class Break:
    reason: str
    where: str

    def __str__(self) -> str:
        return f"{self.reason} at {self.where}"


_active: list[Tracer] = []


class Proxy(Tensor):
    """A traced tensor: a node of a graph under construction, with no data."""

    def __init__(self, tracer: Tracer, node: Node):  # noqa: D107 - no super().__init__: no data
        self._tracer, self.node = tracer, node
        self.device = node.spec.device
        self.requires_grad, self.grad, self._node, self.name = False, None, None, None

    @property
    def shape(self):
        return self.node.spec.shape

    @property
    def dtype(self):
        return self.node.spec.dtype

    @property
    def size(self) -> int:
        return self.node.spec.size

    def numel(self) -> int:
        return self.node.spec.size

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
        tracer = next(x._tracer for x in inputs if isinstance(x, Proxy))
        return record_op(tracer, op, inputs, attrs)

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

    def __repr__(self) -> str:
        return f"Proxy(%{self.node.name}: {self.node.spec})"

    def detach(self) -> Tensor:
        return self

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

    def __init__(self, name: str = "graph", fullgraph: bool = False, concrete=None):
        self.name = name
        self.fullgraph = fullgraph or concrete is None
        self.graph = Graph(name)
        self.graphs: list[Graph] = [self.graph]
        self.breaks: list[Break] = []
        self._concrete = concrete  # list of input tensors, matched to graphs[0].inputs
        self._values: dict[Node, Tensor] = {}
        self._crossing: dict[Node, Node] = {}  # node of an older graph -> input of the current
        self._sources: dict[Node, Node] = {}  # input of a later graph -> node it stands for
        self._broken: list[Node] = []  # nodes whose value Python read at a break

    # ------------------------------------------------------------ what record_op uses
    def lift(self, x) -> Node:
        """The node of the current graph for ``x``: a Proxy's node or a constant."""
        if isinstance(x, Proxy):
            if x._tracer is not self:
                raise OpError(
                    "trace",
                    f"a traced value from another trace ({x!r}) was used here",
                    hint="pass it in as an argument (cond operands, jit arguments)",
                )
            node = x.node
            if node.graph is self.graph:
                return node
            inner = self._crossing.get(node)
            if inner is None:  # a value flowing across a graph break
                inner = self.graph.add_input(node.spec)
                self._crossing[node] = inner
                self._sources[inner] = node
            return inner
        if isinstance(x, Tensor):
            return self.graph.add_const(x)
        raise OpError(
            "trace",
            f"cannot record an op input of type {type(x).__name__}",
            hint="op inputs are Tensors; Python numbers are lifted by Tensor methods",
        )

    def proxy(self, node: Node) -> Proxy:
        return Proxy(self, node)

    def input(self, spec: Spec, name: str | None = None) -> Proxy:
        return Proxy(self, self.graph.add_input(spec, name))

    # ------------------------------------------------------------ breaks
    def graph_break(self, p: Proxy, reason: str) -> Tensor:
        where = user_location()
        if self.fullgraph:
            raise GraphBreakError(
                f"graph break at {where}: {reason} needs a value the trace does not have. "
                "Hint: use minitorch.cond(pred, true_fn, false_fn, *operands) for tensor-dependent "
                "branches, or drop fullgraph=True to split the function into several graphs"
            )
        if p._tracer is not self:
            raise OpError(
                "trace",
                "a traced value escaped its trace",
                hint="return it from the traced function instead",
            )
        self.breaks.append(Break(reason, where))
        self._broken.append(p.node)
        value = self.evaluate(p.node)
        self.graph = Graph(f"{self.name}_{len(self.graphs)}")
        self.graphs.append(self.graph)
        self._crossing = {}
        return value

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
                if src is None:
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
            self._values[n] = run_node(n, [self._values[i] for i in n.inputs])
            stack.pop()
        return self._values[node]

    def finish(self, leaves: list[Node]) -> list[Graph]:
        """Set each graph's outputs: the values later graphs, breaks or the result use."""
        needed: dict[Graph, list[Node]] = {g: [] for g in self.graphs}
        for n in list(self._sources.values()) + self._broken + leaves:
            if n.graph in needed and n not in needed[n.graph]:
                needed[n.graph].append(n)
        for g in self.graphs:
            g.set_outputs(needed[g])
        return self.graphs

    def __enter__(self) -> Tracer:
        _active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _active.remove(self)


def tracing() -> bool:
    """True while some trace is being recorded."""
    return bool(_active)


@exercise("5.1")
def record_op(tracer: Tracer, op: OpDef, inputs: tuple, attrs: dict) -> Proxy:
    """Record one op call into ``tracer.graph`` and return the Proxy of its result.

    This is the tracer's dispatch handler: ``dispatch`` calls it whenever one of
    ``inputs`` is a :class:`Proxy`. Nothing is computed. The steps:

    1. turn every input into a node of the current graph with ``tracer.lift(x)``
       (a Proxy gives its node, a concrete Tensor becomes a ``const`` node);
    2. fill in and check the attributes: ``attrs = op.bind(attrs, specs)`` where
       ``specs`` are the input nodes' ``.spec`` (this also normalises, e.g. axes);
    3. infer the output: ``spec = op.infer(*specs, **attrs)`` -- the very function
       eager mode uses, so shapes and errors agree with eager;
    4. append the node: ``tracer.graph.add_node(op.name, input_nodes, attrs, spec)``;
    5. return ``tracer.proxy(node)``.

    Example:
        >>> t = Tracer(); x = t.input(Spec((2, 3), minitorch.float32))
        >>> y = record_op(t, get_op("sum"), (x,), {"axis": 1})
        >>> y.shape, t.graph.op_names()
        ((2,), ['sum'])

    Hint: do not call ``op.check`` (it needs real values) nor any kernel.
    """
    raise NotImplementedError("Exercise 5.1: record_op")


def trace_function(fn, specs: list[Spec], names=None, name=None) -> Graph:
    """Trace ``fn`` on inputs described by ``specs`` alone (no data: breaks are errors)."""
    names = names or [f"x{i}" for i in range(len(specs))]
    tracer = Tracer(name or getattr(fn, "__name__", "graph"), fullgraph=True)
    with tracer:
        args = [tracer.input(s, n) for s, n in zip(specs, names)]
        result = fn(*args)
    leaves, tree = flatten_output(tracer, result)
    tracer.graph.set_outputs(leaves, tree)
    return tracer.graph


def flatten_output(tracer: Tracer, result):
    """The output nodes of ``result`` (a tensor or nested tuples/lists) and how to repack them."""
    leaves: list[Node] = []

    def walk(x):
        if isinstance(x, Tensor):
            leaves.append(tracer.lift(x))
            return ("leaf", len(leaves) - 1)
        if isinstance(x, (tuple, list)):
            return ("list" if isinstance(x, list) else "tuple", [walk(v) for v in x])
        return ("static", x)

    return leaves, walk(result)


__all__ = ["Break", "GraphBreakError", "Proxy", "Tracer", "record_op", "trace_function", "tracing"]
