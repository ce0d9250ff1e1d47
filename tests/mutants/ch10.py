"""Known-wrong implementations of the chapter-10 exercises (profiler and ONNX export)."""

from __future__ import annotations

import time

import numpy as np
from onnx import helper

from minitorch.core import registry
from minitorch.core.errors import OpError
from minitorch.core.registry import OPS
from minitorch.onnx.context import OnnxContext
from minitorch.profiler.chrome import PID
from minitorch.profiler.core import backend_name
from minitorch.profiler.summary import Row, self_times
from solutions.reference import ch10 as ref

from . import mutant

# ---------------------------------------------------------------- 10.1 profiled_apply


@mutant("10.1", "records the event before running the op: a failing call is still recorded")
def profiled_apply_records_first(prof, op, inputs, attrs):
    t0 = prof.clock()
    shapes = tuple(tuple(x.shape) for x in inputs)
    ev = prof.add_event(op.name, "op", t0, t0, shapes=shapes, backend="numpy")
    out = registry._eager_apply(op, inputs, attrs)
    ev.end = prof.clock()
    prof.track(ev, out, inputs)
    return out


@mutant("10.1", "records the output's shape instead of the input shapes")
def profiled_apply_output_shape(prof, op, inputs, attrs):
    t0 = prof.clock()
    out = registry._eager_apply(op, inputs, attrs)
    t1 = prof.clock()
    ev = prof.add_event(
        op.name, "op", t0, t1, shapes=(out.shape,), backend=backend_name(out.device)
    )
    prof.track(ev, out, inputs)
    return out


@mutant("10.1", "forgets prof.track: no bytes allocated or freed")
def profiled_apply_no_memory(prof, op, inputs, attrs):
    t0 = prof.clock()
    out = registry._eager_apply(op, inputs, attrs)
    t1 = prof.clock()
    shapes = tuple(tuple(x.shape) for x in inputs)
    prof.add_event(op.name, "op", t0, t1, shapes=shapes, backend=backend_name(out.device))
    return out


@mutant("10.1", "calls the eager path without recording anything")
def profiled_apply_records_nothing(prof, op, inputs, attrs):
    return registry._eager_apply(op, inputs, attrs)


@mutant("10.1", "the backend of the default device, not of the output's: a cuda op says numpy")
def profiled_apply_default_backend(prof, op, inputs, attrs):
    t0 = prof.clock()
    out = registry._eager_apply(op, inputs, attrs)
    t1 = prof.clock()
    shapes = tuple(tuple(x.shape) for x in inputs)
    ev = prof.add_event(op.name, "op", t0, t1, shapes=shapes, backend=backend_name("cpu"))
    prof.track(ev, out, inputs)
    return out


@mutant("10.1", "times with time.perf_counter_ns, not prof.clock(): off the profile's timeline")
def profiled_apply_own_clock(prof, op, inputs, attrs):
    t0 = time.perf_counter_ns()
    out = registry._eager_apply(op, inputs, attrs)
    t1 = time.perf_counter_ns()
    shapes = tuple(tuple(x.shape) for x in inputs)
    ev = prof.add_event(op.name, "op", t0, t1, shapes=shapes, backend=backend_name(out.device))
    prof.track(ev, out, inputs)
    return out


# ---------------------------------------------------------------- 10.2 self_times


@mutant("10.2", "subtracts every nested event, not only direct children")
def self_times_all_descendants(events):
    out = []
    for a in events:
        inner = [
            b
            for b in events
            if b is not a and b.tid == a.tid and a.start <= b.start and b.end <= a.end
        ]
        out.append(a.duration - sum(b.duration for b in inner))
    return out


@mutant("10.2", "ignores threads: an event on another thread counts as a child")
def self_times_ignores_threads(events):
    result = [e.end - e.start for e in events]
    order = sorted(range(len(events)), key=lambda i: (events[i].start, -events[i].end))
    stack: list[int] = []
    for i in order:
        e = events[i]
        while stack and events[stack[-1]].end < e.end:
            stack.pop()
        if stack:
            result[stack[-1]] -= e.end - e.start
        stack.append(i)
    return result


