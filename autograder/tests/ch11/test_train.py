"""Graded tests, chapter 11: the training loop. The learning-rate schedule (11.11), gradient
clipping (11.12), AdamW (11.13) and, open, a model for a compute budget (11.14)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from autograder.harness import assert_close, check, graded, text
from autograder.strategies import shapes, values
from autograder.tests.ch11 import budget_table as table
from autograder.tests.ch11.test_generation import _raises
from autograder.tests.ch11.util import t
from minitorch.transformer.train import adamw_step, choose_config, clip_grads, lr_at, step_flops

# ---------------------------------------------------------------- 11.11 lr_at


def _schedule(peak, warmup, total, floor, steps):
    """The contract another way: warm-up as a fraction of its length, the decay as a
    cosine of the fraction of the decay done, clamped at its end."""
    out = []
    for s in steps:
        if s < warmup:
            out.append(peak * (s + 1) / warmup)
        else:
            done = min(1.0, (s - warmup) / (total - warmup)) if s < total else 1.0
            out.append(floor + 0.5 * (peak - floor) * (1 + math.cos(done * math.pi)))
    return out


@graded("11.11", points=2)
def test_lr_at_whole_schedules():
    """contract: step ``k`` at ``peak * (k + 1) / warmup``
    contract: the last warm-up step is at ``peak``
    contract: follows half a cosine from ``peak`` (at step ``warmup``) down to ``floor``
    contract: Any step at or beyond ``total`` returns ``floor``
    contract: With ``warmup == 0`` there is no warm-up
    contract: with ``warmup == total`` there is no decay
    contract: The result is a Python float, never
    contract: above ``peak``, and from step ``warmup`` on never below ``floor``
    """
    got = [round(lr_at(s, 1.0, 2, 6, 0.1), 3) for s in range(8)]
    check(got == [0.5, 1.0, 1.0, 0.868, 0.55, 0.232, 0.1, 0.1], "11.11",
          "the docstring's example", value=got)  # fmt: skip
    plain = [lr_at(s, 2.0, 0, 4) for s in (0, 4)]  # floor left at its default
    check(plain == [2.0, 0.0], "11.11", "floor defaults to 0.0", value=plain)
    cases = [(3e-3, 10, 100, 3e-4), (1.0, 0, 7, 0.0), (2.0, 5, 5, 0.5), (1.0, 1, 1, 1.0),
             (0.5, 3, 4, 0.0), (1e-30, 2, 9, 1e-31), (7.0, 0, 1, 0.25)]  # fmt: skip
    for peak, warmup, total, floor in cases:
        steps = list(range(total + 3)) + [10**9]
        got = [lr_at(s, peak, warmup, total, floor) for s in steps]
        floats = all(type(x) is float for x in got)
        check(floats, "11.11", "return a Python float", peak=peak, warmup=warmup, total=total)
        low = [x for s, x in zip(steps, got) if s >= warmup]
        inside = max(got) <= peak * (1 + 1e-12) and min(low) >= floor * (1 - 1e-12)
        check(inside, "11.11", "no rate above peak, none below floor after the warm-up", peak=peak,
              warmup=warmup, total=total, floor=floor, got=got[:12])  # fmt: skip
        assert_close(np.array(got), np.array(_schedule(peak, warmup, total, floor, steps)),
                     "11.11", rtol=1e-9, atol=0, peak=peak, warmup=warmup, total=total,
                     floor=floor)  # fmt: skip


@graded("11.11", points=1)
def test_lr_at_errors():
    """contract: Raises ``OpError("lr_at", problem, hint)`` whose problem names the argument
    contract: ``step`` below 0, ``warmup`` below 0 or above ``total``, ``total`` below 1
    contract: ``peak`` not above 0, ``floor`` below 0 or above ``peak``
    contract: or any of them NaN or infinite
    """
    ok = {"step": 0, "peak": 1.0, "warmup": 2, "total": 10, "floor": 0.1}
    bad = [("step", -1), ("warmup", -1), ("warmup", 11), ("total", 0), ("peak", 0.0),
           ("peak", -1.0), ("floor", -0.1), ("floor", 1.5), ("peak", math.nan),
           ("floor", math.nan), ("peak", math.inf), ("step", math.nan)]  # fmt: skip
    for name, value in bad:
        args = dict(ok, **{name: value})
        raised, msg, op = _raises(lambda a=args: lr_at(**a), "lr_at", name)
        check(raised, "11.11", f"lr_at({name}={value}) raises OpError naming {name}",
              value=text(op), got=msg)  # fmt: skip
    edge = [lr_at(**dict(ok, floor=1.0)), lr_at(**dict(ok, warmup=10)), lr_at(**dict(ok, floor=0))]
    check(edge == [0.5, 0.1, 0.5], "11.11", "floor == peak, warmup == total and floor == 0 are "
          "allowed", value=edge)  # fmt: skip


# ---------------------------------------------------------------- 11.12 clip_grads


@st.composite
def _grad_lists(draw):
    n = draw(st.integers(1, 3))
    return [draw(values(draw(shapes(max_dims=2)), np.float32)) for _ in range(n)]


def _norm(arrays) -> float:
    flat = np.concatenate([np.asarray(a, np.float64).ravel() for a in arrays] + [np.zeros(0)])
    return float(np.sqrt(np.dot(flat, flat)))


def _clip_case(arrays, max_norm):
    grads = [t(a) for a in arrays]
    clipped, norm = clip_grads(grads, max_norm)
    want = _norm(arrays)
    check(type(norm) is float, "11.12", "the norm is a Python float", got=type(norm).__name__)
    assert_close(np.float64(norm), np.float64(want), "11.12", rtol=1e-6, atol=0,
                 max_norm=max_norm)  # fmt: skip
    left = all(np.array_equal(g.numpy(), a, equal_nan=True) for g, a in zip(grads, arrays))
    check(left, "11.12", "the input gradients are not changed")
    check(
        len(clipped) == len(grads), "11.12", "one clipped tensor per gradient", value=len(clipped)
    )
    if not math.isfinite(want) or want <= max_norm:
        same = all(c is g for c, g in zip(clipped, grads))
        check(same, "11.12", f"norm {want} is at most max_norm {max_norm}, or not finite: "
              "return the same tensor objects", norm=want)  # fmt: skip
        return
    for c, a in zip(clipped, arrays):
        check(c.shape == a.shape and c.numpy().dtype == a.dtype, "11.12",
              "a clipped gradient keeps its shape and dtype", got=(c.shape, str(c.numpy().dtype)))  # fmt: skip
        assert_close(c.numpy(), (a.astype(np.float64) * (max_norm / want)).astype(a.dtype),
                     "11.12", rtol=1e-5, atol=1e-37, max_norm=max_norm, norm=want)  # fmt: skip


@graded("11.12", points=2)
@given(arrays=_grad_lists(), max_norm=st.sampled_from([1e-3, 1.0, 5.0, 1e30]))
def test_clip_grads_whole_outputs(arrays, max_norm):
    """contract: the global norm before clipping, a Python float
    contract: it is exact to float32 rounding even when squaring an element would overflow
    contract: ``clipped`` holds the same tensor objects as ``grads``, unchanged
    contract: every gradient is multiplied by the same factor ``max_norm / norm``
    contract: new tensors of the same shapes and dtypes; the inputs are not changed
    contract: If any gradient holds an inf or a NaN, the norm is inf or NaN
    """
    _clip_case(arrays, max_norm)


@graded("11.12", points=1)
def test_clip_grads_boundaries():
    """contract: so the clipped norm equals ``max_norm``
    contract: All-zero gradients, and an empty list, have norm 0.0
    contract: If ``norm`` is at most ``max_norm``
    contract: new tensors of the same shapes and dtypes
    """
    f32 = np.float32
    cases = [([np.array([3.0, 4.0], f32)], 5.0), ([np.array([3.0, 4.0], f32)], 4.999),
             ([np.full((2, 3), 1e20, f32), np.array(-1e20, f32)], 1.0),
             ([np.zeros((2, 2), f32), np.zeros(0, f32)], 1.0),
             ([np.array([np.inf, 1.0], f32), np.ones(2, f32)], 1.0),
             ([np.array([1.0, np.nan], f32)], 1.0), ([np.full(4, 1e-30, f32)], 1e-31),
             ([np.array([3.0, 4.0]), np.array([12.0])], 6.5)]  # fmt: skip
    for arrays, max_norm in cases:
        _clip_case(arrays, max_norm)
        clipped, _ = clip_grads([t(a) for a in arrays], max_norm)
        after = _norm([c.numpy() for c in clipped])
        if math.isfinite(after):
            check(after <= max_norm * (1 + 1e-6), "11.12", "the clipped norm is max_norm or less",
                  value=round(after / max_norm, 5), max_norm=max_norm)  # fmt: skip
    empty = clip_grads([], 1.0)
    check(empty == ([], 0.0), "11.12", "an empty list has norm 0.0", got=repr(empty))


@graded("11.12", points=1)
def test_clip_grads_errors():
    """contract: Raises ``OpError("clip_grads", problem, hint)`` whose problem names ``max_norm``
    contract: when it is not above 0 or is NaN or infinite
    """
    for bad in (0.0, -1.0, math.nan, math.inf):
        raised, msg, op = _raises(lambda b=bad: clip_grads([t(np.ones(2, np.float32))], b),
                                  "clip_grads", "max_norm")  # fmt: skip
        check(
            raised,
            "11.12",
            f"max_norm={bad} raises OpError naming max_norm",
            value=text(op),
            got=msg,
        )


# ---------------------------------------------------------------- 11.13 adamw_step


def _adamw_np(p, g, m, v, step, lr, b1, b2, eps, wd):
    """Float64, the decay applied to the parameter after Adam's move, as a separate term."""
    p, g, m, v = (np.asarray(a, np.float64) for a in (p, g, m, v))
    m2, v2 = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g**2
    move = (m2 / (1 - b1**step)) / (np.sqrt(v2 / (1 - b2**step)) + eps)
    return p - lr * move - lr * wd * p, m2, v2


