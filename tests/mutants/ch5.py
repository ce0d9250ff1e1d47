"""Known-wrong implementations of Chapter 5 (tracing, shape functions, passes, jit guards, cond)."""

from __future__ import annotations

from minitorch.core import dtypes as dt
from minitorch.core.errors import OpError
from minitorch.core.registry import Spec
from minitorch.core.tensor import Tensor
from minitorch.tensor.indexing import broadcast_shape
from minitorch.tracing.control import trace_branch
from minitorch.tracing.graph import Graph
from minitorch.tracing.tracer import Break
from solutions.reference import ch5 as ref

from . import mutant

# ---------------------------------------------------------------- 5.1 record_op


@mutant("5.1", "attributes not bound: defaults and normalised axes missing")
def record_op(tracer, op, inputs, attrs):
    nodes = [tracer.lift(x) for x in inputs]
    specs = [n.spec for n in nodes]
    full = op.bind(attrs, specs)
    spec = op.infer(*specs, **full)
    return tracer.proxy(tracer.graph.add_node(op.name, nodes, dict(attrs), spec))


@mutant("5.1", "the output spec copied from the first input instead of inferred")
def record_op_first_spec(tracer, op, inputs, attrs):
    nodes = [tracer.lift(x) for x in inputs]
    specs = [n.spec for n in nodes]
    attrs = op.bind(attrs, specs)
    op.infer(*specs, **attrs)
    return tracer.proxy(tracer.graph.add_node(op.name, nodes, attrs, specs[0]))


@mutant("5.1", "recorded into the first graph: ops after a graph break land in the wrong graph")
def record_op_first_graph(tracer, op, inputs, attrs):
    nodes = [tracer.lift(x) for x in inputs]
    specs = [n.spec for n in nodes]
    attrs = op.bind(attrs, specs)
    spec = op.infer(*specs, **attrs)
    return tracer.proxy(tracer.graphs[0].add_node(op.name, nodes, attrs, spec))


@mutant("5.1", "inputs recorded in reverse order")
def record_op_reversed(tracer, op, inputs, attrs):
    nodes = [tracer.lift(x) for x in inputs]
    specs = [n.spec for n in nodes]
    attrs = op.bind(attrs, specs)
    spec = op.infer(*specs, **attrs)
    return tracer.proxy(tracer.graph.add_node(op.name, nodes[::-1], attrs, spec))


# ---------------------------------------------------------------- 5.2 infer_matmul


@mutant("5.2", "batch dims taken from a alone")
def infer_matmul(a, b):
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise OpError("matmul", f"cannot multiply shapes {a.shape} and {b.shape}")
    return Spec(a.shape[:-1] + (b.shape[-1],), dt.promote(a.dtype, b.dtype), a.device)


@mutant("5.2", "the dtype is a's, not the promoted one")
def infer_matmul_dtype(a, b):
    s = ref.infer_matmul(a, b)
    return Spec(s.shape, a.dtype, s.device)


@mutant("5.2", "the inner dimensions never compared")
def infer_matmul_unchecked(a, b):
    if a.ndim < 2 or b.ndim < 2:
        raise OpError("matmul", f"cannot multiply shapes {a.shape} and {b.shape}")
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    return Spec(tuple(batch) + (a.shape[-2], b.shape[-1]), dt.promote(a.dtype, b.dtype), a.device)


@mutant("5.2", "raises ValueError instead of OpError")
def infer_matmul_valueerror(a, b):
    try:
        return ref.infer_matmul(a, b)
    except OpError as e:
        raise ValueError(str(e)) from None


# ---------------------------------------------------------------- 5.3 infer_reduce


@mutant("5.3", "negative axes not normalised")
def infer_reduce(a, axis, keepdims=False):
    n = a.ndim
    axes = list(range(n)) if axis is None else list((axis,) if isinstance(axis, int) else axis)
    for ax in axes:
        if not -n <= ax < n:
            raise OpError("sum", f"axis {ax} is out of range for {n} dimension(s)")
    if keepdims:
        shape = tuple(1 if d in axes else s for d, s in enumerate(a.shape))
    else:
        shape = tuple(s for d, s in enumerate(a.shape) if d not in axes)
    return Spec(shape, dt.int64 if a.dtype == dt.bool_ else a.dtype, a.device)


@mutant("5.3", "a bool tensor's sum stays bool")
def infer_reduce_bool(a, axis, keepdims=False):
    s = ref.infer_reduce(a, axis, keepdims)
    return Spec(s.shape, a.dtype, s.device)


