"""Differential: compiled training steps against eager, across modes and backends.

Each scenario trains the same seeded model twice, eagerly and with
``minitorch.compile(step, mode=...)``, changing some Python state the step reads
between calls (issue 26's classes and their neighbours). Losses and final
parameters must agree; a change the compiled step cannot see must retrace, never
run stale. Also: size-dependent branches over many size orders, and eager's dtype
rules under every jit option set.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import minitorch as mt
from minitorch import nn
from minitorch.passes import CompileOptions

MODES = ["default", "reduce-overhead", "max-autotune"]
BACKENDS = ["numpy", "numba"]
SCALE = 1.0


def _mlp():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m.k = 1.0
    return m


def _set_global(m, o, env):
    global SCALE
    SCALE = 2.5


def _freeze_first(m, o, env):
    m.parameters()[0].requires_grad = False


def _unfreeze(m, o, env):
    for p in m.parameters():
        p.requires_grad = True


# name -> (change at call 2, change at call 4, optimizer, zero_grad each step)
SCENARIOS = {
    "nothing": (None, None, "sgd", True),
    "closure dict": (
        lambda m, o, e: e.update(scale=3.0),
        lambda m, o, e: e.update(scale=0.5),
        "sgd",
        True,
    ),
    "global float": (_set_global, None, "sgd", True),
    "module float": (lambda m, o, e: setattr(m, "k", -1.0), None, "sgd", True),
    "eval then train": (lambda m, o, e: m.eval(), lambda m, o, e: m.train(), "sgd", True),
    "swapped layer": (lambda m, o, e: m.layers.__setitem__(1, nn.Tanh()), None, "sgd", True),
    "freeze then unfreeze": (_freeze_first, _unfreeze, "momentum", True),
    "learning rate": (lambda m, o, e: o.defaults.update(lr=0.01), None, "momentum", True),
    "accumulate with momentum": (None, None, "momentum", False),
    "adam": (None, lambda m, o, e: o.defaults.update(lr=0.002), "adam", True),
}


def _run(scenario, mode, backend, steps=6):
    global SCALE
    first, second, opt, zero = SCENARIOS[scenario]
    SCALE = 1.0
    mt.manual_seed(1)
    with mt.use_backend(backend):
        m = _mlp()
        o = {
            "sgd": lambda: nn.SGD(m.parameters(), lr=0.1),
            "momentum": lambda: nn.SGD(m.parameters(), lr=0.1, momentum=0.9),
            "adam": lambda: nn.Adam(m.parameters(), lr=0.01),
        }[opt]()
        env = {"scale": 1.0}

        def step(x):
            if zero:
                o.zero_grad()
            loss = (m(x) * env["scale"] * SCALE * m.k).tanh().sum() * (1.0 if m.training else 0.5)
            loss.backward()
            o.step()
            return loss

        f = mt.compile(step, mode=mode) if mode else step
        rng = np.random.default_rng(5)
        losses = []
        try:
            for i in range(steps):
                if i == 2 and first:
                    first(m, o, env)
                if i == 4 and second:
                    second(m, o, env)
                x = mt.tensor(rng.standard_normal((5, 3)).astype(np.float32))
                losses.append(f(x).item())
        finally:
            SCALE = 1.0
        return losses, [p.numpy().copy() for p in m.parameters()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_compiled_training_matches_eager(scenario, mode, backend):
    want_loss, want_params = _run(scenario, None, backend)
    got_loss, got_params = _run(scenario, mode, backend)
    np.testing.assert_allclose(got_loss, want_loss, rtol=2e-5, atol=1e-6, err_msg=scenario)
    for g, w in zip(got_params, want_params):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6, err_msg=scenario)


def _branchy(x):
    if x.shape[0] > 4:
        return (x * 2.0).sum(0)
    if x.shape[0] == 1:
        return x.exp().sum(0)
    return (x * 3.0 - 1.0).sum(0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", [(4, 5, 9, 2, 1, 7), (1, 2, 3, 8, 5, 4), (9, 8, 7, 1, 2, 3)])
def test_size_dependent_branches_follow_eager(mode, order):
    cf = mt.compile(_branchy, mode=mode)
    for n in order:
        x = mt.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2) / 10)
        np.testing.assert_allclose(cf(x).numpy(), _branchy(x).numpy(), rtol=1e-6, err_msg=f"n={n}")


UNARY = {
    "recip": lambda a: a.recip(),
    "exp": lambda a: a.exp(),
    "tanh": lambda a: a.tanh(),
    "neg": lambda a: -a,
    "sigmoid": lambda a: a.sigmoid(),
    "chain": lambda a: ((a + 1).exp() * 0.5).recip(),
}
INPUTS = {
    "int64": lambda: mt.tensor([1, 2, 4]),
    "bool": lambda: mt.tensor([True, False, True]),
    "float32": lambda: mt.tensor([0.5, -1.0, 2.0]),
}
OPTIONS = [
    None,
    CompileOptions(fuse=True),
    CompileOptions(memory=True),
    CompileOptions(fuse=True, memory=True),
    CompileOptions(fuse=True, memory=True, mode="reduce-overhead"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,dtype", list(itertools.product(UNARY, INPUTS)))
def test_jit_follows_eager_dtype_rules(op, dtype, backend):
    fn = UNARY[op]
    with mt.use_backend(backend):
        x = INPUTS[dtype]()
        try:
            want = fn(x)
        except mt.OpError:
            return  # eager refuses this dtype; jit is checked to refuse elsewhere
        for options in OPTIONS:
            got = mt.jit(fn, options=options)(x)
            assert got.dtype == want.dtype, (op, dtype, options)
            np.testing.assert_allclose(
                got.numpy(), want.numpy(), rtol=1e-6, err_msg=f"{op} {dtype} {options}"
            )


# ---------------------------------------------------------------- issue 40: what the caller holds
# Generated cases: a caller keeps tensors that share a parameter's or an optimizer buffer's
# storage (and drops them later or not), accumulates an argument's gradient over calls,
# gets arguments and parameters back; eager and every compile mode must agree on values,
# on what the held tensors hold, on object identity and on requires_grad, call by call.

HOLDS = {
    "nothing": lambda m, o: None,
    "weight.detach()": lambda m, o: m.layers[0].weight.detach(),
    "a row of the weight": lambda m, o: m.layers[0].weight[1],
    "bias.reshape": lambda m, o: m.layers[2].bias.reshape((1, 2)),
    "an optimizer buffer": lambda m, o: next(
        (
            v
            for _, st in sorted(o.state.items())
            for _, v in sorted(st.items())
            if isinstance(v, mt.Tensor)
        ),
        None,
    ),
}
RETURNS = {
    "loss": lambda loss, m, x: loss,
    "loss and a parameter": lambda loss, m, x: (loss, m.layers[0].weight),
    "the input and the loss": lambda loss, m, x: {"x": x, "loss": loss},
}
_CASES = list(
    itertools.product(
        ["sgd", "momentum", "adam"],
        HOLDS,
        [1, 2],
        [None, 3],
        [True, False],
        [True, False],
        RETURNS,
    )
)
HELD_CASES = [_CASES[i] for i in np.random.default_rng(40).choice(len(_CASES), 24, replace=False)]


def _identity(out, m, x) -> list:
    """Which results are the caller's own objects (a parameter, the argument)."""
    leaves = tuple(out.values()) if isinstance(out, dict) else out
    leaves = leaves if isinstance(leaves, tuple) else (leaves,)
    return [(v is m.layers[0].weight, v is x) for v in leaves]


