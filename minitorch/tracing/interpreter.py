"""Running a graph: the interpreter (exercise 5.6) and the compiled form ``graph.compile()``."""

from __future__ import annotations

import contextlib

from ..backends.base import use_backend
from ..core import instrument as profiler
from ..core.errors import OpError
from ..core.registry import dispatch
from ..exercises import exercise
from .graph import Graph, Node


def run_node(node: Node, args: list):
    """Compute one node on concrete tensors: ``dispatch`` for a registry op, a branch for
    cond, the subgraph for a fused group."""
    if node.op == "cond":
        branch = node.attrs["true_graph"] if bool(args[0]) else node.attrs["false_graph"]
        return interpret(branch, *args[1:])
    if node.op == "fused":  # chapter 7: a group runs its ops one by one, as eager would
        return interpret(node.attrs["graph"], *args)
    return dispatch(node.op, *args, **node.attrs)


@exercise("5.6")
def interpret(graph: Graph, *inputs):
    """Run ``graph`` on concrete tensors and return its outputs, packed as traced.

    A plain loop over ``graph.nodes`` with an environment ``env: dict[Node, Tensor]``:

    * start with ``env[graph.inputs[i]] = inputs[i]`` (raise
      ``OpError("interpret", problem)`` if the number of inputs is wrong, the
      problem naming how many the graph takes and how many it got);
    * skip ``input`` nodes; a ``const`` node's value is ``node.value``;
    * any other node: ``env[node] = run_node(node, [env[i] for i in node.inputs])``
      (``run_node`` calls ``dispatch(node.op, *args, **node.attrs)``, so the
      current backend runs it, exactly as in eager mode);
    * finish with ``graph.unflatten([env[o] for o in graph.outputs])``.

    Example:
        >>> g = minitorch.jit(lambda x: (x * 2).sum()).trace(x)
        >>> interpret(g, minitorch.tensor([1.0, 2.0]))
        tensor(6.)

    Hint: the nodes are already in execution order; no sorting needed.
    """
    raise NotImplementedError("Exercise 5.6: interpret")


class CompiledGraph:
    """A verified graph ready to run: checks its inputs, then interprets on a chosen backend.

    Later chapters make ``compile`` do real work (graph passes, fusion, memory
    planning); here it verifies once so that ``run`` only has to check input specs.
    """

    def __init__(self, graph: Graph, backend: str | None = None):
        self.graph, self.backend = graph, backend
        self.specs = [n.spec for n in graph.inputs]

    def run(self, *inputs):
        if len(inputs) != len(self.specs):
            raise OpError("run", f"the graph takes {len(self.specs)} input(s), got {len(inputs)}")
        for k, (x, s) in enumerate(zip(inputs, self.specs)):
            if x.shape != s.shape or x.dtype != s.dtype or x.device != s.device:
                raise OpError(
                    "run",
                    f"input {k} ({self.graph.inputs[k]!r}) is {x.spec}, "
                    f"the graph was traced for {s}",
                    hint="trace again for new shapes (minitorch.jit does this for you)",
                )
        ctx = use_backend(self.backend) if self.backend else contextlib.nullcontext()
        if profiler.enabled():  # chapter 10: the plan is one "plan" slice around its kernels
            shapes = [x.shape for x in inputs]
            with ctx, profiler.kernel(self.graph.name, shapes, self.backend or "", cat="plan"):
                return interpret(self.graph, *inputs)
        with ctx:
            return interpret(self.graph, *inputs)

    __call__ = run

    def __repr__(self) -> str:
        return f"<CompiledGraph {self.graph.name}: {len(self.graph)} ops>"
