"""Reference solutions, Chapter 10 (Profiling and deployment). Same names and signatures as the stubs."""

from __future__ import annotations

from onnx import helper

from minitorch.core import registry
from minitorch.core.errors import OpError
from minitorch.core.registry import OPS
from minitorch.onnx.context import OnnxContext
from minitorch.profiler.chrome import PID
from minitorch.profiler.core import backend_name
from minitorch.profiler.summary import Row


def profiled_apply(prof, op, inputs, attrs):
    t0 = prof.clock()
    out = registry._eager_apply(op, inputs, attrs)
    t1 = prof.clock()
    shapes = tuple(tuple(x.shape) for x in inputs)
    ev = prof.add_event(op.name, "op", t0, t1, shapes=shapes, backend=backend_name(out.device))
    prof.track(ev, out, inputs)
    return out


def self_times(events):
    result = [e.end - e.start for e in events]
    order = sorted(
        range(len(events)), key=lambda i: (events[i].tid, events[i].start, -events[i].end)
    )
    stack: list[int] = []
    for i in order:
        e = events[i]
        while stack and (events[stack[-1]].tid != e.tid or events[stack[-1]].end < e.end):
            stack.pop()
        if stack:
            result[stack[-1]] -= e.end - e.start
        stack.append(i)
    return result


def summarize(events):
    selfs = self_times(events)
    rows: dict[str, Row] = {}
    for e, s in zip(events, selfs):
        r = rows.get(e.name)
        if r is None:
            r = rows[e.name] = Row(e.name)
        r.calls += 1
        r.total += e.end - e.start
        r.self += s
        r.alloc += e.alloc
        r.freed += e.freed
    total = sum(selfs)
    for r in rows.values():
        r.share = r.self / total if total else 0.0
    return list(rows.values())


def chrome_trace(events, counters, threads):
    out = [
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": name}}
        for tid, name in threads.items()
    ]
    for e in events:
        args = {
            "shapes": [list(s) for s in e.shapes],
            "backend": e.backend,
            "alloc": e.alloc,
            "freed": e.freed,
            **e.args,
        }
        out.append(
            {
                "name": e.name,
                "cat": e.cat,
                "ph": "X",
                "pid": PID,
                "tid": e.tid,
                "ts": e.start / 1000,
                "dur": (e.end - e.start) / 1000,
                "args": args,
            }
        )
    for t, live in counters:
        out.append(
            {
                "name": "memory",
                "ph": "C",
                "pid": PID,
                "tid": 0,
                "ts": t / 1000,
                "args": {"live bytes": live},
            }
        )
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def dynamic_dims(graph_a, graph_b):
    if len(graph_a.nodes) != len(graph_b.nodes):
        raise OpError(
            "onnx.export",
            f"the two traces have {len(graph_a.nodes)} and {len(graph_b.nodes)} nodes",
            hint="the program's structure depends on the input size; export without dynamic_axes",
        )
    out = {}
    for a, b in zip(graph_a.nodes, graph_b.nodes):
        if a.op != b.op or a.spec.ndim != b.spec.ndim:
            raise OpError(
                "onnx.export",
                f"node %{a.name} is {a.op}{list(a.spec.shape)} in one trace and "
                f"{b.op}{list(b.spec.shape)} in the other",
                hint="the program's structure depends on the input size; "
                "export without dynamic_axes",
            )
        dims = tuple(d for d, (x, y) in enumerate(zip(a.spec.shape, b.spec.shape)) if x != y)
        if dims and a.op == "const":
            raise OpError(
                "onnx.export",
                f"constant %{a.name} has shape {a.spec.shape} in one trace and {b.spec.shape} "
                "in the other: it was built from the batch size",
                hint="compute it from the input with tensor ops, or export without dynamic_axes",
            )
        if dims:
            out[a.name] = dims
    return out


def graph_to_onnx(graph, dynamic, opset=18):
    ctx = OnnxContext(dynamic)
    names = {}
    inputs, outputs = [], []
    for k, node in enumerate(graph.inputs):
        names[node] = f"input{k}"
        inputs.append(ctx.value_info(names[node], node))
    for node in graph.nodes:
        if node.op == "input":
            continue
        if node.op == "const":
            names[node] = ctx.const(node.value.numpy(), f"const_{node.name}")
            continue
        if node.op not in OPS:
            raise OpError(
                "onnx.export",
                f"node %{node.name} is a {node.op!r}, which has no ONNX form here",
                hint="export minitorch.fusion.inline_fused(graph), the same graph unfused"
                if node.op == "fused"
                else "compute both branches and select with minitorch.where, then export",
            )
        emit = OPS[node.op].onnx
        if emit is None:
            raise OpError(
                "onnx.export",
                f"op {node.op!r} (node %{node.name}) has no ONNX mapping",
                hint=f"register one with @minitorch.onnx.register_onnx({node.op!r}) "
                "(emit(ctx, node, names) -> output name), the route for custom ops",
            )
        names[node] = emit(ctx, node, [names[i] for i in node.inputs])
    for k, node in enumerate(graph.outputs):
        name = ctx.node("Identity", [names[node]], output=f"output{k}")
        outputs.append(ctx.value_info(name, node))
    g = helper.make_graph(ctx.nodes, graph.name, inputs, outputs, ctx.initializers)
    return helper.make_model(
        g, opset_imports=[helper.make_opsetid("", opset)], producer_name="minitorch"
    )
