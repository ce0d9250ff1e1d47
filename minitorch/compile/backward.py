"""Chapter 9, exercises 9.1-9.2: the backward pass as more nodes of the same graph.

Inside a compiled training step, ``loss.backward()`` does not compute anything.
The forward ops were recorded as graph nodes; the backward walks those nodes
from the loss to the parameters and calls each op's VJP from the registry. The
VJPs are written with Tensor ops, so on traced values they *record*: the
gradients become nodes of the very graph that computed the loss, and a value
the forward computed and the backward reads (a saved activation) is just a
node with users on both sides, and what a training step must keep alive from its
forward to its backward (exercise 9.1; 9.11 trades it against recomputing).
"""

from __future__ import annotations

from typing import Callable

from ..autograd.backprop import _seed
from ..core import dtypes as dt
from ..core.registry import get_op  # noqa: F401  (what the exercises call)
from ..core.tensor import Tensor, no_grad
from ..exercises import exercise
from ..tracing.graph import Graph, Node
from .remat import is_view, node_bytes  # noqa: F401  (what exercise 9.1 calls)


def backward_order(loss: Node, needs_grad: set) -> list[Node]:
    """The nodes the backward visits: those ``loss`` depends on through ``needs_grad``.

    Chapter 2's topological sort (exercise 2.7) over graph nodes: every node reached
    from ``loss`` along ``node.inputs`` without passing through a node outside
    ``needs_grad``, each once, loss first and every node before all of its inputs;
    ``[]`` when ``loss`` needs no grad. An explicit stack: a long training step is
    deeper than Python's recursion limit.
    """
    if loss not in needs_grad:
        return []
    seen, post = {loss}, []
    stack = [(loss, iter(loss.inputs))]
    while stack:
        node, it = stack[-1]
        for i in it:
            if i in needs_grad and i not in seen:
                seen.add(i)
                stack.append((i, iter(i.inputs)))
                break
        else:
            stack.pop()
            post.append(node)
    return post[::-1]


@exercise("9.1")
def saved_activations(graph: Graph, backward_start: int) -> dict[Node, int]:
    """The forward values a training step keeps for its backward, with their bytes.

    ``graph`` is a traced step in program order: ``graph.nodes[:backward_start]`` is
    the forward, the rest the backward and the update. A forward op (a node before
    ``backward_start`` that is not an ``input`` or a ``const``) is *saved* when a
    node at ``backward_start`` or later reads its buffer: reads it, or reads a view
    of it. A view (:func:`~minitorch.compile.remat.is_view`) has no buffer: its
    buffer is its first input's, followed back through views to the op that made
    it; a view of an input or a constant saves nothing (the caller holds those).

    Return ``{op: bytes}`` for every saved op, ``bytes`` its
    ``spec.size * spec.dtype.itemsize`` (:func:`~minitorch.compile.remat.node_bytes`),
    in program order; ``{}`` when nothing is saved. Leave ``graph`` unchanged.
    Raise ``ValueError`` naming ``backward_start`` and the number of nodes when
    ``backward_start`` is not between 0 and ``len(graph.nodes)`` (both included).

    Example:
        >>> # forward:  %0 = input (4, 8) f32 ; %1 = exp(%0) ; %2 = reshape(%1) (32,)
        >>> #           %3 = tanh(%1) ; %4 = sum(%3)
        >>> # backward: %5 = mul(%2, %2) ; %6 = mul(%3, %0)       (backward_start = 5)
        >>> saved_activations(g, 5)  # %1 through the view %2, %3; not %0 (an input)
        {%1: 128, %3: 128}
    """
    raise NotImplementedError("Exercise 9.1: saved_activations")


