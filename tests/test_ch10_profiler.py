"""Chapter 10 framework: the profiler's hook, ranges, kernel hook, table and trace validation."""

from __future__ import annotations

import json

import pytest

import minitorch
from minitorch import OpError, profiler
from minitorch.core import registry


def test_off_means_no_hook_and_no_events():
    assert registry._profile_hook is None and not profiler.enabled()
    with profiler.record("ignored"), profiler.kernel("ignored"):
        minitorch.ones(2) + 1.0
    prof = profiler.profile()
    assert prof.events == [] and registry._profile_hook is None


def test_profiles_do_not_nest_and_the_hook_goes_away_on_error():
    with pytest.raises(ValueError):
        with profiler.profile():
            assert profiler.enabled()
            raise ValueError("boom")
    assert registry._profile_hook is None and profiler.current() is None
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already recording"):
            profiler.profile().start()


def test_record_and_kernel_ranges():
    with profiler.profile() as prof:
        with profiler.record("data loading"):
            x = minitorch.randn(3, 3)
        with profiler.kernel("fused_add_relu", [(3, 3)], "numba", grid=(1,), block=(32,)):
            pass
    names = [(e.name, e.cat) for e in prof.events]
    assert ("data loading", "range") in names and ("fused_add_relu", "kernel") in names
    k = next(e for e in prof.events if e.cat == "kernel")
    assert (
        k.shapes == ((3, 3),) and k.backend == "numba" and k.args == {"grid": (1,), "block": (32,)}
    )
    assert x.shape == (3, 3)


def test_compiled_graph_run_is_a_plan_slice():
    x = minitorch.randn(2, 2)
    compiled = minitorch.jit(lambda x: (x * 2.0).relu()).trace(x).compile()
    with profiler.profile() as prof:
        compiled(x)
    plan = [e for e in prof.events if e.cat == "plan"]
    assert len(plan) == 1 and plan[0].shapes == ((2, 2),)
    assert [e.name for e in prof.events if e.cat == "op"] == ["mul", "relu"]


def test_table_sorting_and_bad_key():
    with profiler.profile() as prof:
        for _ in range(3):
            minitorch.ones(4) * 2.0
        minitorch.ones(4).sum()
    assert [r.name for r in prof.summary("calls")][0] == "mul"
    assert [r.name for r in prof.summary("name")] == sorted(r.name for r in prof.summary())
    with pytest.raises(OpError, match="sort by"):
        prof.table(sort_by="speed")
    text = prof.table(limit=1)
    assert "more" in text and text.splitlines()[-1].startswith("total")


def test_validate_trace_rejects_bad_events(tmp_path):
    good = {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 0, "ts": 0.0, "dur": 1.0}]}
    profiler.validate_trace(good)
    bad = [
        {"events": []},
        {"traceEvents": [{"name": "a", "ph": "Q", "pid": 1}]},
        {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 0, "ts": 0.0}]},
        {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 0, "ts": -1, "dur": 1}]},
        {"traceEvents": [{"name": "m", "ph": "C", "pid": 1, "ts": 0, "args": {"x": "1"}}]},
        {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": "0", "ts": 0, "dur": 1}]},
    ]
    for trace in bad:
        with pytest.raises(ValueError):
            profiler.validate_trace(trace)
    with profiler.profile() as prof:
        minitorch.ones(3).exp()
    path = prof.export_chrome_trace(tmp_path / "t.json")
    assert profiler.load_trace(path)["traceEvents"]
    assert json.load(open(path))["displayTimeUnit"] == "ms"


def test_cuda_kernels_are_listed_with_their_launch_shapes():
    x = minitorch.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
    with profiler.profile() as prof:
        y = (x * 2.0).sum()
    kernels = [e for e in prof.events if e.cat == "kernel"]
    assert kernels and all("grid" in e.args and "block" in e.args for e in kernels)
    assert {e.name for e in kernels} >= {"zip"}
    ops = [e for e in prof.events if e.cat == "op"]
    assert all(e.backend == "cuda" for e in ops if e.name in ("mul", "sum"))
    assert float(y.numpy()) == 20.0
