"""Reference solutions, chapter 11, the training loop (11.11-11.14)."""

from __future__ import annotations

import math

import numpy as np

from minitorch.core.errors import OpError

__all__ = ["adamw_step", "choose_config", "clip_grads", "lr_at"]


def _finite(op, name, value, ok, hint):
    if not (math.isfinite(value) and ok):
        raise OpError(op, f"{name}={value!r} is out of range", hint=hint)


# ---------------------------------------------------------------- 11.11


def lr_at(step, peak, warmup, total, floor=0.0):
    _finite("lr_at", "total", total, total >= 1, hint="total is a number of steps, at least 1")
    _finite("lr_at", "step", step, step >= 0, hint="steps count from 0")
    _finite("lr_at", "warmup", warmup, 0 <= warmup <= total, hint=f"0 <= warmup <= {total}")
    _finite("lr_at", "peak", peak, peak > 0, hint="peak is a rate above 0")
    _finite("lr_at", "floor", floor, 0 <= floor <= peak, hint=f"0 <= floor <= peak={peak}")
    if step < warmup:
        return float(peak * (step + 1) / warmup)
    if step >= total:
        return float(floor)
    frac = (step - warmup) / (total - warmup)
    return float(floor + (peak - floor) * (1 + math.cos(math.pi * frac)) / 2)


# ---------------------------------------------------------------- 11.12


def clip_grads(grads, max_norm):
    _finite("clip_grads", "max_norm", max_norm, max_norm > 0, hint="max_norm is a length above 0")
    # float64 squares: a float32 element up to its largest value squares without overflow
    sq = sum(float(np.sum(np.square(g.numpy(), dtype=np.float64))) for g in grads)
    norm = math.sqrt(sq)
    if not math.isfinite(norm) or norm <= max_norm:  # inf/NaN: the caller skips the step
        return list(grads), norm
    factor = max_norm / norm
    return [(g * factor).astype(g.dtype) for g in grads], norm


# ---------------------------------------------------------------- 11.13


def adamw_step(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    m = m * beta1 + grad * (1 - beta1)
    v = v * beta2 + grad * grad * (1 - beta2)
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    new = param - (m_hat / (v_hat.sqrt() + eps) + param * weight_decay) * lr
    return new, m, v


# ---------------------------------------------------------------- 11.14


# Tiny runs (tests/ch11_budget_table.py) lost with every added layer at a fixed budget, and the
# best step cost grew about as the square root of the budget (as in Hoffmann et al., 2022).
SQRT_BUDGET_FLOPS = 200.0  # the step FLOPs aimed at, per square root of the budget


def choose_config(budget, candidates, step_flops):
    cost = {tuple(c): step_flops(*c) for c in candidates}
    affordable = [c for c, f in cost.items() if f <= budget]
    if not affordable:
        cheapest = min(cost.values(), default=math.inf)
        raise OpError(
            "choose_config",
            f"budget={budget:.3g} FLOPs affords no step of any candidate",
            hint=f"the cheapest step costs {cheapest:.3g} FLOPs: a larger budget or a smaller model",
        )
    depth = min(layers for _, layers in affordable)
    target = SQRT_BUDGET_FLOPS * math.sqrt(budget)
    shallow = [c for c in affordable if c[1] == depth]
    return min(shallow, key=lambda c: (abs(math.log(cost[c] / target)), cost[c]))