@mutant("10.2", "sorts by start only: a parent starting with its child may come after it")
def self_times_sort_by_start(events):
    result = [e.end - e.start for e in events]
    order = sorted(range(len(events)), key=lambda i: (events[i].tid, events[i].start))
    stack: list[int] = []
    for i in order:
        e = events[i]
        while stack and (events[stack[-1]].tid != e.tid or events[stack[-1]].end < e.end):
            stack.pop()
        if stack:
            result[stack[-1]] -= e.end - e.start
        stack.append(i)
    return result


@mutant("10.2", "assumes the events come in start order (they do not: parents are appended last)")
def self_times_in_list_order(events):
    result = [e.end - e.start for e in events]
    stack: list[int] = []
    for i, e in enumerate(events):
        while stack and (events[stack[-1]].tid != e.tid or events[stack[-1]].end < e.end):
            stack.pop()
        if stack:
            result[stack[-1]] -= e.end - e.start
        stack.append(i)
    return result


# ---------------------------------------------------------------- 10.3 summarize


def _rows(events, selfs):
    rows: dict[str, Row] = {}
    for e, s in zip(events, selfs):
        r = rows.setdefault(e.name, Row(e.name))
        r.calls += 1
        r.total += e.duration
        r.self += s
        r.alloc += e.alloc
        r.freed += e.freed
    return rows


@mutant("10.3", "share is self / total time of all events (double counts nested time)")
def summarize_share_of_total(events):
    rows = _rows(events, self_times(events))
    total = sum(e.duration for e in events)
    for r in rows.values():
        r.share = r.self / total if total else 0.0
    return list(rows.values())


@mutant("10.3", "self time taken as the duration: nested events not subtracted")
def summarize_self_is_total(events):
    rows = _rows(events, [e.duration for e in events])
    total = sum(r.self for r in rows.values())
    for r in rows.values():
        r.share = r.self / total if total else 0.0
    return list(rows.values())


@mutant("10.3", "rows sorted by name instead of first appearance")
def summarize_sorted_by_name(events):
    selfs = self_times(events)
    rows = _rows(events, selfs)
    total = sum(selfs)
    for r in rows.values():
        r.share = r.self / total if total else 0.0
    return sorted(rows.values(), key=lambda r: r.name)


@mutant("10.3", "alloc and freed not summed: the last event's bytes win")
def summarize_bytes_overwritten(events):
    selfs = self_times(events)
    rows = _rows(events, selfs)
    for e in events:
        rows[e.name].alloc, rows[e.name].freed = e.alloc, e.freed
    total = sum(selfs)
    for r in rows.values():
        r.share = r.self / total if total else 0.0
    return list(rows.values())


@mutant("10.2", "computed in a numpy array and returned as list(array): np.int64, not int")
def self_times_numpy_items(events):
    return list(np.array(ref.self_times(events), dtype=np.int64))


@mutant("10.3", "one row per (name, thread): a name run on two threads gets two rows")
def summarize_per_thread(events):
    selfs = ref.self_times(events)
    rows = {}
    for e, s in zip(events, selfs):
        r = rows.setdefault((e.name, e.tid), Row(e.name))
        r.calls += 1
        r.total += e.end - e.start
        r.self += s
        r.alloc += e.alloc
        r.freed += e.freed
    total = sum(selfs)
    for r in rows.values():
        r.share = r.self / total if total else 0.0
    return list(rows.values())


# ---------------------------------------------------------------- 10.4 chrome_trace


