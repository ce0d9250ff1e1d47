"""The user-facing Tensor and the eager path of every op.

A Tensor is a :class:`TensorData` on a device plus what autograd needs
(``requires_grad``, ``grad`` and ``_node``, the op that made it). Every method
that computes goes through :func:`dispatch`, so the tracer of chapter 5 sees
exactly what eager execution runs.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ..backends import base as backends
from ..tensor.data import TensorData
from . import dtypes as dt
from . import registry
from .args import as_axis
from .errors import OpError
from .registry import OpDef, Spec, dispatch

# Chapter 2's ``backward(root, grad)`` puts itself here: chapter 1 imports no later chapter.
BACKWARD: list = []

# ---------------------------------------------------------------- grad mode


class _GradMode(threading.local):
    """Per thread, as in PyTorch: ranks that are threads of one process (chapter 12) each
    have their own, and a rank's ``no_grad`` never stops another's recording."""

    def __init__(self):
        self.stack = [True]


_grad_mode = _GradMode()


def is_grad_enabled() -> bool:
    return _grad_mode.stack[-1]


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Run ops without recording them for backward (evaluation, optimizer steps)."""
    _grad_mode.stack.append(False)
    try:
        yield
    finally:
        _grad_mode.stack.pop()


@contextlib.contextmanager
def enable_grad() -> Iterator[None]:
    _grad_mode.stack.append(True)
    try:
        yield
    finally:
        _grad_mode.stack.pop()


@dataclass
class Node:
    """How a tensor was made: the op, its input tensors and attributes (the autograd tape)."""

    op: OpDef
    inputs: tuple
    attrs: dict


# ---------------------------------------------------------------- eager apply


_alloc_hook: Callable | None = None  # chapter 8 sees every eager result here when set


def eager_apply(op: OpDef, inputs: tuple, attrs: dict) -> Tensor:
    for x in inputs:
        if not isinstance(x, Tensor):
            raise OpError(op.name, f"expected Tensor inputs, got {type(x).__name__}")
    specs = [x.spec for x in inputs]
    attrs = op.bind(attrs, specs)
    out_spec = op.infer(*specs, **attrs)
    if op.check is not None:
        op.check(*inputs, **attrs)
    kernel = backends.current(out_spec.device).kernel(op)
    data = kernel(*(x._data for x in inputs), out=out_spec, **attrs)
    if _alloc_hook is not None:  # chapter 8: track_memory() / temp_allocator() are on
        data = _alloc_hook(op, inputs, data)
    out = Tensor._make(data, out_spec.device)
    # Only float results carry gradients (comparisons and argmax of a tracked input do not).
    if _grad_mode.stack[-1] and dt.is_float(out.dtype) and any(x.requires_grad for x in inputs):
        out.requires_grad = True
        out._node = Node(op, inputs, attrs)
    return out


registry._eager_apply = eager_apply


# ---------------------------------------------------------------- Tensor


