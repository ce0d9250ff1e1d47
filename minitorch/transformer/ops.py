"""Chapter 11's ops: embedding (a gather) and its scatter-add gradient, layer norm, GELU, a causal mask.

Each op is registered once with its shape rule, a numpy kernel (the eager
baseline), a python kernel (the chapter-1 loops), an ONNX emitter (chapter 10)
and its backward rule. The Numba kernels live in ``fast.py`` and the CUDA ones
in ``cuda.py``; both load on first use, like the backends they belong to.
Attention is not an op: it is a composite of registry ops (``attention.py``),
so the tracer, fusion and the memory planner see every step of it.

Fusion templates are left for the compiler's merge; what each op would need:
``gelu`` is elementwise with a scalar formula (it already fuses with its
neighbours as a map); ``causal_mask`` is elementwise given the element's last
two indices (a fused loop would need the index, not only the value);
``layer_norm`` is a row reduction followed by a map (the fused reduce pattern of
softmax); ``embedding`` is a gather that could feed an elementwise consumer
(an indexed load in the generated loop).
"""

from __future__ import annotations

import importlib
import math

import numpy as np

from ..backends.numpy_backend import prepared_kernel
from ..core import dtypes as dt
from ..core.errors import OpError
from ..core.ops import check_range, in_range
from ..core.registry import OpKind, Spec, dispatch, register_kernel, register_op, register_vjp
from ..exercises import exercise
from ..tensor.data import TensorData
from ..tensor.indexing import index_to_position, to_index
from . import onnx_emit

# ---------------------------------------------------------------- shared helpers


def _same_device(op: str, *specs: Spec) -> None:
    devices = sorted({s.device for s in specs})
    if len(devices) > 1:
        raise OpError(op, f"inputs are on different devices {devices}", hint="use .to(device)")


def _need_float(op: str, name: str, s: Spec) -> None:
    if not dt.is_float(s.dtype):
        raise OpError(
            op, f"{name} must be float32 or float64, got {s.dtype.name}", hint="cast with .float()"
        )


def _np(x: TensorData) -> np.ndarray:
    return x.as_numpy_view()


def _wrap(array, out: Spec) -> TensorData:
    return TensorData.wrap(np.asarray(array, dtype=out.dtype))


def lazy_kernel(module: str, name: str):
    """A kernel that imports ``minitorch.transformer.<module>`` on its first call.

    The Numba and CUDA kernels load with their backends (chapter 3 and 4 load lazily too).
    """
    path = f"{__package__}.{module}"

    def kernel(*inputs, **kw):
        return getattr(importlib.import_module(path), name)(*inputs, **kw)

    def prepare(out, inputs):  # chapter 8: the kernel of one plan step, writing into the arena
        found = getattr(importlib.import_module(path), f"prepare_{name}", None)
        return found(out, inputs) if found is not None else None

    kernel.__name__ = f"{module}.{name}"
    kernel.prepare = prepare
    return kernel


def _rows(shape) -> int:
    return math.prod(shape[:-1]) if len(shape) else 1


def _py_rows(x: TensorData):
    """(index of each row, positions of its elements) for the python backend's loops."""
    lead, n = x.shape[:-1], x.shape[-1]
    for r in range(_rows(x.shape)):
        idx = tuple(to_index(r, lead)) if lead else ()
        start = index_to_position(idx + (0,), x.strides, x.offset)
        yield idx, [start + j * x.strides[-1] for j in range(n)]


# ---------------------------------------------------------------- embedding


def _embedding_infer(weight: Spec, ids: Spec) -> Spec:
    _same_device("embedding", weight, ids)
    if weight.ndim != 2:
        raise OpError(
            "embedding",
            f"weight must be 2-D (num_embeddings, dim), got shape {weight.shape}",
            hint="one row per token id: minitorch.randn(vocab, dim)",
        )
    _need_float("embedding", "weight", weight)
    if ids.dtype != dt.int64:
        raise OpError(
            "embedding",
            f"ids must be int64 token ids, got {ids.dtype.name}",
            hint="make them with minitorch.tensor(ids, dtype='int64')",
        )
    return Spec(ids.shape + (weight.shape[1],), weight.dtype, weight.device)


