"""Chapter 2: reverse-mode automatic differentiation on the shared op registry.

Importing this package registers a backward rule on every differentiable op
(:mod:`.rules`) and the ``pad_slice`` op (:mod:`.ops`).
"""

from . import ops as _ops  # noqa: F401  (registers pad_slice)
from . import rules as _rules  # noqa: F401  (registers the backward rules)
from .backprop import backpropagate, backward, grad, graph_size, tape_bytes, toposort
from .check import gradcheck, numerical_grad
from .ops import pad_slice

__all__ = [
    "backpropagate",
    "backward",
    "grad",
    "gradcheck",
    "graph_size",
    "numerical_grad",
    "pad_slice",
    "tape_bytes",
    "toposort",
]
