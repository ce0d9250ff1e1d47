"""Issue 42, part 4: a compiled step on the cuda device runs in one device arena planned as
on the CPU, with fewer launches and no more device memory than eager; ``track_memory``
counts device bytes. Numba's simulator: launch counts and bytes are exact, times are not."""

from __future__ import annotations

import numpy as np
import pytest
from test_cuda_training import MODELS

import minitorch as mt
from minitorch.core.instrument import LAUNCHES
from minitorch.nn.optim import Adam


def _run(name, mode):
    """Two steps of ``name`` on cuda: (losses, launches and device peak of the second)."""
    make_model, make_step_fn, data = MODELS[name]
    model = make_model().to("cuda")
    step = make_step_fn(model, Adam(model, lr=0.01))
    if mode is not None:
        step = mt.compile(step, mode=mode)
    inputs = [mt.tensor(np.asarray(b.numpy() if hasattr(b, "numpy") else b), device="cuda")
              for b in data()]  # fmt: skip
    losses = [step(*inputs).item()]
    before = LAUNCHES[0]
    with mt.track_memory() as m:
        losses.append(step(*inputs).item())
    return losses, LAUNCHES[0] - before, m, step


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_step_on_cuda_fewer_launches_and_no_more_device_memory(name):
    eager_losses, eager_launches, eager_mem, _ = _run(name, None)
    losses, launches, mem, step = _run(name, "default")
    # the first step bit for bit; Adam's second may differ in the last bits (the compiled
    # plan sums the three slices' gradients of the fused q/k/v in another order)
    assert losses[0] == eager_losses[0]
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    assert launches < eager_launches
    assert 0 < mem.device.peak <= eager_mem.device.peak
    runner = step.last.compiled.runner
    assert runner.describe() == "run_plan in a device arena"
    assert runner.launches == launches
    mp = step.last.compiled.memory_plan()
    assert not mp.inplace  # a scratch buffer may land in a step's place: no input there
    # the arena is the plan's one allocation: its bytes are part of the peak counted
    assert mem.device.peak >= mp.arena_bytes
    text = str(step.last and mt.explain(step)(*_inputs(name)))
    assert f"{launches} kernel launches" in text and "one cuda allocation per compiled plan" in text
    assert "device memory: current" in mt.memory_summary(mem)


def _inputs(name):
    return [mt.tensor(np.asarray(b.numpy() if hasattr(b, "numpy") else b), device="cuda")
            for b in MODELS[name][2]()]  # fmt: skip


def test_kept_device_arena_is_allocated_once():
    *_, step = _run("cnn", "reduce-overhead")
    step(*_inputs("cnn"))
    runner = step.last.compiled.runner
    assert runner.describe() == "generated in a device arena" and runner.allocations == 1


def test_scratch_of_the_results_size_then_result_copied_into_place():
    # where() makes two scratch buffers of its result's size before the result: the
    # step's place goes to the first, and the result is copied there afterwards
    def f(c, a, b):
        t = mt.where(c, a * 2.0, b + 1.0)
        return (t * t).sum(axis=0)

    rng = np.random.default_rng(0)
    c, a, b = rng.random((3, 5)) > 0.5, rng.random((3, 5)), rng.random((3, 5))
    want = f(*(mt.tensor(v) for v in (c, a, b))).numpy()
    g = mt.jit(f, options=mt.CompileOptions(memory=True))
    args = [mt.tensor(v, device="cuda") for v in (c, a, b)]
    for _ in range(2):
        np.testing.assert_allclose(g(*args).numpy(), want, rtol=1e-12)
    (runner,) = {t.compiled.runner for ts in g.store.entries.values() for t in ts}
    assert runner.describe() == "run_plan in a device arena"
    # from the second call on, the place goes to the buffer that became the result
    assert "copy_into" not in _kernels_of(g, *args)


def _kernels_of(g, *args) -> list:
    """The kernels of a call of ``g`` (the second profiled: the first may trace anew)."""
    from minitorch import profiler

    for _ in range(2):
        with profiler.profile() as prof:
            g(*args)
    return [e.name for e in prof.events if e.cat == "kernel"]