def check_ids(op: str, ids: np.ndarray, rows: int) -> None:
    # a decode step's token is one read, not two reductions; the message only on failure
    fits = 0 <= ids.item() < rows if ids.size == 1 else in_range(ids, rows)
    if not fits:
        hint = f"token ids index the weight's {rows} rows; check the vocabulary size"
        check_range(op, "ids", ids, rows, hint)


def _embedding_check(weight, ids) -> None:
    # every decode step checks its token: read host ids in place, copy device ones
    d = ids._data
    if ids.device != "cpu":
        a = ids.numpy()
    elif d.size == 1:  # a decode step's one token, read where it sits
        a = d.storage[d.offset : d.offset + 1]
    else:
        a = d.as_numpy_view()
    check_ids("embedding", a, weight.shape[0])


register_op(
    "embedding",
    OpKind.OPAQUE,
    2,
    _embedding_infer,
    check=_embedding_check,
    onnx=onnx_emit.embedding,
)


@register_kernel("embedding", "numpy")
def embedding_numpy(weight, ids, out):
    return _wrap(np.take(_np(weight), _np(ids), axis=0), out)


def _prepare_embedding(out, inputs):
    if inputs[0].dtype != out.dtype:
        return None
    take = lambda target, w, i: np.take(w, i, axis=0, out=target)  # noqa: E731
    return prepared_kernel("embedding", out, inputs, take, contiguous=False)


embedding_numpy.prepare = _prepare_embedding


@register_kernel("embedding", "python")
def embedding_python(weight, ids, out):
    result = TensorData.empty(out.shape, out.dtype)
    n = out.shape[-1]
    for k in range(ids.size):
        pos = index_to_position(tuple(to_index(k, ids.shape)), ids.strides, ids.offset)
        row = int(ids.storage[pos])
        base = index_to_position((row, 0), weight.strides, weight.offset)
        for j in range(n):
            result.storage[k * n + j] = weight.storage[base + j * weight.strides[1]]
    return result


@register_vjp("embedding")
def embedding_vjp(grad, out, weight, ids):
    return dispatch("embedding_grad", grad, ids, num_embeddings=weight.shape[0]), None


# ---------------------------------------------------------------- embedding_grad (scatter-add)


@exercise("11.1")
def scatter_add_rows(grad: np.ndarray, ids: np.ndarray, num_rows: int) -> np.ndarray:
    """The gradient of an embedding lookup: add each row of ``grad`` into row ``ids[i]``.

    ``grad`` is ``(N, C)`` (one gradient row per looked-up token), ``ids`` is
    ``(N,)`` int64. Return a new ``(num_rows, C)`` array of ``grad``'s dtype:
    ``out[r] = sum of grad[i] over every i with ids[i] == r`` (zeros for rows
    never looked up). A token that occurs twice gets both rows added.

    Raise ``OpError("embedding_grad", problem, hint)`` when an id lies outside
    ``[0, num_rows)`` (name the id), or when ``grad`` and ``ids`` disagree on
    ``N`` (name both shapes). Write it without a Python loop over the rows.

    Example:
        >>> scatter_add_rows(np.array([[1., 2.], [3., 4.], [5., 6.]]), np.array([2, 0, 2]), 3)
        array([[3., 4.], [0., 0.], [6., 8.]])
    """
    raise NotImplementedError("Exercise 11.1: scatter_add_rows")