_FINITE = ("quarters", "huge_small_spread", "denormal")


@graded("11.13", points=2)
@given(
    data=st.data(),
    shape=shapes(max_dims=2, min_side=1),
    hyper=st.sampled_from(
        [
            (1, 1e-3, 0.9, 0.999, 0.1),
            (3, 0.1, 0.8, 0.99, 0.0),
            (10, 1.0, 0.0, 0.5, 0.5),
            (2, 0.01, 0.9, 0.999, 2.0),
        ]
    ),  # fmt: skip
)
def test_adamw_step_whole_outputs(data, shape, hyper):
    """contract: One AdamW step (Loshchilov & Hutter, 2019): return
    contract: The moments and their bias correction are Adam's
    contract: the weight decay never enters ``m`` or ``v``
    contract: The decay is decoupled
    contract: With ``weight_decay == 0`` the result equals Adam's
    contract: Returns new tensors of the input's shape and dtype; the inputs are not changed
    """
    step, lr, b1, b2, wd = hyper
    p, g, m = (data.draw(values(shape, np.float32, special=False, families=_FINITE))
               for _ in range(3))  # fmt: skip
    v = np.abs(data.draw(values(shape, np.float32, special=False, families=_FINITE)))
    ins = [t(a) for a in (p, g, m, v)]
    out = adamw_step(*ins, step, lr, b1, b2, 1e-8, wd)
    want = _adamw_np(p, g, m, v, step, lr, b1, b2, 1e-8, wd)
    kept = all(np.array_equal(x.numpy(), a) for x, a in zip(ins, (p, g, m, v)))
    check(kept, "11.13", "the inputs are not changed", shape=shape)
    for name, got, w in zip(("param", "m", "v"), out, want):
        check(got.shape == shape and got.numpy().dtype == np.float32, "11.13",
              f"new {name} has the input's shape and dtype", got=(got.shape, str(got.numpy().dtype)))  # fmt: skip
        scale = max(1.0, float(np.abs(w).max()))
        assert_close(got.numpy(), w, "11.13", rtol=2e-5, atol=2e-6 * scale, output=name,
                     step=step, lr=lr, weight_decay=wd)  # fmt: skip


