"""Chapter 11 (train) known-wrong implementations (11.11-11.14)."""

from __future__ import annotations

import math

import numpy as np

from minitorch.core.errors import OpError
from solutions.reference import ch11_train as ref

from . import mutant

# ---------------------------------------------------------------- 11.11 lr_at


def _lr(step, peak, warmup, total, floor, *, start=1, end=0, clamp=True, low=None, checks=True):
    if checks:
        ref.lr_at(0, peak, warmup, total, floor)  # the reference's argument checks
        if step < 0:
            raise OpError("lr_at", f"step={step} is negative", hint="steps count from 0")
    if step < warmup:
        return float(peak * (step + start) / warmup)
    if clamp and step >= total:
        return float(floor)
    frac = (step - warmup) / max(total - warmup - end, 1)
    bottom = floor if low is None else low
    return float(max(floor, bottom + (peak - bottom) * (1 + math.cos(math.pi * frac)) / 2))


@mutant("11.11", "the warm-up starts at 0 (step * peak / warmup): step 0 learns nothing")
def lr_at_warmup_from_zero(step, peak, warmup, total, floor=0.0):
    return _lr(step, peak, warmup, total, floor, start=0)


@mutant("11.11", "off by one: the decay reaches floor at total - 1")
def lr_at_decay_off_by_one(step, peak, warmup, total, floor=0.0):
    return _lr(step, peak, warmup, total, floor, end=1)


@mutant("11.11", "no clamp past total: the cosine rises again")
def lr_at_no_clamp(step, peak, warmup, total, floor=0.0):
    return _lr(step, peak, warmup, total, floor, clamp=False)


@mutant("11.11", "the cosine decays to 0 and is cut at floor")
def lr_at_decays_to_zero(step, peak, warmup, total, floor=0.0):
    return _lr(step, peak, warmup, total, floor, low=0.0)


@mutant("11.11", "checks by comparisons only: a NaN argument passes")
def lr_at_nan_passes(step, peak, warmup, total, floor=0.0):
    for name, value, bad in (("step", step, step < 0), ("total", total, total < 1),
                             ("warmup", warmup, warmup < 0 or warmup > total),
                             ("peak", peak, peak <= 0), ("floor", floor, floor < 0 or floor > peak)):  # fmt: skip
        if bad:
            raise OpError("lr_at", f"{name}={value} is out of range", hint="see the docstring")
    return _lr(step, peak, warmup, total, floor, checks=False)


@mutant("11.11", "a numpy float, not a Python float")
def lr_at_numpy_float(step, peak, warmup, total, floor=0.0):
    return np.float32(ref.lr_at(step, peak, warmup, total, floor))


# ---------------------------------------------------------------- 11.12 clip_grads


def _clip(grads, max_norm, *, dtype=np.float64, each=False, at_limit=False, eps=0.0,
          finite_only=True):  # fmt: skip
    ref.clip_grads([], max_norm)  # the reference's argument check
    sq = [float(np.sum(np.square(g.numpy().astype(dtype)))) for g in grads]
    norm = math.sqrt(sum(sq))
    if finite_only and not math.isfinite(norm):
        return list(grads), norm
    if norm < max_norm or (norm == max_norm and not at_limit) or math.isnan(norm):
        return list(grads), norm
    if each:
        return [(g * min(1.0, max_norm / max(math.sqrt(s), 1e-300))).astype(g.dtype)
                for g, s in zip(grads, sq)], norm  # fmt: skip
    return [(g * (max_norm / (norm + eps))).astype(g.dtype) for g in grads], norm


@mutant("11.12", "squares summed in float32: 1e20 gradients overflow to an inf norm")
def clip_grads_float32(grads, max_norm):
    return _clip(grads, max_norm, dtype=np.float32)


@mutant("11.12", "each tensor clipped to its own norm, not the global one")
def clip_grads_per_tensor(grads, max_norm):
    return _clip(grads, max_norm, each=True)