def test_a_buffer_an_output_views_is_not_copied_out_of_the_arena():
    def f(a):
        return ((a * 2.0) + 1.0).reshape(6), a * 3.0

    x = mt.tensor(np.arange(6.0).reshape(2, 3), device="cuda")
    g = mt.jit(f, options=mt.CompileOptions(memory=True))
    g(x)
    assert _kernels_of(g, x) == ["zip", "zip", "zip"]  # no copy of the reshaped output
    out = g(x)
    np.testing.assert_array_equal(out[0].numpy(), np.arange(6.0) * 2 + 1)


def test_track_memory_counts_device_bytes():
    x = mt.tensor(np.ones(1000, np.float32), device="cuda")
    with mt.track_memory() as m:
        y = x + 1.0
        z = y * 2.0
        del y
    assert m.device.allocations >= 2 and m.device.peak >= 8000
    assert m.device.current >= 4000 and z.device == "cuda"


def test_profiler_reports_launches_and_device_peak_of_a_compiled_cuda_call():
    from minitorch import profiler

    def f(a, b):
        return ((a * b + 1.0) * a).sum()

    rng = np.random.default_rng(1)
    args = [mt.tensor(rng.random((4, 6)), device="cuda") for _ in range(2)]
    g = mt.jit(f, options=mt.CompileOptions(fuse=True, memory=True))
    g(*args)
    before = LAUNCHES[0]
    with profiler.profile() as prof:
        g(*args)
    assert prof.launches == LAUNCHES[0] - before > 0
    assert prof.device.peak > 0
    assert f"cuda: {prof.launches} kernel launches, device memory peak" in prof.table()


def test_device_arena_with_the_thread_pool():
    # independent branches run at once: each thread is offered its own step's place
    def f(a, b):
        return ((a * 2.0).sum(axis=0) + (b + 1.0).sum(axis=0), mt.where(a > b, a, b) * 3.0)

    rng = np.random.default_rng(2)
    a, b = rng.random((4, 3)), rng.random((4, 3))
    want = [t.numpy() for t in f(mt.tensor(a), mt.tensor(b))]
    g = mt.jit(f, options=mt.CompileOptions(memory=True, parallel=True))
    args = [mt.tensor(v, device="cuda") for v in (a, b)]
    for _ in range(3):
        for got, w in zip(g(*args), want):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-12)
    (runner,) = {t.compiled.runner for ts in g.store.entries.values() for t in ts}
    assert runner.describe().endswith("in a device arena") and runner.way.name != "run_plan"


def test_groups_cuda_does_not_generate_run_as_planned_steps():
    """A reduction group has no generated CUDA kernel: run inside one step, its ops' results
    would be temporaries outside the arena, allocated on every call. The fuse stage unfuses
    it on cuda (the report says so): the call allocates its arena and its result, and its
    peak stays at or below eager's. The CPU, which generates it, keeps the group."""

    def f(x, w):
        h = (x * w + 1.0).relu()
        e = (h - 2.0).exp()
        return (e * 3.0).sum(axis=1) + (h * h).sum(axis=1)

    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((16, 32)), rng.standard_normal((16, 32))
    options = mt.CompileOptions(fuse=True, memory=True)
    reports = {}
    for device in ("cpu", "cuda"):
        x, w = (mt.tensor(v, dtype="float32", device=device) for v in (xs, ws))
        want = f(x, w).numpy()
        g = mt.jit(f, options=options)
        g(x, w)
        with mt.track_memory() as eager_mem:
            f(x, w)
        with mt.track_memory() as mem:
            got = g(x, w).numpy()
        np.testing.assert_array_equal(got, want)
        reports[device] = str(mt.explain(g)(x, w))
        if device == "cuda":  # two allocations: the arena and the result, nothing else
            assert mem.device.allocations == 2, mem.device.summary()
            assert 0 < mem.device.peak <= eager_mem.device.peak, (mem.device, eager_mem.device)
    text = " ".join(reports["cuda"].split())  # explain folds long lines
    assert "unfused: its ops run as steps on cuda (no CUDA kernel is generated for a reduce" in text
    assert "unfused" not in reports["cpu"] and "[reduce]" in reports["cpu"], reports["cpu"]
