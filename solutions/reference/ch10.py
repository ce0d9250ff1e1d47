"""Reference solutions, Chapter 10 (Profiling and deployment). Same names and signatures as the stubs."""

from __future__ import annotations

import numpy as np
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


# ---------------------------------------------------------------- 10.7 (open)

_END = 2**62  # a Slice bound past any dim


def _window(k, size: int):
    """``(first index written, count, step > 0, reversed)`` of key entry ``k`` on a dim."""
    if not isinstance(k, slice):
        return int(k) % size, 1, 1, False
    r = range(*k.indices(size))
    if len(r) <= 1:
        return (r[0] if r else 0), len(r), 1, False
    if r.step < 0:
        return r[-1], len(r), -r.step, True
    return r.start, len(r), r.step, False


def emit_pad_slice(ctx, node, names):
    """At most five nodes, usually one or two: reverse the negative-step dims (one Slice),
    insert the integer-indexed dims and one block axis after each strided dim (one
    Unsqueeze), pad everything at once (one Pad: a strided dim by whole blocks of its step,
    its block axis around the value), merge the blocks (one Reshape), then crop or pad what
    the blocks leave over (one Pad, negative pads crop). An empty window pads to zeros."""
    shape = tuple(node.attrs["shape"])
    key = tuple(node.attrs["key"]) + (slice(None),) * (len(shape) - len(node.attrs["key"]))
    dyn = ctx.dims(node)
    dims = [
        (0, n, 1, False) if d in dyn else _window(k, n) for d, (k, n) in enumerate(zip(key, shape))
    ]
    x = names[0]
    kept = [d for d, k in enumerate(key) if isinstance(k, slice)]  # the values' own axes
    rev = [j for j, d in enumerate(kept) if dims[d][3]]
    if rev:
        bounds = ([-1] * len(rev), [-_END] * len(rev), rev, [-1] * len(rev))
        x = ctx.node("Slice", [x, *(ctx.const(np.array(b, np.int64)) for b in bounds)])
    inserted, lo_pads, hi_pads, target, rest = [], [], [], [], []
    for d, (lo, w, s, _) in enumerate(dims):
        axis = len(lo_pads)  # dim d's axis once the block axes are in
        if not isinstance(key[d], slice):
            inserted.append(axis)
        if s > 1:
            q, r = divmod(lo, s)
            lo_pads += [q, r]
            hi_pads += [0, s - 1 - r]
            inserted.append(axis + 1)
            target.append((q + w) * s)
            rest.append(shape[d] - (q + w) * s)
        else:
            lo_pads.append(lo)
            hi_pads.append(shape[d] - lo - w)
            # Reshape's 0 copies the input's size at the same axis; -1 is inferred
            target.append((0 if axis == d else -1) if d in dyn else shape[d])
            rest.append(0)
    if inserted:
        x = ctx.node("Unsqueeze", [x, ctx.const(np.array(inserted, np.int64))])
    if any(lo_pads) or any(hi_pads):
        x = ctx.node("Pad", [x, ctx.const(np.array(lo_pads + hi_pads, np.int64))])
    if len(lo_pads) != len(shape):  # merge each strided dim with its block axis
        x = ctx.node("Reshape", [x, ctx.const(np.array(target, np.int64))])
    if any(rest):
        x = ctx.node("Pad", [x, ctx.const(np.array([0] * len(shape) + rest, np.int64))])
    return x