def _trace(events, counters, threads, scale=1000, meta=True, counter_ph="C", flaw=None):
    out = []
    if meta:
        out += [
            {"ph": "M", "name": "thread_name", "pid": PID, "tid": t, "args": {"name": n}}
            for t, n in threads.items()
        ]
    for e in events:
        args = {
            "shapes": [list(s) for s in e.shapes if s or flaw != "drop_0d"],
            "backend": e.backend,
            "alloc": e.alloc,
            "freed": e.freed,
            **e.args,
        }
        if flaw == "tuples":  # json.dumps writes them as lists, but the dict holds tuples
            args["shapes"] = list(e.shapes)
        if flaw == "alias":  # the event's own args dict, updated in place
            args = e.args
            args.update(shapes=[list(s) for s in e.shapes], backend=e.backend)
            args.update(alloc=e.alloc, freed=e.freed)
        out.append(
            {
                "name": e.name,
                "cat": e.cat,
                "ph": "X",
                "pid": PID,
                "tid": e.tid,
                "ts": e.start / scale,
                "dur": (e.end - e.start) / scale,
                "args": args,
            }
        )
    for t, live in counters:
        out.append(
            {
                "name": "memory",
                "ph": counter_ph,
                "pid": PID,
                "tid": 0,
                "ts": t / scale,
                "args": {"live bytes": live},
            }
        )
    return {"traceEvents": out, "displayTimeUnit": "ms"}


@mutant("10.4", "timestamps in nanoseconds instead of microseconds")
def chrome_trace_nanoseconds(events, counters, threads):
    return _trace(events, counters, threads, scale=1)


@mutant("10.4", "no thread_name metadata: the tracks have no names")
def chrome_trace_no_thread_names(events, counters, threads):
    return _trace(events, counters, threads, meta=False)


@mutant("10.4", "memory samples written as instant events instead of counters")
def chrome_trace_counters_as_instants(events, counters, threads):
    return _trace(events, counters, threads, counter_ph="i")


@mutant("10.4", "every event on track 0: threads are not separated")
def chrome_trace_one_track(events, counters, threads):
    trace = _trace(events, counters, {0: threads.get(0, "main")})
    for ev in trace["traceEvents"]:
        ev["tid"] = 0
    return trace


@mutant("10.4", "shapes kept as tuples: the dict is not the promised list of lists")
def chrome_trace_tuples(events, counters, threads):
    return _trace(events, counters, threads, flaw="tuples")


@mutant("10.4", "a 0-d input's shape () is left out of shapes")
def chrome_trace_drops_0d(events, counters, threads):
    return _trace(events, counters, threads, flaw="drop_0d")


@mutant("10.4", "writes the fields into the event's own args: the profile changes on export")
def chrome_trace_alias_args(events, counters, threads):
    return _trace(events, counters, threads, flaw="alias")


# ---------------------------------------------------------------- 10.5 dynamic_dims


def _dims(graph_a, graph_b, check_consts=True, check_structure=True, keep_static=False):
    if check_structure and len(graph_a.nodes) != len(graph_b.nodes):
        raise OpError("onnx.export", "the node counts differ")
    out = {}
    for a, b in zip(graph_a.nodes, graph_b.nodes):
        if check_structure and (a.op != b.op or a.spec.ndim != b.spec.ndim):
            raise OpError("onnx.export", f"node %{a.name} differs")
        dims = tuple(d for d, (x, y) in enumerate(zip(a.spec.shape, b.spec.shape)) if x != y)
        if dims and a.op == "const" and check_consts:
            raise OpError("onnx.export", f"constant %{a.name} depends on the batch size")
        if dims or keep_static:
            out[a.name] = dims
    return out


@mutant("10.5", "never compares the structure: a shape-dependent program passes")
def dynamic_dims_no_structure_check(graph_a, graph_b):
    return _dims(graph_a, graph_b, check_structure=False)


@mutant("10.5", "accepts constants built from the batch size")
def dynamic_dims_accepts_constants(graph_a, graph_b):
    return _dims(graph_a, graph_b, check_consts=False)


@mutant("10.5", "only dim 0 can be dynamic")
def dynamic_dims_only_first(graph_a, graph_b):
    out = _dims(graph_a, graph_b)
    return {k: (0,) for k, v in out.items() if 0 in v}


@mutant("10.5", "lists static values too, with an empty tuple")
def dynamic_dims_keeps_static(graph_a, graph_b):
    return _dims(graph_a, graph_b, keep_static=True)


# ---------------------------------------------------------------- 10.6 graph_to_onnx