@graded("11.13", points=1)
def test_adamw_step_decay_is_decoupled():
    """contract: with a zero gradient a parameter shrinks by the factor
    contract: ``1 - lr * weight_decay`` each step, whatever its scale
    contract: the weight decay never enters ``m`` or ``v``
    """
    p = np.array([2.0, -3.0, 1e6, 1e-6], np.float32)
    z = np.zeros(4, np.float32)
    new, m, v = adamw_step(t(p), t(z), t(z), t(z), 1, 0.1, 0.9, 0.999, 1e-8, 0.5)
    assert_close(new.numpy(), p * np.float32(0.95), "11.13", rtol=1e-6, atol=0, grad="zeros")
    check(not m.numpy().any() and not v.numpy().any(), "11.13",
          "a zero gradient leaves m and v at 0 whatever the decay")  # fmt: skip
    # two equal parameters, gradients a million apart: the same decay term
    g = np.array([1e3, 1e-3], np.float32)
    both = np.array([1.0, 1.0], np.float32)
    zz = np.zeros(2, np.float32)
    runs = [adamw_step(t(both), t(g), t(zz), t(zz), 1, 0.01, 0.9, 0.999, 1e-8, wd)
            for wd in (0.0, 1.0)]  # fmt: skip
    decay = runs[0][0].numpy() - runs[1][0].numpy()
    assert_close(decay, np.full(2, 0.01, np.float32), "11.13", rtol=1e-3, atol=0,
                 what="the decay's share of the move, for gradients 1e3 and 1e-3")  # fmt: skip
    same = all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(runs[0][1:], runs[1][1:]))
    check(same, "11.13", "m and v do not depend on weight_decay")


