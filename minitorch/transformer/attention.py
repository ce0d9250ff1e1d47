"""Scaled dot-product attention (exercise 11.3): a composite of registry ops, not an op.

Written with ``matmul``, ``mul``, ``causal_mask``, ``where`` and ``softmax``,
it needs no kernel or backward rule of its own, and the tracer records every
step: fusion groups the elementwise parts, the memory planner sees the
``(Tq, Tk)`` scores as a buffer it can reuse, and ``explain`` lists them all.
"""

from __future__ import annotations

from ..core.errors import OpError  # noqa: F401  (what exercise 11.3 raises)
from ..core.registry import dispatch  # noqa: F401  (the exercise dispatches causal_mask, softmax)
from ..core.tensor import Tensor
from ..exercises import exercise


@exercise("11.3")
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, key_mask=None) -> Tensor:
    """``softmax(q @ k^T / sqrt(D) [masked]) @ v`` over the last two dims, built from registry ops.

    Shapes: ``q`` is ``(..., Tq, D)``, ``k`` is ``(..., Tk, D)``, ``v`` is
    ``(..., Tk, Dv)``; leading (batch, head) dims broadcast as in ``matmul``.
    The result is ``(..., Tq, Dv)``.

    * scale the scores by ``1 / sqrt(D)`` (``D`` = the last dim of ``q``);
    * ``causal=True``: query ``i`` may only see keys ``j <= i + (Tk - Tq)``
      (the queries are the *last* ``Tq`` positions): use the registry op
      ``dispatch("causal_mask", scores)``, which sets the others to ``-inf``;
    * ``key_mask`` (a bool tensor broadcasting to the scores' shape): a key
      where it is False is hidden (``-inf``) too;
    * softmax over the keys with ``dispatch("softmax", scores, axis=-1)``.

    Raise ``OpError("attention", problem, hint)`` naming the shapes when a
    tensor has fewer than 2 dims, when ``q`` and ``k`` disagree on ``D`` or
    ``k`` and ``v`` on ``Tk``; and naming the dtype when ``key_mask`` is not bool.

    Example:
        >>> q = k = v = minitorch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
        >>> attention(q, k, v).numpy().round(3)   # the first query sees only the first key
        array([[[1.   , 0.   ],
                [0.33 , 0.67 ]]], dtype=float32)
    """
    raise NotImplementedError("Exercise 11.3: attention")
