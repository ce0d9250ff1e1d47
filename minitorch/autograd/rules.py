"""Chapter 2, exercises 2.1-2.6: the backward rule (vector-Jacobian product) of every op.

For ``out = f(a, b, ...)`` and ``grad = dL/d(out)`` (same shape as ``out``), a
VJP returns ``dL/da, dL/db, ...``, each shaped like its input. Rules are
written with Tensor operations only (never raw numpy): every step then goes
through :func:`dispatch`, so the chapter-5 tracer can record the backward
pass as a graph, and the backward pass itself could be differentiated.

The exercises are the rules; the bottom of this file registers them (and the
rules that are not exercises) on the op registry with ``register_vjp``.
"""

from __future__ import annotations

from ..core import dtypes as dt
from ..core.creation import where
from ..core.registry import register_vjp
from ..core.tensor import Tensor
from ..exercises import exercise

UNARY_OPS = ("neg", "abs", "exp", "log", "sqrt", "recip", "tanh", "sigmoid", "relu")
BINARY_OPS = ("add", "sub", "mul", "div")
REDUCE_OPS = ("sum", "mean", "max")
VIEW_OPS = ("permute", "reshape", "expand", "getitem")


@exercise("2.1")
def unbroadcast(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``grad`` down to ``shape``: the backward of broadcasting.

    When an input of shape ``shape`` was broadcast to ``grad.shape`` in the
    forward pass, each of its elements was used once per copy, so its
    gradient is the *sum* of the gradients of all its copies. Two cases:

    * leading dimensions that broadcasting added: sum them away;
    * dimensions of size 1 in ``shape`` that grew: sum them with ``keepdims=True``.

    Return ``grad`` itself when the shapes already match. Use ``Tensor.sum``
    (with a tuple ``axis``) rather than numpy: the result is a tensor on ``grad``'s device.

    Example:
        >>> g = minitorch.ones(2, 3, 4)
        >>> unbroadcast(g, (3, 1)).numpy()      # each element had 2 * 4 copies
        array([[8.], [8.], [8.]], dtype=float32)
    """
    raise NotImplementedError("Exercise 2.1: unbroadcast")


@exercise("2.2")
def unary_vjp(op: str, grad: Tensor, out: Tensor, a: Tensor) -> Tensor:
    """The gradient for ``a`` of the elementwise op ``out = op(a)``.

    ``op`` is one of ``neg, abs, exp, log, sqrt, recip, tanh, sigmoid, relu``.
    Each rule is ``grad * f'(a)``, a tensor of ``a``'s shape, written with
    Tensor ops. Raise ``KeyError`` for another op. At a kink (``relu`` and
    ``abs`` at 0) the derivative is taken to be 0.

    Hint: the saved output ``out`` makes several derivatives cheaper. For
    example ``exp' = exp = out``; find the similar forms for ``sqrt``,
    ``recip``, ``tanh`` and ``sigmoid`` (differentiate, then look for ``out``
    in the result). ``minitorch.where`` picks per element for ``relu`` and ``abs``.

    Example:
        >>> a = minitorch.tensor([1.0, 4.0])
        >>> unary_vjp("sqrt", minitorch.ones(2), a.sqrt(), a).numpy()
        array([0.5 , 0.25], dtype=float32)
    """
    raise NotImplementedError("Exercise 2.2: unary_vjp")


@exercise("2.3")
def binary_vjp(op: str, grad: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """The gradients ``(for a, for b)`` of ``out = op(a, b)``, ``op`` in ``add, sub, mul, div``.

    ``a`` and ``b`` may have been broadcast to ``out.shape``: compute each
    gradient at ``out``'s shape, then bring it back with :func:`unbroadcast`
    (exercise 2.1) to ``a.shape`` and ``b.shape``. Raise ``KeyError`` for
    another op.

    Hint: ``add`` passes ``grad`` to both inputs unchanged; for the others,
    take the partial derivative of ``out`` with respect to each input while
    holding the other fixed (the book works ``mul`` through by hand). Prefer
    ``b * b`` to a power: it is one cheap op.

    Example:
        >>> a, b = minitorch.tensor([[1.0], [2.0]]), minitorch.tensor([3.0, 4.0, 5.0])
        >>> ga, gb = binary_vjp("mul", minitorch.ones(2, 3), a * b, a, b)
        >>> ga.numpy(), gb.numpy()       # ga sums b over the row; gb sums a over the column
        (array([[12.], [12.]], dtype=float32), array([3., 3., 3.], dtype=float32))
    """
    raise NotImplementedError("Exercise 2.3: binary_vjp")


@exercise("2.4")
def reduce_vjp(
    op: str, grad: Tensor, out: Tensor, a: Tensor, axis: tuple, keepdims: bool
) -> Tensor:
    """The gradient for ``a`` of ``out = a.op(axis=axis, keepdims=keepdims)``, ``op`` in ``sum, mean, max``.

    ``axis`` is already a sorted tuple of non-negative axes. First give
    ``grad`` (and ``out``) the kept-dims shape (size 1 on every reduced axis)
    with ``reshape`` when ``keepdims`` is False; then ``expand`` it to ``a.shape``.

    * ``sum``: every element of ``a`` gets the gradient of its sum;
    * ``mean``: the same, divided by the number of elements averaged;
    * ``max``: only the elements equal to the maximum get it; when several
      tie, share it evenly (divide by how many tie), so the rule stays exact.

    Example:
        >>> a = minitorch.tensor([[1.0, 5.0, 5.0], [2.0, 0.0, 1.0]])
        >>> reduce_vjp("max", minitorch.ones(2), a.max(axis=1), a, (1,), False).numpy()
        array([[0. , 0.5, 0.5],
               [1. , 0. , 0. ]], dtype=float32)
    """
    raise NotImplementedError("Exercise 2.4: reduce_vjp")


@exercise("2.5")
def matmul_vjp(grad: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """The gradients ``(for a, for b)`` of ``out = a @ b`` (2+ dims, batch dims broadcast).

    Each result has its input's shape. With batch dimensions the rule holds
    per batch; a batch dimension that was broadcast (missing, or of size 1)
    must then be summed away: use :func:`unbroadcast` to ``a.shape`` /
    ``b.shape``.

    Hint: let the shapes find the formula. ``grad`` is ``(n, m)``, ``a`` is
    ``(n, k)`` and ``b`` is ``(k, m)``; the gradient for ``a`` must be
    ``(n, k)``, and there is one way to get that from ``grad`` and ``b`` with
    one matrix product and one transpose (``x.transpose(-2, -1)`` swaps the
    last two axes). Check it on ``out[i, j] = sum_k a[i, k] * b[k, j]``.

    Example:
        >>> a, b = minitorch.ones(2, 3), minitorch.ones(3, 4)
        >>> ga, gb = matmul_vjp(minitorch.ones(2, 4), a @ b, a, b)
        >>> ga.shape, gb.shape, float(ga.sum())
        ((2, 3), (3, 4), 24.0)
    """
    raise NotImplementedError("Exercise 2.5: matmul_vjp")


@exercise("2.6")
def view_vjp(op: str, grad: Tensor, a: Tensor, attrs: dict) -> Tensor:
    """The gradient for ``a`` of the view ``out = op(a, **attrs)``.

    A view moves elements without computing, so its backward moves the
    gradient back:

    * ``permute`` (``attrs["order"]``): permute by the inverse order;
    * ``reshape`` (``attrs["shape"]``): reshape back to ``a.shape``;
    * ``expand`` (``attrs["shape"]``): a broadcast, so :func:`unbroadcast`;
    * ``getitem`` (``attrs["key"]``, a tuple of ints and slices): the picked
      elements get ``grad``, the others 0. That is a scatter, the registered
      op ``pad_slice(grad, key, a.shape)`` from ``minitorch.autograd.ops``.

    Example:
        >>> a = minitorch.zeros(2, 3, 4)
        >>> view_vjp("permute", minitorch.ones(4, 2, 3), a, {"order": (2, 0, 1)}).shape
        (2, 3, 4)
    """
    raise NotImplementedError("Exercise 2.6: view_vjp")


# ---------------------------------------------------------------- registration
# The registered rules call the exercises by name, so the mode (learner,
# reference, isolated) chooses whose rule runs at backward time.


def _register(names, make):
    for name in names:
        register_vjp(name)(make(name))


_register(UNARY_OPS, lambda op: lambda grad, out, a: (unary_vjp(op, grad, out, a),))
_register(BINARY_OPS, lambda op: lambda grad, out, a, b: binary_vjp(op, grad, out, a, b))
_register(
    REDUCE_OPS,
    lambda op: lambda grad, out, a, axis, keepdims: (reduce_vjp(op, grad, out, a, axis, keepdims),),
)
_register(VIEW_OPS, lambda op: lambda grad, out, a, **attrs: (view_vjp(op, grad, a, attrs),))
register_vjp("matmul")(matmul_vjp)


# Rules that are not exercises.


@register_vjp("min")
def _min_vjp(grad, out, a, axis, keepdims):
    # min(a) = -max(-a): reuse the max rule (ties shared evenly).
    return (reduce_vjp("max", grad, -out, -a, axis, keepdims),)


@register_vjp("contiguous")
def _contiguous_vjp(grad, out, a):
    return (grad,)


@register_vjp("cast")
def _cast_vjp(grad, out, a, dtype):
    # Integer and bool inputs carry no gradient.
    return (grad.astype(a.dtype) if dt.is_float(a.dtype) else None,)


@register_vjp("where")
def _where_vjp(grad, out, c, a, b):
    zero = grad * 0
    return (
        None,
        unbroadcast(where(c, grad, zero), a.shape),
        unbroadcast(where(c, zero, grad), b.shape),
    )


def _extremum_vjp(pick_a):
    # Ties share the gradient evenly, like the max reduction.
    def vjp(grad, out, a, b):
        half = grad * 0.5
        zero = grad * 0
        ga = where(pick_a(a, b), grad, where(a == b, half, zero))
        gb = where(pick_a(b, a), grad, where(a == b, half, zero))
        return unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)

    return vjp


register_vjp("maximum")(_extremum_vjp(lambda x, y: x > y))
register_vjp("minimum")(_extremum_vjp(lambda x, y: x < y))


@register_vjp("pow")
def _pow_vjp(grad, out, a, b):
    # b * a**(b-1) is 0 * inf = NaN at a = 0, b = 0; the derivative of a**0 = 1 is 0.
    ga = where(b == 0, grad * 0, grad * b * a ** (b - 1))
    # d(a**b)/db = out * log(a), defined for a > 0; elsewhere taken as 0.
    positive = a > 0
    safe = where(positive, a, a * 0 + 1)
    gb = where(positive, grad * out * safe.log(), grad * 0)
    return unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)


# Comparisons and argmax are piecewise constant: no gradient flows through them.
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    register_vjp(_name)(lambda grad, out, a, b: (None, None))
register_vjp("argmax")(lambda grad, out, a, axis, keepdims: (None,))
