"""Chapter 9 dynamic shapes and parallel scheduling, on the reference solutions."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch
from minitorch import CompileOptions, OpError
from minitorch.compile import dynamic, parallel, report_dynamic
from minitorch.passes.plan import run_plan


def T(*shape, seed=0):
    return minitorch.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_mark_dynamic_checks_its_arguments():
    x = T(4, 3)
    assert minitorch.mark_dynamic(x, -2) is x and dynamic.marked_dims(x) == {0}
    with pytest.raises(OpError, match="mark_dynamic"):
        minitorch.mark_dynamic(x, 2)
    with pytest.raises(OpError, match="Tensor"):
        minitorch.mark_dynamic(np.ones(3), 0)


def test_size_used_as_a_python_number_keeps_the_dim_static_with_a_reason():
    jf = minitorch.jit(lambda x: x[: x.shape[0] // 2] * 2)
    for b in (4, 5, 6):
        x = minitorch.mark_dynamic(T(b, 3, seed=b), 0)
        np.testing.assert_allclose(jf(x).numpy(), x.numpy()[: b // 2] * 2)
    assert jf.trace_count == 3 and not jf.dynamic
    assert "used as a Python number" in " ".join(jf.dynamic_notes)
    assert "kept static" in jf.recompiles[-1]  # the retrace names why the dim is not dynamic
    jh = minitorch.jit(lambda x: x.sum() / x.shape[0])  # a constant computed from the size
    for b in (4, 5):
        x = minitorch.mark_dynamic(T(b, 3, seed=b), 0)
        np.testing.assert_allclose(jh(x).numpy(), x.numpy().sum() / b, rtol=1e-5)
    assert jh.trace_count == 2 and "constant" in " ".join(jh.dynamic_notes)


def test_size_one_and_unrelated_dims_are_handled():
    jf = minitorch.jit(lambda x, y: x.sum() + y.sum())
    jf(minitorch.mark_dynamic(T(4, 3), 0), minitorch.mark_dynamic(T(4, 2), 0))
    assert [g.dims[0] for g in jf.dynamic[0].guard] == ["s0", "s1"]  # not tied: no broadcast
    jf(T(5, 3), T(7, 2))
    assert jf.trace_count == 1
    jf(T(1, 3), T(7, 2))  # 1 is specialised: retrace with the reason
    assert jf.trace_count == 2 and "needs a size >= 2" in jf.recompiles[-1]
    g = minitorch.jit(lambda x: x * 2)
    g(minitorch.mark_dynamic(T(1, 3), 0))
    assert not g.dynamic and "size 1 is specialised" in g.dynamic_notes[0]


def test_explain_shows_dynamic_dims_and_why():
    def f(x, y):
        return (x + y).sum(1)

    out = minitorch.explain(f)(
        minitorch.mark_dynamic(T(4, 3), 0), minitorch.mark_dynamic(T(4, 3), 0)
    )
    assert any("x.shape[0] is dynamic (s0" in s and "mark_dynamic" in s for s in out.dynamic)
    assert "Dynamic dims:" in str(out)
    out = minitorch.explain(f)(minitorch.mark_dynamic(T(4, 3), 0), T(4, 3))  # y static: tied
    assert "kept static" in " ".join(out.dynamic)
    jf = minitorch.jit(f, options=CompileOptions(dynamic=True))
    jf(T(4, 3), T(4, 3))
    jf(T(6, 3), T(6, 3))
    out = minitorch.explain(jf)(T(5, 3), T(5, 3))
    assert any("automatically" in s for s in out.dynamic)


def test_per_size_cache_is_bounded_and_autograd_works():
    w = T(3, 2, seed=1)
    w.requires_grad = True

    def f(x, w):
        return (x @ w).tanh().sum()

    jf = minitorch.jit(f)
    jf(minitorch.mark_dynamic(T(4, 3), 0), w)
    for b in range(2, 14):
        x = T(b, 3, seed=b)
        w.grad = None
        jf(x, w).backward()
        got = w.grad.numpy()
        w.grad = None
        f(x, w).backward()
        np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-5, atol=1e-6)
    entry = jf.dynamic[0]
    assert jf.trace_count == 1 and entry.compiled_sizes == 11  # size 4 is the traced one
    assert len(entry.plans) == dynamic.PER_SIZE_CACHE


def test_automatic_dynamic_only_with_the_option():
    plain = minitorch.jit(lambda x: x * 3)
    auto = minitorch.jit(lambda x: x * 3, options=CompileOptions(dynamic=True))
    for b in (2, 3, 4, 5):
        plain(T(b, 2))
        auto(T(b, 2))
    assert plain.trace_count == 4 and auto.trace_count == 2
    auto(T(5, 3))  # the static dim changed; now it becomes dynamic too
    auto(T(5, 4))
    assert auto.trace_count == 3


def _two_branch():
    rng = np.random.default_rng(3)
    w1, w2 = (minitorch.tensor(rng.standard_normal((16, 16)).astype(np.float32)) for _ in range(2))

    def model(x):
        return ((x @ w1).relu() @ w1 + (x @ w2).tanh() @ w2).sum(1)

    return model


def test_parallel_runner_is_installed_and_matches_sequential():
    model = _two_branch()
    jf = minitorch.jit(model, options=CompileOptions(parallel=True))
    x = T(8, 16)
    got = jf(x)
    entry = report_dynamic.trace_for(jf, x)
    compiled = entry.compiled
    assert compiled.runner.way is parallel.PARALLEL
    inputs = [t._data for t in entry.inputs(jf.fn, [x])]  # x, then w1 and w2 (closure)
    want = run_plan(compiled.plan, inputs)[0].to_numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)  # small: ran sequentially
    got = parallel.run_parallel(compiled.plan, inputs, parallel.pool())[0].to_numpy()
    np.testing.assert_array_equal(got, want)  # the same kernels: bit for bit
    s = parallel.schedule(compiled.plan)
    assert s["width"] >= 1.5 and s["levels"] < s["steps"]


def test_threads_in_an_arena_wait_for_the_buffers_they_reuse():
    """Arena and thread pool combine: a step that reuses a buffer waits for its earlier
    readers (``plan.after``), so many runs on the pool give the loop's answer, bit for bit."""
    rng = np.random.default_rng(5)
    ws = [minitorch.tensor(rng.standard_normal((64, 64)).astype(np.float32)) for _ in range(4)]

    def model(x):  # four branches whose temporaries the arena reuses
        return sum(((x @ w).relu() * 0.5 + 1.0).tanh() @ w for w in ws).sum(1)

    x = T(64, 64)
    jf = minitorch.jit(model, options=CompileOptions(parallel=True, memory=True))
    with minitorch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(jf(x).numpy(), want, rtol=1e-4, atol=1e-4)
    entry = report_dynamic.trace_for(jf, x)
    runner, plan = entry.compiled.runner, entry.compiled.plan
    assert runner.use_arena and runner.way is parallel.PARALLEL
    runner.way = parallel.Parallel(min_width=0, min_elements=0)  # the pool, whatever the size
    inputs = [t._data for t in entry.inputs(jf.fn, [x])]
    seq = run_plan(plan, inputs)[0].to_numpy()
    for _ in range(20):
        np.testing.assert_array_equal(runner(plan, inputs)[0].to_numpy(), seq)
    mp = runner.memory(plan)
    assert mp.arena_bytes < mp.no_reuse_bytes  # bytes are reused ...
    after = parallel.hazards(plan, mp)  # ... so some steps wait for more than their producers
    deps = parallel.producers(plan)
    assert any(set(js) - set(deps[i]) for i, js in after.items())


