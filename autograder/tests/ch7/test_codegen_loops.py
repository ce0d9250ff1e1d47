"""Graded tests, chapter 7, exercises 7.8 and 7.9: the loop nests of elementwise and reduce groups.

The generated source is run as plain Python here (exact, no compile time);
``test_codegen_run.py`` compiles it with Numba through the runtime.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.harness import assert_close, check, graded
from minitorch.fusion.codegen import Loop, ReduceLoop, elementwise_source, reduce_source
from minitorch.tensor.indexing import broadcast_shape

from .codegen_cases import expanded, make_input, python_function, shapes

KINDS = ["contiguous", "permuted", "flipped", "offset", "mixed", "expanded"]


def _loop_strides(shape, strides, out_shape):
    # the grader's own broadcasting rule (7.6 is graded on its own)
    lead = len(out_shape) - len(shape)
    return tuple(
        0 if a < lead or shape[a - lead] == 1 else strides[a - lead] for a in range(len(out_shape))
    )


def _layout(d, out_shape):
    if d.size == 1:
        return "scalar"
    c = tuple(int(np.prod(d.shape[k + 1 :])) for k in range(len(d.shape)))
    return "flat" if d.shape == tuple(out_shape) and d.strides == c else "strided"


def _run_elementwise(datas, out_shape, lines, result, layouts=None):
    layouts = layouts or [_layout(d, out_shape) for d in datas]
    src = elementwise_source(Loop("k", len(out_shape), layouts, lines, result, "prange"))
    check(isinstance(src, str) and "def k(" in src, "7.8", "return the source of def k(...)")
    fn = python_function(src, "k")
    out = np.full(int(np.prod(out_shape)), np.nan, np.float32)
    args = [out, np.array(out_shape, dtype=np.int64)]
    for d in datas:
        st_ = np.array(_loop_strides(d.shape, d.strides, out_shape), dtype=np.int64)
        args += [d.storage, d.offset, st_]
    with np.errstate(all="ignore"):
        fn(*args)
    return out.reshape(out_shape), src


LINES = ["v0 = np.float32((a0 - a1))", "v1 = np.float32((v0 * a2))", "v2 = np.float32((v1 - a0))"]


def _expected(vals):
    return (vals[0] - vals[1]) * vals[2] - vals[0]


@graded("7.8", points=1)
def test_example_flat_and_scalar():
    """
    contract: Only the outermost loop is ``loop.loop``
    contract: a ``"scalar"`` input is one element, ``xk[ok]``, for every ``p``
    """
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 10, np.float32)
    c = np.array([3], np.float32)
    from minitorch.tensor.data import TensorData

    datas = [TensorData.from_numpy(a), TensorData.from_numpy(b), TensorData.from_numpy(c)]
    got, src = _run_elementwise(datas, (2, 3), LINES, "v2")
    assert_close(got, (a - b) * 3 - a, "7.8", source=src)
    # ndim 0 (the contract: any ndim, 0 included) with "strided" inputs at an offset
    store = np.arange(5, dtype=np.float32)
    datas = [TensorData(store, (), (), 3), TensorData(np.array([10.0], np.float32), (), (), 0),
             TensorData(store, (), (), 1)]  # fmt: skip
    got, src = _run_elementwise(datas, (), LINES, "v2", ["strided", "scalar", "strided"])
    assert_close(got, np.float32((3 - 10) * 1 - 3), "7.8", layouts="strided, scalar, strided",
                 shape=(), source=src)  # fmt: skip
    # ndim 2, a transposed (strided) input: only the outermost loop is loop.loop
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = TensorData(x.reshape(-1), (4, 3), (1, 4), 0)
    got, src = _run_elementwise([d], (4, 3), ["v0 = np.float32((-a0))"], "v0", ["strided"])
    assert_close(got, -x.T, "7.8", layouts="strided", source=src)
    fors = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("for ")]
    check(
        bool(fors) and "prange(" in fors[0] and all("prange(" not in f for f in fors[1:]),
        "7.8",
        "only the outermost loop is loop.loop (prange); every inner loop is range",
        source=src,
    )


@graded("7.8", points=3)
@settings(max_examples=40)
@given(shapes(min_side=0), st.lists(st.sampled_from(KINDS), min_size=3, max_size=3), st.data())
def test_every_layout_reads_the_right_elements(sh, kinds, data):
    """
    contract: a ``"strided"`` input needs the general index
    """
    out_shape, ins = sh
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ins = (ins * 3)[:3]
    datas, vals = [], []
    for shape, kind in zip(ins, kinds):
        if kind == "expanded" and len(shape) >= 1:
            row = rng.standard_normal(shape[1:]).astype(np.float32)
            d = expanded(row, shape)
            v = np.broadcast_to(row, shape)
        else:
            v = rng.standard_normal(shape).astype(np.float32)
            d = make_input(rng, v, "contiguous" if kind == "expanded" else kind)
        datas.append(d)
        vals.append(v)
    full = broadcast_shape(broadcast_shape(ins[0], ins[1]), ins[2])
    check(tuple(full) == tuple(out_shape), "7.8", "test setup")
    if int(np.prod(out_shape)) == 0:
        return  # the runtime never calls a kernel for an empty output
    got, src = _run_elementwise(datas, out_shape, LINES, "v2")
    want = _expected([np.broadcast_to(v, out_shape) for v in vals])
    assert_close(got, want, "7.8", kinds=kinds, shapes=ins, source=src)


def _run_reduce(x, axes, fold, outer_val=None, keep_kind="contiguous", rng=None):
    """Fold ``x * 2`` over ``axes`` then ``red + b0`` (b0 per output element) or just ``red``."""
    nd = x.ndim
    keep = [a for a in range(nd) if a not in axes]
    perm = keep + list(axes)
    d = make_input(rng, x, keep_kind)
    st_ = _loop_strides(d.shape, d.strides, x.shape)
    inner = ["v0 = np.float32((a0 * np.float32(2.0)))"]
    outer, result, outer_in = [], "red", 0
    if outer_val is not None:
        outer, result, outer_in = ["w0 = np.float32((red + b0))"], "w0", 1
    init = {"sum": "0.0", "mean": "0.0", "max": "-math.inf", "min": "math.inf"}[fold]
    loop = ReduceLoop(
        "k",
        len(keep),
        len(axes),
        1,
        outer_in,
        inner,
        "v0",
        fold,
        init,
        "np.float32",
        "red",
        outer,
        result,
        "prange",
    )
    src = reduce_source(loop)
    check(isinstance(src, str) and "def k(" in src, "7.9", "return the source of def k(...)")
    fn = python_function(src, "k")
    out_shape = tuple(x.shape[a] for a in keep)
    out = np.full(int(np.prod(out_shape)), np.nan, np.float32)
    args = [out, np.array([x.shape[a] for a in perm], dtype=np.int64)]
    args += [d.storage, d.offset, np.array([st_[a] for a in perm], dtype=np.int64)]
    if outer_val is not None:
        o = make_input(rng, outer_val, "flipped")
        args += [o.storage, o.offset, np.array(_loop_strides(o.shape, o.strides, out_shape))]
    with np.errstate(all="ignore"):
        fn(*args)
    return out.reshape(out_shape), src


FOLD = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@graded("7.9", points=1)
def test_example_row_sum_with_epilogue():
    """
    contract: Only the outermost loop over the kept axes is ``loop.loop``
    contract: start ``acc`` at ``acc_init``
    """
    rng = np.random.default_rng(0)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got, src = _run_reduce(x, (1,), "sum", np.array([100, 200], np.float32), rng=rng)
    assert_close(got, np.array([106, 224], np.float32), "7.9", source=src)
    fors = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("for ")]
    check(
        len(fors) == 2 and "prange(" in fors[0] and "prange(" not in fors[1],
        "7.9",
        "only the outer loop over the kept axes is loop.loop (prange)",
        source=src,
    )
    # two kept and two folded axes, mean: divide by the product of the folded sizes
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    got, src = _run_reduce(x, (1, 3), "mean", None, "permuted", rng)
    assert_close(got, (x * 2).mean(axis=(1, 3)), "7.9", rtol=1e-5, atol=1e-6, axes=(1, 3),
                 source=src)  # fmt: skip
    fors = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("for ")]
    check(
        bool(fors) and "prange(" in fors[0] and all("prange(" not in f for f in fors[1:]),
        "7.9",
        "only the outermost loop over the kept axes is loop.loop; the other loops are range",
        source=src,
    )
    # no folded axis at all (nred 0): one element per output, and mean divides by 1
    x = rng.standard_normal((2, 3)).astype(np.float32)
    got, src = _run_reduce(x, (), "mean", None, "permuted", rng)
    assert_close(got, x * 2, "7.9", axes=(), fold="mean", source=src)
    # rows of -inf, of large negative values, and with a NaN inside: max starts at acc_init,
    # not at 0 or -1e30, and keeps a NaN once seen; the same for min on the negated rows
    x = np.array([[-np.inf, -np.inf, -np.inf], [-1e30, -3e30, -2e30], [1, np.nan, 3]], np.float32)
    for fold, rows in (("max", x), ("min", -x)):
        got, src = _run_reduce(rows, (1,), fold, None, "contiguous", rng)
        want = FOLD[fold](rows * 2, axis=1)
        check(np.array_equal(got, want, equal_nan=True), "7.9", f"{fold} of rows all -inf, all "
              "large and negative (min: positive), or with a NaN: start acc at acc_init, keep NaN",
              value=got, rows=rows, expected=want, source=src)  # fmt: skip


@graded("7.9", points=3)
@settings(max_examples=40)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.sampled_from(["sum", "mean", "max", "min"]),
    st.sampled_from(["contiguous", "permuted", "flipped", "mixed"]),
    st.booleans(),
    st.data(),
)
def test_fold_any_axes_any_layout(shape, fold, kind, epilogue, data):
    """
    contract: ``max``/``min`` keep the larger/smaller and, as numpy does, a NaN once seen
    contract: ``mean`` then divides by the count of folded elements
    """
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    nd = len(shape)
    # no folded axes at all (nred 0) is one element per output: mean divides by 1
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, nd - 1)))))
    x = rng.standard_normal(shape).astype(np.float32)
    # extremes: all large and negative, +-inf, a large magnitude with a small spread
    extreme = data.draw(st.sampled_from(["normal", "normal", "-1e30", "inf", "1e6 + small"]))
    if extreme == "-1e30":
        x = (np.abs(x) + 1) * np.float32(-1e30)
    elif extreme == "inf":
        x = np.where(x < 0, -np.inf, np.inf).astype(np.float32)
    elif extreme == "1e6 + small":
        x = (x + np.float32(1e6)).astype(np.float32)
    if data.draw(st.booleans()):
        x.reshape(-1)[rng.integers(0, x.size)] = np.nan  # NaN must win max/min, as in numpy
    keep = tuple(a for a in range(nd) if a not in axes)
    out_shape = tuple(shape[a] for a in keep)
    outer = rng.standard_normal(out_shape).astype(np.float32) if epilogue else None
    got, src = _run_reduce(x, axes, fold, outer, kind, rng)
    want = FOLD[fold](x * 2, axis=axes)
    if epilogue:
        want = want + outer
    assert_close(
        got, want, "7.9", rtol=1e-4, atol=1e-4, shape=shape, axes=axes, fold=fold, source=src
    )
