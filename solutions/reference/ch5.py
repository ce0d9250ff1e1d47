"""Reference solutions, Chapter 5 (Tracing). Same names and signatures as the stubs."""

from __future__ import annotations

from minitorch.core import dtypes as dt
from minitorch.core.errors import OpError
from minitorch.core.registry import Spec, get_op
from minitorch.core.tensor import Tensor
from minitorch.tensor.indexing import broadcast_shape
from minitorch.tracing.control import trace_branch
from minitorch.tracing.graph import Graph
from minitorch.tracing.interpreter import run_node
from minitorch.tracing.tracer import Break


def record_op(tracer, op, inputs, attrs):
    nodes = [tracer.lift(x) for x in inputs]
    specs = [n.spec for n in nodes]
    attrs = op.bind(attrs, specs)
    spec = op.infer(*specs, **attrs)
    return tracer.proxy(tracer.graph.add_node(op.name, nodes, attrs, spec))


def infer_matmul(a, b):
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise OpError(
            "matmul",
            f"cannot multiply shapes {a.shape} and {b.shape}",
            hint="both need 2+ dims and a.shape[-1] == b.shape[-2]",
        )
    try:
        batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    except OpError as e:
        raise OpError("matmul", f"batch dimensions do not broadcast: {e.problem}") from None
    return Spec(tuple(batch) + (a.shape[-2], b.shape[-1]), dt.promote(a.dtype, b.dtype), a.device)


def infer_reduce(a, axis, keepdims=False):
    n = a.ndim
    if axis is None:
        axes = list(range(n))
    else:
        axes = []
        for ax in (axis,) if isinstance(axis, int) else tuple(axis):
            if not -n <= ax < n:
                raise OpError(
                    "sum",
                    f"axis {ax} is out of range for a tensor with {n} dimension(s)",
                    hint=f"use an axis in [-{n}, {n - 1}]" if n else "a 0-d tensor takes axis=None",
                )
            ax %= n
            if ax in axes:
                raise OpError(
                    "sum",
                    f"axis {ax} is repeated in {axis} (a tensor with {n} dimension(s))",
                    hint="name each axis once; -1 and n - 1 are the same axis",
                )
            axes.append(ax)
    if keepdims:
        shape = tuple(1 if d in axes else s for d, s in enumerate(a.shape))
    else:
        shape = tuple(s for d, s in enumerate(a.shape) if d not in axes)
    dtype = dt.int64 if a.dtype == dt.bool_ else a.dtype
    return Spec(shape, dtype, a.device)


