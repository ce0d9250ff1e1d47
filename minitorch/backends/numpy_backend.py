"""The ``numpy`` backend: every kernel is one numpy call on a zero-copy strided view.

It is the eager baseline that the compiled mode of later chapters must beat.
Its kernels are also what a compiled plan runs on this backend: lowering (chapter
6) asks :meth:`NumpyBackend.prepare` for the same kernel specialised to the specs
the graph knows, able to write into a destination (chapter 8's arena). Both go
through :func:`_apply`, so eager and compiled code follow one set of dtype rules.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.registry import OpDef, OpKind, Spec, register_kernel
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from .base import Backend, register_backend


def _wrap(array, out, strides=None) -> TensorData:
    array = np.asarray(array, dtype=out.dtype)
    if strides is not None and array.shape == out.shape and array.flags.c_contiguous:
        # a prepared kernel knows its result's strides: no call to work them out per run
        return TensorData(array.reshape(-1), out.shape, strides, 0)
    return TensorData.wrap(array)


def _casts_first(op: OpDef, out: Spec) -> bool:
    # an elementwise op with a float result computes in that float: numpy's exp of a
    # bool array is float16, its reciprocal of an int array is an integer division
    return op.kind is OpKind.ELEMENTWISE and out.dtype.kind == "f"


def _apply(fn, arrays, out: Spec, cast: bool, dest=None, strides=None, **kw) -> TensorData:
    """``fn(*arrays)`` as a result of spec ``out``: allocated, or written into ``dest``."""
    if cast:
        arrays = [a.astype(out.dtype, copy=False) for a in arrays]
    if dest is None:
        return _wrap(fn(*arrays, **kw), out, strides)
    target = dest.reshape(out.shape)
    same = all(getattr(a, "dtype", out.dtype) == out.dtype for a in arrays)
    if (isinstance(fn, np.ufunc) or fn is rows_matmul) and same and not kw:
        fn(*arrays, out=target)
    elif kw and same and arrays[0].size:  # a reduction: numpy accumulates into ``out``
        fn(*arrays, out=target, **kw)
    else:
        np.copyto(target, fn(*arrays, **kw), casting="unsafe")
    return TensorData(dest, out.shape, strides, 0)


class NumpyBackend(Backend):
    name = "numpy"

    def generic(self, op: OpDef):
        fn = op.numpy
        if fn is None:
            return None
        if op.kind is OpKind.REDUCE:

            def reduce_kernel(a, out, axis, keepdims):
                return _apply(fn, [a.as_numpy_view()], out, False, axis=axis, keepdims=keepdims)

            return reduce_kernel

        def kernel(*inputs, out):
            arrays = [x.as_numpy_view() for x in inputs]
            with np.errstate(all="ignore"):  # inf/nan follow IEEE, as on every backend
                return _apply(fn, arrays, out, _casts_first(op, out))

        return kernel

    def prepare(self, op: OpDef, out: Spec, inputs: list) -> Callable | None:
        """The kernel of ``op`` for a plan step whose specs are known: ``dest=`` accepted.

        The layouts a contiguous input has and the result's strides are computed here,
        once, instead of on every call; the plan sets numpy's error state once per run.
        """
        fn = op.numpy if not op.kernels.keys() & {"numpy", "*"} else None
        if op.name == "relu" and op.kernels.get("numpy") is relu:
            fn, extra = np.maximum, (0,)
        elif op.name == "matmul" and op.kernels.get("numpy") is matmul:
            fn, extra = rows_matmul, ()
        elif fn is not None and op.kind in (OpKind.ELEMENTWISE, OpKind.BROADCAST):
            extra = ()
        elif fn is not None and op.kind is OpKind.REDUCE and out.device == "cpu":
            return _prepared_reduce(fn, out, inputs[0])
        elif op.name == "cast" and op.kernels.get("numpy") is cast:
            return _prepared_cast(out, inputs[0])
        else:
            return super().prepare(op, out, inputs)
        strides = tuple(strides_from_shape(out.shape))
        casts = _casts_first(op, out) and not extra  # relu's eager kernel does not cast
        views = [viewer(s) for s in inputs]
        if len(views) == 1:
            (va,) = views

            def kernel(a, out, dest=None):
                return _apply(fn, [va(a), *extra], out, casts, dest, strides)
        elif len(views) == 2:
            va, vb = views

            def kernel(a, b, out, dest=None):
                return _apply(fn, [va(a), vb(b)], out, casts, dest, strides)
        else:

            def kernel(*args, out, dest=None):
                return _apply(fn, [v(d) for v, d in zip(views, args)], out, casts, dest, strides)

        kernel.__name__ = op.name
        kernel.writes_into = True  # chapter 8's protocol: accepts ``dest=``
        kernel.bind = _binder(fn, extra, out, inputs, views, strides)
        return kernel

    def copy(self, data: TensorData) -> TensorData:
        return TensorData.from_numpy(data.as_numpy_view())


def viewer(spec: Spec) -> Callable:
    """``d.as_numpy_view()`` for data of ``spec``, with the contiguous case of ``spec`` checked without a call,
    and a permutation of a contiguous array (a transposed operand) made by ``transpose``."""
    st, shape, n = tuple(strides_from_shape(spec.shape)), spec.shape, spec.size
    permuted: dict = {}  # strides -> (contiguous shape, axes), or None

    def view(d: TensorData):
        if d.offset == 0 and d.storage.size == n:
            if d.strides == st:
                return d.storage.reshape(shape)
            how = permuted.get(d.strides, False)
            if how is False:
                how = permuted[d.strides] = _permutation(shape, d.strides)
            if how is not None:
                return d.storage.reshape(how[0]).transpose(how[1])
        return d.as_numpy_view()

    return view


def _permutation(shape: tuple, strides: tuple):
    """``(base shape, axes)`` when ``strides`` read a contiguous array of ``base`` transposed."""
    order = sorted(range(len(shape)), key=lambda k: -strides[k])
    base = tuple(shape[k] for k in order)
    if tuple(strides[k] for k in order) != tuple(strides_from_shape(base)):
        return None
    return base, tuple(order.index(k) for k in range(len(shape)))


def _cast_into(a, out):
    np.copyto(out, a, casting="unsafe")  # what ``astype`` computes, written in place


def _prepared_cast(out: Spec, source: Spec) -> Callable:
    strides, va = tuple(strides_from_shape(out.shape)), viewer(source)

    def cast_kernel(a, out, dtype, dest=None):
        if dest is None:
            return _wrap(va(a).astype(dtype), out)
        _cast_into(va(a), dest.reshape(out.shape))
        return TensorData(dest, out.shape, strides, 0)

    cast_kernel.__name__ = "cast"
    cast_kernel.writes_into = True
    cast_kernel.bind = _binder(_cast_into, (), out, [source], [va], strides, into=True)
    return cast_kernel


def _prepared_reduce(fn, out: Spec, source: Spec) -> Callable:
    strides = tuple(strides_from_shape(out.shape))
    va = viewer(source)

    def reduce(a, out, axis, keepdims, dest=None):
        return _apply(fn, [va(a)], out, False, dest, strides, axis=axis, keepdims=keepdims)

    reduce.__name__ = fn.__name__
    reduce.writes_into = True
    reduce.bind = _binder(fn, (), out, [source], [va], strides, reduce=True)
    return reduce


def _binder(fn, extra, out: Spec, inputs: list, views: list, strides, reduce=False, into=False):
    """``kernel.bind(dest, fixed)``: the kernel with its destination and layouts bound once.

    ``fixed[k]`` is the ``TensorData`` input ``k`` holds on every call (a place in the
    arena) or ``None``; its numpy view is made here, not per call. With a ``dest`` the
    result is always the same ``TensorData`` over it; without, each call allocates one.
    ``None`` (use the kernel as it is) unless numpy computes in the result's dtype
    straight into the destination: every input already has it, or (a comparison) the
    ufunc's own result has it. ``into``: ``fn(array, out=)`` converts by itself (cast).
    """
    shape, dtype = out.shape, np.dtype(out.dtype)

    def bind(dest, fixed):
        if not out.size or not all(s.size for s in inputs):
            return None
        same = all(np.dtype(s.dtype) == dtype for s in inputs)
        if not same and isinstance(fn, np.ufunc) and not reduce and dtype.kind != "f":
            probe = fn(*[np.zeros(1, s.dtype) for s in inputs], *extra)
            same = probe.dtype == dtype  # eq of two ints is bool: no cast either way
        takes_out = isinstance(fn, np.ufunc) or fn is rows_matmul  # fn(*arrays, out=)
        if not (same or into) or not (takes_out or reduce or into):
            return None
        if dest is None:

            def place():  # an output: the caller keeps it
                t = np.empty(shape, dtype)
                return t, TensorData(t.reshape(-1), shape, strides, 0)

        else:
            placed = dest.reshape(shape), TensorData(dest, shape, strides, 0)

            def place():
                return placed

        arrays = [None if f is None else v(f) for f, v in zip(fixed, views)]
        if reduce:
            fa, va = arrays[0], views[0]

            def bound(a, out=None, axis=None, keepdims=False):
                t, r = place()
                fn(va(a) if fa is None else fa, axis=axis, keepdims=keepdims, out=t)
                return r

        elif all(a is not None for a in arrays):
            args = (*arrays, *extra)

            def bound(*_, out=None, **attrs):
                t, r = place()
                fn(*args, out=t)
                return r

        elif len(arrays) == 1:
            (va,) = views

            def bound(a, out=None, **attrs):
                t, r = place()
                fn(va(a), *extra, out=t)
                return r

        elif len(arrays) == 2 and arrays[0] is not None:
            fa, vb = arrays[0], views[1]

            def bound(a, b, out=None, **attrs):
                t, r = place()
                fn(fa, vb(b), out=t)
                return r

        elif len(arrays) == 2 and arrays[1] is not None:
            va, fb = views[0], arrays[1]

            def bound(a, b, out=None, **attrs):
                t, r = place()
                fn(va(a), fb, out=t)
                return r

        else:
            pairs = list(zip(arrays, views))

            def bound(*inputs, out=None, **attrs):
                t, r = place()
                fn(*[v(x) if f is None else f for (f, v), x in zip(pairs, inputs)], *extra, out=t)
                return r

        return bound

    return bind


register_backend(NumpyBackend())


def _np(x: TensorData) -> np.ndarray:
    return x.as_numpy_view()


@register_kernel("sigmoid", "numpy")
def sigmoid(a, out):
    x = _np(a).astype(out.dtype, copy=False)  # bool and int inputs compute in float
    e = np.exp(-np.abs(x))
    return _wrap(np.where(x >= 0, 1 / (1 + e), e / (1 + e)), out)


@register_kernel("relu", "numpy")
def relu(a, out):
    return _wrap(np.maximum(_np(a), 0), out)


@register_kernel("cast", "numpy")
def cast(a, out, dtype):
    return _wrap(_np(a).astype(dtype), out)


@register_kernel("where", "numpy")
def where(c, a, b, out):
    return _wrap(np.where(_np(c), _np(a), _np(b)), out)


def _where_into(target, c, a, b):
    np.copyto(target, b)  # a selection: the same bits as ``np.where``, with no temporary
    np.copyto(target, a, where=c)


def _prepare_where(out: Spec, inputs: list) -> Callable | None:
    c, a, b = inputs
    if c.dtype != np.bool_ or not a.dtype == b.dtype == out.dtype:
        return None  # numpy's promotion decides the result's dtype: keep ``np.where``
    return prepared_kernel("where", out, inputs, _where_into, contiguous=False)


where.prepare = _prepare_where


def prepared_kernel(name: str, out: Spec, inputs: list, call: Callable, shapes=None,
                    contiguous=True) -> Callable:  # fmt: skip
    """A kernel of one plan step that writes its result into ``dest`` (chapter 8's arena)
    through ``call(target, *arrays, **attrs)``, with ``target`` of ``out.shape``.

    Each input is viewed as numpy once per call (``viewer``), made C-contiguous (when
    ``contiguous``) and reshaped to ``shapes[k]``. ``kernel.bind(dest, fixed)`` does that
    once for an input that sits in the same place on every call (and is contiguous
    there), so a bound call is ``call`` and nothing else.
    """
    shapes = shapes or [s.shape for s in inputs]
    strides, views = tuple(strides_from_shape(out.shape)), [viewer(s) for s in inputs]

    def array(v, d, shape):
        a = v(d)
        return (np.ascontiguousarray(a) if contiguous else a).reshape(shape)

    def kernel(*datas, out, dest=None, **attrs):
        t = np.empty(out.size, out.dtype) if dest is None else dest
        call(t.reshape(out.shape), *[array(*z) for z in zip(views, datas, shapes)], **attrs)
        return TensorData(t, out.shape, strides, 0)

    def bind(dest, fixed):
        size, dtype, shape = out.size, np.dtype(out.dtype), out.shape
        if dest is None:  # an output, which the caller keeps: a new array on each call

            def place():
                t = np.empty(size, dtype)
                return t.reshape(shape), TensorData(t, shape, strides, 0)

        else:
            placed = dest.reshape(shape), TensorData(dest, shape, strides, 0)

            def place():
                return placed

        held = []
        for v, f, s in zip(views, fixed, shapes):
            a = None if f is None else array(v, f, s)
            held.append(a if a is not None and np.shares_memory(a, f.storage) else None)
        todo = [(k, views[k], shapes[k]) for k, a in enumerate(held) if a is None]

        def bound(*datas, out=None, **attrs):
            arrays = list(held)
            for k, v, s in todo:
                arrays[k] = array(v, datas[k], s)
            target, result = place()
            call(target, *arrays, **attrs)
            return result

        return bound

    kernel.__name__ = name
    kernel.writes_into = True
    kernel.bind = bind
    return kernel


@register_kernel("argmax", "numpy")
def argmax(a, out, axis, keepdims):
    return _wrap(np.argmax(_np(a), axis=axis[0], keepdims=keepdims), out)


def rows_matmul(a: np.ndarray, b: np.ndarray, out=None) -> np.ndarray:
    """``np.matmul(a, b, out=out)``, as one GEMM when ``b`` is a matrix and ``a`` a stack
    whose rows sit contiguously: numpy's matmul calls BLAS once per matrix of the stack
    (a (32, 64, 512) @ (512, 128) is 32 small GEMMs, 10-30% slower than one of 2048
    rows). Each row is the same dot products either way, so the bits are the same."""
    stacked = a.ndim > 2 and a.size > a.shape[-2] * a.shape[-1]  # more than one matrix
    if stacked and b.ndim == 2 and a.flags.c_contiguous and a.dtype == b.dtype:
        shape = a.shape[:-1] + b.shape[-1:]
        if out is None:
            return np.matmul(a.reshape(-1, a.shape[-1]), b).reshape(shape)
        if out.flags.c_contiguous and out.shape == shape and out.dtype == a.dtype:
            np.matmul(a.reshape(-1, a.shape[-1]), b, out=out.reshape(-1, shape[-1]))
            return out
    return np.matmul(a, b, out=out)


@register_kernel("matmul", "numpy")
def matmul(a, b, out):
    return _wrap(rows_matmul(_np(a), _np(b)), out)
