"""Issue 26: compiled code gives eager's answer or refuses with a reason.

One test per class of wrong answer (each failed before the fix; the comment says
what it gave), and the entry points' argument checks.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch as mt
from minitorch import nn
from minitorch.passes import CompileOptions

X = np.ones((4, 2), np.float32)


def _train(change, compiled, model=None, steps=4, momentum=0.0, zero=True):
    mt.manual_seed(0)
    m = model() if model else nn.Linear(2, 1)
    o = nn.SGD(m.parameters(), lr=0.1, momentum=momentum)
    env = {"scale": 1.0}

    def step(x):
        if zero:
            o.zero_grad()
        loss = (m(x) * env["scale"]).sum()
        loss.backward()
        o.step()
        return loss

    f = mt.compile(step) if compiled else step
    out = []
    for i in range(steps):
        if i == 2 and change:
            change(m, o, env)
        out.append(f(mt.tensor(X * 0.5 - 0.2)).item())
    return out, [p.numpy().copy() for p in m.parameters()], f


def _agree(change, **kw):
    (el, ep, _), (cl, cp, f) = _train(change, False, **kw), _train(change, True, **kw)
    np.testing.assert_allclose(cl, el, rtol=1e-5)
    for a, b in zip(cp, ep):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    return f


SCALE = 1.0


def test_class1_python_state_read_by_a_step_is_guarded():
    # the step kept the old value: a closure-held dict, a module's float, eval(), a swapped layer
    def seq():
        m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        m.k = 1.0
        return m

    f = _agree(lambda m, o, env: env.update(scale=3.0))
    assert any("scale" in r for r in f.recompiles)
    _agree(lambda m, o, env: setattr(m, "k", 2.0), model=seq)
    _agree(lambda m, o, env: m.eval(), model=seq)
    f = _agree(lambda m, o, env: m.layers.__setitem__(1, nn.Tanh()), model=seq)
    assert any("changed class from ReLU to Tanh" in r for r in f.recompiles), f.recompiles


def test_class1_a_global_float_used_in_the_loss():
    global SCALE
    mt.manual_seed(0)
    m = nn.Linear(2, 1)
    o = nn.SGD(m, lr=0.1)

    def step(x):
        o.zero_grad()
        loss = (m(x) * SCALE).sum()
        loss.backward()
        o.step()
        return loss

    f = mt.compile(step)
    x = mt.tensor(X)
    f(x), f(x)
    SCALE = 3.0
    try:
        with mt.no_grad():
            want = (m(x) * 3.0).sum().item()
        assert f(x).item() == pytest.approx(want, rel=1e-6)  # gave the loss at SCALE 1.0
        assert f.recompiles == ["global SCALE changed from 1.0 to 3.0"]
    finally:
        SCALE = 1.0


def test_class2_a_frozen_weight_is_not_updated():
    # the weight kept being updated after requires_grad = False
    def freeze(m, o, env):
        m.weight.requires_grad = False

    _agree(freeze)


def test_class3_gradient_accumulation_with_momentum():
    # 9.42 vs 18.79 by the 4th call: p.grad and the velocity were one graph input
    _agree(None, momentum=0.9, zero=False, steps=6)


def test_class4_a_branch_on_the_size_keeps_the_dim_static():
    # size 2 was served with the x * 2 branch after sizes 4, 5, 9
    def f(x):
        return x * 2.0 if x.shape[0] > 4 else x * 3.0

    cf = mt.compile(f)
    for n in (4, 5, 9, 2, 3, 7):
        np.testing.assert_array_equal(cf(mt.ones(n)).numpy(), f(mt.ones(n)).numpy())
    g = mt.compile(lambda x: x * 2.0 if x.shape[0] > 4 else x * 3.0)
    for n in (5, 9, 2):  # the branch was never taken the other way while tracing
        np.testing.assert_array_equal(g(mt.ones(n)).numpy(), f(mt.ones(n)).numpy())


@pytest.mark.parametrize("options", [None, CompileOptions(fuse=True, memory=True)])
def test_class5_jit_follows_eager_dtype_rules_on_numpy(options):
    # recip of int64 gave [0, 0]; exp of bool computed in float16 (2.71875)
    with mt.use_backend("numpy"):
        for fn, x in [
            (lambda a: a.recip(), mt.tensor([2, 4])),
            (lambda a: a.recip(), mt.tensor([True, False])),
            (lambda a: a.exp(), mt.tensor([True, False])),
            (lambda a: a.tanh(), mt.tensor([1, 2])),
            (lambda a: (a.exp() + 1).recip(), mt.tensor([1, 2])),
        ]:
            want = fn(x)
            got = mt.jit(fn, options=options)(x)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_class6_fusion_with_an_anchor_operand_read_again():
    # KeyError: %1 in the grouping
    fn = lambda x: (lambda a: a @ a + a)(x * 0.5)  # noqa: E731
    x = mt.tensor(np.arange(4.0, dtype=np.float32).reshape(2, 2))
    np.testing.assert_allclose(
        mt.jit(fn, options=CompileOptions(fuse=True))(x).numpy(), fn(x).numpy()
    )
    np.testing.assert_allclose(mt.compile(fn)(x).numpy(), fn(x).numpy())


def test_class9_profiler_sees_reduce_overhead_kernels():
    # only the function's own event was recorded
    g = mt.compile(lambda x: (x * 2).exp().sum(), mode="reduce-overhead")
    g(mt.ones(3)), g(mt.ones(3))
    with mt.profiler.profile() as prof:
        g(mt.ones(3))
    cats = {e.cat for e in prof.events}
    assert "op" in cats, [(e.name, e.cat) for e in prof.events]


def test_class11_a_training_loop_traces_once():
    # every loop traced twice: each p.grad went from None to a tensor
    f = _agree(None, steps=5)
    assert f.trace_count == 1, f.recompiles


def test_a_side_effect_runs_once_on_the_first_call():
    calls = []

    def side(a):
        calls.append(1)
        return a * 2

    mt.compile(side)(mt.ones(3))
    assert calls == [1]


BAD = [
    (lambda: mt.jit(lambda a: a, options="fuse"), "options must be a CompileOptions"),
    (lambda: CompileOptions(mode="fast"), "unknown mode 'fast'"),
    (lambda: CompileOptions(fuse="yes"), "fuse must be True or False"),
    (lambda: mt.jit(lambda a: a, cache_limit=0), "cache_limit must be an int >= 1"),
    (lambda: mt.compile(None)(mt.ones(2)), "got Tensor"),
    (lambda: mt.compile(3), "got int 3"),
    (lambda: mt.jit(3), "got int 3"),
    (lambda: mt.mark_dynamic(mt.ones(2), "0"), "dim must be an int, got str"),
    (lambda: mt.compile(lambda x: x, mode="fast"), "unknown mode"),
]


@pytest.mark.parametrize("make,words", BAD)
def test_entry_points_check_their_arguments(make, words):
    with pytest.raises(mt.OpError, match=words):
        make()


def _sum_step(m, o):
    def step(x):
        o.zero_grad()
        loss = m(x).sum()
        loss.backward()
        o.step()
        return loss

    return step


def test_a_step_called_with_a_list_says_so():
    m = nn.Linear(3, 1)
    step = _sum_step(m, nn.SGD(m, lr=0.1))
    with pytest.raises(mt.OpError, match=r"x \(a list\) is a static Python value"):
        mt.compile(step)([1.0, 2.0, 3.0])


def test_jit_on_a_method_keeps_its_options():
    class A:
        @mt.jit(options=CompileOptions(fuse=True))
        def f(self, a):
            return a * 2

    assert A().f.options == CompileOptions(fuse=True)


def test_backward_twice_on_one_graph_warns():
    w = mt.tensor([1.0], requires_grad=True)
    loss = (w * w).sum()
    loss.backward()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loss.backward()
    assert any("backward() ran on this graph before" in str(s.message) for s in seen)


def test_a_users_optimizer_class_is_not_guarded_attribute_by_attribute():
    # its step counter changed on every call: a retrace per step
    class Nesterov(nn.optim.Optimizer):
        def update(self, p, grad, state):
            v = grad if "v" not in state else state["v"] * 0.9 + grad
            state["v"] = v
            return p - (grad + v * 0.9) * 0.05

    m = nn.Linear(2, 1)
    f = mt.compile(_sum_step(m, Nesterov(m, lr=0.05)))
    for _ in range(4):
        f(mt.tensor(X))
    assert f.trace_count == 2, f.recompiles  # the first step creates its "v" buffers


def test_a_fused_group_with_a_chain_of_views():
    # KeyError: %0 in body_lines: reshape read only by the permute after it had no name
    def run(compiled):
        rng = np.random.default_rng(9)
        w = nn.Parameter(mt.tensor(rng.standard_normal((6, 6)).astype(np.float32)))
        opt = nn.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            b, t, _ = x.shape
            h = (x @ w).reshape(b, t, 2, 3).permute(0, 2, 1, 3)
            loss = (h * h).sum(axis=-1).sum() * 0.01
            loss.backward()
            opt.step()
            return loss

        f = mt.compile(step) if compiled else step
        x = mt.tensor(rng.standard_normal((4, 5, 6)).astype(np.float32))
        return [f(x).item() for _ in range(3)], w.numpy()

    (el, ew), (cl, cw) = run(False), run(True)
    np.testing.assert_allclose(cl, el, rtol=1e-5)
    np.testing.assert_allclose(cw, ew, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["default", "max-autotune"])
def test_adams_step_count_stays_a_python_number(mode):
    """Adam's step count is traced as a float64 scalar so that ``beta ** t`` is not baked
    in; it stays weak as the Python int it is in eager, so ``m / (1 - beta1 ** t)`` is
    float32. (Before: the update ran in float64, one ulp off eager's parameters.)"""
    rng = np.random.default_rng(0)
    x = mt.tensor(rng.standard_normal((3, 4)).astype(np.float32))

    def run(compiled):
        w = nn.Parameter(np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32))
        opt = nn.Adam([w], lr=1e-2)

        def step(x):
            opt.zero_grad()
            loss = ((x @ w) ** 2).sum()
            loss.backward()
            opt.step()
            return loss

        f = mt.compile(step, mode=mode) if compiled else step
        for _ in range(6):
            f(x)
        return w.numpy(), opt.state["0"]

    (we, se), (wc, sc) = run(False), run(True)
    np.testing.assert_array_equal(wc, we)
    np.testing.assert_array_equal(sc["m"].numpy(), se["m"].numpy())
    assert sc["t"] == se["t"] == 6 and sc["m"].dtype == np.float32