def _embedding_grad_infer(grad: Spec, ids: Spec, num_embeddings) -> Spec:
    _same_device("embedding_grad", grad, ids)
    if grad.shape[:-1] != ids.shape or grad.ndim == 0:
        raise OpError(
            "embedding_grad",
            f"grad {grad.shape} must be ids {ids.shape} plus one feature dim",
            hint="grad is the gradient of embedding(weight, ids)",
        )
    _need_float("embedding_grad", "grad", grad)
    return Spec((num_embeddings, grad.shape[-1]), grad.dtype, grad.device)


def _positive(op: str, name: str):
    def normalize(*specs, **attrs):
        v = attrs[name]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise OpError(op, f"{name} must be a positive int, got {v!r}")
        return {**attrs, name: int(v)}

    return normalize


register_op(
    "embedding_grad",
    OpKind.OPAQUE,
    2,
    _embedding_grad_infer,
    attrs={"num_embeddings": None},
    normalize=_positive("embedding_grad", "num_embeddings"),
    check=lambda grad, ids, num_embeddings: check_ids(
        "embedding_grad", ids.numpy(), num_embeddings
    ),
)


@register_kernel("embedding_grad", "numpy")
def embedding_grad_numpy(grad, ids, out, num_embeddings):
    g = _np(grad).reshape(-1, out.shape[1])
    return _wrap(scatter_add_rows(g, _np(ids).reshape(-1), num_embeddings), out)


@register_kernel("embedding_grad", "python")
def embedding_grad_python(grad, ids, out, num_embeddings):
    n = out.shape[1]
    result = TensorData.contiguous(np.zeros(out.size, out.dtype), out.shape)
    for k in range(ids.size):
        pos = index_to_position(tuple(to_index(k, ids.shape)), ids.strides, ids.offset)
        row = int(ids.storage[pos])
        idx = tuple(to_index(k, ids.shape))
        for j in range(n):
            p = index_to_position(idx + (j,), grad.strides, grad.offset)
            result.storage[row * n + j] += grad.storage[p]
    return result


@register_vjp("embedding_grad")
def embedding_grad_vjp(grad, out, g, ids, num_embeddings):
    return dispatch("embedding", grad, ids), None  # a scatter-add's adjoint is the gather


# ---------------------------------------------------------------- layer norm


def _layer_norm_infer(x: Spec, weight: Spec, bias: Spec, eps) -> Spec:
    _same_device("layer_norm", x, weight, bias)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise OpError("layer_norm", f"x needs a non-empty last dim, got shape {x.shape}")
    for name, s in (("weight", weight), ("bias", bias)):
        if s.shape != x.shape[-1:]:
            raise OpError(
                "layer_norm",
                f"{name} has shape {s.shape}, but x {x.shape} normalises {x.shape[-1]} features",
                hint=f"{name} is one value per feature: shape ({x.shape[-1]},)",
            )
    for name, s in (("x", x), ("weight", weight), ("bias", bias)):
        _need_float("layer_norm", name, s)
    return Spec(x.shape, dt.promote(dt.promote(x.dtype, weight.dtype), bias.dtype), x.device)


def _eps(x, weight, bias, eps):
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise OpError("layer_norm", f"eps must be a positive number, got {eps!r}", hint="e.g. 1e-5")
    return {"eps": float(eps)}


register_op(
    "layer_norm",
    OpKind.OPAQUE,
    3,
    _layer_norm_infer,
    attrs={"eps": 1e-5},
    normalize=_eps,
    onnx=onnx_emit.layer_norm,
)


