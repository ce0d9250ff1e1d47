"""``minitorch.onnx.export``: trace, find the dynamic dims, write an ONNX model.

1. trace the function (or model) on the example inputs into a chapter-5 graph;
2. with ``dynamic_axes``, trace again with each named dim at other sizes:
   the dims that differ are dynamic (exercise 10.5), and whatever else differs
   (a branch, a constant computed from the size) is refused or rebuilt
   (``sizes.py``);
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
from . import (
    mapping,  # noqa: F401  (puts the emitters on the built-in ops)
    pad_slice,  # noqa: F401  (10.7: pad_slice's emitter)
    sizes,
)

OPSET = 18  # the lowest opset the emitters' forms exist in, and the default
MAX_OPSET = min(28, onnx.defs.onnx_opset_version())  # the newest opset the tests run


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
    """
    raise NotImplementedError("Exercise 10.5: dynamic_dims")


@exercise("10.6")
def graph_to_onnx(graph: Graph, dynamic: dict, opset: int = OPSET) -> onnx.ModelProto:
    """Write ``graph`` as an ONNX model; ``dynamic[node.name]`` is ``{dim: symbol}``.

    The model (``producer_name="minitorch"``, the default domain at ``opset``) holds
    one graph named ``graph.name``, written through one ``OnnxContext(dynamic)``
    (``minitorch.onnx.context``: it types values with their symbolic dims):

    * graph input ``k`` is the ONNX input ``f"input{k}"``, typed by
      ``ctx.value_info(name, node)``;
    * a ``const`` node is an initializer named ``f"const_{node.name}"`` holding its
      value;
    * any other node is what its op's emitter writes, ``get_op(node.op).onnx(ctx,
      node, input_names) -> output_name``. An op that is not in ``OPS`` (``cond``)
      or has no emitter raises ``OpError("onnx.export", problem, hint)`` naming the
      op, with a hint that says how to add one
      (``minitorch.onnx.register_onnx(op_name)``, the custom-op route);
    * output ``k`` is an ``Identity`` node whose output is ``f"output{k}"``, typed
      by ``ctx.value_info``.

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


def _refuse(problem: str, hint: str) -> OpError:
    return OpError("onnx.export", problem, hint=hint)


def _check_fn(fn_or_model) -> None:
    if isinstance(fn_or_model, type):
        raise _refuse(
            f"fn_or_model is the class {fn_or_model.__name__}, not a model",
            hint=f"pass an instance, e.g. {fn_or_model.__name__}(...), or a function",
        )
    if not callable(fn_or_model):
        raise _refuse(
            f"fn_or_model is of type {type(fn_or_model).__name__} ({fn_or_model!r:.40}), which "
            "cannot be called",
            hint="pass a Module or a function of tensors, e.g. lambda x: model(x)",
        )


def _check_inputs(example_inputs) -> list[Tensor]:
    if isinstance(example_inputs, Tensor):
        return [example_inputs]
    if isinstance(example_inputs, list):  # one list argument, or several tensors?
        raise _refuse(
            f"example_inputs is a list of {len(example_inputs)}",
            hint="pass the inputs as a tuple, export(f, (x, y)), one per argument of f; a "
            "function of one list takes lambda x, y: f([x, y])",
        )
    if not isinstance(example_inputs, tuple):
        raise _refuse(
            f"example_inputs is of type {type(example_inputs).__name__}",
            hint="pass a Tensor or a tuple of Tensors, e.g. minitorch.randn(8, 64)",
        )
    for k, x in enumerate(example_inputs):
        if not isinstance(x, Tensor):
            raise _refuse(
                f"example_inputs[{k}] is of type {type(x).__name__}, not a Tensor",
                hint="ONNX inputs are tensors: wrap arrays with minitorch.tensor(a); "
                "fix other arguments with a lambda",
            )
    return list(example_inputs)


def _non_tensors(tree, path: str = "result") -> list[tuple[str, object]]:
    """Each value of a traced function's result that is not a tensor, with where it is."""
    kind, body = tree
    if kind == "leaf":
        return []
    if kind == "static":
        return [(path, body)]
    if kind == "dict":
        keys, subtrees = body
        places = [f"{path}[{k!r}]" for k in keys]
    elif kind == "dataclass":
        _, names, subtrees = body
        places = [f"{path}.{n}" for n in names]
    else:  # tuple, list, namedtuple
        subtrees = body[1] if kind == "namedtuple" else body
        places = [f"{path}[{i}]" for i in range(len(subtrees))]
    return [bad for p, t in zip(places, subtrees) for bad in _non_tensors(t, p)]


def _check_outputs(graph: Graph) -> None:
    """ONNX outputs are tensors: a Python value in the result would be dropped, and a model
    with no output at all does not load in onnxruntime."""
    bad = _non_tensors(graph.out_tree)
    if bad:
        where, value = bad[0]
        raise _refuse(
            f"{where} is {value!r:.40} ({type(value).__name__}), not a tensor; an ONNX model "
            "returns only tensors",
            hint="return tensors only: drop it, or make it one with minitorch.tensor(value)",
        )
    if not graph.outputs:
        raise _refuse("the function returns no tensor", hint="return at least one tensor")