def _held_run(case, mode, steps=5):
    opt, hold, hold_at, drop_at, zero, x_grad, ret = case
    mt.manual_seed(2)
    m = _mlp()
    o = {
        "sgd": lambda: nn.SGD(m.parameters(), lr=0.1),
        "momentum": lambda: nn.SGD(m.parameters(), lr=0.1, momentum=0.9),
        "adam": lambda: nn.Adam(m.parameters(), lr=0.01),
    }[opt]()
    rng = np.random.default_rng(7)
    x = mt.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=x_grad)

    def step(t):
        if zero:
            o.zero_grad()
        loss = (m(t).tanh() * t.sum(1).reshape((5, 1))).sum()
        loss.backward()
        o.step()
        return RETURNS[ret](loss, m, t)

    f = mt.compile(step, mode=mode) if mode else step
    held, seen = None, []
    for i in range(steps):
        if i == hold_at:
            held = HOLDS[hold](m, o)
            taken = None if held is None else held.numpy()
        if i == drop_at:
            held = None
        if not x_grad:
            x = mt.tensor(rng.standard_normal((5, 3)).astype(np.float32))
        out = f(x)
        loss = out if ret == "loss" else out[0] if isinstance(out, tuple) else out["loss"]
        seen.append((round(loss.item(), 4), _identity(out, m, x)))
        if held is not None:  # what the caller holds keeps the values it had
            np.testing.assert_array_equal(held.numpy(), taken, err_msg=f"call {i + 1}")
    state = {n: sorted(k for k, v in st.items() if v is not None) for n, st in o.state.items()}
    grad = None if x.grad is None else x.grad.numpy()
    return seen, [p.numpy() for p in m.parameters()], grad, state


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", HELD_CASES, ids=lambda c: "-".join(map(str, c)))
def test_compiled_keeps_what_the_caller_holds(case, mode):
    want = _held_run(case, None)
    got = _held_run(case, mode)
    assert [s[1] for s in got[0]] == [s[1] for s in want[0]]  # identity of the results
    np.testing.assert_allclose([s[0] for s in got[0]], [s[0] for s in want[0]], rtol=1e-4)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    if want[2] is not None:  # the argument's gradient, accumulated over the calls
        np.testing.assert_allclose(got[2], want[2], rtol=2e-5, atol=1e-6)
    assert got[3] == want[3]  # the optimizer's state: the same buffers, no more


FN_RESULTS = {
    "p": lambda p, t: p,
    "t": lambda p, t: t,
    "t * p": lambda p, t: t * p,
    "(t * 2).sum()": lambda p, t: (t * 2).sum(),
}
FN_CASES = list(itertools.product(itertools.combinations(FN_RESULTS, 2), [True, False]))


@pytest.mark.parametrize("mode", [*MODES, "jit"])
@pytest.mark.parametrize("case", FN_CASES, ids=lambda c: "+".join(c[0]) + f"-grad{c[1]}")
def test_function_results_follow_eager_on_every_call(case, mode):
    (a, b), grad = case
    p = nn.Parameter(mt.tensor([1.0, -2.0]))

    def fn(t):
        return FN_RESULTS[a](p, t), FN_RESULTS[b](p, t)

    f = mt.jit(fn) if mode == "jit" else mt.compile(fn, mode=mode)
    for call in range(3):
        x = mt.tensor([0.5, 3.0], requires_grad=grad)
        got, want = f(x), fn(x)
        for g, w, name in zip(got, want, (a, b)):
            where = f"{name}, call {call + 1}"
            assert (g is p, g is x) == (w is p, w is x), where
            assert g.requires_grad == w.requires_grad, where
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=where)
