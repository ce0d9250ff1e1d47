"""Chapter 11, exercises 11.11-11.14: the language model's training loop.

A learning-rate schedule (11.11), global-norm gradient clipping (11.12), AdamW's
decoupled weight decay (11.13) and, open, a model size for a compute budget (11.14).
:class:`AdamW` is chapter 2's :class:`~minitorch.nn.optim.Adam` with 11.13 as its rule,
so chapter 9's compiled steps take it as they take Adam. :func:`train_lm` puts the
pieces together; :func:`train_flops` is the budget's counter.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..core.tensor import Tensor
from ..exercises import exercise
from ..nn.optim import Adam
from .data import batches
from .model import lm_loss


@exercise("11.11")
def lr_at(step: int, peak: float, warmup: int, total: int, floor: float = 0.0) -> float:
    """The learning rate of step ``step`` (counted from 0): a linear warm-up, then cosine decay.

    Steps ``0 .. warmup - 1`` rise in equal increments, step ``k`` at ``peak * (k + 1) / warmup``,
    so the last warm-up step is at ``peak``. From step ``warmup`` the rate follows half a
    cosine from ``peak`` (at step ``warmup``) down to ``floor`` (at step ``total``): at
    ``warmup + d`` it is ``floor + (peak - floor) * (1 + cos(pi * d / (total - warmup))) / 2``.
    Any step at or beyond ``total`` returns ``floor``. With ``warmup == 0`` there is no
    warm-up; with ``warmup == total`` there is no decay. The result is a Python float, never
    above ``peak``, and from step ``warmup`` on never below ``floor``.

    Raises ``OpError("lr_at", problem, hint)`` whose problem names the argument: ``step``
    below 0, ``warmup`` below 0 or above ``total``, ``total`` below 1, ``peak`` not above 0,
    ``floor`` below 0 or above ``peak`` (or any of them NaN or infinite).

    Hint: find out which of the three regions ``step`` is in first; the cosine's argument
    runs from 0 to pi over the decay.

    Hint: write the boundaries down for ``peak=1, warmup=2, total=6, floor=0.1`` before the
    code, and test them.

    Example:
        >>> [round(lr_at(s, 1.0, 2, 6, 0.1), 3) for s in range(8)]
        [0.5, 1.0, 1.0, 0.868, 0.55, 0.232, 0.1, 0.1]
    """
    raise NotImplementedError("Exercise 11.11: lr_at")


@exercise("11.12")
def clip_grads(grads: list[Tensor], max_norm: float) -> tuple[list[Tensor], float]:
    """Scale a list of gradients together so that their global L2 norm is at most ``max_norm``.

    The global norm is ``sqrt`` of the sum of every element squared, over all the tensors,
    as one vector. Returns ``(clipped, norm)``: ``norm`` is the global norm before clipping,
    a Python float, computed so that it is exact to float32 rounding even when squaring an
    element would overflow float32 (gradients of 1e20 have a finite norm). If ``norm`` is at
    most ``max_norm``, ``clipped`` holds the same tensor objects as ``grads``, unchanged.
    Otherwise every gradient is multiplied by the same factor ``max_norm / norm`` (new
    tensors of the same shapes and dtypes; the inputs are not changed), so the clipped
    norm equals ``max_norm``. All-zero gradients, and an empty list, have norm 0.0.
    If any gradient holds an inf or a NaN, the norm is inf or NaN and ``clipped`` is
    ``grads`` unchanged: the caller sees the norm and skips that step.

    Raises ``OpError("clip_grads", problem, hint)`` whose problem names ``max_norm`` when it
    is not above 0 or is NaN or infinite.

    Hint: the direction of the whole update is kept; only its length changes.

    Hint: float32 squares overflow at about 1.8e19: accumulate in float64, or factor out
    the largest magnitude first.

    Example:
        >>> g = [minitorch.tensor([3.0]), minitorch.tensor([4.0])]
        >>> c, n = clip_grads(g, 1.0)
        >>> n, [round(x.item(), 2) for x in c]
        (5.0, [0.6, 0.8])
    """
    raise NotImplementedError("Exercise 11.12: clip_grads")


@exercise("11.13")
def adamw_step(
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
    """One AdamW step (Loshchilov & Hutter, 2019): return ``(new_param, new_m, new_v)``.

    The moments and their bias correction are Adam's (exercise 2.13, ``t`` counted from 1),
    computed from ``grad`` alone: the weight decay never enters ``m`` or ``v``. The decay is
    decoupled: the new parameter is ``param - lr * (m_hat / (sqrt(v_hat) + eps) +
    weight_decay * param)``, so with a zero gradient a parameter shrinks by the factor
    ``1 - lr * weight_decay`` each step, whatever its scale. With ``weight_decay == 0`` the
    result equals Adam's. Returns new tensors of the input's shape and dtype; the inputs are
    not changed.

    Hint: compare with adding ``weight_decay * param`` to the gradient (2.13): there the
    decay is divided by ``sqrt(v_hat)``, so parameters with large gradients barely decay.

    Example:
        >>> p, g, z = minitorch.tensor([2.0]), minitorch.tensor([0.0]), minitorch.zeros(1)
        >>> p1, m1, v1 = adamw_step(p, g, z, z, 1, 0.1, 0.9, 0.999, 1e-8, 0.5)
        >>> round(p1.item(), 4), m1.item(), v1.item()
        (1.9, 0.0, 0.0)
    """
    raise NotImplementedError("Exercise 11.13: adamw_step")


@exercise("11.14")
def choose_config(budget: float, candidates: list[tuple[int, int]], step_flops) -> tuple[int, int]:
    """Pick the ``(width, layers)`` among ``candidates`` to train under ``budget`` FLOPs.

    The chosen ``TinyGPT`` (4 heads, context 32, seed 0) trains with :func:`train_lm` for
    ``budget // step_flops(width, layers)`` steps (batches of 16 pieces of the shipped text,
    peak rate 3e-3, its default schedule, decay and clipping); the aim is the lowest loss
    on the last 300 pieces after training. Returns one of ``candidates`` that affords at
    least one step. Graded in tiers by the measured held-out loss of the choice against the
    best candidate's, at several budgets. It is given a fraction of a second: no time to
    train a model.

    Raises ``OpError("choose_config", problem, hint)`` whose problem names ``budget`` when
    no candidate affords a single step.

    Hint: a larger model learns more per step but affords fewer steps; at a small budget
    steps are scarce. Train a few tiny models yourself with ``train_lm`` and compare.

    Hint: count a model's size by its parameters (``step_flops`` grows with them) and the
    data it sees by the steps it affords; look for the ratio of the two that did best.
    """
    raise NotImplementedError("Exercise 11.14: choose_config")


# ---------------------------------------------------------------- given: AdamW, the loop, FLOPs


def decays(p: Tensor) -> bool:
    """Which parameters AdamW decays: matrices (2+ dims), the embeddings included; biases
    and layer-norm weights (1 dim) never: pulling an offset or a scale towards 0 is no prior."""
    return p.ndim >= 2


class AdamW(Adam):
    """Adam with decoupled weight decay (11.13) on the parameters :func:`decays` picks.

    The state and the step counter are Adam's, so a compiled step (chapter 9) takes it as it
    takes Adam. ``lr`` may change between steps (``opt.defaults["lr"]``, a schedule): eager
    reads it at each step; a compiled step keys on it, so each new value traces again.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    def update(self, p, grad, state):
        d = self.defaults
        self._init(p, state)
        state["t"] += 1
        wd = d["weight_decay"] if decays(p) else 0.0
        new, state["m"], state["v"] = adamw_step(
            p, grad, state["m"], state["v"], state["t"], d["lr"], *d["betas"], d["eps"], wd
        )
        return new


