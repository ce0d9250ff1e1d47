"""Graded tests, chapter 10: recording op calls (10.1), self time (10.2), the table (10.3),
the Chrome trace (10.4)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from hypothesis import given

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch import OpError, profiler
from minitorch.core import registry
from minitorch.profiler import Event, chrome_trace, self_times, summarize, validate_trace

from .util import brute_self_times, event_lists


def _ops(prof):
    return [e for e in prof.events if e.cat == "op"]


@graded("10.1", points=2)
def test_every_op_call_is_recorded_with_shapes_and_backend():
    """contract: Run one eager op call and record it in ``prof``
    contract: The result is what ``registry._eager_apply(op, inputs, attrs)`` returns
    """
    x, y = minitorch.randn(2, 3), minitorch.randn(3)
    with profiler.profile() as prof:
        z = (x + y).relu()
        s = z.sum(axis=1)
    check(registry._profile_hook is None, "10.1", "the hook must be removed when the block ends")
    ops = _ops(prof)
    names = [e.name for e in ops]
    check(
        names == ["add", "relu", "sum"],
        "10.1",
        "one event per op call, in order",
        value=text(names),
        got=names,
    )
    shapes = [e.shapes for e in ops]
    want = [((2, 3), (3,)), ((2, 3),), ((2, 3),)]
    check(
        shapes == want,
        "10.1",
        "shapes: the input shapes as tuples",
        value=text(shapes),
        got=shapes,
        expected=want,
    )
    check(
        all(e.backend == "numpy" for e in ops),
        "10.1",
        "backend: the name of the backend that ran",
        value=text([e.backend for e in ops]),
    )
    check(
        all(0 <= e.start <= e.end for e in ops)
        and all(a.end <= b.start for a, b in zip(ops, ops[1:])),
        "10.1",
        "start/end come from prof.clock() around the call, in order",
        events=ops,
    )
    np.testing.assert_allclose(s.numpy(), np.maximum(x.numpy() + y.numpy(), 0).sum(axis=1))
    # backend_name(out.device): an op on cuda (the simulator without a GPU) says "cuda"
    xc = x.to("cuda")
    with profiler.profile() as prof:
        zc = xc + 1.0
    ops = _ops(prof)
    got = [(e.name, e.shapes, e.backend) for e in ops]
    want = [("add", ((2, 3), ()), "cuda")]
    check(got == want, "10.1", "a cuda op's event: backend_name(out.device)",
          value=text(got), got=got, expected=want)  # fmt: skip
    assert_close(zc.numpy(), x.numpy() + 1.0, "10.1", rtol=1e-6)


@graded("10.1", points=2)
def test_allocated_and_freed_bytes():
    x = minitorch.randn(4, 8)
    with profiler.profile() as prof:
        a = x * 2.0  # 4*8 float32 = 128 bytes
        v = a.reshape(8, 4)  # a view: no new storage
        b = (v + 1.0).sum()  # 128 bytes, freed at once, then 4 bytes
        del a, v
    ops = {e.name: e for e in _ops(prof)}
    check(
        ops["mul"].alloc == 128,
        "10.1",
        "mul allocates 4*8*4 bytes",
        value=ops["mul"].alloc,
        got=ops["mul"].alloc,
    )
    check(
        ops["reshape"].alloc == 0,
        "10.1",
        "a view allocates nothing",
        value=ops["reshape"].alloc,
        got=ops["reshape"].alloc,
    )
    check(
        ops["add"].alloc == 128 and ops["sum"].alloc == 4,
        "10.1",
        "wrong bytes",
        value=(ops["add"].alloc, ops["sum"].alloc),
        events=ops,
    )
    check(
        ops["add"].freed == 128,
        "10.1",
        "the temporary of add was freed",
        value=ops["add"].freed,
        got=ops["add"].freed,
    )
    check(
        ops["mul"].freed == 128,
        "10.1",
        "a (and its view) were deleted",
        value=ops["mul"].freed,
        got=ops["mul"].freed,
    )
    check(
        prof.counters and prof.counters[-1][1] == 4,
        "10.1",
        "live bytes at the end",
        c=prof.counters,
    )
    assert_close(float(b.numpy()), float((x.numpy() * 2 + 1).sum()), "10.1", rtol=1e-5)


@graded("10.1", points=1)
def test_a_failing_op_records_nothing():
    """contract: If the op raises, record nothing and let the error through"""
    with profiler.profile() as prof:
        with pytest.raises(OpError, match="matmul"):
            minitorch.ones(2, 3) @ minitorch.ones(2, 3)
        minitorch.ones(2) + 1.0
    names = [e.name for e in _ops(prof)]
    check(
        names == ["add"],
        "10.1",
        "a call that raised must not be recorded",
        value=text(names),
        got=names,
    )


@graded("10.1", points=1)
def test_backward_and_compiled_plans_are_recorded():
    w = minitorch.randn(3, 2, requires_grad=True)
    x = minitorch.randn(4, 3)
    f = minitorch.jit(lambda x: (x @ w.detach()).tanh())
    f(x)
    with profiler.profile() as prof:
        with profiler.record("forward"):
            loss = (x @ w).tanh().sum()
        loss.backward()
        f(x)
    names = [e.name for e in prof.events]
    for n in ("forward", "matmul", "tanh", "sum", "lambda"):
        check(n in names, "10.1", f"no event named {n!r}", names=names)
    plan = next(e for e in prof.events if e.cat == "plan")
    inner = [e.name for e in _ops(prof) if plan.start <= e.start and e.end <= plan.end]
    inner = [n for n in inner if n != "detach"]  # jit records w.detach() as a graph op
    check(
        inner == ["matmul", "tanh"],
        "10.1",
        "the plan's ops run inside it",
        value=text(inner),
        got=inner,
    )
    check(names.count("matmul") >= 3, "10.1", "backward's matmuls are op calls too", names=names)


@graded("10.2", points=3)
@given(event_lists())
def test_self_time_matches_the_definition(events):
    """contract: An event B is nested in A when both ran on the same thread
    contract: Return one integer per event, in the order of ``events``
    """
    got = self_times(events)
    want = brute_self_times(events)
    check(
        got == want,
        "10.2",
        "wrong self times",
        value=got,
        events=events,
        got=got,
        expected=want,
    )


@graded("10.2", points=1)
def test_self_time_examples():
    """contract: Events of different threads never nest"""
    a = Event("A", "op", 0, 0, 100)
    b = Event("B", "op", 0, 10, 40)
    c = Event("C", "op", 0, 20, 30)
    d = Event("D", "op", 1, 20, 30)  # another thread: never a child of A
    e = Event("E", "op", 0, 40, 60)  # touches B's end: a sibling of B, child of A
    got = self_times([c, b, d, e, a])
    check(
        got == [10, 20, 10, 20, 50] and all(type(t) is int for t in got),
        "10.2",
        "wrong self times (one int per event, in the order given)",
        value=got,
        got=got,
        expected=[10, 20, 10, 20, 50],
    )


@graded("10.3", points=3)
@given(event_lists())
def test_summary_rows(events):
    rows = summarize(events)
    selfs = brute_self_times(events)
    order = list(dict.fromkeys(e.name for e in events))
    check(
        [r.name for r in rows] == order,
        "10.3",
        "one row per name, in order of first appearance",
        got=[r.name for r in rows],
        expected=order,
    )
    total_self = sum(selfs)
    for r in rows:
        mine = [(e, s) for e, s in zip(events, selfs) if e.name == r.name]
        want = dict(
            calls=len(mine),
            total=sum(e.duration for e, _ in mine),
            self=sum(s for _, s in mine),
            alloc=sum(e.alloc for e, _ in mine),
            freed=sum(e.freed for e, _ in mine),
        )
        got = {k: getattr(r, k) for k in want}
        check(
            got == want,
            "10.3",
            f"wrong row {r.name!r}",
            value=list(got.values()),
            got=got,
            expected=want,
            events=events,
        )
        share = want["self"] / total_self if total_self else 0.0
        check(
            abs(r.share - share) < 1e-12,
            "10.3",
            "share = self / all self",
            got=r.share,
            expected=share,
        )


@graded("10.3", points=1)
def test_table_of_a_real_profile():
    model = minitorch.nn.Sequential(minitorch.nn.Linear(8, 4), minitorch.nn.ReLU())
    x = minitorch.randn(5, 8)
    with profiler.profile() as prof:
        for _ in range(3):
            with profiler.record("step"):
                model(x).sum().backward()
    rows = {r.name: r for r in prof.summary()}
    check(
        rows["step"].calls == 3 and rows["relu"].calls == 3,
        "10.3",
        "calls",
        value=(rows["step"].calls, rows["relu"].calls),
        rows=rows,
    )
    check(
        rows["matmul"].calls == 9,
        "10.3",
        "3 forward + 6 backward matmuls",
        value=rows["matmul"].calls,
        rows=rows,
    )
    check(rows["step"].total >= rows["step"].self, "10.3", "self <= total", row=rows["step"])
    ranked = [r.name for r in prof.summary("calls")]
    check(ranked[0] in ("matmul", "add", "mul", "permute"), "10.3", "sorted by calls", got=ranked)
    text = prof.table(sort_by="self")
    for word in ("matmul", "calls", "self", "step"):
        check(word in text, "10.3", f"the table lacks {word!r}", table=text)
    # a profile whose events took no time: every share is 0.0 (no division by zero)
    rows = summarize(
        [Event("A", "op", 0, 5, 5), Event("B", "op", 0, 5, 5), Event("A", "op", 0, 7, 7)]
    )
    got = [(r.name, r.calls, r.total, r.self, r.share) for r in rows]
    want = [("A", 2, 0, 0, 0.0), ("B", 1, 0, 0, 0.0)]
    check(got == want, "10.3", "zero total self time: shares are 0.0", got=got, expected=want)
    check(summarize([]) == [], "10.3", "no events, no rows")


@graded("10.4", points=2)
def test_chrome_trace_fields():
    """contract: Return ``{"traceEvents": [...], "displayTimeUnit": "ms"}``
    contract: Read ``events`` only: an event's own ``args`` is not changed
    """
    # a 0-d input (a scalar operand) has the shape (): []
    ev = Event("add", "op", 1, 1000, 3500, ((2,), (2, 1), ()), "numpy", 8, 8, {"grid": [1, 2]})
    got = chrome_trace([ev], [(1000, 8), (3000, 0)], {0: "MainThread", 1: "worker"})
    want = {
        "traceEvents": [
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "MainThread"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "worker"}},
            {
                "name": "add",
                "cat": "op",
                "ph": "X",
                "pid": 1,
                "tid": 1,
                "ts": 1.0,
                "dur": 2.5,
                "args": {
                    "shapes": [[2], [2, 1], []],
                    "backend": "numpy",
                    "alloc": 8,
                    "freed": 8,
                    "grid": [1, 2],
                },
            },
            {"name": "memory", "ph": "C", "pid": 1, "tid": 0, "ts": 1.0, "args": {"live bytes": 8}},
            {"name": "memory", "ph": "C", "pid": 1, "tid": 0, "ts": 3.0, "args": {"live bytes": 0}},
        ],
        "displayTimeUnit": "ms",
    }
    key = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731  (order of events is free)
    events = sorted(map(key, got["traceEvents"]))
    check(
        events == sorted(map(key, want["traceEvents"])) and got.get("displayTimeUnit") == "ms",
        "10.4",
        "wrong trace events",
        value=text([events, got.get("displayTimeUnit")]),
        got=got,
        expected=want,
    )
    # the dict itself, not only its JSON: shapes a list of lists
    (x,) = [e for e in got["traceEvents"] if e.get("ph") == "X"]
    shapes = x.get("args", {}).get("shapes")
    check(
        type(shapes) is list and all(type(s) is list for s in shapes),
        "10.4",
        "args['shapes'] must be a list of lists (not tuples)",
        value=text(repr(shapes)),
    )
    # exporting reads the profile: the event's own args stay as they were, a second export
    # gives the same trace
    again = chrome_trace([ev], [(1000, 8), (3000, 0)], {0: "MainThread", 1: "worker"})
    check(
        ev.args == {"grid": [1, 2]} and key(again) == key(got),
        "10.4",
        "chrome_trace must not change the events it is given (the event's own args)",
        value=text(repr(ev.args)),
    )


@graded("10.4", points=2)
def test_exported_trace_validates_with_one_track_per_thread(tmp_path):
    x = minitorch.randn(16, 16)

    def work():
        for _ in range(5):
            (x @ x).relu()

    with profiler.profile() as prof:
        t = threading.Thread(target=work, name="worker")
        t.start()
        t.join()
        work()
    path = prof.export_chrome_trace(tmp_path / "trace.json")
    with open(path) as f:
        trace = json.load(f)
    validate_trace(trace)
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    tracks = {e["tid"] for e in slices}
    check(tracks == {0, 1}, "10.4", "one track per thread", got=tracks)
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    check(set(names) == {0, 1} and names[1] == "worker", "10.4", "thread names", got=names)
    check(
        len(slices) == len(prof.events) == 20,
        "10.4",
        "one slice per event",
        value=len(slices),
        got=len(slices),
    )
    counters = [e for e in events if e["ph"] == "C"]
    check(len(counters) == len(prof.counters) > 0, "10.4", "one counter sample per change")
    ev = prof.events[0]
    first = next(e for e in slices if e["ts"] == pytest.approx(ev.start / 1000))
    check(
        first["dur"] == pytest.approx(ev.duration / 1000),
        "10.4",
        "ts and dur are in microseconds",
        got=first,
    )