@mutant("5.3", "keepdims ignored")
def infer_reduce_keepdims(a, axis, keepdims=False):
    return ref.infer_reduce(a, axis, False)


@mutant("5.3", "a repeated axis accepted")
def infer_reduce_repeated(a, axis, keepdims=False):
    if isinstance(axis, (tuple, list)):
        axis = tuple(dict.fromkeys(ax % a.ndim if a.ndim else ax for ax in axis))
    return ref.infer_reduce(a, axis, keepdims)


@mutant("5.3", "axis out of range not rejected (wraps around)")
def infer_reduce_wraps(a, axis, keepdims=False):
    n = a.ndim
    if n and axis is not None:
        axis = axis % n if isinstance(axis, int) else tuple(ax % n for ax in axis)
    return ref.infer_reduce(a, axis, keepdims)


# ---------------------------------------------------------------- 5.4 topological_sort


@mutant("5.4", "depth-first from the last node: valid but not stable (reorders independent nodes)")
def topological_sort(nodes):
    members, order, seen = set(nodes), [], set()
    for root in reversed(nodes):
        stack = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if n in seen:
                continue
            seen.add(n)
            stack.append((n, True))
            stack.extend((i, False) for i in n.inputs if i in members and i not in seen)
    return order


@mutant("5.4", "no cycle detection: the nodes of a cycle are silently dropped")
def topological_sort_no_cycles(nodes):
    try:
        return ref.topological_sort(nodes)
    except OpError:
        members = set(nodes)
        missing = {n: sum(1 for i in n.inputs if i in members) for n in nodes}
        return [n for n in nodes if missing[n] == 0]


@mutant("5.4", "returns the nodes in the order given")
def topological_sort_identity(nodes):
    return list(nodes)


@mutant("5.4", "a cycle names the first stuck node's stuck input, one step back, not a node on it")
def topological_sort_one_step(nodes):
    try:
        return ref.topological_sort(nodes)
    except OpError:
        members, placed, grew = set(nodes), set(), True
        while grew:  # what Kahn's algorithm places: nodes whose inputs in the list are placed
            ready = {n for n in nodes if n not in placed
                     and all(i not in members or i in placed for i in n.inputs)}  # fmt: skip
            placed, grew = placed | ready, bool(ready)
        stuck = next(n for n in nodes if n not in placed)
        step = next(i for i in stuck.inputs if i in members and i not in placed)
        raise OpError("topological_sort", f"the nodes form a cycle through %{step.name}") from None


# ---------------------------------------------------------------- 5.5 verify_graph


@mutant("5.5", "no use-before-definition check")
def verify_graph(graph):
    _verify_rest(graph)


def _verify_rest(graph):
    """The reference's checks after the definition-order one (cond branches left out)."""
    from minitorch.core.registry import get_op

    for n in graph.nodes:
        if n.op == "input" and n not in graph.inputs:
            raise OpError("verify", f"%{n.name} ({n.op}) is an input node missing from inputs")
    for n in graph.nodes:
        if n.op in ("input", "const", "cond"):
            continue
        try:
            expected = get_op(n.op).infer(*[i.spec for i in n.inputs], **n.attrs)
        except (OpError, KeyError, TypeError) as e:
            raise OpError("verify", f"%{n.name} ({n.op}) fails shape inference: {e}") from None
        if expected != n.spec:
            raise OpError("verify", f"%{n.name} ({n.op}) recorded {n.spec}, expected {expected}")


@mutant("5.5", "recorded specs never re-inferred")
def verify_graph_no_infer(graph):
    seen = set()
    for n in graph.nodes:
        for i in n.inputs:
            if i not in seen:
                raise OpError("verify", f"%{n.name} ({n.op}) uses %{i.name} before it is defined")
        seen.add(n)
    for n in graph.outputs:
        if n not in seen:
            raise OpError("verify", f"output %{n.name} is not a node of the graph")


@mutant("5.5", "cond branches not checked")
def verify_graph_no_cond(graph):
    conds = [n for n in graph.nodes if n.op == "cond"]
    saved = [(n, n.op) for n in conds]
    try:
        for n in conds:
            n.op = "const"  # skipped like a constant
        ref.verify_graph(graph)
    finally:
        for n, op in saved:
            n.op = op


# ---------------------------------------------------------------- 5.6 interpret


