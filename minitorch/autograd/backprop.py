"""Chapter 2, exercises 2.7-2.8: walking the recorded graph backwards.

Every op run while grad mode is on, on an input that requires grad, leaves a
:class:`~minitorch.core.tensor.Node` on its output: the op, the input tensors
and the attributes. Those nodes form a DAG from the leaves (tensors made by
the user, ``requires_grad=True``) to the loss. Backpropagation visits it in
reverse topological order, so that a tensor's gradient is complete (summed
over every use) before it is passed on to the tensor's inputs.
"""

from __future__ import annotations

import contextlib
import warnings

from ..core import dtypes as dt
from ..core import tensor as _tensor
from ..core.creation import ones
from ..core.errors import OpError
from ..core.tensor import Tensor, no_grad
from ..exercises import exercise


@exercise("2.7")
def toposort(root: Tensor) -> list[Tensor]:
    """Every tensor that ``root`` depends on and that requires grad, each before its inputs.

    Start at ``root`` and follow ``t._node.inputs`` (leaves have ``t._node is
    None``). Keep only tensors with ``requires_grad``; visit each tensor once
    even when it is used several times (``seen`` by ``id(t)``: ``==`` on
    tensors is elementwise). The result starts with ``root``, and every
    tensor appears before all of its inputs (a reversed post-order DFS).

    Graphs can be thousands of ops deep (a long loop in Python): use an
    explicit stack, not recursion, and keep it linear in the graph size.

    Example:
        >>> x = minitorch.tensor([1.0], requires_grad=True)
        >>> y = x * 2
        >>> z = y + x
        >>> [t is s for t, s in zip(toposort(z), (z, y, x))]
        [True, True, True]
    """
    raise NotImplementedError("Exercise 2.7: toposort")


@exercise("2.8")
def backpropagate(root: Tensor, grad: Tensor) -> dict[int, Tensor]:
    """The total gradient of ``root`` (seeded with ``grad``) w.r.t. every tensor in its graph.

    Return a dict ``{id(t): dL/dt}`` over the tensors of :func:`toposort` that
    received a gradient. Walk them in that order; for a tensor ``t`` with a
    node ``n = t._node``, call ``n.op.vjp(g, t, *n.inputs, **n.attrs)``: it
    returns one gradient (or ``None``) per input. Skip inputs that do not
    require grad or got ``None``; when an input is reached a second time
    (the value was used several times), *add* to the gradient it already
    has, never overwrite it. Leaves are in the dict too; writing ``.grad``
    is the caller's job (:func:`backward`).

    If an op has no rule (``n.op.vjp is None``) raise ``RuntimeError`` naming
    the op; if a rule returns a gradient whose shape is not its input's,
    raise ``RuntimeError`` naming the op and both shapes.

    Example:
        >>> x = minitorch.tensor([3.0], requires_grad=True)
        >>> y = x * x                     # x is used twice: dy/dx = 2x
        >>> backpropagate(y, minitorch.ones(1))[id(x)].item()
        6.0
    """
    raise NotImplementedError("Exercise 2.8: backpropagate")


# ---------------------------------------------------------------- framework


def _seed(root: Tensor, grad: Tensor | None, who: str) -> Tensor:
    if not root.requires_grad:
        raise RuntimeError(
            f"{who}: this tensor (shape {root.shape}) does not require grad and has no "
            "recorded graph. Hint: create the leaves with requires_grad=True (or use "
            "nn.Parameter), and do not compute the loss under no_grad() or from .detach()"
        )
    if grad is None:
        if root.size != 1:
            raise RuntimeError(
                f"{who}: the output has shape {root.shape}, not one element, so the "
                "gradient to start from is ambiguous. Hint: reduce it to a scalar first "
                "(e.g. loss.sum() or loss.mean()), or pass grad= a tensor of shape "
                f"{root.shape} holding dL/d(output)"
            )
        return ones(root.shape, dtype=root.dtype, device=root.device)
    if not isinstance(grad, Tensor):
        grad = Tensor(grad, dtype=root.dtype, device=root.device)
    if grad.shape != root.shape:
        raise OpError(
            who,
            f"the gradient has shape {grad.shape} but the output has shape {root.shape}",
            hint="pass a gradient of exactly the output's shape",
        )
    return grad


