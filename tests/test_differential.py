"""Every registry op on every backend against numpy, forward and backward.

``CASES`` holds one entry per registered op: how to draw its inputs and
attributes, which dtypes it accepts, and numpy's answer. The tests iterate the
registry, so a new op without an entry fails ``test_every_op_has_a_case``.
Inputs come from ``strategies.py``: size-0 and size-1 dims, 0-d tensors,
broadcasting, negative-step, strided, offset, transposed and stride-0 views,
and the special values ±0, ±inf and NaN. Where numpy raises (a max over an
empty axis), the backend must raise an ``OpError``. Gradients are checked
against central finite differences of the numpy answer in float64.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
from backends_util import BACKENDS, on
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import FLOATS, laid_out, shapes, values

import minitorch as mt
import minitorch.cuda.backend  # noqa: F401  (registers the cuda kernels)
import minitorch.fast.backend  # noqa: F401  (registers the numba kernels)
from minitorch.core.registry import OPS, OpKind, Spec
from minitorch.transformer.ops import gelu_ref, layer_norm_ref

ALL = ["float32", "float64", "int64", "bool"]
NUMERIC = ["float32", "float64", "int64"]


@dataclass
class Case:
    build: Callable  # build(draw, dtype, smooth) -> (arrays, attrs, numpy answer)
    dtypes: list = field(default_factory=lambda: FLOATS)
    grad: bool = True  # check the backward rule too


def f64(x):
    return x.astype(np.float64) if x.dtype.kind == "f" else x


def _arr(draw, shape, dtype, smooth, domain=None, shift=0.0, special=True):
    """Smooth mode (gradients): distinct float64 values away from 0 and kinks."""
    if smooth:
        a = np.asarray(draw(values(shape, "float64", domain="unique")) + shift)
        return np.asarray(np.abs(a) + 0.3) if domain == "positive" else a
    return draw(values(shape, dtype, special=special, domain=domain))


def unary(fn, domain=None, dtypes=FLOATS, grad=True, float_result=False):
    def build(draw, dtype, smooth):
        a = _arr(draw, draw(shapes()), dtype, smooth, domain)
        cast = (lambda a: a.astype(np.float64)) if float_result else f64
        return [a], {}, lambda a: fn(cast(a))

    return Case(build, dtypes, grad)


def binary(fn, domain_b=None, dtypes=FLOATS, grad=True):
    def build(draw, dtype, smooth):
        sa, sb = draw(BROADCASTABLE)
        pow_ = domain_b == "pow"
        a = _arr(draw, sa, dtype, smooth, "positive" if pow_ and smooth else None)
        if dtype == "int64" and pow_:
            b = draw(values(sb, dtype, domain="positive"))  # int ** negative int is refused
        else:
            b = _arr(draw, sb, dtype, smooth, None if pow_ else domain_b, shift=0.05)
        return [a, b], {}, lambda a, b: fn(f64(a), f64(b))

    return Case(build, dtypes, grad)


BROADCASTABLE = st.one_of(
    shapes().map(lambda s: (s, s)),
    hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, min_side=0, max_side=3).map(
        lambda r: r.input_shapes
    ),
)


def _where(draw, dtype, smooth):
    sc, sa = draw(BROADCASTABLE)
    c = draw(values(sc, "bool"))
    a = _arr(draw, sa, dtype, smooth)
    b = _arr(draw, sc, dtype, smooth, shift=0.05)
    return [c, a, b], {}, lambda c, a, b: np.where(c, f64(a), f64(b))


def _axis(draw, ndim):
    kinds = ["none", "tuple", "empty"] + (["int"] if ndim else ["zero"])
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None
    if kind == "empty":
        return ()
    if kind == "zero":
        return draw(st.sampled_from([0, -1]))
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    return tuple(draw(st.sets(st.integers(0, ndim - 1), max_size=ndim))) if ndim else ()


def reduction(fn, dtypes=ALL, grad=True):
    def build(draw, dtype, smooth):
        a = _arr(draw, draw(shapes(min_side=1 if smooth else 0)), dtype, smooth)
        axis, keep = _axis(draw, a.ndim), draw(st.booleans())

        def ref(a):
            if axis is None or a.ndim == 0:
                ax = None if axis is None else ()
            else:
                ax = tuple(int(d) % a.ndim for d in np.atleast_1d(np.asarray(axis, dtype=int)))
            with np.errstate(all="ignore"):
                return fn(f64(a), axis=ax, keepdims=keep)

        return [a], {"axis": axis, "keepdims": keep}, ref

    return Case(build, dtypes, grad)


def _argmax(draw, dtype, smooth):
    a = _arr(draw, draw(shapes(min_dims=1)), dtype, smooth)
    axis, keep = draw(st.integers(-a.ndim, a.ndim - 1)), draw(st.booleans())
    return [a], {"axis": axis, "keepdims": keep}, lambda a: np.argmax(a, axis=axis, keepdims=keep)


def _cast(draw, dtype, smooth):
    target = "float64" if smooth else draw(st.sampled_from(ALL))
    a = _arr(draw, draw(shapes()), dtype, smooth)
    if target in ("int64",) and a.dtype.kind == "f":
        a = np.nan_to_num(
            a, nan=1.0, posinf=7.0, neginf=-7.0
        )  # float -> int of inf/NaN is undefined
    return [a], {"dtype": target}, lambda a: a.astype(target)


def _permute(draw, dtype, smooth):
    a = _arr(draw, draw(shapes()), dtype, smooth)
    order = tuple(draw(st.permutations(range(a.ndim))))
    return [a], {"order": order}, lambda a: np.transpose(a, order)


def _reshape(draw, dtype, smooth):
    a = _arr(draw, draw(shapes()), dtype, smooth)
    shape = draw(
        st.sampled_from(
            [(-1,), a.shape[::-1], (1,) + a.shape, (a.size,), a.shape + (1,)]
            + ([(a.shape[0], -1)] if a.ndim and a.shape[0] else [])
        )
    )
    return [a], {"shape": shape}, lambda a: np.reshape(a, shape)


def _expand(draw, dtype, smooth):
    a = _arr(draw, draw(shapes(max_side=2)), dtype, smooth)
    lead = tuple(draw(st.lists(st.integers(0, 2), max_size=1)))
    shape = lead + tuple(draw(st.integers(1, 3)) if n == 1 else n for n in a.shape)
    return [a], {"shape": shape}, lambda a: np.broadcast_to(a, shape)


def _key(draw, shape):
    key = []
    for n in shape[: draw(st.integers(0, len(shape)))]:
        if n and draw(st.booleans()):
            key.append(draw(st.integers(-n, n - 1)))
        else:
            step = draw(st.sampled_from([1, 2, -1, -2]))
            lo, hi = (draw(st.one_of(st.none(), st.integers(-n - 1, n + 1))) for _ in "ab")
            key.append(slice(lo, hi, step))
    return tuple(key)


def _getitem(draw, dtype, smooth):
    a = _arr(draw, draw(shapes()), dtype, smooth)
    key = _key(draw, a.shape)
    return [a], {"key": key}, lambda a: a[key]


def _pad_slice(draw, dtype, smooth):
    shape = draw(shapes())
    key = _key(draw, shape)
    g = _arr(draw, np.zeros(shape)[key].shape, dtype, smooth)

    def ref(g):
        out = np.zeros(shape, f64(g).dtype)
        out[key] = g
        return out

    return [g], {"key": key, "shape": shape}, ref


def _matmul(draw, dtype, smooth):
    n, k, m = (draw(st.integers(0 if not smooth else 1, 3)) for _ in "nkm")
    batch_a, batch_b = draw(st.sampled_from([((), ()), ((2,), ()), ((1,), (2,)), ((2,), (2,))]))
    a = _arr(draw, batch_a + (n, k), dtype, smooth)
    b = _arr(draw, batch_b + (k, m), dtype, smooth, shift=0.05)
    return [a, b], {}, lambda a, b: np.matmul(f64(a), f64(b))


def conv_ref(x, w, stride, padding):
    x = np.pad(f64(x), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, :, i, j] = np.tensordot(patch, f64(w), axes=([1, 2, 3], [1, 2, 3]))
    return out


def adjoint(linear, shape, g):
    """``J^T g`` of a linear map ``linear`` on arrays of ``shape``, built from the basis."""
    out = np.zeros(int(np.prod(shape)))
    for i in range(out.size):
        e = np.zeros(out.size)
        e[i] = 1.0
        out[i] = np.sum(linear(e.reshape(shape)) * g)
    return out.reshape(shape)


def _conv_shapes(draw):
    n, c, o = (draw(st.integers(1, 2)) for _ in "nco")
    kh, kw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    stride, padding = draw(st.integers(1, 2)), draw(st.integers(0, 1))
    h, w = (
        draw(st.integers(max(kh - 2 * padding, 1), 4)),
        draw(st.integers(max(kw - 2 * padding, 1), 4)),
    )
    return (n, c, h, w), (o, c, kh, kw), stride, padding


def _conv2d(draw, dtype, smooth):
    xs, ws, stride, padding = _conv_shapes(draw)
    # finite values only: with inf/NaN, 0 * inf may or may not be computed (the Numba
    # kernel skips the zero padding, BLAS may skip zeros), so backends differ; left open
    x = _arr(draw, xs, dtype, smooth, special=False)
    w = _arr(draw, ws, dtype, smooth, shift=0.05, special=False)
    return (
        [x, w],
        {"stride": stride, "padding": padding},
        lambda x, w: conv_ref(x, w, stride, padding),
    )


def _conv_grad_input(draw, dtype, smooth):
    xs, ws, stride, padding = _conv_shapes(draw)
    w = _arr(draw, ws, dtype, smooth, special=False)
    g = _arr(
        draw,
        conv_ref(np.zeros(xs), np.zeros(ws), stride, padding).shape,
        dtype,
        smooth,
        special=False,
    )
    attrs = {"stride": stride, "padding": padding, "input_hw": xs[2:]}
    return (
        [g, w],
        attrs,
        lambda g, w: adjoint(lambda x: conv_ref(x, w, stride, padding), xs, f64(g)),
    )


def _conv_grad_weight(draw, dtype, smooth):
    xs, ws, stride, padding = _conv_shapes(draw)
    x = _arr(draw, xs, dtype, smooth, special=False)
    g = _arr(
        draw,
        conv_ref(np.zeros(xs), np.zeros(ws), stride, padding).shape,
        dtype,
        smooth,
        special=False,
    )
    attrs = {"stride": stride, "padding": padding, "kernel_hw": ws[2:]}
    return (
        [x, g],
        attrs,
        lambda x, g: adjoint(lambda w: conv_ref(x, w, stride, padding), ws, f64(g)),
    )


def pool_ref(x, k, s, fold):
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = fold(
                x[:, :, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]], axis=(2, 3)
            )
    return out


def _pool_shapes(draw):
    k = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    shape = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 2)),
        draw(st.integers(k[0], 4)),
        draw(st.integers(k[1], 4)),
    )
    return shape, k, s


def pool(fold):
    def build(draw, dtype, smooth):
        shape, k, s = _pool_shapes(draw)
        x = _arr(draw, shape, dtype, smooth, domain="unique")
        return [x], {"kernel_size": k, "stride": s}, lambda x: pool_ref(f64(x), k, s, fold)

    return build


def pool_grad(fold):
    def build(draw, dtype, smooth):
        shape, k, s = _pool_shapes(draw)
        x = draw(values(shape, dtype, domain="unique"))  # distinct: one maximum per window
        g = _arr(draw, pool_ref(np.zeros(shape), k, s, np.max).shape, dtype, smooth, special=False)

        def ref(g, x):
            if fold is np.mean:
                return adjoint(lambda v: pool_ref(v, k, s, np.mean), shape, f64(g))
            out = np.zeros(shape)
            for i in range(g.shape[2]):
                for j in range(g.shape[3]):
                    win = x[:, :, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]]
                    flat = win.reshape(win.shape[0], win.shape[1], -1).argmax(axis=2)
                    for a in range(shape[0]):
                        for b in range(shape[1]):
                            di, dj = divmod(int(flat[a, b]), k[1])
                            out[a, b, i * s[0] + di, j * s[1] + dj] += g[a, b, i, j]
            return out

        return [g, x], {"kernel_size": k, "stride": s}, ref

    return build


def _softmax_ref(x, axis):
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _lse_ref(x, axis, keepdims):
    with np.errstate(all="ignore"):
        m = x.max(axis=axis, keepdims=True)
        shift = np.where(np.isfinite(m), m, 0)
        r = np.log(np.exp(x - shift).sum(axis=axis, keepdims=True)) + shift
    return r if keepdims else np.squeeze(r, axis=axis)


def _softmax(draw, dtype, smooth):
    a = _arr(draw, draw(shapes(min_dims=1, min_side=1)), dtype, smooth)
    axis = draw(st.integers(-a.ndim, a.ndim - 1))
    return [a], {"axis": axis}, lambda a: _softmax_ref(f64(a), axis)


def _logsumexp(draw, dtype, smooth):
    a = _arr(draw, draw(shapes(min_dims=1, min_side=1)), dtype, smooth)
    axis, keep = draw(st.integers(-a.ndim, a.ndim - 1)), draw(st.booleans())
    return [a], {"axis": axis, "keepdims": keep}, lambda a: _lse_ref(f64(a), axis, keep)


def _embedding(draw, dtype, smooth):
    v, c = draw(st.integers(1, 4)), draw(st.integers(0 if not smooth else 1, 3))
    w = _arr(draw, (v, c), dtype, smooth)
    ids = draw(hnp.arrays(np.int64, draw(shapes(max_dims=2)), elements=st.integers(0, v - 1)))
    return [w, ids], {}, lambda w, ids: f64(w)[ids]


def _scatter_ref(g, ids, v):
    out = np.zeros((v, g.shape[-1]))
    np.add.at(out, ids.reshape(-1), f64(g).reshape(-1, g.shape[-1]))
    return out


def _embedding_grad(draw, dtype, smooth):
    v, c = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    ids = draw(hnp.arrays(np.int64, draw(shapes(max_dims=2)), elements=st.integers(0, v - 1)))
    g = _arr(draw, ids.shape + (c,), dtype, smooth, special=False)
    return [g, ids], {"num_embeddings": v}, lambda g, ids: _scatter_ref(g, ids, v)


def _index_check(draw, dtype, smooth):
    size = draw(st.integers(1, 4))
    ids = draw(hnp.arrays(np.int64, draw(shapes(max_dims=2)), elements=st.integers(-1, size)))

    def ref(ids):
        if ids.size and (ids.min() < 0 or ids.max() >= size):
            raise IndexError(f"an id outside [0, {size})")
        return ids

    return [ids], {"size": size}, ref


def _layer_norm(draw, dtype, smooth):
    shape = draw(shapes(min_dims=1, min_side=1))
    x = _arr(draw, shape, dtype, smooth, domain="unique" if smooth else None)
    w = _arr(draw, shape[-1:], dtype, smooth, shift=0.05)
    b = _arr(draw, shape[-1:], dtype, smooth, shift=0.1)
    eps = draw(st.sampled_from([1e-5, 0.1]))
    return [x, w, b], {"eps": eps}, lambda x, w, b: layer_norm_ref(f64(x), f64(w), f64(b), eps)


def _causal_mask(draw, dtype, smooth):
    lead = draw(shapes(max_dims=2))
    tk = draw(st.integers(1, 4))
    tq = draw(st.integers(1, tk))
    x = _arr(draw, lead + (tq, tk), dtype, smooth)
    fill = 0.0 if smooth else draw(st.sampled_from([-math.inf, 0.0, -1e9]))
    keep = np.arange(tk)[None, :] <= np.arange(tq)[:, None] + (tk - tq)
    return [x], {"fill": fill}, lambda x: np.where(keep, f64(x), fill)


def _sigmoid(x):
    with np.errstate(all="ignore"):
        return 1 / (1 + np.exp(-x))


def _ign(fn):
    def wrapped(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    return wrapped


def _plan_only(draw, dtype, smooth):
    # chapter 12's halves of an all-reduce run only in compiled plans: eager refuses them
    return [_arr(draw, draw(shapes()), dtype, smooth)], {"tag": 0}, lambda a: a


CASES = {
    "neg": unary(np.negative, dtypes=NUMERIC),
    "abs": unary(np.abs, dtypes=ALL),
    "exp": unary(_ign(np.exp), dtypes=ALL, float_result=True),
    "log": unary(_ign(np.log), domain="positive", dtypes=ALL, float_result=True),
    "sqrt": unary(_ign(np.sqrt), domain="positive", dtypes=ALL, float_result=True),
    "recip": unary(_ign(lambda x: 1.0 / x), domain="nonzero", dtypes=ALL, float_result=True),
    "tanh": unary(np.tanh, dtypes=ALL, float_result=True),
    "sigmoid": unary(_sigmoid, dtypes=ALL, float_result=True),
    "relu": unary(lambda x: np.maximum(x, 0), dtypes=ALL),
    "cast": Case(_cast, ALL),
    "add": binary(np.add, dtypes=ALL),
    "sub": binary(np.subtract, dtypes=NUMERIC),
    "mul": binary(np.multiply, dtypes=ALL),
    "div": binary(_ign(np.divide), domain_b="nonzero", dtypes=ALL),
    "pow": binary(_ign(np.power), domain_b="pow", dtypes=NUMERIC),
    "maximum": binary(np.maximum, dtypes=ALL),
    "minimum": binary(np.minimum, dtypes=ALL),
    "eq": binary(np.equal, dtypes=ALL, grad=False),
    "ne": binary(np.not_equal, dtypes=ALL, grad=False),
    "lt": binary(np.less, dtypes=ALL, grad=False),
    "le": binary(np.less_equal, dtypes=ALL, grad=False),
    "gt": binary(np.greater, dtypes=ALL, grad=False),
    "ge": binary(np.greater_equal, dtypes=ALL, grad=False),
    "where": Case(_where, ALL),
    "sum": reduction(np.sum),
    "max": reduction(np.max),
    "min": reduction(np.min),
    "mean": reduction(np.mean),
    "argmax": Case(_argmax, ALL, grad=False),
    "permute": Case(_permute, ALL),
    "reshape": Case(_reshape, ALL),
    "expand": Case(_expand, ALL),
    "getitem": Case(_getitem, ALL),
    "contiguous": Case(
        lambda draw, dtype, smooth: ([_arr(draw, draw(shapes()), dtype, smooth)], {}, lambda a: a),
        ALL,
    ),
    "detach": Case(  # jit's gradient stop (chapter 5): the same values, no gradient
        lambda draw, dtype, smooth: ([_arr(draw, draw(shapes()), dtype, smooth)], {}, lambda a: a),
        ALL,
        grad=False,
    ),
    "matmul": Case(_matmul, ALL),
    "conv2d": Case(_conv2d),
    "conv2d_grad_input": Case(_conv_grad_input, grad=False),
    "conv2d_grad_weight": Case(_conv_grad_weight, grad=False),
    "max_pool2d": Case(pool(np.max)),
    "avg_pool2d": Case(pool(np.mean)),
    "max_pool2d_grad": Case(pool_grad(np.max), grad=False),
    "avg_pool2d_grad": Case(pool_grad(np.mean), grad=False),
    "softmax": Case(_softmax),
    "logsumexp": Case(_logsumexp),
    "pad_slice": Case(_pad_slice, ALL),
    "index_check": Case(_index_check, ["int64"], grad=False),
    # chapter 12: one process is one rank, so the average over the ranks is the input
    "all_reduce": unary(lambda a: a, dtypes=["float32", "float64"]),
    "all_reduce_start": Case(_plan_only, ["float32", "float64"], grad=False),
    "all_reduce_wait": Case(_plan_only, ["float32", "float64"], grad=False),
    # chapter 11
    "embedding": Case(_embedding),
    "embedding_grad": Case(_embedding_grad),
    "layer_norm": Case(_layer_norm),
    "gelu": unary(gelu_ref, dtypes=NUMERIC, float_result=True),
    "causal_mask": Case(_causal_mask),
}

# (op, backend) pairs with no kernel: the call must refuse with an OpError naming the op.
NO_KERNEL = {
    ("conv2d", "python"),
    ("conv2d_grad_input", "python"),
    ("conv2d_grad_weight", "python"),
    ("max_pool2d", "python"),
    ("avg_pool2d", "python"),
    ("max_pool2d_grad", "python"),
    ("avg_pool2d_grad", "python"),
    ("softmax", "python"),
    ("logsumexp", "python"),
    ("all_reduce", "cuda"),  # MPI reads host memory: all-reduce refuses device tensors
}  # every other op has a cuda kernel (tests/test_cuda_on_device.py runs each one)
# chapter 12's halves of an all-reduce: plan-only, no backend kernel
NO_KERNEL |= {(op, b) for op in ("all_reduce_start", "all_reduce_wait") for b in BACKENDS}

RTOL = {"float32": 2e-6, "float64": 1e-12}
# Few examples per (op, backend) keep the suite under a minute; a deeper hunt:
# MINITORCH_DIFF_SCALE=20 pytest tests/test_differential.py
_SCALE = int(os.environ.get("MINITORCH_DIFF_SCALE", "1"))
EXAMPLES = {"python": 4 * _SCALE, "numpy": 4 * _SCALE, "numba": 4 * _SCALE, "cuda": _SCALE}


# The ops the framework registers; other test modules add custom ops while they run.
FRAMEWORK_OPS = frozenset(OPS)


def test_every_op_has_a_case():
    missing = sorted(FRAMEWORK_OPS - set(CASES))
    assert not missing, f"ops with no entry in test_differential.CASES: {missing}"


def test_tested_dtypes_are_the_accepted_ones():
    # The dtype policy (book/appendix_dtypes.md) is the ops' shape rules; the cases must draw
    # exactly the dtypes each elementwise, broadcasting and reducing op accepts.
    kinds = (OpKind.ELEMENTWISE, OpKind.BROADCAST, OpKind.REDUCE)
    for name, op in OPS.items():
        if op.kind not in kinds or name in ("cast", "where"):
            continue
        accepted = []
        for dtype in ALL:
            specs = [Spec((2,), np.dtype(dtype))] * op.num_inputs
            try:
                op.infer(*specs, **op.bind({"axis": -1} if name == "argmax" else {}, specs))
                accepted.append(dtype)
            except mt.OpError:
                pass
        assert accepted == CASES[name].dtypes, (
            f"{name}: accepts {accepted}, tested {CASES[name].dtypes}"
        )


def _settings(backend):
    return settings(
        max_examples=EXAMPLES[backend],
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


def _run(backend, name, data, smooth):
    case = CASES[name]
    dtype = "float64" if smooth else data.draw(st.sampled_from(case.dtypes), label="dtype")
    arrays, attrs, ref = case.build(data.draw, dtype, smooth)
    return arrays, attrs, ref


def _laid_out(data, T, arrays):
    """Tensors holding ``arrays``, each laid out at random, and the arrays they hold."""
    pairs = [data.draw(laid_out(T, a), label="layout") for a in arrays]
    return [t for t, _ in pairs], [a for _, a in pairs]


def _expected(ref, arrays):
    try:
        with np.errstate(all="ignore"):
            return np.asarray(ref(*arrays)), None
    except (ValueError, IndexError) as e:  # numpy refuses: so must we
        return None, e


def _assert_matches(got, want, dtype, label):
    if want.dtype.kind == "f" and dtype.kind == "f":
        want = want.astype(dtype)
        rtol = RTOL[dtype.name]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=label)
        # the sign of zero and of infinity must agree too
        both = np.isfinite(got) | np.isinf(got)
        assert np.array_equal(np.isinf(got), np.isinf(want)), label
        assert both.shape == got.shape
    else:
        np.testing.assert_array_equal(got, want.astype(dtype), err_msg=label)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward(name, backend):
    @_settings(backend)
    @given(data=st.data())
    def check(data):
        arrays, attrs, ref = _run(backend, name, data, smooth=False)
        with on(backend) as T:
            inputs, used = _laid_out(data, T, arrays)
            want, refused = _expected(ref, used)
            label = f"{name} on {backend}: inputs {[str(t.spec) for t in inputs]}, attrs {attrs}"
            if refused is not None or (name, backend) in NO_KERNEL:
                with pytest.raises(mt.OpError, match=name):
                    mt.dispatch(name, *inputs, **attrs)
                return
            out = mt.dispatch(name, *inputs, **attrs)
            assert out.device == inputs[0].device, label
            got = out.numpy()
        assert got.shape == want.shape, f"{label}: shape {got.shape}, numpy {want.shape}"
        _assert_matches(got, want, out.dtype, label)

    check()


@pytest.mark.parametrize(
    "name", ["layer_norm", "logsumexp", "max", "mean", "min", "softmax", "sum"]
)
def test_forward_cuda_tuned(name):
    # the drawn examples again, served by the kernels tuned for a GPU (on by default there)
    from minitorch.cuda import backend as cb

    with cb.tuned(True):
        test_forward(name, "cuda")


def _fd_grads(ref, arrays, g, h=1e-6):
    """Central differences of sum(ref(*arrays) * g) with respect to each array."""
    grads = []
    for i, a in enumerate(arrays):
        grad = np.zeros_like(a, dtype=np.float64)
        for idx in np.ndindex(a.shape):
            plus, minus = [np.array(x) for x in arrays], [np.array(x) for x in arrays]
            plus[i][idx] += h
            minus[i][idx] -= h
            grad[idx] = (np.sum(ref(*plus) * g) - np.sum(ref(*minus) * g)) / (2 * h)
        grads.append(grad)
    return grads


GRAD_OPS = sorted(n for n, c in CASES.items() if c.grad)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", GRAD_OPS)
def test_backward(name, backend):
    if (name, backend) in NO_KERNEL:
        pytest.skip(f"no {name} kernel on {backend} (the forward test checks the refusal)")

    @_settings(backend)
    @given(data=st.data())
    def check(data):
        arrays, attrs, ref = _run(backend, name, data, smooth=True)
        with on(backend) as T:
            leaves = [T(a, requires_grad=a.dtype.kind == "f") for a in arrays]
            out = mt.dispatch(name, *leaves, **attrs)
            g = data.draw(values(out.shape, "float64", special=False), label="cotangent")
            (out * T(g)).sum().backward()
            got = [None if x.grad is None else x.grad.numpy() for x in leaves]
        want = _fd_grads(ref, arrays, g)
        for i, (a, gw) in enumerate(zip(arrays, want)):
            if a.dtype.kind != "f":
                continue
            label = f"d {name} / d input {i} on {backend}, shapes {[x.shape for x in arrays]}, attrs {attrs}"
            gi = np.zeros_like(gw) if got[i] is None else got[i]
            np.testing.assert_allclose(gi, gw, rtol=1e-5, atol=1e-5, err_msg=label)

    check()


# ---------------------------------------------------------------- cuda: the paths one example misses
# One drawn example per op on cuda (EXAMPLES) cannot reach every path of the device kernels;
# these fixed inputs do, against the numpy backend: both float dtypes, views with strides and
# offsets, empty batches, NaN/inf, ties, and rows longer than chapter 11's MAX_COLS (256 on
# the simulator), where minitorch/cuda/rows.py gives each row a block and a tree.

_RNG = np.random.default_rng(39)
NAN, INF = math.nan, math.inf


def _normal(shape, dtype="float64"):
    return _RNG.standard_normal(shape).astype(dtype)


def _quarters(shape, dtype="float64", specials=()):
    """Few distinct values (ties), with ``specials`` as (index, value) pairs."""
    a = (_RNG.integers(-2, 3, size=shape) / 4).astype(dtype)
    for index, v in specials:
        a[index] = v
    return a


def _lay(T, a, layout):
    """``a`` on cuda: "c" contiguous, "o" after one junk element, "s" every other element
    of the last axis (an offset and a stride), "t" stored transposed (reversed axes)."""
    if layout == "o":
        return T(np.concatenate([np.zeros(1, a.dtype), a.reshape(-1)]))[1:].reshape(*a.shape)
    if layout == "s":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), a.dtype)
        big[..., 1::2] = a
        return T(big)[(slice(None),) * (a.ndim - 1) + (slice(1, None, 2),)]
    if layout == "t":
        order = tuple(reversed(range(a.ndim)))
        return T(np.ascontiguousarray(a.transpose(order))).permute(*order)
    return T(a)


_X, _W = _normal((2, 3, 5, 4), "float32"), _normal((2, 3, 2, 3), "float32")
_ROWS = [((1, 7), NAN), ((2, 3), INF), ((3, slice(None)), -INF)]  # rows 1-3; row 0 is plain
CUDA_EDGES = {
    "conv2d-f32-views": ("conv2d", [(_X, "s"), (_W, "t")], {"stride": 2, "padding": 1}),
    "conv2d-mixed-f64": (
        "conv2d",
        [(_normal((1, 2, 4, 4), "float32"), "o"), (_normal((3, 2, 3, 3)), "c")],
        {"stride": 1, "padding": 0},
    ),
    "conv2d-empty-batch": (
        "conv2d",
        [(_normal((0, 2, 4, 4)), "c"), (_normal((2, 2, 2, 2)), "c")],
        {"stride": 1, "padding": 1},
    ),
    "conv2d_grad_input-f32": (
        "conv2d_grad_input",
        [(_normal((2, 2, 3, 2), "float32"), "s"), (_W, "o")],
        {"stride": 2, "padding": 1, "input_hw": (5, 4)},
    ),
    "conv2d_grad_input-f64-overlap": (
        "conv2d_grad_input",
        [(_normal((1, 2, 4, 3)), "t"), (_normal((2, 2, 3, 3)), "c")],
        {"stride": 1, "padding": 1, "input_hw": (4, 3)},
    ),
    "conv2d_grad_weight-f64": (
        "conv2d_grad_weight",
        [(_X.astype("float64"), "t"), (_normal((2, 2, 3, 2)), "o")],
        {"stride": 2, "padding": 1, "kernel_hw": (2, 3)},
    ),
    "conv2d_grad_weight-empty-batch": (
        "conv2d_grad_weight",
        [(_normal((0, 2, 4, 4), "float32"), "c"), (_normal((0, 2, 3, 3), "float32"), "c")],
        {"stride": 1, "padding": 0, "kernel_hw": (2, 2)},
    ),
    "max_pool2d-f32-specials": (
        "max_pool2d",
        [(_quarters((2, 2, 4, 5), "float32", [((0, 0, 1, 1), NAN), ((1, 1, 2), INF)]), "s")],
        {"kernel_size": (2, 3), "stride": (1, 2)},
    ),
    "max_pool2d-f64-minus-inf-window": (
        "max_pool2d",
        [(_quarters((1, 2, 4, 4), specials=[((0, 0, slice(0, 2), slice(0, 2)), -INF)]), "t")],
        {"kernel_size": (2, 2), "stride": (2, 2)},
    ),
    "avg_pool2d-f64-specials": (
        "avg_pool2d",
        [(_quarters((1, 2, 5, 4), specials=[((0, 0, 0, 0), NAN), ((0, 1, 3, 2), INF)]), "o")],
        {"kernel_size": (3, 2), "stride": (2, 1)},
    ),
    "max_pool2d_grad-f32-ties": (
        "max_pool2d_grad",
        [
            (_normal((1, 2, 3, 3), "float32"), "s"),
            (_quarters((1, 2, 4, 4), "float32", [((0, 0, 1, 2), NAN), ((0, 1, slice(0, 2), slice(0, 2)), -INF)]), "c"),
        ],
        {"kernel_size": (2, 2), "stride": (1, 1)},
    ),
    "max_pool2d_grad-f64-strides": (
        "max_pool2d_grad",
        [(_normal((2, 1, 2, 2)), "c"), (_quarters((2, 1, 4, 4)), "t")],
        {"kernel_size": (2, 3), "stride": (2, 1)},
    ),
    "avg_pool2d_grad-f32-overlap": (
        "avg_pool2d_grad",
        [(_normal((1, 2, 3, 2), "float32"), "t"), (_normal((1, 2, 5, 4), "float32"), "c")],
        {"kernel_size": (3, 2), "stride": (1, 2)},
    ),
    "softmax-f32-long": (
        "softmax",
        [(_quarters((4, 260), "float32", _ROWS), "s")],
        {"axis": -1},
    ),
    "softmax-f64-long-axis0": ("softmax", [(_normal((261, 2)), "t")], {"axis": 0}),
    "logsumexp-f32-long": (
        "logsumexp",
        [(_quarters((4, 270), "float32", _ROWS), "o")],
        {"axis": 1, "keepdims": False},
    ),
    "logsumexp-f64-long-axis0": (
        "logsumexp",
        [(_normal((300, 2)), "t")],
        {"axis": 0, "keepdims": True},
    ),
    "logsumexp-f32-short-specials": (
        "logsumexp",
        [(_quarters((4, 9), "float32", _ROWS), "s")],
        {"axis": 1, "keepdims": True},
    ),
    "argmax-f32-long": (
        "argmax",
        [(_quarters((3, 300), "float32", [((1, 280), NAN), ((1, 290), NAN), ((2, slice(None)), -INF)]), "s")],
        {"axis": -1, "keepdims": False},
    ),
    "argmax-f64-ties-axis0": (
        "argmax",
        [(_quarters((5, 3), specials=[((3, 1), NAN), ((1, 1), NAN)]), "t")],
        {"axis": 0, "keepdims": True},
    ),
    "argmax-int64": ("argmax", [(_RNG.integers(0, 3, (4, 6)), "o")], {"axis": 1, "keepdims": False}),
    "argmax-bool-long": ("argmax", [(_RNG.random((3, 300)) < 0.01, "s")], {"axis": 1, "keepdims": False}),
    "layer_norm-f32-long": (
        "layer_norm",
        [(_normal((2, 270), "float32"), "s"), (_normal(270, "float32"), "s"), (_normal(270, "float32"), "o")],
        {"eps": 1e-5},
    ),
    "layer_norm-mixed-short": (
        "layer_norm",
        [(_normal((3, 5), "float32"), "t"), (_normal(5), "c"), (_normal(5, "float32"), "s")],
        {"eps": 0.1},
    ),
    "pad_slice-bool-negative-step": (
        "pad_slice",
        [(_RNG.random((2, 2)) < 0.5, "t")],
        {"key": (slice(None, None, -2), 1), "shape": (3, 4, 2)},
    ),
    "pad_slice-0d": ("pad_slice", [(np.array(2.5, "float32"), "c")], {"key": (), "shape": ()}),
    "pad_slice-empty-window": (
        "pad_slice",
        [(np.zeros((0, 2)), "c")],
        {"key": (slice(2, 0),), "shape": (3, 2)},
    ),
    "matmul-f32-ragged-views": ("matmul", [(_normal((13, 9), "float32"), "s"), (_normal((9, 11), "float32"), "t")], {}),
    "matmul-f64-batched": ("matmul", [(_normal((3, 5, 6)), "t"), (_normal((6, 7)), "o")], {}),
    "matmul-f32-specials": (
        "matmul",
        [(_quarters((5, 6), "float32", [((1, 2), NAN), ((3, 0), INF)]), "c"), (_normal((6, 4), "float32"), "s")],
        {},
    ),
    "matmul-empty-k": ("matmul", [(np.zeros((3, 0), "float32"), "c"), (np.zeros((0, 4), "float32"), "c")], {}),
    "sum-empty": ("sum", [(np.zeros((0, 3), "float32"), "c")], {"axis": 0}),
    "mean-f64-view": ("mean", [(_normal((3, 4)), "t")], {"axis": 1}),
    # every path of the tuned reductions (cuda/reduce.py) on the simulator's launch sizes
    "sum-f32-all-chunks": ("sum", [(_quarters(3000, "float32"), "o")], {"axis": None}),
    "max-f32-rows-specials": ("max", [(_quarters((4, 200), "float32", _ROWS), "c")], {"axis": 1}),
    "min-f64-columns": ("min", [(_quarters((40, 37), specials=_ROWS), "o")], {"axis": 0}),
    "sum-int64-middle": ("sum", [(_RNG.integers(-9, 9, (2, 33, 5)), "c")], {"axis": 1}),
    "mean-f32-last-two": ("mean", [(_normal((3, 5, 70), "float32"), "o")], {"axis": (1, 2)}),
    "softmax-f32-5000": ("softmax", [(_quarters((4, 5000), "float32", _ROWS), "c")], {"axis": 1}),
    "layer_norm-f64-offset": (
        "layer_norm",
        [(_normal((3, 300)) + 1e3, "o"), (_normal(300), "s"), (_normal(300), "c")],
        {"eps": 1e-5},
    ),
}  # fmt: skip
# the cases the tuned kernels serve (cb.tuned(True): a real GPU's default, off on the simulator)
TUNED_EDGES = sorted(
    k for k, (name, _, _) in CUDA_EDGES.items()
    if name in ("sum", "max", "min", "mean", "softmax", "logsumexp", "layer_norm", "matmul", "conv2d")
    or k.startswith(("matmul", "conv"))
)  # fmt: skip


def _cuda_vs_numpy(name, arrays, attrs):
    want = mt.dispatch(name, *[mt.tensor(a, dtype=a.dtype.name) for a, _ in arrays], **attrs)
    with on("cuda") as T:
        got = mt.dispatch(name, *[_lay(T, a, layout) for a, layout in arrays], **attrs)
        label = f"{name} on cuda, attrs {attrs}"
        assert got.dtype == want.dtype and got.shape == want.shape, label
        _assert_matches(got.numpy(), want.numpy(), got.dtype, label)


@pytest.mark.parametrize("case", sorted(CUDA_EDGES))
def test_cuda_edges(case):
    _cuda_vs_numpy(*CUDA_EDGES[case])


@pytest.mark.parametrize("case", TUNED_EDGES)
def test_cuda_edges_tuned(case):
    from minitorch.cuda import backend as cb

    with cb.tuned(True):
        _cuda_vs_numpy(*CUDA_EDGES[case])


@pytest.mark.parametrize("case", ["softmax-f32-long", "logsumexp-f32-short-specials"])
def test_cuda_softmax_of_chapter_4(case, monkeypatch):
    # Chapter 11's fused kernel replaces chapter 4's softmax when minitorch loads; short rows
    # (a thread each) and long ones (a block each) of chapter 4's own kernel are checked here.
    from minitorch.cuda import rows

    monkeypatch.setitem(mt.get_op("softmax").kernels, "cuda", rows.softmax)
    ((a, layout),) = CUDA_EDGES[case][1]
    _cuda_vs_numpy("softmax", [(a, layout)], {"axis": 1})
    _cuda_vs_numpy("softmax", [(a[:, :9], "t")], {"axis": 0})


# ---------------------------------------------------------------- cuda: the tuned elementwise kernels
# minitorch/cuda/elementwise.py serves contiguous (and offset) layouts on a real GPU, under
# backend.TUNED; here the simulator runs them against numpy. Strided ("s") and transposed
# ("t") operands fall back to the exercises in the same call.
_SPECIALS = [((0, 1), NAN), ((1, 2), INF), ((2, 0), -INF), ((0, 3), 0.0)]
CUDA_TUNED = {
    "add-f32-row": ("add", [(_normal((3, 70), "float32"), "o"), (_normal(70, "float32"), "c")], {}),
    "div-f32-specials-column": (
        "div",
        [(_quarters((4, 70), "float32", _SPECIALS), "c"), (_quarters((4, 1), "float32"), "o")],
        {},
    ),
    "mul-f64-mixed-scalar": ("mul", [(_normal((5, 61)), "o"), (np.array(2.5, "float32"), "c")], {}),
    "sub-i64-channels": (
        "sub",
        [(_RNG.integers(-9, 9, (2, 3, 50)), "c"), (_RNG.integers(-9, 9, (3, 1)), "c")],
        {},
    ),
    "maximum-f32-nan-strided-fallback": (
        "maximum",
        [(_quarters((4, 70), "float32", _SPECIALS), "s"), (_normal(70, "float32"), "c")],
        {},
    ),
    "relu-f32-specials": ("relu", [(_quarters((4, 70), "float32", _SPECIALS), "o")], {}),
    "sigmoid-f32-specials": ("sigmoid", [(_quarters((4, 70), "float32", _SPECIALS) * 40, "c")], {}),
    "exp-i64": ("exp", [(_RNG.integers(-3, 4, (300,)), "o")], {}),
    "log-f32-specials-transposed": ("log", [(_quarters((4, 70), "float32", _SPECIALS), "t")], {}),
    "cast-f32-to-i64": ("cast", [(_normal((300,), "float32") * 9, "o")], {"dtype": "int64"}),
    "where-f32": (
        "where",
        [
            (_RNG.random((3, 1)) < 0.5, "c"),
            (_normal((3, 70), "float32"), "o"),
            (_quarters((70,), "float32", [((5,), NAN)]), "c"),
        ],
        {},
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(CUDA_TUNED))
def test_cuda_tuned_elementwise(case):
    from minitorch.cuda import backend as cb

    with cb.tuned(True):
        _cuda_vs_numpy(*CUDA_TUNED[case])