@dataclass
class LMRun:
    """What :func:`train_lm` saw: per step the loss, the learning rate and the gradient norm."""

    losses: list = field(default_factory=list)
    lrs: list = field(default_factory=list)
    norms: list = field(default_factory=list)
    skipped: int = 0  # steps whose gradient norm was not finite (no update)
    seconds: float = 0.0


def train_lm(model, seqs, steps, *, batch_size=32, multiple=16, peak_lr=3e-3, warmup=None,
             floor=None, weight_decay=0.1, max_norm=1.0, seed=0) -> LMRun:  # fmt: skip
    """Train ``model`` (eager) on shuffled bucketed batches of ``seqs`` for ``steps`` steps.

    AdamW (11.13) at the rate of :func:`lr_at` (11.11; ``warmup`` defaults to a tenth of
    the steps, ``floor`` to a tenth of ``peak_lr``), the gradients clipped to ``max_norm``
    (11.12) first; a step whose gradient norm is not finite changes nothing.
    """
    warmup = max(1, steps // 10) if warmup is None else warmup
    floor = peak_lr / 10 if floor is None else floor
    opt = AdamW(model, lr=peak_lr, weight_decay=weight_decay)
    rng = np.random.default_rng(seed)
    run = LMRun()
    t0 = time.process_time()
    while len(run.losses) < steps:
        for ids, pos, targets, mask in batches(seqs, batch_size, multiple, rng):
            step = len(run.losses)
            opt.zero_grad()
            loss = lm_loss(model(ids, pos), targets, mask)
            loss.backward()
            params = [p for _, p in opt.named_params() if p.grad is not None]
            clipped, norm = clip_grads([p.grad for p in params], max_norm)
            run.losses.append(float(loss.item()))
            run.norms.append(norm)
            run.lrs.append(lr_at(step, peak_lr, warmup, steps, floor))
            if math.isfinite(norm):
                for p, g in zip(params, clipped):
                    p.grad = g
                opt.defaults["lr"] = run.lrs[-1]
                opt.step()
            else:
                run.skipped += 1
            if len(run.losses) == steps:
                break
    run.seconds = time.process_time() - t0
    return run


def step_flops(width: int, layers: int, vocab: int, context: int, batch_size: int) -> int:
    """FLOPs of one training step of ``TinyGPT`` on a full ``(batch_size, context)`` batch.

    Counted from the matmuls, 2 FLOPs a multiply-add (elementwise ops, layer norms and
    softmax are left out): per token and layer the
    projections (q, k, v, out: ``4 C^2``), the MLP (``8 C^2``) and attention's two products
    over every key (``2 T C``, the masked half included, as the matmul computes it); the
    head ``C V`` per token. The backward computes two products of each forward one: 3x.
    """
    c, t = width, context
    per_token = layers * (12 * c * c + 2 * t * c) + c * vocab
    return 3 * 2 * per_token * batch_size * context
