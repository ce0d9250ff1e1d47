"""Chapter 7 code generation: templates agree with the registry, the cache survives a process,
compiled+fused programs equal eager, dumps and explain say what ran."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import minitorch as mt
from minitorch.core.registry import OPS, get_op
from minitorch.fusion import runtime
from minitorch.passes import CompileOptions

FUSE = CompileOptions(fuse=True)
FAST = CompileOptions(fuse=True, fast_math=True)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py


SPECIAL = [0.0, -0.0, 1.5, -2.0, 3.0, np.inf, -np.inf, np.nan, 1e-30]


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items() if op.expr is not None))
def test_every_template_computes_the_registry_scalar(name):
    """``OpDef.expr`` is the op's ``scalar`` written inline: same value on hard inputs, compiled."""
    op = get_op(name)
    if name == "cast":
        return
    n = op.num_inputs
    names = [f"a{k}" for k in range(n)]
    src = (
        f"def f({', '.join(names)}):\n    return {op.expr.format(*names, zero='0.0', one='1.0')}\n"
    )
    ns = {"math": __import__("math"), "np": np}
    exec(src, ns)
    fn = numba.njit(error_model="numpy")(ns["f"])  # as the generated kernels compile it
    rng = np.random.default_rng(0)
    for _ in range(60):
        args = [float(rng.choice(SPECIAL)) for _ in range(n)]
        if name == "where":
            args[0] = bool(args[0])
        with np.errstate(all="ignore"):
            try:
                want = op.scalar(*args)
            except (ValueError, ZeroDivisionError):
                continue
            got = fn(*args)
        assert np.isclose(float(got), float(want), equal_nan=True), (name, args, got, want)


def _programs():
    def chain(x, y):
        return ((x * y + 1.0).relu() - y / 3.0) * 0.5

    def reduce_epilogue(x, y):
        return (x * 2.0 - y).sum(axis=1) * 0.5 + 1.0

    def mlp(x, w, b):
        return (x @ w + b).relu()

    def softmax(x, y):
        e = (x - x.max(axis=1, keepdims=True)).exp()
        return e / e.sum(axis=1, keepdims=True)

    return [chain, reduce_epilogue, softmax]


@pytest.mark.parametrize("fn", _programs(), ids=lambda f: f.__name__)
def test_compiled_and_fused_equals_eager_on_views(fn):
    rng = np.random.default_rng(1)
    x = mt.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    y = mt.tensor(rng.standard_normal((4, 5)).astype(np.float32)).T  # a transposed view
    jf = mt.jit(fn, options=FUSE)
    np.testing.assert_allclose(jf(x, y).numpy(), fn(x, y).numpy(), rtol=1e-5, atol=1e-5)


