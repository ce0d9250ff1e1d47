"""``minitorch.onnx.export``: trace, find the dynamic dims, write an ONNX model.

1. trace the function (or model) on the example inputs into a chapter-5 graph;
2. with ``dynamic_axes``, trace again with those input dims one larger: the
   dims that differ between the two graphs are dynamic (exercise 10.5);
3. write the graph as ONNX (exercise 10.6): inputs and outputs with symbolic
   dims, constants as initializers, each op through its ``OpDef.onnx`` emitter;
4. check it with ``onnx.checker`` and save it.
"""

from __future__ import annotations

import os

import numpy as np
import onnx

from ..core.errors import OpError
from ..core.tensor import Tensor
from ..exercises import exercise
from ..tracing.graph import Graph
from ..tracing.jit import jit
from . import mapping  # noqa: F401  (puts the emitters on the built-in ops)

OPSET = 18


@exercise("10.5")
def dynamic_dims(graph_a: Graph, graph_b: Graph) -> dict[str, tuple[int, ...]]:
    """Which dims of which values change between two traces of the same program.

    ``graph_b`` was traced with some input dims larger than ``graph_a``. The two
    must be the same program: same number of nodes and, position by position,
    the same ``op`` and the same ``ndim``. Return ``{node.name: dims}`` for every
    node (inputs and constants included) whose shape differs, ``dims`` being the
    sorted tuple of differing dim indices (nodes whose shape matches are left out).

    Raise ``OpError("onnx.export", problem, hint)`` when

    * the node counts, an ``op`` or an ``ndim`` differ (name the first node
      that differs): the program's structure depends on the input size;
    * a ``const`` node's shape differs: a constant was built from the batch size.

    Example:
        >>> a = jit(f).trace(ones(4, 3)); b = jit(f).trace(ones(5, 3))
        >>> dynamic_dims(a, b)    # f(x) = (x @ w).relu()
        {'x': (0,), '1': (0,), '2': (0,)}

    Hint: ``zip(graph_a.nodes, graph_b.nodes)``; the node names match.
    """
    raise NotImplementedError("Exercise 10.5: dynamic_dims")


@exercise("10.6")
def graph_to_onnx(graph: Graph, dynamic: dict, opset: int = OPSET) -> onnx.ModelProto:
    """Write ``graph`` as an ONNX model; ``dynamic[node.name]`` is ``{dim: symbol}``.

    With ``ctx = OnnxContext(dynamic)`` and ``names: dict[Node, str]``:

    * graph input ``k`` is the ONNX input ``f"input{k}"`` (type from
      ``ctx.value_info(name, node)``);
    * a ``const`` node becomes an initializer: ``ctx.const(node.value.numpy(), f"const_{node.name}")``;
    * any other node: ``emit = get_op(node.op).onnx`` (for ops in ``OPS``), then
      ``names[node] = emit(ctx, node, [names[i] for i in node.inputs])``.
      An op that is not in ``OPS`` (``cond``) or has no emitter raises
      ``OpError("onnx.export", problem, hint)`` naming the op, with a hint that
      says how to add one (``minitorch.onnx.register_onnx(op_name)``, the
      custom-op route);
    * output ``k`` is ``ctx.node("Identity", [names[o]], output=f"output{k}")``
      with ``ctx.value_info`` for its type.

    Finish with ``onnx.helper.make_graph(ctx.nodes, graph.name, inputs, outputs,
    ctx.initializers)`` and ``onnx.helper.make_model(g, opset_imports=[
    onnx.helper.make_opsetid("", opset)], producer_name="minitorch")``.

    Example:
        >>> m = graph_to_onnx(jit(lambda x: x.relu()).trace(ones(2)), {})
        >>> [n.op_type for n in m.graph.node]
        ['Relu', 'Identity']
    """
    raise NotImplementedError("Exercise 10.6: graph_to_onnx")


def _as_function(fn_or_model):
    if hasattr(fn_or_model, "forward") and callable(fn_or_model):
        model = fn_or_model

        def forward(*xs):
            return model(*xs)

        forward.__name__ = type(model).__name__
        return forward
    return fn_or_model


def trace_for_export(fn_or_model, example_inputs) -> Graph:
    return jit(_as_function(fn_or_model)).trace(*example_inputs)


def symbols(graph: Graph, dims: dict, axes: dict[int, dict[int, str]]) -> dict:
    """Name every dynamic dim: an input's by ``dynamic_axes``, any other by an input's of equal size."""
    by_size: dict[int, str] = {}
    for k, node in enumerate(graph.inputs):
        for d, sym in axes.get(k, {}).items():
            by_size.setdefault(node.spec.shape[d], sym)
    out = {}
    for node in graph.nodes:
        if node.name in dims:
            out[node.name] = {
                d: by_size.get(node.spec.shape[d], f"{node.name}_dim{d}") for d in dims[node.name]
            }
    for k, node in enumerate(graph.inputs):
        out[node.name] = dict(axes.get(k, {}))
    return out


def _normalize_axes(dynamic_axes, n_inputs: int) -> dict[int, dict[int, str]]:
    """Accept ``{"input0": {0: "batch"}}``, ``{0: {0: "batch"}}`` or ``{"input0": [0]}``."""
    out = {}
    for key, dims in (dynamic_axes or {}).items():
        k = int(key[5:]) if isinstance(key, str) and key.startswith("input") else key
        if not isinstance(k, int) or not 0 <= k < n_inputs:
            raise OpError(
                "onnx.export",
                f"dynamic_axes names {key!r}, which is not an input",
                hint=f"use input0 .. input{n_inputs - 1}, e.g. {{'input0': {{0: 'batch'}}}}",
            )
        if not isinstance(dims, dict):
            dims = {d: f"input{k}_dim{d}" for d in dims}
        out[k] = {int(d): str(s) for d, s in dims.items()}
    return out


def export(
    fn_or_model, example_inputs, path=None, dynamic_axes=None, opset: int = OPSET
) -> onnx.ModelProto:
    """Export a function or ``Module`` as an ONNX model (checked, and saved when ``path`` is given).

    ``example_inputs`` is a Tensor or a tuple of Tensors. Inputs are named
    ``input0, input1, ...`` and outputs ``output0, ...``. ``dynamic_axes``, e.g.
    ``{"input0": {0: "batch"}}``, makes those dims symbolic so that the model
    runs on any batch size.
    """
    inputs = (example_inputs,) if isinstance(example_inputs, Tensor) else tuple(example_inputs)
    graph = trace_for_export(fn_or_model, inputs)
    axes = _normalize_axes(dynamic_axes, len(inputs))
    dims = {}
    if axes:
        bigger = []
        for k, x in enumerate(inputs):
            shape = [s + 1 if d in axes.get(k, {}) else s for d, s in enumerate(x.shape)]
            bigger.append(Tensor(np.zeros(shape, x.dtype)) if k in axes else x)
        dims = dynamic_dims(graph, trace_for_export(fn_or_model, bigger))
    model = graph_to_onnx(graph, symbols(graph, dims, axes), opset)
    onnx.checker.check_model(model, full_check=True)
    if path is not None:
        onnx.save(model, os.fspath(path))
    return model
