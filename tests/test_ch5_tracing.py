"""Chapter 5 framework: jit plumbing, graph dumps, breaks, custom ops, autograd through graphs."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitorch
from minitorch import OpError, Spec
from minitorch.tracing import GraphBreakError, Tracer, trace_function


def mlp(x, w, b, act="relu"):
    h = x @ w + b
    return getattr(h, act)()


def test_text_and_dot_name_ops_specs_and_lines():
    x, w, b = minitorch.randn(2, 3), minitorch.randn(3, 4), minitorch.randn(4)
    g = minitorch.jit(mlp).trace(x, w, b)
    text = g.text()
    assert "graph mlp(%x: float32[2,3], %w: float32[3,4], %b: float32[4])" in text
    assert "matmul(%x, %w) : float32[2,4]  # test_ch5_tracing.py:" in text
    assert g.op_names() == ["matmul", "add", "relu"]
    dot = g.to_dot()
    assert dot.startswith('digraph "mlp"') and '"n0" -> ' in dot and dot.count("->") >= 6
    assert 'label="%x: float32[2,3]"' in dot
    assert g.verify() is g


def test_staged_form_and_backends():
    x, w, b = minitorch.randn(2, 3), minitorch.randn(3, 4), minitorch.randn(4)
    f = minitorch.jit(mlp)
    compiled = f.trace(x, w, b, act="tanh").compile()
    want = mlp(x, w, b, "tanh").numpy()
    np.testing.assert_allclose(compiled.run(x, w, b).numpy(), want, rtol=1e-6)
    slow = f.trace(x, w, b, act="tanh").compile(backend="python")
    np.testing.assert_allclose(slow.run(x, w, b).numpy(), want, rtol=1e-5)
    with pytest.raises(OpError, match=r"run: input 0 .*float32\[5,3\].*float32\[2,3\]"):
        compiled.run(minitorch.randn(5, 3), w, b)


def test_keywords_defaults_varargs_and_static_outputs():
    @minitorch.jit
    def f(*xs, scale=2.0):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return [total * scale, "done", (len(xs), total)]

    a, b = minitorch.ones(2), minitorch.ones(2)
    out = f(a, b, scale=3.0)
    assert out[1] == "done" and out[2][0] == 2
    np.testing.assert_allclose(out[0].numpy(), [6.0, 6.0])
    f(a, b, scale=3.0)
    assert f.trace_count == 1
    f(a, b, a, scale=3.0)
    assert f.recompiles == ["the number of arguments changed from 3 to 4"]


def test_nested_jit_inlines_and_closures_become_constants():
    w = minitorch.randn(3, 3)
    inner = minitorch.jit(lambda x: x @ w)
    outer = minitorch.jit(lambda x: inner(x).sum(axis=0))
    g = outer.trace(minitorch.randn(2, 3))
    assert g.op_names() == ["matmul", "sum"] and g.constants[0].value is w
    x = minitorch.randn(2, 3)
    np.testing.assert_allclose(outer(x).numpy(), (x.numpy() @ w.numpy()).sum(0), rtol=1e-5)


def test_dump_graph_env_and_debug(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINITORCH_DUMP_GRAPH", str(tmp_path))
    f = minitorch.jit(lambda x: x.exp() + 1, debug=True)
    f(minitorch.ones(2))
    printed = capsys.readouterr().out
    assert "exp(%x)" in printed
    files = sorted(p.name for p in tmp_path.iterdir() if p.is_file())  # dirs: ch6 passes
    assert len(files) == 2 and re.fullmatch(r"lambda_[0-9a-f]{10}_0\.dot", files[0])
    assert files[1] == files[0][:-3] + "txt" and "exp" in (tmp_path / files[1]).read_text()
    f(minitorch.ones(3))
    assert "retracing because x.shape changed from (2,) to (3,)" in capsys.readouterr().out


def test_breaks_rerun_python_each_call():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    jf = minitorch.jit(f)
    for v in (1.0, -1.0, 2.0):
        x = minitorch.full((3,), v)
        np.testing.assert_allclose(jf(x).numpy(), f(x).numpy())
    assert len(jf.cache) == 1
    info = minitorch.explain(jf)(minitorch.ones(3))
    assert (info.graph_count, info.graph_break_count) == (2, 1)
    assert "test_ch5_tracing.py:" in info.break_reasons[0].where
    plain = minitorch.explain(mlp)(minitorch.randn(1, 3), minitorch.randn(3, 2), minitorch.randn(2))
    assert (plain.graph_count, plain.graph_break_count, plain.op_count) == (1, 0, 3)


def test_item_float_and_numpy_are_breaks():
    def f(x):
        return x * float(x.max()) + x.sum().item()

    x = minitorch.tensor([1.0, 2.0])
    info = minitorch.explain(f)(x)
    assert info.graph_break_count == 2
    np.testing.assert_allclose(info.out.numpy(), f(x).numpy())
    with pytest.raises(GraphBreakError, match="float"):
        minitorch.jit(f, fullgraph=True)(x)


def test_cond_needs_operands_for_traced_values():
    def leaky(x, y):
        return minitorch.cond(x.sum() > 0, lambda a: a + y, lambda a: a, x)

    with pytest.raises(OpError, match="another trace"):
        minitorch.jit(leaky).trace(minitorch.ones(2), minitorch.ones(2))
    # eager cond runs one branch and traces the other, so mismatches show up before jit
    out = minitorch.cond(
        minitorch.tensor(True), lambda a: a + 1, lambda a: a * 0, minitorch.ones(2)
    )
    assert out.tolist() == [2.0, 2.0]
    with pytest.raises(OpError, match="different results: true gives float32\\[2\\], false gives"):
        minitorch.cond(minitorch.tensor(True), lambda a: a, lambda a: a.sum(), minitorch.ones(2))


def test_trace_function_without_data_and_proxy_metadata():
    g = trace_function(lambda a: a.T.reshape(-1), [Spec((2, 3), minitorch.float32)])
    assert [str(o.spec) for o in g.outputs] == ["float32[6]"]
    t = Tracer()
    p = t.input(Spec((2, 3), minitorch.float64))
    assert p.shape == (2, 3) and p.dtype == minitorch.float64 and len(p) == 2
    assert "Proxy(" in repr(p)
    with pytest.raises(GraphBreakError):
        bool(p.sum() > 0)  # no concrete inputs: a break cannot be evaluated


def test_custom_op_eager_traced_and_autograd():
    def infer(a, k):
        return Spec(a.shape[:-1] + (k,), a.dtype, a.device)

    def check(a, k):
        if k > a.shape[-1]:
            raise OpError("test_cumsum_head", f"k={k} is larger than the last dim {a.shape[-1]}")

    @minitorch.custom_op("test_cumsum_head", infer=infer, attrs={"k": 2}, check=check)
    def cumsum_head(a, k):
        return np.cumsum(a, axis=-1)[..., :k]

    x = minitorch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_allclose(cumsum_head(x).numpy(), [[1, 3], [4, 9]])
    g = minitorch.jit(lambda t: cumsum_head(t, k=3) * 2).trace(x)
    assert g.op_names() == ["test_cumsum_head", "mul"] and str(g.ops[0].spec) == "float32[2,3]"
    with pytest.raises(OpError, match="larger than"):
        cumsum_head(x, k=4)
    with pytest.raises(OpError, match="unknown attribute"):
        cumsum_head(x, j=1)

    @cumsum_head.vjp
    def _(grad, out, a, k):
        # d out[j] / d a[i] = 1 for i <= j < k: a reversed cumulative sum of the gradient
        n = a.shape[-1]
        mask = minitorch.tensor(np.triu(np.ones((n, k)), 0).astype(np.float32))
        return (grad @ mask.T,)

    xg = minitorch.tensor(x.numpy(), requires_grad=True)
    minitorch.jit(lambda t: cumsum_head(t).sum())(xg).backward()
    np.testing.assert_allclose(xg.grad.numpy(), [[2, 1, 0], [2, 1, 0]])


def test_jit_output_supports_backward():
    x = minitorch.randn(3, 2, requires_grad=True)
    f = minitorch.jit(lambda t: (t.tanh() * t).sum())
    f(x).backward()
    x2 = minitorch.tensor(x.numpy(), requires_grad=True)
    (x2.tanh() * x2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-6)
