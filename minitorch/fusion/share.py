"""One ``tanh`` for a GELU and its gradient (stage "share", max-autotune, before the groups).

GELU's VJP recomputes ``tanh(C * (x + 0.044715 x^3))`` from the forward's input: in a
training step that is a second pass of numpy's ``tanh`` (190 us over a (2048, 256)
activation) and the loop computing its argument. The forward computes the same value
from the same ``x``, in the same order (``gelu_numpy``'s steps are ``OpDef.parts``), so
here a ``gelu`` whose backward has that ``tanh`` is written out as its parts and the
backward reads the forward's ``tanh``. The value is then stored between forward and
backward (the memory plan keeps it, as it keeps ``x``), and the gradient's group is one
loop. The bits are eager's: the same operations on the same values; only ``x + y``
against ``y + x`` differ in order, and IEEE addition gives both the same result.
"""

from __future__ import annotations

import numpy as np

from ..core.registry import get_op
from ..passes.pipeline import Stage, register_stage
from ..passes.rewrite import replace_all_uses
from ..tracing.graph import Graph, Node
from .split import _Emit

_CUBE, _SCALE = 0.044715, np.sqrt(2.0 / np.pi)  # gelu's constants (transformer/ops.py)


def _const(n: Node, value: float, dtype) -> bool:
    return (
        n.op == "const"
        and n.spec.size == 1
        and np.dtype(n.spec.dtype) == dtype
        and np.asarray(n.value.numpy()).reshape(()) == np.asarray(value, dtype)
    )


def _binary(n: Node, op: str) -> bool:
    return n.op == op and len(n.inputs) == 2 and not n.attrs


def gelu_argument_of(t: Node) -> Node | None:
    """``x`` when ``t`` is ``tanh(mul(add(x, mul(mul(mul(x, x), x), 0.044715)), C))`` (the
    add either way round), all of one float dtype and shape; else None."""
    if t.op != "tanh" or not _binary(t.inputs[0], "mul"):
        return None
    dtype = np.dtype(t.spec.dtype)
    scaled, c = t.inputs[0].inputs
    if dtype not in (np.float32, np.float64) or not _const(c, _SCALE, dtype):
        return None
    if not _binary(scaled, "add"):
        return None
    for x, cubic in (scaled.inputs, scaled.inputs[::-1]):
        if not (_binary(cubic, "mul") and _const(cubic.inputs[1], _CUBE, dtype)):
            continue
        cube = cubic.inputs[0]
        if not (_binary(cube, "mul") and cube.inputs[1] is x and _binary(cube.inputs[0], "mul")):
            continue
        if cube.inputs[0].inputs == [x, x] and x.spec == t.spec:
            return x
    return None


def _write_out(graph: Graph, gelu: Node) -> tuple[Node, Node]:
    """``gelu`` computed by its parts, placed where it was: (its value, the parts' tanh)."""
    start = len(graph.nodes)
    out = get_op("gelu").parts(_Emit(graph, np.dtype(gelu.spec.dtype)), gelu.inputs[0])
    made = graph.nodes[start:]
    del graph.nodes[start:]
    at = graph.nodes.index(gelu)
    graph.nodes[at:at] = made
    for n in made:
        n.where = gelu.where
    return out, next(n for n in made if n.op == "tanh")


def _drop_dead(graph: Graph, nodes: list[Node]) -> None:
    """Remove ``nodes`` and what only they read, once nothing uses them."""
    outputs = set(graph.outputs)
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if n.users or n in outputs or n.op in ("input", "const") or n not in graph.nodes:
            continue
        graph.nodes.remove(n)
        for i in n.inputs:
            i.users.remove(n)
            todo.append(i)
        n.inputs = []


def share_gelu_tanh(graph: Graph) -> list[Node]:
    """Rewrite each ``gelu`` whose argument's ``tanh`` is recomputed elsewhere (module doc);
    return the ``tanh`` nodes now shared."""
    again: dict[Node, list[Node]] = {}
    for n in graph.nodes:
        x = gelu_argument_of(n) if n.op == "tanh" else None
        if x is not None:
            again.setdefault(x, []).append(n)
    shared = []
    for gelu in [n for n in graph.nodes if n.op == "gelu" and n.inputs[0] in again]:
        x = gelu.inputs[0]
        if gelu.spec != x.spec or x.spec.device != "cpu":  # gelu of ints computes in float
            continue
        value, tanh = _write_out(graph, gelu)
        replace_all_uses(gelu, value)
        for t in again[x]:
            replace_all_uses(t, tanh)
        _drop_dead(graph, [gelu, *again[x]])
        shared.append(tanh)
    return shared


def _run(unit) -> None:
    unit.shared_tanh = share_gelu_tanh(unit.graph)


def _explain(unit) -> list[str]:
    made = getattr(unit, "shared_tanh", None) or []
    return [f"GELU tanh shared with its gradient ({len(made)})"] if made else []


register_stage(
    Stage(
        "share",
        17,  # after the graph passes (10), before slices (18), rows (19) and groups (20)
        _run,
        wanted=lambda options: options.fuse and options.mode == "max-autotune",
        needs=("6.1",),
        explain=_explain,
        rewrites=True,
    )
)