@mutant("11.12", "at exactly max_norm the gradients are scaled by 1 (new tensors)")
def clip_grads_at_limit(grads, max_norm):
    return _clip(grads, max_norm, at_limit=True)


@mutant("11.12", "max_norm / (norm + 1e-6): tiny norms are cut far below max_norm")
def clip_grads_epsilon(grads, max_norm):
    return _clip(grads, max_norm, eps=1e-6)


@mutant("11.12", "an inf norm still scales: every gradient becomes 0 or NaN")
def clip_grads_scales_inf(grads, max_norm):
    return _clip(grads, max_norm, finite_only=False)


@mutant("11.12", "clips in place: the caller's gradients change")
def clip_grads_in_place(grads, max_norm):
    clipped, norm = ref.clip_grads(grads, max_norm)
    for g, c in zip(grads, clipped):
        if c is not g:
            g._data = c._data
    return list(grads), norm


@mutant("11.12", "no check of max_norm")
def clip_grads_unchecked(grads, max_norm):
    return ref.clip_grads(grads, max_norm if max_norm > 0 else 1.0)


# ---------------------------------------------------------------- 11.13 adamw_step


def _adamw(param, grad, m, v, t, lr, beta1, beta2, eps, wd, *, l2=False, correct=True,
           after=False, decay_lr=True, shift=0):  # fmt: skip
    if l2:
        grad = grad + param * wd
    m = m * beta1 + grad * (1 - beta1)
    v = v * beta2 + grad * grad * (1 - beta2)
    m_hat, v_hat = (
        (m / (1 - beta1 ** (t + shift)), v / (1 - beta2 ** (t + shift))) if correct else (m, v)
    )
    moved = param - m_hat / (v_hat.sqrt() + eps) * lr
    if l2:
        return moved, m, v
    base = moved if after else param
    return moved - base * (wd * (lr if decay_lr else 1.0)), m, v


@mutant("11.13", "L2 in the gradient (Adam's weight_decay), not decoupled")
def adamw_step_coupled(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    return _adamw(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay, l2=True)


@mutant("11.13", "no bias correction")
def adamw_step_no_correction(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    return _adamw(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay, correct=False)


@mutant("11.13", "the decay applied to the moved parameter")
def adamw_step_decay_after(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    return _adamw(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay, after=True)


@mutant("11.13", "the decay not scaled by lr")
def adamw_step_decay_without_lr(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    return _adamw(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay, decay_lr=False)


@mutant("11.13", "off by one: the bias correction of step t + 1")
def adamw_step_correction_off_by_one(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    return _adamw(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay, shift=1)


# ---------------------------------------------------------------- 11.14 choose_config (open)


def _affordable(budget, candidates, step_flops, raises=False):
    ok = [c for c in candidates if step_flops(*c) <= budget]
    if raises and not ok:
        raise OpError("choose_config", f"budget={budget} affords no step", hint="a larger budget")
    return ok


@mutant("11.14", "the largest candidate, whatever the budget affords")
def choose_config_largest(budget, candidates, step_flops):
    return max(candidates, key=lambda c: step_flops(*c))


@mutant("11.14", "the largest candidate that affords one step: too few steps to learn")
def choose_config_largest_affordable(budget, candidates, step_flops):
    ok = _affordable(budget, candidates, step_flops, raises=True)
    return max(ok, key=lambda c: step_flops(*c))


@mutant("11.14", "no error when nothing affords a step: the smallest candidate anyway")
def choose_config_no_error(budget, candidates, step_flops):
    if not _affordable(budget, candidates, step_flops):
        return min(candidates, key=lambda c: step_flops(*c))
    return ref.choose_config(budget, candidates, step_flops)


@mutant("11.14", "always the smallest model: the most steps, whatever the budget")
def choose_config_smallest(budget, candidates, step_flops):
    ok = _affordable(budget, candidates, step_flops, raises=True)
    return min(ok, key=lambda c: step_flops(*c))