# ---------------------------------------------------------------- 11.14 choose_config (open)


def _flops(width, layers):
    return step_flops(width, layers, table.VOCAB, table.CONTEXT, table.BATCH)


def _choices():
    """Per budget of the table: (the choice, its loss, the best loss); a wrong answer as a str."""
    losses = {(b, w, n): loss for b, w, n, _, loss in table.ROWS}
    out = {}
    for budget in table.BUDGETS:
        got = choose_config(budget, list(table.CANDIDATES), _flops)
        key = tuple(got) if isinstance(got, (tuple, list)) and len(got) == 2 else None
        if key not in table.CANDIDATES or budget < _flops(*key):
            out[budget] = f"{got!r} is not a candidate that affords a step"
            continue
        best = min(v for (b, _, _), v in losses.items() if b == budget)
        out[budget] = (key, losses[(budget, *key)], best)
    return out


@graded("11.14", points=1)
def test_choose_config_returns_an_affordable_candidate():
    """contract: Returns one of ``candidates`` that affords at least one step
    contract: whose problem names ``budget`` when no candidate affords a single step
    """
    wrong = {b: c for b, c in _choices().items() if isinstance(c, str)}
    check(not wrong, "11.14", "return one of the candidates, affording one step or more",
          got=wrong)  # fmt: skip
    small = [(128, 4), (32, 1)]  # only the second affords a step
    got = choose_config(_flops(32, 1) * 1.5, small, _flops)
    check(tuple(got) == (32, 1), "11.14", "a candidate that affords no step is no choice",
          value=list(got))  # fmt: skip
    raised, msg, op = _raises(lambda: choose_config(_flops(32, 1) / 2, small, _flops),
                              "choose_config", "budget")  # fmt: skip
    check(raised, "11.14", "a budget below every candidate's step raises OpError naming budget",
          value=text(op), got=msg)  # fmt: skip


def _outcome(limit: float) -> None:
    choices = _choices()
    wrong = {b: c for b, c in choices.items() if isinstance(c, str)}
    check(not wrong, "11.14", "return one of the candidates, affording one step or more", got=wrong)
    gaps = {b: loss - best for b, (_, loss, best) in choices.items()}
    mean = sum(gaps.values()) / len(gaps)
    best = [c[2] for c in choices.values()]  # the table's, whatever was chosen
    check(mean <= limit, "11.14",
          f"mean held-out loss above the best candidate's {mean:.3f} nats; this tier needs "
          f"{limit} or less", value=best, chosen={f"{b:.0e}": c[0] for b, c in choices.items()})  # fmt: skip


@graded("11.14", points=1)
def test_choose_config_outcome_within_a_quarter_nat():
    _outcome(0.25)


@graded("11.14", points=2)
def test_choose_config_outcome_within_a_tenth_nat():
    """contract: by the measured held-out loss of the choice against the best candidate's"""
    _outcome(0.10)


@graded("11.14", points=2)
def test_choose_config_outcome_within_three_hundredths():
    _outcome(0.03)
