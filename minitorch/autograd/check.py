"""Checking backward rules against central finite differences."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.tensor import Tensor, no_grad


def numerical_grad(fn: Callable[..., Tensor], *inputs: np.ndarray, eps: float = 1e-6) -> list:
    """Central differences of ``fn(*tensors).sum()`` w.r.t. each float64 input array.

    ``(f(x + eps) - f(x - eps)) / (2 eps)`` one element at a time: slow, exact
    to about ``eps**2``, and independent of any backward rule.
    """
    arrays = [np.array(x, dtype=np.float64) for x in inputs]
    grads = []
    with no_grad():
        for x in arrays:
            g = np.zeros_like(x)
            for idx in np.ndindex(x.shape):
                old = x[idx]
                x[idx] = old + eps
                hi = fn(*(Tensor(a) for a in arrays)).sum().item()
                x[idx] = old - eps
                lo = fn(*(Tensor(a) for a in arrays)).sum().item()
                x[idx] = old
                g[idx] = (hi - lo) / (2 * eps)
            grads.append(g)
    return grads


def analytic_grad(fn: Callable[..., Tensor], *inputs: np.ndarray) -> list:
    """The gradients of ``fn(*tensors).sum()`` from ``backward`` (None where none flowed)."""
    leaves = [Tensor(np.array(x, dtype=np.float64), requires_grad=True) for x in inputs]
    fn(*leaves).sum().backward()
    return [None if t.grad is None else t.grad.numpy() for t in leaves]


def gradcheck(fn: Callable[..., Tensor], *inputs, eps: float = 1e-6, rtol=1e-4, atol=1e-6) -> bool:
    """True when ``backward`` agrees with finite differences for ``fn`` at ``inputs``.

    Raises ``AssertionError`` with the first mismatch otherwise.
    """
    num = numerical_grad(fn, *inputs, eps=eps)
    ana = analytic_grad(fn, *inputs)
    for i, (n, a) in enumerate(zip(num, ana)):
        a = np.zeros_like(n) if a is None else a
        if a.shape != n.shape or not np.allclose(a, n, rtol=rtol, atol=atol):
            raise AssertionError(
                f"gradcheck: input {i}: backward gives\n{a}\nfinite differences give\n{n}"
            )
    return True
