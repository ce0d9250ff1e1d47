"""Shape inference, written by hand for two ops (exercises 5.2 and 5.3).

The registry's ``infer`` functions (``minitorch/core/ops.py``) are what eager
mode and the tracer run. These standalone versions are checked against them:
same output :class:`Spec` on good input, an :class:`OpError` on bad input.
"""

from __future__ import annotations

from ..core.errors import OpError  # noqa: F401  (the error the exercises raise)
from ..core.registry import Spec
from ..exercises import exercise


@exercise("5.2")
def infer_matmul(a: Spec, b: Spec) -> Spec:
    """The output Spec of ``a @ b`` (batched matrix multiply), without computing it.

    Rules (numpy's ``matmul`` for inputs with 2+ dimensions):

    * both inputs need at least 2 dimensions and ``a.shape[-1] == b.shape[-2]``,
      otherwise raise ``OpError("matmul", problem, hint)`` naming both shapes;
    * the leading (batch) dimensions ``a.shape[:-2]`` and ``b.shape[:-2]``
      broadcast together (use ``minitorch.tensor.indexing.broadcast_shape``;
      re-raise its error as an ``OpError("matmul", ...)`` that keeps its
      problem, which names the two batch shapes);
    * the result is ``batch + (a.shape[-2], b.shape[-1])``, with dtype
      ``minitorch.core.dtypes.promote(a.dtype, b.dtype)`` on ``a.device``.

    Example:
        >>> infer_matmul(Spec((5, 2, 3), float32), Spec((3, 4), float32))
        Spec(shape=(5, 2, 4), dtype=dtype('float32'), device='cpu')

    Hint: compare with ``get_op("matmul").infer`` on a few shapes.
    """
    raise NotImplementedError("Exercise 5.2: infer_matmul")


@exercise("5.3")
def infer_reduce(a: Spec, axis, keepdims: bool = False) -> Spec:
    """The output Spec of ``a.sum(axis, keepdims)``, without computing it.

    * ``axis`` is ``None`` (every axis), an int or a tuple of ints; negative
      axes count from the end (``-1`` is the last);
    * an axis outside ``[-ndim, ndim)`` or a repeated axis raises
      ``OpError("sum", problem, hint)`` naming the axis and the number of dims;
    * reduced axes disappear, or stay with size 1 if ``keepdims``;
    * the dtype is ``a.dtype``, except that summing bools gives ``int64``.

    Example:
        >>> infer_reduce(Spec((2, 3, 4), float32), axis=(0, -1)).shape
        (3,)
        >>> infer_reduce(Spec((2, 3, 4), float32), axis=1, keepdims=True).shape
        (2, 1, 4)

    Hint: normalise the axes to a set of non-negative ints first.
    """
    raise NotImplementedError("Exercise 5.3: infer_reduce")
