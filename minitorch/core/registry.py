"""The op registry: every operation is defined here once.

An :class:`OpDef` says what an op *is* (name, kind, attributes with defaults, a
shape/dtype inference function, checks on input values, a scalar formula for
elementwise ops) and holds what later chapters hang on it: kernels per backend
(chapters 1, 3, 4), a vector-Jacobian product (chapter 2), and nothing else is
needed by the tracer (chapter 5) or the graph passes (chapter 6), which read
``kind``, ``infer`` and ``attrs``.

Eager calls, traced calls and backward rules all go through :func:`dispatch`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .errors import OpError


class OpKind(enum.Enum):
    ELEMENTWISE = "elementwise"  # one input, out[i] = f(a[i])
    BROADCAST = "broadcast"  # several inputs broadcast together, out[i] = f(a[i], b[i], ...)
    VIEW = "view"  # injective: moves or shares elements, computes nothing
    REDUCE = "reduce"  # folds axes
    ANCHOR = "anchor"  # heavy ops a fuser builds around: matmul, conv
    OPAQUE = "opaque"  # anything else


@dataclass(frozen=True)
class Spec:
    """What shape inference knows about a value: shape, dtype, device."""

    shape: tuple[int, ...]
    dtype: np.dtype
    device: str = "cpu"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"


REQUIRED = object()  # marks an attribute without a default


@dataclass
class OpDef:
    name: str
    kind: OpKind
    num_inputs: int
    infer: Callable[..., Spec]  # infer(*input_specs, **attrs) -> output Spec; raises OpError
    attrs: dict[str, Any] = field(default_factory=dict)
    normalize: Callable[..., dict] | None = None  # canonical attrs from input specs
    # checks on input values (ids in range): eager runs them, and every compiled plan
    # before the op's kernel, whichever kernel it is (``passes.plan.checked_kernel``)
    check: Callable[..., None] | None = None  # check(*input_tensors, **attrs); raises OpError
    check_if: Callable[..., bool] | None = None  # check_if(*input_specs): can check refuse?
    scalar: Callable | None = None  # per-element formula (elementwise/broadcast)
    kernels: dict[str, Callable] = field(default_factory=dict)  # backend name -> kernel
    # chapter 9: other CPU kernels of the op that max-autotune times beside the backends'
    variants: dict[str, Callable] = field(default_factory=dict)  # name -> kernel
    vjp: Callable | None = None  # chapter 2: vjp(grad, out, *inputs, **attrs)
    onnx: Callable | None = None  # chapter 10: onnx(ctx, node, names) -> output name
    expr: str | None = None  # chapter 7: ``scalar`` as an inline template, "({0} + {1})"
    numpy: Callable | None = None  # the numpy function of the numpy backend's generic kernel
    transcendental: bool = False  # chapter 7's cost model: a libm call per element in Numba
    identity: float | None = None  # a reduction's starting value (chapter 3's folds, chapter 7's)
    vector: str | None = None  # chapter 7: the float32 function in fusion/vecmath that vectorises
    # chapter 7: the op's numpy kernel step by step as registry ops, parts(emit, *inputs) -> node
    # (``emit(op, *inputs)``, ``emit.const(value)``), so fusion can split it (``fusion/split.py``)
    parts: Callable | None = None
    pure: bool = True  # chapter 6: equal inputs give equal values and nothing else happens
    fusable: bool = True  # chapter 7: False keeps the op out of every fused loop body
    doc: str = ""

    def bind(self, attrs: dict, specs: list[Spec]) -> dict:
        """Fill in defaults, reject unknown or missing attributes, normalise."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise OpError(
                self.name,
                f"unknown attribute(s) {sorted(unknown)}",
                hint=f"{self.name} takes {sorted(self.attrs) or 'no attributes'}",
            )
        bound = {k: attrs.get(k, d) for k, d in self.attrs.items()}
        missing = [k for k, v in bound.items() if v is REQUIRED]
        if missing:
            raise OpError(self.name, f"missing attribute(s) {missing}")
        if self.normalize is not None:
            bound = self.normalize(*specs, **bound)
        return bound

    def checks(self, specs: list[Spec]) -> bool:
        """Must a call on inputs of these specs run ``check`` (a plan then keeps the op
        out of fused loops and runs it before the kernel)? Asked without inputs (the op in
        general), only a check that applies to every input does."""
        if self.check is None:
            return False
        if self.check_if is None:
            return True
        return bool(specs) and bool(self.check_if(*specs))

    def __repr__(self) -> str:
        return (
            f"OpDef({self.name}, {self.kind.value}, inputs={self.num_inputs}, attrs={self.attrs})"
        )


OPS: dict[str, OpDef] = {}


def register_op(name: str, kind: OpKind, num_inputs: int, infer: Callable, **fields) -> OpDef:
    """Add an op to the registry (the built-in ops and user custom ops alike)."""
    if name in OPS:
        raise ValueError(f"register_op: an op named {name!r} is already registered")
    op = OpDef(name, kind, num_inputs, infer, **fields)
    OPS[name] = op
    return op


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}; registered ops: {', '.join(sorted(OPS))}") from None


def register_kernel(op_name: str, backend: str) -> Callable[[Callable], Callable]:
    """Decorator: ``kernel(*inputs, out=Spec, **attrs) -> TensorData`` for ``backend``.

    ``backend="*"`` registers a kernel every backend shares (views only touch metadata).
    """

    def deco(fn: Callable) -> Callable:
        get_op(op_name).kernels[backend] = fn
        return fn

    return deco


def register_variant(op_name: str, name: str) -> Callable[[Callable], Callable]:
    """Decorator: another CPU kernel of ``op_name`` (same signature as a backend's) that
    chapter 9's ``max-autotune`` times beside the backends' kernels; never chosen otherwise."""

    def deco(fn: Callable) -> Callable:
        get_op(op_name).variants[name] = fn
        return fn

    return deco


def register_vjp(op_name: str) -> Callable[[Callable], Callable]:
    """Decorator: the backward rule of ``op_name`` (chapter 2)."""

    def deco(fn: Callable) -> Callable:
        get_op(op_name).vjp = fn
        return fn

    return deco


# Objects that are not concrete tensors (the chapter-5 tracer's values) take over
# dispatch by defining ``__minitorch_dispatch__(op, inputs, attrs)`` on their type.
_eager_apply: Callable | None = None
_profile_hook: Callable | None = None  # chapter 10: set only while a profiler records


def dispatch(name: str, *inputs, **attrs):
    """The one entry point of every op call: eager, traced or inside a backward rule."""
    op = get_op(name)
    if len(inputs) != op.num_inputs:
        raise OpError(name, f"expected {op.num_inputs} tensor input(s), got {len(inputs)}")
    for x in inputs:
        handler = getattr(type(x), "__minitorch_dispatch__", None)
        if handler is not None:
            return handler(op, inputs, attrs)
    if _profile_hook is not None:
        return _profile_hook(op, inputs, attrs)
    return _eager_apply(op, inputs, attrs)
