"""Project tests, chapter 6: the user-facing API of graph passes (not graded)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch
from minitorch.passes import PASSES, CompiledPlan


@pytest.fixture(autouse=True)
def _reference():
    old = minitorch.get_mode()
    minitorch.set_mode("reference")
    yield
    minitorch.set_mode(old[0], ",".join(old[1]))


def _naive(x):
    a = (x * 2.0).exp()
    b = (x * 2.0).exp()
    (x - 1.0).tanh()  # dead
    return (a + b) * 1.0


def test_compile_runs_default_pipeline_and_keeps_traced_graph():
    x = minitorch.randn(3)
    g = minitorch.jit(_naive).trace(x)
    n = len(g)
    c = g.compile()
    assert isinstance(c, CompiledPlan) and c.traced is g and len(g) == n
    assert c.graph.op_names() == ["mul", "exp", "add"]
    np.testing.assert_array_equal(c(x).numpy(), _naive(x).numpy())
    assert [s.name for s in c.stats[:4]] == ["cse", "fold", "simplify", "dce"]
    assert len(g.compile(passes=[]).graph) == n


def test_jit_passes_argument_and_custom_pass_run_once_per_signature():
    calls = []

    if "ch6_count" not in PASSES:

        @minitorch.register_pass("ch6_count")
        def count(graph):
            calls.append(len(graph))
            return 0

    f = minitorch.jit(lambda x: x.exp() * 1.0, passes=["ch6_count", "simplify", "dce"])
    x = minitorch.randn(2)
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), np.exp(x.numpy()))
    assert len(calls) == 2  # two rounds (the second finds the fixed point), one trace
    f(minitorch.randn(3))
    assert len(calls) == 4  # a new signature runs the passes again
    with pytest.raises(minitorch.OpError, match="unknown pass 'nope'"):
        minitorch.jit(lambda x: x + 1, passes=["nope"])(x)


def test_dumps_one_file_per_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("MINITORCH_DUMP_GRAPH", str(tmp_path))
    x = minitorch.randn(3)
    minitorch.jit(_naive).trace(x).compile()
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    files = sorted(p.name for p in folder.iterdir())
    assert files[:3] == ["00-traced.txt", "01-cse.txt", "02-fold.txt"]
    assert "plan.txt" in files and "04-dce.txt" in files
    assert "tanh" in (folder / "00-traced.txt").read_text()
    assert "tanh" not in (folder / "04-dce.txt").read_text()


def test_explain_shows_pass_statistics(capsys):
    minitorch.explain(_naive)(minitorch.randn(3))
    out = capsys.readouterr().out
    assert "Passes:" in out and "cse" in out and "dce" in out


def test_autograd_calls_interpret_and_parameters_stay_live():
    w = minitorch.tensor([1.0, 2.0], requires_grad=True)
    f = minitorch.jit(lambda x: (x * w).sum())
    x = minitorch.tensor([3.0, 4.0])
    f(x).backward()
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 4.0])
    w._data = minitorch.tensor([0.0, 1.0])._data  # what an optimizer step does
    with minitorch.no_grad():
        assert float(f(x).numpy()) == 4.0  # the plan reads the parameter's new data


def test_unsafe_rules_are_opt_in():
    x = minitorch.tensor([np.inf, np.nan, 1.0])
    safe = minitorch.jit(lambda x: x * 0.0)
    assert np.isnan(safe(x).numpy()[:2]).all()  # inf * 0 is NaN, as in eager
    fast = minitorch.jit(lambda x: x * 0.0, passes=["simplify_unsafe", "dce"])
    assert (fast(x).numpy() == 0).all()  # fast-math: the answer changed


def test_other_backends_and_cond_run_through_the_plan():
    x = minitorch.randn(2, 3)

    def f(x):
        y = minitorch.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, x)
        return (y + x).relu()

    want = f(x).numpy()
    c = minitorch.jit(f, fullgraph=True).trace(x).compile(backend="python")
    np.testing.assert_allclose(c(x).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(minitorch.jit(f)(x).numpy(), want, rtol=1e-6)