def topological_sort(nodes):
    members = set(nodes)
    missing = {n: sum(1 for i in n.inputs if i in members) for n in nodes}
    users: dict = {n: [] for n in nodes}
    for n in nodes:
        for i in n.inputs:
            if i in members:
                users[i].append(n)
    position = {n: k for k, n in enumerate(nodes)}
    import heapq

    ready = [(position[n], k) for k, n in enumerate(nodes) if missing[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        n = nodes[k]
        order.append(n)
        for u in users[n]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, (position[u], position[u]))
    if len(order) != len(nodes):
        # A node left over waits on an input left over; walking back from one must repeat a
        # node, and the first repeated node is on a cycle (the first left over may be after it).
        stuck, seen = next(n for n in nodes if missing[n] > 0), set()
        while stuck not in seen:
            seen.add(stuck)
            stuck = next(i for i in stuck.inputs if i in members and missing[i] > 0)
        raise OpError(
            "topological_sort", f"the nodes form a cycle through %{stuck.name} ({stuck.op})"
        )
    return order


def _label(n):
    return f"%{n.name} ({n.op})"


def verify_graph(graph):
    seen = set()
    for n in graph.nodes:
        for i in n.inputs:
            if i not in seen:
                raise OpError("verify", f"{_label(n)} uses %{i.name} before it is defined")
        seen.add(n)
    for n in graph.nodes:
        if n.op == "input" and n not in graph.inputs:
            raise OpError("verify", f"{_label(n)} is an input node missing from graph.inputs")
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
                verify_graph(sub)
                if [i.spec for i in sub.inputs] != specs[1:]:
                    raise OpError(
                        "verify",
                        f"{_label(n)}: {key} takes {[str(i.spec) for i in sub.inputs]}"
                        f" but the operands are {[str(s) for s in specs[1:]]}",
                    )
                if [o.spec for o in sub.outputs] != [n.spec]:
                    raise OpError(
                        "verify",
                        f"{_label(n)}: {key} returns "
                        f"{[str(o.spec) for o in sub.outputs]}, the node says {n.spec}",
                    )
            continue
        try:
            expected = get_op(n.op).infer(*specs, **n.attrs)
        except (OpError, KeyError, TypeError) as e:
            raise OpError("verify", f"{_label(n)} fails shape inference: {e}") from None
        if expected != n.spec:
            raise OpError(
                "verify",
                f"{_label(n)} recorded {n.spec} but {n.op}'s shape function gives {expected}",
            )


def interpret(graph, *inputs):
    if len(inputs) != len(graph.inputs):
        raise OpError(
            "interpret", f"the graph takes {len(graph.inputs)} input(s), got {len(inputs)}"
        )
    env = dict(zip(graph.inputs, inputs))
    for node in graph.nodes:
        if node.op == "input":
            continue
        if node.op == "const":
            env[node] = node.value
        else:
            env[node] = run_node(node, [env[i] for i in node.inputs])
    return graph.unflatten([env[o] for o in graph.outputs])


def _static(value, k):
    if isinstance(value, Tensor):
        raise OpError(
            "jit",
            f"argument {k} holds a Tensor inside a list or tuple",
            hint="pass each tensor as its own argument",
        )
    if isinstance(value, (list, tuple)):
        return tuple(_static(v, k) for v in value)
    return value


_DTYPE_NAMES: dict = {}  # numpy works out ``dtype.name`` in Python (2 us): once per dtype


def cache_key(args):
    key = []
    for k, x in enumerate(args):
        if isinstance(x, Tensor):
            dtype = x.dtype
            name = _DTYPE_NAMES.get(dtype) or _DTYPE_NAMES.setdefault(dtype, dtype.name)
            key.append(("tensor", tuple(x.shape), name, x.device))
            continue
        value = _static(x, k)
        try:
            hash(value)
        except TypeError:
            raise OpError(
                "jit",
                f"argument {k} ({type(x).__name__}) is static but cannot be hashed",
                hint="pass tensors, numbers, strings or tuples of them",
            ) from None
        key.append(("static", type(x).__name__, value))
    return tuple(key)


def split_at_break(tracer, p, reason, where):
    tracer.breaks.append(Break(reason, where))
    tracer.broken.append(p.node)
    value = tracer.evaluate(p.node)
    for n in tracer.graph.nodes:  # now, as eager did: Python may mutate state after the break
        tracer.evaluate(n)
    tracer.graph = Graph(f"{tracer.name}_{len(tracer.graphs)}")
    tracer.graphs.append(tracer.graph)
    tracer.crossing = {}  # older values enter the new graph afresh
    return value


def trace_cond(tracer, pred, true_fn, false_fn, operands):
    if pred.size != 1:
        raise OpError(
            "cond",
            f"the predicate must have one element, got shape {pred.shape}",
            hint="reduce it first, e.g. (x > 0).sum() > 0",
        )
    tg = trace_branch(true_fn, operands, "true")
    fg = trace_branch(false_fn, operands, "false")
    ts, fs = tg.outputs[0].spec, fg.outputs[0].spec
    if ts != fs:
        raise OpError(
            "cond",
            f"branches return different results: true gives {ts}, false gives {fs}",
            hint="both branches must return the same shape and dtype (use expand/astype)",
        )
    nodes = [tracer.lift(pred)] + [tracer.lift(x) for x in operands]
    node = tracer.graph.add_node("cond", nodes, {"true_graph": tg, "false_graph": fg}, ts)
    return tracer.proxy(node)