def layer_norm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _layer_norm64(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    with np.errstate(all="ignore"):  # float64 inside, as the other backends' loops
        x, w, b = (t.astype(np.float64, copy=False) for t in (x, w, b))
        d = x - x.mean(axis=-1, keepdims=True)  # layer_norm_ref's steps, with two temporaries
        var = np.square(d).mean(axis=-1, keepdims=True)
        var += eps
        d /= np.sqrt(var, out=var)
        d *= w
        d += b
        return d


@register_kernel("layer_norm", "numpy")
def layer_norm_numpy(x, weight, bias, out, eps):
    return _wrap(_layer_norm64(_np(x), _np(weight), _np(bias), eps), out)


def _layer_norm_into(target, x, w, b, eps):
    np.copyto(target, _layer_norm64(x, w, b, eps), casting="unsafe")


# chapter 8: a plan's step writes its result into its place in the arena
layer_norm_numpy.prepare = lambda out, inputs: prepared_kernel(
    "layer_norm", out, inputs, _layer_norm_into, contiguous=False
)


@register_kernel("layer_norm", "python")
def layer_norm_python(x, weight, bias, out, eps):
    n = out.shape[-1]
    result = TensorData.empty(out.shape, out.dtype)
    w = [float(weight.storage[weight.offset + j * weight.strides[0]]) for j in range(n)]
    b = [float(bias.storage[bias.offset + j * bias.strides[0]]) for j in range(n)]
    for r, (_, pos) in enumerate(_py_rows(x)):
        row = [float(x.storage[p]) for p in pos]
        mean = sum(row) / n
        var = sum((v - mean) ** 2 for v in row) / n
        inv = 1.0 / math.sqrt(var + eps) if var == var else math.nan
        for j, v in enumerate(row):
            result.storage[r * n + j] = (v - mean) * inv * w[j] + b[j]
    return result


@exercise("11.2")
def layer_norm_vjp(grad, x, weight, eps: float):
    """The gradients ``(for x, for weight, for bias)`` of ``layer_norm(x, weight, bias, eps)``.

    Layer norm normalises each row (the last dim, ``C`` features) of ``x``:
    ``xhat = (x - mean) / sqrt(var + eps)`` (``var`` without Bessel's
    correction), then ``out = xhat * weight + bias``. ``grad`` has ``x``'s
    shape. Write the result with Tensor ops only (``sum``, ``mean``, ``*``,
    ``sqrt``...), never numpy, so that the backward pass can be traced and
    runs on every backend.

    * the bias and weight gradients sum ``grad`` (and ``grad * xhat``) over
      every dim but the last: shape ``(C,)``;
    * the input gradient has ``x``'s shape; ``mean`` and ``var`` depend on
      every element of the row, so each element's gradient involves the
      whole row (derive it, or see the book's hints).

    Example:
        >>> x = minitorch.tensor([[1.0, 2.0, 3.0]]); w = minitorch.ones(3)
        >>> gx, gw, gb = layer_norm_vjp(minitorch.ones(1, 3), x, w, 1e-5)
        >>> gx.numpy().round(6), gb.numpy()       # a constant grad is lost in the mean
        (array([[0., 0., 0.]], dtype=float32), array([1., 1., 1.], dtype=float32))
    """
    raise NotImplementedError("Exercise 11.2: layer_norm_vjp")


@register_vjp("layer_norm")
def _layer_norm_vjp(grad, out, x, weight, bias, eps):
    return layer_norm_vjp(grad, x, weight, eps)


# ---------------------------------------------------------------- GELU (tanh form)

_C = math.sqrt(2.0 / math.pi)


def _gelu(x):
    x = x * 1.0
    return 0.5 * x * (1.0 + math.tanh(_C * (x + 0.044715 * x * x * x)))


def _gelu_infer(a: Spec) -> Spec:
    if a.dtype == dt.bool_:
        raise OpError("gelu", "cannot apply gelu to a bool tensor", hint="cast with .float()")
    return Spec(a.shape, a.dtype if dt.is_float(a.dtype) else dt.float32, a.device)


def _gelu_parts(emit, x):
    """``gelu_numpy``'s steps as registry ops: fusion runs the arithmetic around the tanh as
    generated loops (``fusion/split.py``), with the same bits."""
    t = emit("mul", emit("mul", x, x), x)
    t = emit("mul", emit("add", emit("mul", t, emit.const(0.044715)), x), emit.const(_C))
    t = emit("add", emit("tanh", t), emit.const(1.0))
    return emit("mul", t, emit("mul", x, emit.const(0.5)))


register_op(
    "gelu", OpKind.ELEMENTWISE, 1, _gelu_infer, scalar=_gelu, onnx=onnx_emit.gelu, parts=_gelu_parts
)


def gelu_ref(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(_C * (x + 0.044715 * (x * x * x))))  # x**3 is 8x slower


@register_kernel("gelu", "numpy")
def gelu_numpy(a, out):
    """``gelu_ref`` in the input's float type (numpy's float32 ``tanh`` is vectorised, float64's
    is not: 4x faster), with two temporaries instead of eight; integers in float64."""
    x = _np(a)
    x = (x if x.dtype in (np.float32, np.float64) else x.astype(np.float64)).reshape(-1)
    with np.errstate(all="ignore"):  # 1-d: a 0-d product would be a numpy scalar
        t = x * x
        t *= x
        t *= 0.044715
        t += x
        t *= _C
        np.tanh(t, out=t)
        t += 1.0
        h = x * 0.5
        t *= h
        return _wrap(t.reshape(out.shape), out)


@register_vjp("gelu")
def gelu_vjp(grad, out, x):
    inner = (x + x * x * x * 0.044715) * _C
    t = inner.tanh()
    d_inner = (x * x * (3 * 0.044715) + 1.0) * _C
    return (grad * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * d_inner),)