def test_epilogue_and_explain_and_dump(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINITORCH_DUMP_GRAPH", str(tmp_path / "dump"))
    rng = np.random.default_rng(2)
    a, w, b = (mt.tensor(rng.standard_normal(s).astype(np.float32)) for s in [(3, 4), (4, 5), (5,)])

    def layer(a, w, b):
        return (a @ w + b).relu()

    out = mt.explain(mt.jit(layer, options=FUSE))(a, w, b)
    text = capsys.readouterr().out
    assert "Kernels:" in text and "generated epilogue kernel" in text, text
    np.testing.assert_allclose(out.out.numpy(), layer(a, w, b).numpy(), rtol=1e-5, atol=1e-5)
    dumped = [p for p in (tmp_path / "dump").rglob("kernels/*.py")]
    assert dumped and "@njit" in dumped[0].read_text()


def test_cost_model_keeps_libm_ops_on_numpy_and_says_why(capsys):
    x = mt.tensor(np.linspace(-3, 3, 50, dtype=np.float32))
    f = lambda x: (x.exp() * 0.5).tanh() + x  # noqa: E731
    mt.explain(mt.jit(f, options=FUSE))(x)
    text = capsys.readouterr().out
    assert "cost model" in text and "exp" in text, text
    g = lambda x: (x.exp() * 0.5 + 1.0).log() + x  # noqa: E731  fast_math: exp vectorises, log not
    mt.explain(mt.jit(g, options=FAST))(x)
    assert "cost model: log" in capsys.readouterr().out
    np.testing.assert_allclose(
        mt.jit(f, options=FUSE)(x).numpy(), f(x).numpy(), rtol=1e-6, atol=1e-6
    )


def test_second_process_compiles_nothing(tmp_path):
    """The kernel cache is real files: a new process loads Numba's machine code from disk."""
    script = textwrap.dedent(
        """
        import numpy as np, minitorch as mt
        from minitorch.fusion import cache
        mt.set_mode("reference")
        f = lambda x, y: ((x - y) * 2.0).relu() + y
        x = mt.tensor(np.ones((4, 3), np.float32))
        mt.jit(f, options=mt.CompileOptions(fuse=True))(x, x)
        print(cache.STATS["compiled"], cache.STATS["loaded"])
        """
    )
    env = dict(os.environ, MINITORCH_CACHE_DIR=str(tmp_path / "k"), PYTHONPATH=ROOT)
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first = [int(v) for v in runs[0].stdout.split()]
    second = [int(v) for v in runs[1].stdout.split()]
    assert first[0] >= 1 and second == [0, first[0]], (first, second)
    assert list((tmp_path / "k" / "kernels").glob("mt_*.py"))


def test_unhandled_group_runs_on_numpy_with_a_reason():
    """A structure the generator refuses still gives eager's answer."""
    from minitorch.core.registry import Spec
    from minitorch.tracing.graph import Graph
    from minitorch.tracing.tracer import trace_function

    f32 = np.dtype("float32")
    sub = trace_function(lambda x: x.sum(axis=0) + x.max(axis=0), [Spec((3, 4), f32)])
    g = Graph("outer")
    node = g.add_node("fused", [g.add_input(Spec((3, 4), f32))],
                      {"graph": sub, "kind": "reduce", "name": "two_folds"}, sub.outputs[0].spec)  # fmt: skip
    k = runtime.make_kernel(node)
    assert "one sum/mean/max/min" in k.reason
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = k(mt.tensor(x)._data, out=node.spec).to_numpy()
    np.testing.assert_allclose(got, x.sum(0) + x.max(0))
    assert get_op("exp").transcendental and get_op("tanh").vector == "vtanh"


def test_views_of_inputs_fold_into_strides_and_mid_chain_views_refuse():
    rng = np.random.default_rng(3)
    x = mt.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    b = mt.tensor(rng.standard_normal((4,)).astype(np.float32))
    cases = [
        (lambda x, b: (x.T + b).relu() * 2.0, "generated"),
        (lambda x, b: (x.reshape(6, 4) * b - 1.0).relu(), "generated"),
        (lambda x, b: ((x[1:3] * 2.0) + b[:1]).abs(), "generated"),
        (lambda x, b: ((x * 2.0).T + b).relu(), "computed inside the group"),
    ]
    for f, how in cases:
        jf = mt.jit(f, options=FUSE)
        np.testing.assert_allclose(jf(x, b).numpy(), f(x, b).numpy(), rtol=1e-5, atol=1e-6)
        node = next(n for n in jf.trace(x, b).compile(options=FUSE).graph.nodes if n.op == "fused")
        runtime.make_kernel(node)
        assert how in runtime.DECISIONS[id(node)][1], runtime.DECISIONS[id(node)]


def test_vectorised_exp_tanh_sigmoid_match_float64_within_a_few_ulp():
    from numba import njit

    from minitorch.fusion import vecmath

    @njit
    def apply(a, out, which):
        for i in range(a.size):
            x = a[i]
            out[i] = (
                vecmath.vexp(x)
                if which == 0
                else vecmath.vtanh(x)
                if which == 1
                else vecmath.vsigmoid(x)
            )

    rng = np.random.default_rng(0)
    edge = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 88.7, 88.8, -87.5, -100.0, -104.0]
    a = np.concatenate([edge, rng.uniform(-110, 90, 20000), rng.uniform(-1, 1, 20000)])
    a = a.astype(np.float32)
    exact = {
        0: np.exp(a.astype(np.float64)),
        1: np.tanh(a.astype(np.float64)),
        2: 1 / (1 + np.exp(-a.astype(np.float64))),
    }
    for which, want64 in exact.items():
        got = np.empty_like(a)
        apply(a, got, which)
        with np.errstate(over="ignore", under="ignore"):
            want = want64.astype(np.float32)  # inf above float32's range, subnormals below
        same = np.isnan(got) == np.isnan(want)
        assert same.all(), a[~same]
        inf = np.isinf(want)
        assert np.array_equal(got[inf], want[inf]), a[inf]
        ok = np.isfinite(want)
        # relative error, and absolute below float32's smallest normal (subnormal results)
        err = np.abs(got[ok].astype(np.float64) - want[ok])
        bad = err > 5e-7 * np.abs(want[ok]) + np.finfo(np.float32).tiny
        assert not bad.any(), (which, a[ok][bad][:5], got[ok][bad][:5], want[ok][bad][:5])
        assert np.array_equal(np.signbit(got[a == 0]), np.signbit(want[a == 0])) or which != 1


def test_fast_math_generates_float32_exp_tanh_groups_and_float64_stay_on_numpy():
    def f(x):
        return (x.exp() * 0.5).tanh() + x.sigmoid()

    for dtype, how in ((np.float32, "generated"), (np.float64, "cost model")):
        x = mt.tensor(np.linspace(-5, 5, 101).astype(dtype))
        jf = mt.jit(f, options=FAST)
        np.testing.assert_allclose(jf(x).numpy(), f(x).numpy(), rtol=2e-6, atol=1e-7)
        node = next(n for n in jf.trace(x).compile(options=FAST).graph.nodes if n.op == "fused")
        runtime.make_kernel(node)
        assert how in runtime.DECISIONS[id(node)][1]