class Tensor:
    __array_priority__ = 100  # numpy scalars on the left defer to our operators
    # A Python number traced as a tensor (chapter 9: Adam's step count) stays "weak":
    # ``m / (1 - beta1 ** t)`` is float32 for a float32 ``m``, as in eager.
    _weak = False

    def __init__(self, data, dtype=None, requires_grad: bool = False, device: str = "cpu"):
        """Prefer :func:`minitorch.tensor`; this accepts the same arguments."""
        array = _to_numpy(data, dtype)
        if requires_grad and not dt.is_float(array.dtype):
            raise OpError(
                "tensor",
                f"requires_grad=True needs a float tensor, got dtype {array.dtype.name}",
                hint="only float tensors have gradients; pass dtype='float32'",
            )
        self._data = backends.current(device).from_numpy(array)
        self.device = device
        self.requires_grad = requires_grad
        self.grad: Tensor | None = None
        self._node: Node | None = None
        self.name: str | None = None

    @classmethod
    def _make(cls, data: TensorData, device: str = "cpu") -> Tensor:
        t = cls.__new__(cls)
        t._data, t.device = data, device
        t.requires_grad, t.grad, t._node, t.name = False, None, None, None
        return t

    # ------------------------------------------------------------ metadata
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and not dt.is_float(self.dtype):
            raise OpError(
                "requires_grad",
                f"only float tensors can require gradients, this one is {self.dtype.name}",
                hint="cast first: x = x.float(); x.requires_grad = True",
            )
        self._requires_grad = bool(value)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self._data.size

    def numel(self) -> int:
        return self._data.size

    @property
    def spec(self) -> Spec:
        return Spec(self.shape, self.dtype, self.device)

    @property
    def strides(self) -> tuple[int, ...]:
        return self._data.strides

    def is_contiguous(self) -> bool:
        return self._data.is_contiguous()

    def is_leaf(self) -> bool:
        return self._node is None

    # ------------------------------------------------------------ conversion
    def numpy(self) -> np.ndarray:
        """A numpy copy of the values (copied back from the device if needed)."""
        return backends.current(self.device).to_numpy(self._data)

    def item(self):
        if self.size != 1:
            raise OpError(
                "item",
                f"only a tensor with one element has an item, shape is {self.shape}",
                hint="reduce first, e.g. x.sum().item()",
            )
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def to(self, target) -> Tensor:
        """``to("cuda")``/``to("cpu")`` moves devices; ``to("float64")`` casts."""
        if isinstance(target, str) and target in ("cpu", "cuda"):
            if target == self.device:
                return self
            out = Tensor._make(backends.current(target).from_numpy(self.numpy()), target)
            out.requires_grad = self.requires_grad
            return out
        try:
            dtype = None if target is None else dt.as_dtype(target, "to")
        except OpError:
            dtype = None
        if dtype is None:
            raise OpError(
                "to",
                f"target {target!r} is neither a device nor a dtype",
                hint=f"devices: 'cpu', 'cuda'; dtypes: {', '.join(dt.DTYPES)}",
            )
        return self.astype(dtype)

    def astype(self, dtype) -> Tensor:
        dtype = dt.as_dtype(dtype, "astype")
        return self if dtype == self.dtype else dispatch("cast", self, dtype=dtype)

    def float(self) -> Tensor:
        return self.astype(dt.float32)

    def double(self) -> Tensor:
        return self.astype(dt.float64)

    def detach(self) -> Tensor:
        """The same values, cut from the autograd graph (shares storage)."""
        return Tensor._make(self._data, self.device)

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        extra = f", dtype={self.dtype.name}" if self.dtype != dt.float32 or self.size == 0 else ""
        if self.device != "cpu":
            extra += f", device={self.device!r}"
        if self._node is not None:
            extra += f", grad_fn={self._node.op.name}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        if self.size != 1:
            raise OpError(
                "bool",
                f"the truth value of a tensor of shape {self.shape} is ambiguous",
                hint="use (x > 0).all() style reductions, e.g. x.sum().item() > 0",
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __hash__(self) -> int:
        return id(self)

    # ------------------------------------------------------------ autograd
    def backward(self, grad: Tensor | None = None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (chapter 2 installs it)."""
        if not BACKWARD:
            raise OpError("backward", "autograd (chapter 2) is not loaded", hint="import minitorch")
        BACKWARD[0](self, grad)

    def zero_grad_(self) -> None:
        self.grad = None

    # ------------------------------------------------------------ operators
    def _lift(self, other) -> Tensor:
        return other if isinstance(other, Tensor) else _scalar_like(other, self)

    def _binary(self, name: str, other, reverse: bool = False) -> Tensor:
        weak = not isinstance(other, Tensor) or other._weak
        other = self._lift(other)
        if weak != self._weak:  # a weak value meets a tensor: it takes the tensor's kind
            if weak:
                other = other.astype(_weak_dtype(other.dtype, self))
            else:
                self = self.astype(_weak_dtype(self.dtype, other))
        a, b = (other, self) if reverse else (self, other)
        common = dt.promote(a.dtype, b.dtype)
        if name in ("div",) and not dt.is_float(common):
            common = dt.float32
        out = dispatch(name, a.astype(common), b.astype(common))
        if weak and self._weak:
            out._weak = True  # computed from Python numbers alone: still one
        return out

    def __add__(self, o):
        return self._binary("add", o)

    def __radd__(self, o):
        return self._binary("add", o, True)

    def __sub__(self, o):
        return self._binary("sub", o)

    def __rsub__(self, o):
        return self._binary("sub", o, True)

    def __mul__(self, o):
        return self._binary("mul", o)

    def __rmul__(self, o):
        return self._binary("mul", o, True)

    def __truediv__(self, o):
        return self._binary("div", o)

    def __rtruediv__(self, o):
        return self._binary("div", o, True)

    def __pow__(self, o):
        return self._binary("pow", o)

    def __rpow__(self, o):
        return self._binary("pow", o, True)

    def __matmul__(self, o):
        return self._binary("matmul", o)

    def __rmatmul__(self, o):
        return self._binary("matmul", o, True)

    def __neg__(self):
        return dispatch("neg", self)

    def __abs__(self):
        return dispatch("abs", self)

    def __eq__(self, o):  # noqa: D105 - elementwise, like numpy
        return self._binary("eq", o)

    def __ne__(self, o):
        return self._binary("ne", o)

    def __lt__(self, o):
        return self._binary("lt", o)

    def __le__(self, o):
        return self._binary("le", o)

    def __gt__(self, o):
        return self._binary("gt", o)

    def __ge__(self, o):
        return self._binary("ge", o)

    def __getitem__(self, key) -> Tensor:
        return dispatch("getitem", self, key=key)

    # ------------------------------------------------------------ elementwise
    def exp(self):
        return dispatch("exp", self)

    def log(self):
        return dispatch("log", self)

    def sqrt(self):
        return dispatch("sqrt", self)

    def tanh(self):
        return dispatch("tanh", self)

    def sigmoid(self):
        return dispatch("sigmoid", self)

    def relu(self):
        return dispatch("relu", self)

    def recip(self):
        return dispatch("recip", self)

    def abs(self):
        return dispatch("abs", self)

    def maximum(self, o):
        return self._binary("maximum", o)

    def minimum(self, o):
        return self._binary("minimum", o)

    # ------------------------------------------------------------ reductions
    def sum(self, axis=None, keepdims: bool = False):
        return dispatch("sum", self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims: bool = False):
        return dispatch("mean", self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims: bool = False):
        return dispatch("max", self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims: bool = False):
        return dispatch("min", self, axis=axis, keepdims=keepdims)

    def argmax(self, axis: int = -1, keepdims: bool = False):
        return dispatch("argmax", self, axis=axis, keepdims=keepdims)

    # ------------------------------------------------------------ views
    def permute(self, *order):
        return dispatch("permute", self, order=_dims(order))

    def transpose(self, dim0: int = -2, dim1: int = -1):
        if self.ndim < 2 and (dim0, dim1) == (-2, -1):
            return self  # the default swap on a vector or scalar: nothing to swap
        dim0, dim1 = (as_axis("transpose", d, self.ndim) for d in (dim0, dim1))
        if self.ndim < 2:
            return self
        order = list(range(self.ndim))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        return self.permute(*order)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def reshape(self, *shape):
        return dispatch("reshape", self, shape=_dims(shape))

    view = reshape

    def expand(self, *shape):
        return dispatch("expand", self, shape=_dims(shape))

    broadcast_to = expand

    def contiguous(self):
        return dispatch("contiguous", self)


def _dims(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _to_numpy(data, dtype) -> np.ndarray:
    if isinstance(data, Tensor):
        data = data.numpy()
    if dtype is None:
        array = np.asarray(data)
        if array.dtype.kind == "f":
            dtype = (
                array.dtype
                if array.dtype == dt.float64 and isinstance(data, np.ndarray)
                else dt.float32
            )
        elif array.dtype.kind in "iu":
            if array.dtype.kind == "u" or array.dtype.itemsize > 8:  # a signed int64 fits
                _check_int64("tensor", array)
            dtype = dt.int64
        elif array.dtype.kind == "b":
            dtype = dt.bool_
        else:
            if array.dtype == object and all(isinstance(v, int) for v in array.reshape(-1)):
                _check_int64("tensor", array)
            raise OpError(
                "tensor",
                f"cannot make a tensor from {type(data).__name__} of dtype {array.dtype}",
                hint="pass numbers, nested lists of numbers, or a numpy array",
            )
    dtype = dt.as_dtype(dtype, "tensor")
    if dtype == dt.int64 and isinstance(data, np.ndarray) and data.dtype.kind == "u":
        _check_int64("tensor", data)  # the cast below would wrap silently
    try:
        return np.asarray(data, dtype=dtype)
    except (OverflowError, ValueError, TypeError) as e:  # 2**70 as int64, "a" as float32
        raise OpError(
            "tensor",
            f"cannot convert the data to dtype {dtype.name} ({e})",
            hint="pass numbers that fit the dtype, or choose another dtype",
        ) from None


def _check_int64(op: str, array: np.ndarray) -> None:
    """Integers must fit int64: numpy would wrap uint64 above 2**63 silently."""
    if array.size == 0:
        return
    info = np.iinfo(np.int64)
    big = max(array.reshape(-1).tolist(), key=abs)
    if not info.min <= big <= info.max:
        raise OpError(
            op,
            f"the integer {big} does not fit int64 (range [-2**63, 2**63 - 1])",
            hint="pass dtype='float64' for a (rounded) float, or smaller numbers",
        )


def _weak_dtype(kind, like: Tensor):
    """The dtype a weak value of ``kind`` takes beside ``like``: like's own when that
    holds it (a float beside float32), else the smallest of its kind."""
    if dt.promote(kind, like.dtype) == like.dtype:
        return like.dtype
    return dt.float32 if dt.is_float(kind) else kind


def _scalar_like(value: Any, like: Tensor) -> Tensor:
    """A 0-d tensor for a Python scalar; scalars are weak and take ``like``'s kind."""
    if isinstance(value, np.ndarray):
        return Tensor(value, device=like.device)
    if not isinstance(value, (int, float, bool, np.number, np.bool_)):
        raise OpError("tensor", f"cannot combine a Tensor with {type(value).__name__}")
    kind = dt.scalar_dtype(value)
    if kind == dt.int64 and not dt.is_float(like.dtype):
        _check_int64("tensor", np.asarray(value, dtype=object))
    return Tensor(np.asarray(value, dtype=_weak_dtype(kind, like)), device=like.device)