@exercise("9.2")
def backward_graph(
    order: list[Node], seed: Tensor, value_of: Callable[[Node], Tensor], needs_grad: set
) -> dict[Node, Tensor]:
    """The gradient of ``order[0]`` (seeded with ``seed``) w.r.t. every node in ``order``.

    ``order`` comes from :func:`backward_order`. Graph inputs (``n.op == "input"``:
    parameters, arguments) are leaves: they only receive. Every other node passes
    its gradient ``g`` to its inputs through its op's rule in the registry,
    ``get_op(n.op).vjp(g, out, *ins, **n.attrs)``, with ``out`` and ``ins`` the
    traced tensors ``value_of`` gives for ``n`` and its inputs (so the rule's Tensor
    ops record new nodes); it returns one gradient (or ``None``) per input. Inputs
    not in ``needs_grad`` get no gradient, a ``None`` adds nothing, and an input
    reached several times (a value used twice) gets the sum (``a + b``, also
    recorded). Return ``{node: gradient}`` for every node that got one
    (``order[0]`` included).

    Raise ``RuntimeError`` naming the op when it has no rule (``vjp is None``)
    and when a rule returns a gradient whose shape is not its input's.

    Example:
        >>> grads = backward_graph(order, ones(()), tracer.proxy, needs)  # y = sum(x * x)
        >>> grads[x]     # recorded: mul(...) + mul(...), i.e. 2 * x
    """
    raise NotImplementedError("Exercise 9.2: backward_graph")


class StepTrace:
    """What a training-step trace records besides the forward ops (see ``Tracer.training``).

    ``grad_nodes`` are the nodes whose values require grad; ``leaves`` maps an
    input node (a parameter, an argument) to the tensor whose ``.grad`` it
    fills; ``rebound`` maps a parameter updated in this step to its new value;
    ``updates`` is every write the step made, in order: ``((kind, obj, key), node)``.
    """

    def __init__(self, tracer):
        self.tracer = tracer
        self.grad_nodes: set[Node] = set()
        self.leaves: dict[Node, Tensor] = {}
        self.rebound: dict[int, Tensor] = {}
        self.updates: list[tuple[tuple, Node | None]] = []
        self.backward_calls = 0
        self.marks: dict[str, int] = {}  # where the backward and the update start (node count)

    def backward(self, loss: Tensor, grad: Tensor | None = None) -> None:
        """``loss.backward()`` inside the step: record the gradients, set ``.grad`` of leaves."""
        self.backward_calls += 1
        self.marks.setdefault("backward", len(self.tracer.graph.nodes))
        seed = _seed(loss, grad, "backward")
        tracer = self.tracer
        for node, path in tracer.state_inputs:  # parameters the forward read
            if path[0] == "param":
                self.leaves.setdefault(node, tracer._state_values[node])
        order = backward_order(loss.node, self.grad_nodes)
        with no_grad():
            grads = backward_graph(order, seed, tracer.proxy, self.grad_nodes)
            for node, leaf in self.leaves.items():
                g = grads.get(node)
                if g is None:
                    continue
                if g.dtype != leaf.dtype and dt.is_float(leaf.dtype):
                    g = g.astype(leaf.dtype)
                leaf.grad = g if leaf.grad is None else leaf.grad + g
        self.marks["backward_end"] = len(tracer.graph.nodes)

    def assign(self, param: Tensor, value: Tensor) -> Tensor:
        """``param.assign_(value)`` inside the step: later reads see ``value``; written back."""
        if value.shape != param.shape:
            from ..core.errors import OpError

            raise OpError(
                "assign_",
                f"a parameter of shape {param.shape} cannot take values of shape {value.shape}",
                hint="to change a layer's size, build a new Parameter (and a new optimizer)",
            )
        if value.dtype != param.dtype:
            value = value.astype(param.dtype)
        # a detach node: the new value is a leaf, the update itself is not differentiated
        value_node = self.tracer.lift(value)
        node = self.tracer.graph.add_node("detach", [value_node], {}, value_node.spec)
        proxy = self.tracer.proxy(node)
        self.rebound[id(param)] = proxy
        if param.requires_grad:  # still a leaf: a later backward reaches it through the new value
            self.grad_nodes.add(node)
            self.leaves[node] = param
        self.updates.append((("data", param, None), node))
        return param