def backward(root: Tensor, grad: Tensor | None = None) -> None:
    """``root.backward(grad)``: add ``d(root)/d(leaf)`` into the ``.grad`` of every leaf.

    A leaf is a tensor with ``requires_grad=True`` that no recorded op made.
    ``.grad`` *accumulates* across calls (like PyTorch): zero it between steps
    (``optimizer.zero_grad()`` or ``module.zero_grad()``). The graph is kept,
    so calling ``backward`` twice adds the gradient twice. Gradients are
    computed with grad mode off, so they are plain tensors without a graph.
    """
    seed = _seed(root, grad, "backward")
    if getattr(root, "_backward_ran", False):  # allowed (it accumulates), but never silently
        warnings.warn(
            "backward() ran on this graph before: its gradients are added to .grad a second "
            "time. Hint: compute the loss again for a new step, or zero_grad() in between",
            RuntimeWarning,
            stacklevel=3,
        )
    root._backward_ran = True
    with no_grad():
        order = toposort(root)
        with _watching(order) as watched:
            grads = backpropagate(root, seed)
        for t in order:
            g = grads.get(id(t))
            if g is None or t._node is not None:
                continue
            g = _as_leaf(t, g)
            if id(t) in watched:  # no rule was seen to finish it (e.g. root is the leaf)
                watched.pop(id(t)).fire(g)
            t.grad = g if t.grad is None else t.grad + g


def _as_leaf(t: Tensor, g: Tensor) -> Tensor:
    return g.astype(t.dtype) if g.dtype != t.dtype and dt.is_float(t.dtype) else g


class _Watch:
    """A leaf with grad hooks: its gradient so far, and how many of its users are still to run."""

    def __init__(self, leaf: Tensor, users: int):
        self.leaf, self.users, self.grad = leaf, users, None

    def fire(self, g: Tensor) -> None:
        for fn in list(self.leaf._grad_hooks):
            fn(g)


class _Watched:
    """Stands in for an op during one backward: after its rule runs, it adds what the rule
    gave the watched leaves, and fires a leaf's hooks once its last user has run."""

    def __init__(self, op, watched: dict):
        self.op, self.name, self.watched = op, op.name, watched
        self.vjp = None if op.vjp is None else self._vjp

    def _vjp(self, g, out, *inputs, **attrs):
        in_grads = self.op.vjp(g, out, *inputs, **attrs)
        mine = {}
        for x, gx in zip(inputs, in_grads):
            w = self.watched.get(id(x))
            if w is not None:
                mine[id(x)] = w
                if gx is not None and gx.shape == x.shape:  # else backpropagate names the rule
                    w.grad = gx if w.grad is None else w.grad + gx
        for key, w in mine.items():
            w.users -= 1
            if w.users == 0 and w.grad is not None:
                del self.watched[key]
                w.fire(_as_leaf(w.leaf, w.grad))
        return in_grads


@contextlib.contextmanager
def _watching(order: list[Tensor]):
    """Fire each hooked leaf's hooks (``Parameter.register_grad_hook``) as soon as the walk has
    run the rule of every tensor that uses it: its gradient for this backward is final then.

    Rules are seen, not changed: the ops of the leaves' users are stood in for while the walk
    runs (the learner's 2.8 calls them) and put back afterwards. Leaves still waiting when the
    walk ends (a user that received no gradient) are fired by ``backward`` from its result.
    """
    watched = {id(t): t for t in order if t._node is None and getattr(t, "_grad_hooks", None)}
    if not watched:
        yield {}
        return
    users: dict[int, int] = {}
    nodes = [t._node for t in order if t._node is not None]
    for n in nodes:
        for key in {id(x) for x in n.inputs if id(x) in watched}:
            users[key] = users.get(key, 0) + 1
    watched = {k: _Watch(t, users.get(k, 0)) for k, t in watched.items()}
    touched = list({id(n): n for n in nodes if any(id(x) in watched for x in n.inputs)}.values())
    for n in touched:
        n.op = _Watched(n.op, watched)
    try:
        yield watched
    finally:
        for n in touched:
            n.op = n.op.op


def grad(output: Tensor, inputs, grad_output: Tensor | None = None) -> list[Tensor | None]:
    """``d(output)/d(input)`` for each of ``inputs``, without touching any ``.grad``.

    Inputs may be leaves or intermediate tensors of the graph; an input that
    ``output`` does not depend on gets ``None``.
    """
    seed = _seed(output, grad_output, "grad")
    with no_grad():
        grads = backpropagate(output, seed)
    return [grads.get(id(x)) for x in inputs]


def tape_bytes(root: Tensor) -> int:
    """Bytes of storage the recorded graph of ``root`` keeps alive (saved inputs of every node).

    Each storage buffer is counted once, however many views of it the nodes hold.
    """
    seen_nodes, seen_storage, total = set(), set(), 0
    stack = [root]
    while stack:
        t = stack.pop()
        node = t._node
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        for x in node.inputs:
            storage = x._data.storage
            if id(storage) not in seen_storage:
                seen_storage.add(id(storage))
                total += int(storage.nbytes)
            stack.append(x)
    return total


def graph_size(root: Tensor) -> int:
    """The number of recorded ops ``root`` depends on."""
    seen, stack = set(), [root]
    while stack:
        t = stack.pop()
        if t._node is not None and id(t) not in seen:
            seen.add(id(t))
            stack.extend(t._node.inputs)
    return len(seen)


if not _tensor.BACKWARD:  # ``Tensor.backward`` calls this (chapter 1 knows no later chapter)
    _tensor.BACKWARD.append(backward)