def test_narrow_plans_and_numba_stay_sequential():
    jf = minitorch.jit(lambda x: (x * 2).exp().sum(), options=CompileOptions(parallel=True))
    x = T(3, 3)
    np.testing.assert_allclose(jf(x).numpy(), np.exp(x.numpy() * 2).sum(), rtol=1e-5)
    compiled = report_dynamic.trace_for(jf, x).compiled
    assert parallel.schedule(compiled.plan)["width"] < parallel.PARALLEL.min_width
    g = minitorch.jit(lambda x: x + 1).trace(x)
    compiled = g.compile(backend="numba", options=CompileOptions(parallel=True))
    assert compiled.runner is run_plan


def test_dynamic_and_parallel_together():
    model = _two_branch()
    jf = minitorch.jit(model, options=CompileOptions(parallel=True, dynamic=True))
    for b in (4, 6, 9, 3):
        x = T(b, 16, seed=b)
        with minitorch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(jf(x).numpy(), want, rtol=1e-5, atol=1e-5)
    assert jf.trace_count == 2
    plan = next(iter(jf.dynamic[0].plans.values()))
    assert plan.runner.way is parallel.PARALLEL


def test_training_loop_with_a_dataloader_traces_once():
    """An nn model trained with SGD over epochs whose last batch is smaller: one trace."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((70, 6)).astype(np.float32)
    target = rng.standard_normal((70, 2)).astype(np.float32)

    def make():
        return minitorch.nn.Sequential(
            minitorch.nn.Linear(6, 8, seed=1),
            minitorch.nn.ReLU(),
            minitorch.nn.Linear(8, 2, seed=2),
        )

    def loss_fn(model, x, y):
        return ((model(x) - y) ** 2).mean()

    eager, compiled = make(), make()
    step = minitorch.jit(loss_fn)
    opts = [minitorch.optim.SGD(m.parameters(), lr=0.1) for m in (eager, compiled)]
    loader = minitorch.nn.DataLoader(data, target, batch_size=32, seed=3)  # 32, 32, 6
    for _epoch in range(2):
        for x, y in loader:
            minitorch.mark_dynamic(x, 0)
            minitorch.mark_dynamic(y, 0)
            losses = []
            for model, opt, fn in ((eager, opts[0], loss_fn), (compiled, opts[1], step)):
                opt.zero_grad()
                loss = fn(model, x, y)
                loss.backward()
                opt.step()
                losses.append(loss.numpy())
            np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(eager.parameters(), compiled.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert step.trace_count == 1, step.recompiles


def _heads_step(w, opt, sliced=False):
    def step(x):  # x (B, T, 6): heads by reshape(B, T, 2, 3), as transformers usually split
        opt.zero_grad()
        b, t, c = x.shape
        h = (x @ w).reshape(b, t, 2, 3).permute(0, 2, 1, 3)  # (B, 2, T, 3)
        if sliced:  # two parts of one projection, as a fused q/k/v: the backward pads each
            h = h[:, :1].tanh() * h[:, 1:]
        loss = (h.tanh() * h).sum(axis=-1).sum() * 0.01
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.parametrize("mark,sliced", [(True, False), (False, False), (True, True)])
def test_compiled_step_is_dynamic_and_a_reshape_of_the_sizes_follows_them(mark, sliced):
    """A training step honours dynamic dims; reshape(B, T, 2, 3), the backward's expand
    to (B, T, ...) and a slice's backward (pad_slice to (B, 2, T, 3)) hold the sizes as
    attributes, which follow the symbols: no retrace."""
    from minitorch import nn
    from minitorch.nn.optim import SGD

    runs = {}
    for compiled in (False, True):
        w = nn.Parameter(T(6, 6, seed=9))
        opt = SGD([w], lr=0.1, momentum=0.9)
        f = _heads_step(w, opt, sliced)
        f = minitorch.compile(f) if compiled else f
        out = []
        for k, (b, t) in enumerate([(4, 5), (4, 7), (3, 7), (5, 2), (6, 9), (3, 7)]):
            x = T(b, t, 6, seed=k)
            if compiled and mark:
                minitorch.mark_dynamic(minitorch.mark_dynamic(x, 0), 1)
            out.append(float(f(x).item()))
        runs[compiled] = out, w.numpy().copy(), f
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-5)
    np.testing.assert_allclose(runs[True][1], runs[False][1], rtol=1e-5)
    f = runs[True][2]
    assert f.trace_count == (1 if mark else 3), f.recompiles  # automatic: T, then B
    lines = " ".join(x for e in f.dynamic for x in e.lines)
    assert "x.shape[0] is dynamic" in lines and "x.shape[1] is dynamic" in lines
    assert "reshape.shape" in lines and "expand.shape" in lines
    assert ("pad_slice.shape" in lines) == sliced
    report = minitorch.explain(f)(minitorch.mark_dynamic(T(2, 3, 6), 0))
    assert "dynamic dims:" in str(report)


def test_compiled_step_follows_a_flattening_reshape():
    """reshape(B * T, C) in a training step: its entry is 3 * B at every size (T static),
    a template, so one trace serves every batch size with eager's results."""
    from minitorch import nn
    from minitorch.nn.optim import SGD

    def make():
        w = nn.Parameter(T(6, 6, seed=9))
        opt = SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = ((x @ w).reshape(x.shape[0] * x.shape[1], 6) ** 2).sum() * 0.01
            loss.backward()
            opt.step()
            return loss

        return w, step

    (w, step), (we, eager) = make(), make()
    f = minitorch.compile(step)
    sizes = (4, 5, 7)
    got = [float(f(minitorch.mark_dynamic(T(b, 3, 6, seed=b), 0)).item()) for b in sizes]
    assert f.trace_count == 1 and f.dynamic, f.recompiles
    want = [float(eager(T(b, 3, 6, seed=b)).item()) for b in sizes]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), we.numpy(), rtol=1e-5)


def test_a_flattened_batch_follows_the_product_of_its_sizes():
    """reshape(-1, C) of (B, T, C) keeps B * T (or 4 * T with B static) as an attribute: a
    multiple of the symbols, filled in per size, so one trace serves every size."""
    both = minitorch.jit(lambda x: (x.reshape(-1, 3) * 2).reshape(x.shape[0], -1, 3))
    time = minitorch.jit(lambda x: (x.reshape(-1, 3) * 3).reshape(x.shape[0], -1, 3))
    for jf, marked, sizes, k in [
        (both, (0, 1), [(4, 5), (3, 7), (6, 2)], 2),
        (time, (1,), [(4, 5), (4, 7), (4, 2), (4, 9)], 3),
    ]:
        for b, t in sizes:
            x = T(b, t, 3, seed=b + t)
            for d in marked:
                minitorch.mark_dynamic(x, d)
            np.testing.assert_array_equal(jf(x).numpy(), x.numpy() * k)
        assert jf.trace_count == 1, jf.recompiles
        assert "follow the symbols" in " ".join(jf.dynamic_notes)