def _to_onnx(graph, dynamic, opset, const_inputs=False, symbolic=True, outputs_by_node=False):
    ctx = OnnxContext(dynamic if symbolic else {})
    names, inputs, outputs = {}, [], []
    for k, node in enumerate(graph.inputs):
        names[node] = f"input{k}"
        inputs.append(ctx.value_info(names[node], node))
    for node in graph.nodes:
        if node.op == "input":
            continue
        if node.op == "const":
            name = f"const_{node.name}"
            if const_inputs:  # a constant as a graph input that the caller must feed
                inputs.append(ctx.value_info(name, node))
                names[node] = name
            else:
                names[node] = ctx.const(node.value.numpy(), name)
            continue
        emit = OPS[node.op].onnx if node.op in OPS else None
        if emit is None:
            raise OpError("onnx.export", f"cannot export node %{node.name}")
        names[node] = emit(ctx, node, [names[i] for i in node.inputs])
    for k, node in enumerate(graph.outputs):
        name = (
            names[node]
            if outputs_by_node
            else ctx.node("Identity", [names[node]], output=f"output{k}")
        )
        outputs.append(ctx.value_info(name, node))
    g = helper.make_graph(ctx.nodes, graph.name, inputs, outputs, ctx.initializers)
    return helper.make_model(
        g, opset_imports=[helper.make_opsetid("", opset)], producer_name="minitorch"
    )


@mutant("10.6", "constants become graph inputs instead of initializers")
def graph_to_onnx_consts_as_inputs(graph, dynamic, opset=18):
    return _to_onnx(graph, dynamic, opset, const_inputs=True)


@mutant("10.6", "ignores dynamic: the batch dim is fixed to the example's size")
def graph_to_onnx_static_shapes(graph, dynamic, opset=18):
    return _to_onnx(graph, dynamic, opset, symbolic=False)


@mutant("10.6", "the unmapped-op error names neither the op nor register_onnx")
def graph_to_onnx_vague_error(graph, dynamic, opset=18):
    return _to_onnx(graph, dynamic, opset)


@mutant("10.6", "outputs keep their internal names instead of output0, output1, ...")
def graph_to_onnx_internal_output_names(graph, dynamic, opset=18):
    return _to_onnx(graph, dynamic, opset, outputs_by_node=True)


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("10.3", "divides by the total self time even when it is 0")
def summarize_divides_by_zero(events):
    selfs = self_times(events)
    rows = _rows(events, selfs)
    total = sum(selfs)
    for r in rows.values():
        r.share = r.self / total
    return list(rows.values())


@mutant("10.5", "compares the ops but not their rank")
def dynamic_dims_ignores_rank(graph_a, graph_b):
    for a, b in zip(graph_a.nodes, graph_b.nodes):
        if a.op != b.op:
            raise OpError("onnx.export", f"node %{a.name} differs")
    return (
        _dims(graph_a, graph_b, check_structure=False)
        if len(graph_a.nodes) == len(graph_b.nodes)
        else _dims(graph_a, graph_b)
    )


@mutant("10.6", "looks every op up in OPS: a cond node raises KeyError")
def graph_to_onnx_key_error(graph, dynamic, opset=18):
    for node in graph.nodes:
        if node.op not in ("input", "const"):
            OPS[node.op]  # noqa: B018 - the KeyError is the mistake
    return ref.graph_to_onnx(graph, dynamic, opset)


from . import ch10_pad  # noqa: E402, F401  (10.7's mutants, a part of their own)


@mutant("10.5", "lists the ops only: an input or constant whose shape changes is left out")
def dynamic_dims_ops_only(graph_a, graph_b):
    got = ref.dynamic_dims(graph_a, graph_b)
    ops = {n.name for n in graph_a.nodes if n.op not in ("input", "const")}
    return {k: v for k, v in got.items() if k in ops}


@mutant("10.6", "the ONNX graph is named 'main', not graph.name")
def graph_to_onnx_main(graph, dynamic, opset=18):
    model = ref.graph_to_onnx(graph, dynamic, opset)
    model.graph.name = "main"
    return model
