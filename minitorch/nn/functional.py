"""Chapter 2, exercises 2.9-2.10: activations and numerically stable losses.

All of these are compositions of registered ops, so their gradients come from
the ops' backward rules: nothing here needs a rule of its own.
"""

from __future__ import annotations

from ..core.tensor import Tensor
from ..exercises import exercise


def relu(x: Tensor) -> Tensor:
    return x.relu()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


@exercise("2.9")
def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``log(softmax(x))`` along ``axis``, stable for large inputs.

    ``log_softmax(x) = x - log(sum(exp(x)))``. Written that way ``exp``
    overflows to ``inf`` for inputs around 100 (float32) and the result is
    ``nan``. Subtract the maximum ``m`` along ``axis`` first (keep the dims):
    ``z = x - m`` has a largest entry of 0, and ``z - log(sum(exp(z)))`` is
    the same value. ``m`` is a constant for the gradient (the result does not
    change when ``m`` does): take it from ``x.detach()``.

    Example:
        >>> log_softmax(minitorch.tensor([[1000.0, 1000.0]])).numpy()
        array([[-0.6931472, -0.6931472]], dtype=float32)
    """
    raise NotImplementedError("Exercise 2.9: log_softmax")


@exercise("2.10")
def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """The mean negative log-likelihood of the ``targets`` classes: a 0-d tensor.

    ``logits`` has shape ``(N, C)`` (unnormalised scores), ``targets`` shape
    ``(N,)`` with int64 class indices in ``[0, C)``. The loss is
    ``-mean over rows of log_softmax(logits)[row, targets[row]]``.

    Pick the target entries with a one-hot mask built from registered ops
    (``targets.reshape(N, 1) == minitorch.arange(C, device=logits.device).reshape(1, C)``,
    cast to the logits' dtype), multiply and sum: no Python loop over rows. Use
    :func:`log_softmax` (exercise 2.9) for stability.

    Raise ``OpError("cross_entropy", ...)`` when ``logits`` is not 2-D or
    ``targets`` is not of shape ``(N,)``, naming both shapes; also when
    ``targets`` is not an integer tensor or (eager tensors only) holds a class
    outside ``[0, C)``: a wrong target must not quietly give a loss. A tensor
    whose type defines ``__minitorch_dispatch__`` (chapter 5's traced tensors)
    is not eager: it has a shape, a dtype and a device but no values to read.

    Example:
        >>> logits = minitorch.tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> cross_entropy(logits, minitorch.tensor([0, 1])).item()    # log 2
        0.6931471824645996
    """
    raise NotImplementedError("Exercise 2.10: cross_entropy")


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    return log_softmax(x, axis).exp()


def accuracy(logits: Tensor, targets: Tensor) -> float:
    """The fraction of rows whose largest logit is the target class."""
    return float((logits.argmax(axis=-1) == targets).astype("float32").mean().item())


def mse_loss(pred: Tensor, target: Tensor) -> Tensor:
    diff = pred - target
    return (diff * diff).mean()