# ---------------------------------------------------------------- causal mask


def _mask_infer(x: Spec, fill) -> Spec:
    if x.ndim < 2:
        raise OpError(
            "causal_mask",
            f"needs scores of shape (..., queries, keys), got shape {x.shape}",
            hint="apply it to q @ k.transpose(-2, -1)",
        )
    if x.shape[-2] > x.shape[-1]:
        raise OpError(
            "causal_mask",
            f"{x.shape[-2]} queries but only {x.shape[-1]} keys: the last queries see no key",
            hint="queries are the last positions of the keys' sequence (Tq <= Tk)",
        )
    _need_float("causal_mask", "x", x)
    return x


def _fill(x, fill):
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        raise OpError("causal_mask", f"fill must be a number, got {fill!r}", hint="-inf or 0.0")
    return {"fill": float(fill)}


register_op(
    "causal_mask",
    OpKind.OPAQUE,
    1,
    _mask_infer,
    attrs={"fill": -math.inf},
    normalize=_fill,
    onnx=onnx_emit.causal_mask,
)


def visible(tq: int, tk: int) -> np.ndarray:
    """Which keys each query sees: query i is position ``tk - tq + i`` of the keys."""
    return np.arange(tk)[None, :] <= np.arange(tq)[:, None] + (tk - tq)


@register_kernel("causal_mask", "numpy")
def causal_mask_numpy(x, out, fill):
    v = _np(x)
    return _wrap(np.where(visible(*v.shape[-2:]), v, out.dtype.type(fill)), out)


@register_kernel("causal_mask", "python")
def causal_mask_python(x, out, fill):
    tq, tk = out.shape[-2:]
    result = TensorData.empty(out.shape, out.dtype)
    for r, (idx, pos) in enumerate(_py_rows(x)):
        i = idx[-1]
        for j, p in enumerate(pos):
            result.storage[r * tk + j] = x.storage[p] if j <= i + tk - tq else fill
    return result


@register_vjp("causal_mask")
def causal_mask_vjp(grad, out, x, fill):
    return (dispatch("causal_mask", grad, fill=0.0),)


# ---------------------------------------------------------------- Numba and CUDA kernels

for _op, _fn in {
    "embedding": "embedding",
    "embedding_grad": "embedding_grad",
    "layer_norm": "layer_norm",
    "causal_mask": "causal_mask",
}.items():
    register_kernel(_op, "numba")(lazy_kernel("fast", _fn))
for _op in ("embedding", "embedding_grad", "layer_norm", "causal_mask", "softmax"):
    register_kernel(_op, "cuda")(lazy_kernel("cuda", _op))