def _check_path(path):
    if path is None:
        return None
    if not isinstance(path, (str, os.PathLike)):
        raise _refuse(
            f"path is of type {type(path).__name__}", hint="pass a file name such as 'model.onnx'"
        )
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        raise _refuse(
            f"path {os.fspath(path)!r} is in {folder!r}, which is not a folder",
            hint="create the folder first, or save elsewhere",
        )
    return os.fspath(path)


def _check_opset(opset) -> int:
    if isinstance(opset, (bool, np.bool_)) or not isinstance(opset, (int, np.integer)):
        raise _refuse(f"opset must be an int, got {opset!r}", hint=f"e.g. opset={OPSET}")
    if not OPSET <= opset <= MAX_OPSET:
        raise _refuse(
            f"opset {opset} is not supported",
            hint=f"use {OPSET}..{MAX_OPSET}: the emitters write opset-{OPSET} forms (reductions "
            f"take axes as an input), and onnxruntime is tested up to {MAX_OPSET}",
        )
    return int(opset)


def _normalize_axes(dynamic_axes, inputs: list[Tensor]) -> dict[int, dict[int, str]]:
    """Accept ``{"input0": {0: "batch"}}``, ``{0: {0: "batch"}}`` or ``{"input0": [0]}``."""
    if dynamic_axes is None:
        return {}
    if not isinstance(dynamic_axes, dict):
        raise _refuse(
            f"dynamic_axes is of type {type(dynamic_axes).__name__}",
            hint="pass a dict such as {'input0': {0: 'batch'}}",
        )
    n_inputs = len(inputs)
    out: dict[int, dict[int, str]] = {}
    seen: dict[str, tuple[int, int, int]] = {}
    for key, dims in dynamic_axes.items():
        k = (
            int(key[5:])
            if isinstance(key, str) and key[5:].isdigit() and key.startswith("input")
            else key
        )
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n_inputs:
            raise _refuse(
                f"dynamic_axes names {key!r}, which is not an input",
                hint=f"name input0 .. input{n_inputs - 1} (or 0 .. {n_inputs - 1}), e.g. "
                "{'input0': {0: 'batch'}}",
            )
        if k in out:
            raise _refuse(f"dynamic_axes names input{k} twice", hint="merge the two entries")
        if isinstance(dims, (list, tuple)):
            dims = {d: None for d in dims}
        if not isinstance(dims, dict) or not dims:
            raise _refuse(
                f"dynamic_axes[{key!r}] is {dims!r}",
                hint="map dims to names, {0: 'batch'}, or list the dims, [0]",
            )
        ndim = inputs[k].ndim
        out[k] = {}
        for d, sym in dims.items():
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not -ndim <= d < ndim:
                raise _refuse(
                    f"dynamic_axes[{key!r}] names dim {d!r}, but input{k} has shape "
                    f"{list(inputs[k].shape)}",
                    hint=f"use dims 0..{ndim - 1}" if ndim else "a 0-d input has no dims",
                )
            d = int(d) % ndim
            sym = f"input{k}_dim{d}" if sym is None else sym
            if not isinstance(sym, str) or not sym.isidentifier():
                raise _refuse(
                    f"dynamic_axes[{key!r}] gives dim {d} the name {sym!r}, which is not an identifier",
                    hint="name a dim with an identifier such as 'batch'",
                )
            if d in out[k]:
                raise _refuse(f"dynamic_axes[{key!r}] names dim {d} twice", hint="name it once")
            n = inputs[k].shape[d]
            first = seen.setdefault(sym, (k, d, n))
            if first[2] != n:
                raise _refuse(
                    f"{sym!r} names input{first[0]} dim {first[1]} (size {first[2]}) and input{k} "
                    f"dim {d} (size {n})",
                    hint="one name stands for one size: make the example sizes equal, or use "
                    "two names",
                )
            out[k][d] = sym
    return out


def export(
    fn_or_model, example_inputs, path=None, dynamic_axes=None, opset: int = OPSET
) -> onnx.ModelProto:
    """Export a function or ``Module`` as an ONNX model (checked, and saved when ``path`` is given).

    ``example_inputs`` is a Tensor or a tuple of Tensors. Inputs are named
    ``input0, input1, ...`` and outputs ``output0, ...``; the result may nest
    tensors in tuples, lists and dicts but hold nothing else. ``dynamic_axes``, e.g.
    ``{"input0": {0: "batch"}}``, makes those dims symbolic so that the model
    runs on any batch size; dims that share a name share a size. A value or a
    Python branch that depends on a dynamic dim is refused with its source line
    (see ``sizes.py``), unless it is ``a * size + b``, which the model computes.
    """
    _check_fn(fn_or_model)
    inputs = _check_inputs(example_inputs)
    path = _check_path(path)
    axes = _normalize_axes(dynamic_axes, inputs)
    opset = _check_opset(opset)

    def trace(xs):
        return trace_for_export(fn_or_model, xs)

    graph = trace(inputs)
    _check_outputs(graph)
    probes = sizes.probe(trace, inputs, axes)
    changed = sizes.check_same_program(graph, probes)
    dims = [[dynamic_dims(graph, g) for g in p.graphs] for p in probes]
    model = graph_to_onnx(graph, sizes.symbols(graph, probes, dims, axes), opset)
    sizes.rebuild_constants(model, graph, changed)
    onnx.checker.check_model(model, full_check=True)
    if path is not None:
        onnx.save(model, path)
    return model