@mutant("5.6", "inputs bound in reverse order")
def interpret(graph, *inputs):
    return ref.interpret(graph, *inputs[::-1]) if len(inputs) > 1 else ref.interpret(graph, *inputs)


@mutant("5.6", "the wrong number of inputs is not caught (zip truncates)")
def interpret_no_count(graph, *inputs):
    if len(inputs) > len(graph.inputs):
        inputs = inputs[: len(graph.inputs)]
    if len(inputs) < len(graph.inputs):
        raise TypeError("missing inputs")
    return ref.interpret(graph, *inputs)


@mutant("5.6", "returns the flat list of outputs, not the function's structure")
def interpret_flat(graph, *inputs):
    result = ref.interpret(graph, *inputs)
    return list(result) if isinstance(result, tuple) else [result]


# ---------------------------------------------------------------- 5.7 cache_key


@mutant("5.7", "a tensor's dtype left out of the key")
def cache_key(args):
    return tuple(
        ("tensor", tuple(x.shape), x.device) if isinstance(x, Tensor) else k
        for x, k in zip(args, ref.cache_key(args))
    )


@mutant("5.7", "a tensor keyed by its number of dimensions, not its shape")
def cache_key_ndim(args):
    return tuple(
        ("tensor", x.ndim, x.dtype.name, x.device) if isinstance(x, Tensor) else k
        for x, k in zip(args, ref.cache_key(args))
    )


@mutant("5.7", "statics keyed by value alone: 1, 1.0 and True collide")
def cache_key_no_type(args):
    return tuple(k if k[0] == "tensor" else ("static", "value", k[2]) for k in ref.cache_key(args))


@mutant("5.7", "unhashable statics not rejected")
def cache_key_unhashable(args):
    try:
        return ref.cache_key(args)
    except OpError:
        return tuple(("static", type(x).__name__, repr(x)) for x in args)


# ---------------------------------------------------------------- 5.8 split_at_break


@mutant("5.8", "no cut: the ops after the break go on into the same graph")
def split_at_break(tracer, p, reason, where):
    tracer.breaks.append(Break(reason, where))
    tracer.broken.append(p.node)
    value = tracer.evaluate(p.node)
    for n in tracer.graph.nodes:
        tracer.evaluate(n)
    return value


@mutant("5.8", "tracer.crossing kept: a value crosses into the new graph as the old graph's input")
def split_at_break_crossing(tracer, p, reason, where):
    tracer.breaks.append(Break(reason, where))
    tracer.broken.append(p.node)
    value = tracer.evaluate(p.node)
    for n in tracer.graph.nodes:
        tracer.evaluate(n)
    tracer.graph = Graph(f"{tracer.name}_{len(tracer.graphs)}")
    tracer.graphs.append(tracer.graph)
    return value


@mutant("5.8", "lazy: only the value Python reads is computed, the rest after later updates")
def split_at_break_lazy(tracer, p, reason, where):
    tracer.breaks.append(Break(reason, where))
    tracer.broken.append(p.node)
    value = tracer.evaluate(p.node)
    tracer.graph = Graph(f"{tracer.name}_{len(tracer.graphs)}")
    tracer.graphs.append(tracer.graph)
    tracer.crossing = {}
    return value


@mutant("5.8", "the value Python read is not recorded: it is no output of its graph")
def split_at_break_unrecorded(tracer, p, reason, where):
    tracer.breaks.append(Break(reason, where))
    value = tracer.evaluate(p.node)
    for n in tracer.graph.nodes:
        tracer.evaluate(n)
    tracer.graph = Graph(f"{tracer.name}_{len(tracer.graphs)}")
    tracer.graphs.append(tracer.graph)
    tracer.crossing = {}
    return value


# ---------------------------------------------------------------- 5.9 trace_cond


@mutant("5.9", "the predicate's size never checked")
def trace_cond(tracer, pred, true_fn, false_fn, operands):
    tg = trace_branch(true_fn, operands, "true")
    fg = trace_branch(false_fn, operands, "false")
    ts, fs = tg.outputs[0].spec, fg.outputs[0].spec
    if ts != fs:
        raise OpError("cond", f"branches return different results: true gives {ts}, false {fs}")
    nodes = [tracer.lift(pred)] + [tracer.lift(x) for x in operands]
    node = tracer.graph.add_node("cond", nodes, {"true_graph": tg, "false_graph": fg}, ts)
    return tracer.proxy(node)


