"""Chapter 2, exercises 2.12-2.13: optimizers.

An optimizer owns the per-parameter state (momentum buffers, Adam moments)
and, in :meth:`Optimizer.step`, replaces each parameter's values by the
result of a pure update rule, the exercise. The rules take and return
tensors; ``step`` runs them under ``no_grad`` so no graph is recorded.
"""

from __future__ import annotations

from ..core.tensor import Tensor, no_grad
from ..exercises import exercise


@exercise("2.12")
def sgd_step(
    param: Tensor,
    grad: Tensor,
    velocity: Tensor | None,
    lr: float,
    momentum: float,
    weight_decay: float,
) -> tuple[Tensor, Tensor | None]:
    """One SGD step with momentum: return ``(new_param, new_velocity)``.

    With ``weight_decay`` (L2), first ``grad = grad + weight_decay * param``.
    Without momentum (``momentum == 0``): ``new_param = param - lr * grad`` and
    the velocity is returned unchanged. With momentum: the velocity is
    ``grad`` on the first step (``velocity is None``) and
    ``momentum * velocity + grad`` after that; the step is ``param - lr * velocity``.
    Return new tensors; do not modify the inputs.

    Example:
        >>> p, g = minitorch.tensor([1.0]), minitorch.tensor([0.5])
        >>> p1, v1 = sgd_step(p, g, None, lr=0.1, momentum=0.9, weight_decay=0.0)
        >>> p2, v2 = sgd_step(p1, g, v1, lr=0.1, momentum=0.9, weight_decay=0.0)
        >>> round(p1.item(), 4), round(p2.item(), 4), round(v2.item(), 4)
        (0.95, 0.855, 0.95)
    """
    raise NotImplementedError("Exercise 2.12: sgd_step")


@exercise("2.13")
def adam_step(
    param: Tensor,
    grad: Tensor,
    m: Tensor,
    v: Tensor,
    t: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """One Adam step (Kingma & Ba, 2015): return ``(new_param, new_m, new_v)``.

    ``m`` and ``v`` are the running first and second moments (zeros before
    the first step); ``t`` is the step number, starting at 1. With
    ``weight_decay``, first ``grad = grad + weight_decay * param``. Then::

        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        m_hat = m / (1 - beta1 ** t)          # undo the bias towards 0
        v_hat = v / (1 - beta2 ** t)
        param = param - lr * m_hat / (sqrt(v_hat) + eps)

    Hint: on the first step ``m_hat = grad`` and ``v_hat = grad**2``, so
    every parameter moves by about ``lr`` whatever the gradient's scale.

    Example:
        >>> p, g, z = minitorch.tensor([1.0]), minitorch.tensor([-3.0]), minitorch.zeros(1)
        >>> p1, m1, v1 = adam_step(p, g, z, z, 1, 0.1, 0.9, 0.999, 1e-8, 0.0)
        >>> round(p1.item(), 4), round(m1.item(), 4), round(v1.item(), 4)
        (1.1, -0.3, 0.009)
    """
    raise NotImplementedError("Exercise 2.13: adam_step")


class Optimizer:
    """Holds parameters (a list, or a module whose parameters are looked up at every step)."""

    def __init__(self, params, **defaults):
        from .module import Module

        self.module = params if isinstance(params, Module) else None
        self._params = None if self.module is not None else list(params)
        if self._params is not None and not self._params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        self.defaults = defaults
        self.state: dict[str, dict] = {}
        self.steps = 0

    def named_params(self) -> list[tuple[str, Tensor]]:
        if self.module is not None:
            return self.module.named_parameters()
        return [(str(i), p) for i, p in enumerate(self._params)]

    def zero_grad(self) -> None:
        for _, p in self.named_params():
            p.grad = None

    def reset(self) -> None:
        """Forget all state (momentum, moments, step count)."""
        self.state.clear()
        self.steps = 0

    def _check(self, name: str, p: Tensor, buffers: dict) -> None:
        if p.grad is not None and p.grad.shape != p.shape:
            raise RuntimeError(
                f"{type(self).__name__}: parameter {name!r} has shape {p.shape} but its .grad has "
                f"shape {p.grad.shape}. Hint: call zero_grad() after changing a parameter's shape"
            )
        for key, buf in buffers.items():
            if isinstance(buf, Tensor) and buf.shape not in (p.shape, ()):  # () broadcasts
                raise RuntimeError(
                    f"{type(self).__name__}: parameter {name!r} now has shape {p.shape}, but its "
                    f"{key} buffer from earlier steps has shape {buf.shape}: the parameter was "
                    "replaced after the optimizer started. Hint: build a new optimizer, or call "
                    "optimizer.reset() to drop the old state"
                )

    def init_state(self) -> None:
        """Create the buffers the update reads (zeros) before the first step.

        The first step then computes what the later ones compute (SGD's
        ``momentum * 0 + grad`` is ``grad``), so a compiled step is one program
        from the first call on (chapter 9 traces it once).
        """
        for name, p in self.named_params():
            self._init(p, self.state.setdefault(name, {}))

    def _init(self, p: Tensor, state: dict) -> None:
        pass

    def step(self) -> None:
        self.init_state()
        self.steps += 1
        with no_grad():
            for name, p in self.named_params():
                state = self.state.setdefault(name, {})
                self._check(name, p, state)
                if p.grad is None:
                    continue
                new = self.update(p, p.grad, state)
                if hasattr(p, "assign_"):
                    p.assign_(new)
                else:
                    p._data = new.astype(p.dtype).contiguous()._data

    def update(self, p: Tensor, grad: Tensor, state: dict) -> Tensor:
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and L2 weight decay."""

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.0, weight_decay: float = 0.0):
        if lr <= 0 or not 0 <= momentum < 1:
            raise ValueError(
                f"SGD: need lr > 0 and 0 <= momentum < 1, got lr={lr}, momentum={momentum}"
            )
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay)

    def _init(self, p, state):
        if self.defaults["momentum"] and state.get("velocity") is None:
            from ..core.creation import zeros

            state["velocity"] = zeros(p.shape, dtype=p.dtype, device=p.device)

    def update(self, p, grad, state):
        d = self.defaults
        new, state["velocity"] = sgd_step(
            p, grad, state.get("velocity"), d["lr"], d["momentum"], d["weight_decay"]
        )
        return new


class Adam(Optimizer):
    """Adam with bias correction and optional L2 weight decay."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        if lr <= 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"Adam: need lr > 0 and betas in [0, 1), got lr={lr}, betas={betas}")
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

    def _init(self, p, state):
        if "m" not in state:
            from ..core.creation import zeros

            state["m"] = zeros(p.shape, dtype=p.dtype, device=p.device)
            state["v"] = zeros(p.shape, dtype=p.dtype, device=p.device)
            state["t"] = 0

    def update(self, p, grad, state):
        d = self.defaults
        self._init(p, state)
        state["t"] += 1
        new, state["m"], state["v"] = adam_step(
            p,
            grad,
            state["m"],
            state["v"],
            state["t"],
            d["lr"],
            *d["betas"],
            d["eps"],
            d["weight_decay"],
        )
        return new
