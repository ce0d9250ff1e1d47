"""Every exportable op through ONNX and onnxruntime against eager, at several batch sizes.

Inputs, attributes and dtypes come from ``test_differential.CASES`` (every dtype
the registry admits, special values, size-0 and size-1 dims). Each example is
exported twice:

* at its own shapes: ``onnx.checker`` must accept the model and onnxruntime must
  give eager's answer;
* with dim 0 of the inputs whose dim 0 matches the first input's named
  ``"batch"``: export either refuses with an ``OpError`` naming ``onnx.export``
  or gives eager's answer at batch sizes 1, n and n + 3 too (where eager accepts
  them). A model that runs but answers differently at another batch is the bug
  this hunts (a size baked in).

A deeper hunt: ``MINITORCH_DIFF_SCALE=20 pytest tests/test_differential_onnx.py``.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_differential import _SCALE, CASES, FRAMEWORK_OPS

import minitorch as mt
from minitorch.core.registry import OPS
from minitorch.onnx import export

EXPORTABLE = sorted(n for n in FRAMEWORK_OPS if OPS[n].onnx is not None)
PAIRS = [(n, d) for n in EXPORTABLE for d in CASES[n].dtypes]  # every dtype each op admits
TOL = {"float32": 2e-5, "float64": 1e-12}
SESSION = ort.SessionOptions()
SESSION.intra_op_num_threads = SESSION.inter_op_num_threads = 1
SESSION.log_severity_level = 3  # output-shape warnings are checked below, not printed


def run_onnx(model, arrays):
    sess = ort.InferenceSession(
        model.SerializeToString(), SESSION, providers=["CPUExecutionProvider"]
    )
    return sess.run(None, {f"input{k}": a for k, a in enumerate(arrays)})


def eager(name, arrays, attrs):
    try:
        with np.errstate(all="ignore"):
            return mt.dispatch(name, *[mt.tensor(a, dtype=a.dtype.name) for a in arrays], **attrs)
    except mt.OpError:
        return None


def same(got, want: mt.Tensor, label):
    want = want.numpy()
    assert got.shape == want.shape, f"{label}: shape {got.shape}, eager {want.shape}"
    assert got.dtype == want.dtype, f"{label}: dtype {got.dtype}, eager {want.dtype}"
    if want.dtype.kind == "f":
        tol = TOL[want.dtype.name]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=label)
    else:
        np.testing.assert_array_equal(got, want, err_msg=label)


def redraw(arrays, batched, size, rng):
    """The inputs with dim 0 of the ``batched`` ones at ``size`` (fresh finite values)."""
    out = []
    for k, a in enumerate(arrays):
        if k not in batched:
            out.append(a)
            continue
        shape = (size,) + a.shape[1:]
        if a.dtype == np.bool_:
            out.append(rng.random(shape) < 0.5)
        elif a.dtype.kind == "i":
            out.append(rng.integers(1, 4, shape).astype(a.dtype))
        else:  # positive: in every op's domain (log, sqrt, pow)
            out.append((rng.random(shape) + 0.5).astype(a.dtype))
    return out


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("name, dtype", PAIRS)
def test_onnx_matches_eager(name, dtype):
    @settings(
        max_examples=6 * _SCALE,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def check(data):
        arrays, attrs, _ = CASES[name].build(data.draw, dtype, False)
        arrays = [np.ascontiguousarray(a) for a in arrays]
        want = eager(name, arrays, attrs)
        if want is None:
            return  # eager refuses these inputs (test_differential checks that)
        label = f"{name} {[f'{a.dtype}{list(a.shape)}' for a in arrays]} {attrs}"

        def fn(*xs):
            return mt.dispatch(name, *xs, **attrs)

        xs = [mt.tensor(a, dtype=a.dtype.name) for a in arrays]
        (got,) = run_onnx(export(fn, tuple(xs)), arrays)
        same(got, want, label)

        if not arrays[0].ndim:
            return
        n = arrays[0].shape[0]
        batched = [k for k, a in enumerate(arrays) if a.ndim and a.shape[0] == n]
        try:
            model = export(fn, tuple(xs), dynamic_axes={k: {0: "batch"} for k in batched})
        except mt.OpError as e:
            assert e.op == "onnx.export", f"{label}: {e}"
            return
        rng = np.random.default_rng(n)
        for size in (1, n, n + 3):
            at = redraw(arrays, batched, size, rng)
            want = eager(name, at, attrs)
            if want is not None:
                (got,) = run_onnx(model, at)
                same(got, want, f"{label} at batch {size}")

    check()


# ---------------------------------------------------------------- issue 40: what a result may hold
# Generated results: tensors (computed, constant, the input itself) and Python values nested
# in tuples, lists and dicts. Export gives a model whose outputs are eager's tensors in
# order, or refuses (OpError "onnx.export") exactly when the result holds a non-tensor or
# no tensor at all: nothing is dropped silently, and no model that onnxruntime cannot load.

LEAVES = {
    "computed": lambda x: x * 2.0 + 1.0,
    "reduced": lambda x: x.sum(axis=0),
    "constant": lambda x: mt.ones(2),
    "the input": lambda x: x,
    "float": lambda x: 3.0,
    "int": lambda x: 2,
    "None": lambda x: None,
    "str": lambda x: "logits",
}


def _draw_result(rng, depth=0):
    """A result tree: ("leaf", name) or (container, [subtrees])."""
    if depth == 2 or rng.random() < 0.4:
        return "leaf", str(rng.choice(list(LEAVES)))
    kind = str(rng.choice(["tuple", "list", "dict"]))
    return kind, [_draw_result(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))]


def _build(tree, x):
    kind, body = tree
    if kind == "leaf":
        return LEAVES[body](x)
    parts = [_build(t, x) for t in body]
    if kind == "dict":
        return {f"k{i}": p for i, p in enumerate(parts)}
    return parts if kind == "list" else tuple(parts)


def _leaves(value):
    """Every leaf of a built result, depth first (the order of the exported outputs)."""
    if isinstance(value, (tuple, list)):
        return [v for part in value for v in _leaves(part)]
    if isinstance(value, dict):
        return [v for part in value.values() for v in _leaves(part)]
    return [value]


@pytest.mark.parametrize("seed", range(4))
def test_onnx_export_keeps_every_output_or_refuses(seed):
    rng = np.random.default_rng(400 + seed)
    x = mt.tensor(rng.standard_normal((3, 2)).astype(np.float32))
    kinds = set()
    for _ in range(12):
        tree = _draw_result(rng)
        want = _leaves(_build(tree, x))
        tensors_only = bool(want) and all(isinstance(v, mt.Tensor) for v in want)
        try:
            model = export(lambda t, tree=tree: _build(tree, t), x)
        except mt.OpError as e:
            assert e.op == "onnx.export" and not tensors_only, f"{tree}: {e}"
            kinds.add("refused")
            continue
        assert tensors_only, f"{tree}: exported, but the result holds {want!r:.80}"
        got = run_onnx(model, [x.numpy()])
        assert len(got) == len(want), tree
        for g, w in zip(got, want):
            same(g, w, str(tree))
        kinds.add("exported")
    assert kinds == {"exported", "refused"}, kinds