@mutant("5.9", "the branches' results never compared")
def trace_cond_unchecked(tracer, pred, true_fn, false_fn, operands):
    if pred.size != 1:
        raise OpError("cond", f"the predicate must have one element, got shape {pred.shape}")
    tg = trace_branch(true_fn, operands, "true")
    fg = trace_branch(false_fn, operands, "false")
    nodes = [tracer.lift(pred)] + [tracer.lift(x) for x in operands]
    spec = tg.outputs[0].spec
    node = tracer.graph.add_node("cond", nodes, {"true_graph": tg, "false_graph": fg}, spec)
    return tracer.proxy(node)


@mutant("5.9", "only the true branch traced; it stands for both")
def trace_cond_one_branch(tracer, pred, true_fn, false_fn, operands):
    if pred.size != 1:
        raise OpError("cond", f"the predicate must have one element, got shape {pred.shape}")
    tg = trace_branch(true_fn, operands, "true")
    nodes = [tracer.lift(pred)] + [tracer.lift(x) for x in operands]
    spec = tg.outputs[0].spec
    node = tracer.graph.add_node("cond", nodes, {"true_graph": tg, "false_graph": tg}, spec)
    return tracer.proxy(node)


# ---------------------------------------------------------------- issue 29: contract gaps


def _verify(
    graph,
    members=True,
    recurse=True,
    in_specs=True,
    shape_only=False,
    wrap=True,
    first_output=False,
):
    """The reference's verify_graph with one of its checks left out."""
    from minitorch.core.registry import get_op

    seen = set()
    for n in graph.nodes:
        for i in n.inputs:
            if i not in seen:
                raise OpError("verify", f"%{n.name} ({n.op}) uses %{i.name} before it is defined")
        seen.add(n)
    if members:
        for n in graph.nodes:
            if n.op == "input" and n not in graph.inputs:
                raise OpError("verify", f"%{n.name} (input) is missing from graph.inputs")
    for n in graph.inputs:
        if n not in seen:
            raise OpError("verify", f"graph input %{n.name} is not a node of the graph")
    for n in graph.outputs:
        if n not in seen:
            raise OpError("verify", f"output %{n.name} is not a node of the graph")
    for n in graph.nodes:
        if n.op in ("input", "const"):
            continue
        specs = [i.spec for i in n.inputs]
        if n.op == "cond":
            for key in ("true_graph", "false_graph"):
                sub = n.attrs[key]
                if recurse:
                    _verify(sub, members, recurse, in_specs, shape_only, wrap, first_output)
                if in_specs and [i.spec for i in sub.inputs] != specs[1:]:
                    raise OpError("verify", f"%{n.name} (cond): {key} takes other specs")
                returned = [o.spec for o in sub.outputs][: 1 if first_output else None]
                if returned != [n.spec]:
                    raise OpError("verify", f"%{n.name} (cond): {key} returns other specs")
            continue
        try:
            expected = get_op(n.op).infer(*specs, **n.attrs)
        except (OpError, KeyError, TypeError) as e:
            if not wrap and isinstance(e, OpError):
                raise
            raise OpError("verify", f"%{n.name} ({n.op}) fails shape inference: {e}") from None
        if (expected.shape != n.spec.shape) if shape_only else (expected != n.spec):
            raise OpError("verify", f"%{n.name} ({n.op}) recorded {n.spec}, expected {expected}")


@mutant("5.5", "an input node missing from graph.inputs passes")
def verify_graph_no_membership(graph):
    _verify(graph, members=False)


@mutant("5.5", "checks the cond branches' signatures but not the branches themselves")
def verify_graph_no_recursion(graph):
    _verify(graph, recurse=False)


@mutant("5.5", "checks what a cond branch returns but not what it takes")
def verify_graph_no_branch_inputs(graph):
    _verify(graph, in_specs=False)


@mutant("5.5", "compares the recorded shape only: a wrong dtype or device passes")
def verify_graph_shape_only(graph):
    _verify(graph, shape_only=True)


@mutant("5.5", "an OpError from infer escapes as it is (OpError('matmul'), not 'verify')")
def verify_graph_infer_error_escapes(graph):
    _verify(graph, wrap=False)


@mutant("5.5", "a cond branch's first output checked, not that it returns exactly one")
def verify_graph_first_output(graph):
    _verify(graph, first_output=True)


@mutant("5.5", "sorts the caller's nodes before checking them (changes its input)")
def verify_graph_sorts_first(graph):
    graph.nodes[:] = ref.topological_sort(graph.nodes)
    _verify(graph)