def test_a_weak_number_takes_the_tensors_kind():
    t = mt.tensor(np.array(3.0))  # float64, as a traced step count
    t._weak = True
    m = mt.tensor(np.ones(2, np.float32))
    bc = 1 - 0.9**t
    assert bc._weak and bc.dtype == np.float64  # Python numbers alone: still weak, float64
    assert (m / bc).dtype == np.float32 and not (m / bc)._weak
    assert (bc * m).dtype == np.float32
    assert (mt.tensor(np.ones(2, np.int64)) * bc).dtype == np.float32  # a float beside ints


def _adam_run(compiled, skip_first=False, bump=None, steps=5):
    """Three parameters under one Adam; ``skip_first``: the bias has no gradient on the
    first (eager) step, so its count lags; ``bump``: set the weight's count at step 3."""
    rng = np.random.default_rng(0)
    x = mt.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    w = nn.Parameter(np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32))
    b = nn.Parameter(np.zeros(3, np.float32))
    v = nn.Parameter(np.ones(3, np.float32))
    opt = nn.Adam([w, b, v], lr=1e-2)

    def step(x):
        opt.zero_grad()
        loss = (((x @ w) + b) * v).sum()
        loss.backward()
        opt.step()
        return loss

    if skip_first:  # one eager step without b
        opt.zero_grad()
        ((x @ w) * v).sum().backward()
        b.grad = None
        opt.step()
    f = mt.compile(step, mode="max-autotune") if compiled else step
    for i in range(steps):
        if bump is not None and i == 3:
            opt.state["0"]["t"] = bump
        f(x)
    return [p.numpy() for p in (w, b, v)], [opt.state[k]["t"] for k in ("0", "1", "2")], f


@pytest.mark.parametrize("skip_first,bump", [(False, None), (True, None), (False, 40)])
def test_equal_step_counts_are_one_input_checked_on_every_call(skip_first, bump):
    """Parameters whose Adam step counts are equal when traced read one counter (``beta
    ** t`` once, not once per parameter); counts that differ are separate inputs, and
    counts that were equal and differ later retrace, saying why."""
    (pe, te, _), (pc, tc, f) = (_adam_run(c, skip_first, bump) for c in (False, True))
    for a, b in zip(pc, pe):
        np.testing.assert_array_equal(a, b)
    assert tc == te and all(type(t) is int for t in tc)
    if bump is not None:
        assert any("step counts of 0 and 1" in r for r in f.recompiles), f.recompiles
    entries = list(f.entries.values())
    counters = [sum(fd[0] == "counter" for fd in e.feeds) for e in entries]
    assert counters[0] == (2 if skip_first else 1)
