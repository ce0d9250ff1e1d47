"""Chapter 9 (train): minitorch.compile on training steps, modules and functions."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

import minitorch
from minitorch import nn
from minitorch.nn import functional as F
from minitorch.tracing.tracer import GraphBreakError


def _data(seed=0, n=3, batch=6, features=5, classes=3):
    rng = np.random.default_rng(seed)
    return [
        (
            minitorch.tensor(rng.standard_normal((batch, features)).astype(np.float32)),
            minitorch.tensor(rng.integers(0, classes, batch)),
        )
        for _ in range(n)
    ]


def _step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def test_module_compile_is_jit_with_parameters_as_inputs():
    model = nn.mlp([5, 4, 3], seed=0)
    compiled = minitorch.compile(model)
    ((x, _),) = _data(n=1)
    with minitorch.no_grad():
        want = model(x).numpy()
        got = compiled(x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)
        w = model.parameters()[0]
        w.assign_(w * 0.5)
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert compiled.trace_count == 1


def test_function_that_trains_nothing_is_plain_jit():
    f = minitorch.compile(lambda a, b: (a * b).sum())
    a, b = minitorch.ones(3), minitorch.ones(3)
    assert f(a, b).item() == 3.0 and f._jit is not None


def test_unknown_mode_names_the_modes():
    with pytest.raises(minitorch.OpError, match="reduce-overhead"):
        minitorch.compile(lambda x: x, mode="fastest")


def test_graph_break_runs_eagerly_with_a_warning_or_raises_with_fullgraph():
    model = nn.mlp([5, 3], seed=0)
    opt = nn.SGD(model, lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        if loss.item() > 100:  # a Python decision on a tensor value
            return loss
        loss.backward()
        opt.step()
        return loss

    ((x, y),) = _data(n=1)
    with pytest.raises(GraphBreakError):
        minitorch.compile(step, fullgraph=True)(x, y)
    assert all(p.grad is None for p in model.parameters())  # the state was restored
    f = minitorch.compile(step)
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        f(x, y)
    assert f.eager_reason and "item" in f.eager_reason
    assert all(p.grad is not None for p in model.parameters())


def test_two_steps_in_one_call_and_grad_accumulation():
    def run(compiled):
        model = nn.mlp([5, 4, 3], seed=1)
        opt = nn.SGD(model, lr=0.1, momentum=0.9)

        def two(x, y):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            F.cross_entropy(model(x * 2.0), y).backward()  # accumulates into .grad
            opt.step()
            loss = F.cross_entropy(model(x), y)  # reads the updated parameters
            loss.backward()
            opt.step()
            return loss

        f = minitorch.compile(two) if compiled else two
        out = [f(x, y).item() for x, y in _data(2, 4)]
        return out, [p.numpy() for p in model.parameters()], opt.steps

    (el, ep, es), (cl, cp, cs) = run(False), run(True)
    np.testing.assert_allclose(cl, el, rtol=1e-5)
    for a, b in zip(cp, ep):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert cs == es == 8


def test_input_requiring_grad_gets_its_grad():
    w = nn.Parameter(minitorch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    opt = nn.SGD([w], lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (x @ w).sum()
        loss.backward()
        opt.step()
        return loss

    f = minitorch.compile(step)
    x = minitorch.tensor([[1.0, -1.0]], requires_grad=True)
    f(x)
    np.testing.assert_allclose(x.grad.numpy(), [[3.0, 7.0]])
    np.testing.assert_allclose(w.numpy(), [[0.9, 1.9], [3.1, 4.1]], rtol=1e-6)


def test_reduce_overhead_dumps_its_generated_source(tmp_path, monkeypatch):
    monkeypatch.setenv("MINITORCH_DUMP_GRAPH", str(tmp_path))
    model = nn.mlp([5, 3], seed=0)
    opt = nn.SGD(model, lr=0.1)
    f = minitorch.compile(_step(model, opt), mode="reduce-overhead")
    for x, y in _data(n=2):
        f(x, y)
    sources = [os.path.join(r, n) for r, _, fs in os.walk(tmp_path) for n in fs]
    runners = [s for s in sources if s.endswith("runner.py")]
    assert runners, sources
    text = open(runners[0], encoding="utf-8").read()
    assert text.startswith("def run(inputs):") and "= k0(" in text


def test_max_autotune_reads_its_choice_from_disk(tmp_path, monkeypatch):
    from minitorch.compile import autotune

    monkeypatch.setenv("MINITORCH_CACHE_DIR", str(tmp_path))
    calls = []

    def measure(fn):
        calls.append(fn)
        return 1.0

    model = nn.mlp([5, 3], seed=0)
    f = minitorch.compile(_step(model, nn.SGD(model, lr=0.1)), mode="max-autotune")
    ((x, y),) = _data(n=1)
    f(x, y)
    cache = json.loads((tmp_path / "autotune.json").read_text())
    assert cache and all(v in ("blas", "numba") for v in cache.values())
    plan = next(iter(f.entries.values())).compiled.plan
    autotune.tune_plan(plan, measure=measure)
    assert calls == []  # every choice came from the file


def test_adam_compiles_once_its_step_count_is_an_input():
    def run(compiled):
        model = nn.mlp([5, 3], seed=0)
        opt = nn.Adam(model, lr=0.01)
        f = minitorch.compile(_step(model, opt)) if compiled else _step(model, opt)
        losses = [f(x, y).item() for x, y in _data(3, 10)]
        return losses, [p.numpy() for p in model.parameters()], opt, f

    (el, ep, eo, _), (cl, cp, co, f) = run(False), run(True)
    np.testing.assert_allclose(cl, el, rtol=1e-5)
    for a, b in zip(cp, ep):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert f.eager_reason is None and f.trace_count == 1  # m, v and t exist before step 1
    counts = [st["t"] for st in co.state.values()]
    assert counts == [st["t"] for st in eo.state.values()] == [10, 10]
    assert all(type(t) is int for t in counts)


def test_a_python_decision_on_the_step_count_is_a_graph_break():
    class Warmup(nn.optim.SGD):
        def update(self, p, grad, state):
            state["n"] = state.get("n", 0) + 1
            scale = 0.1 if state["n"] < 3 else 1.0  # a Python decision on the counter
            return p - grad * (self.defaults["lr"] * scale)

    def run(compiled):
        model = nn.mlp([5, 3], seed=0)
        f = _step(model, Warmup(model, lr=0.1))
        f = minitorch.compile(f) if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return [f(x, y).item() for x, y in _data(4, 5)], f

    (el, _), (cl, f) = run(False), run(True)
    np.testing.assert_allclose(cl, el, rtol=1e-6)
    assert f.eager_reason is not None


def test_explain_shows_mode_phases_writes_and_stage_times(capsys):
    model = nn.mlp([5, 3], seed=0)
    f = minitorch.compile(_step(model, nn.SGD(model, lr=0.1, momentum=0.9)), mode="reduce-overhead")
    data = _data(n=3)
    for x, y in data[:2]:
        f(x, y)
    report = minitorch.explain(f)(*data[2])
    text = str(report)
    assert "mode reduce-overhead" in text and "generated_runner" in text
    assert "2 parameters, 2 gradients, 2 optimizer buffers" in text
    assert "forward" in text and "backward" in text and "passes + lowering" in text
    assert "graphs: 1 (traced 1 times)" in text  # momentum buffers exist before step 1
    assert report.entry.phases["update"] == 10  # mul, add, mul, sub, detach per parameter


def test_random_numbers_in_the_step_run_eagerly_with_the_same_draws():
    def run(compiled):
        minitorch.manual_seed(3)
        model = nn.mlp([5, 3], seed=0)
        opt = nn.SGD(model, lr=0.1)

        def step(x, y):
            opt.zero_grad()
            noise = minitorch.randn(*x.shape) * 0.1
            loss = F.cross_entropy(model(x + noise), y)
            loss.backward()
            opt.step()
            return loss

        f = minitorch.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return [f(x, y).item() for x, y in _data(n=3)], f

    (el, _), (cl, f) = run(False), run(True)
    assert el == cl and "random" in f.eager_reason


def test_capstone_row_trains_both_ways_alike_and_measures_everything():
    from minitorch.compile.capstone import curves_agree, table_text, train_row
    from minitorch.nn import functional as F
    from minitorch.nn.train import mlp

    row = train_row("MLP", lambda: mlp([64, 16, 10], seed=0), F.cross_entropy, 1, 0.1, "default")
    assert curves_agree(row) and row.eager_losses == pytest.approx(row.compiled_losses, rel=1e-5)
    assert row.eager_acc == row.compiled_acc > 0.5
    assert min(row.eager_ms, row.compiled_ms, row.eager_peak_kib, row.compiled_peak_kib) > 0
    assert "MLP" in table_text([row])
