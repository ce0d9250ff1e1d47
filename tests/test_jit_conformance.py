"""jit gives the answer eager gives, or says why not (issue 10).

Every case compares ``jit(f)`` with ``f`` run eagerly: the outputs, their types and
the gradients, or the documented graph break / error.
"""

from __future__ import annotations

import warnings
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.tests.ch5.programs import programs, run_program
from minitorch import OpError
from minitorch.tracing import GraphBreakError

Pair = namedtuple("Pair", "first second")


@dataclass
class Out:
    value: minitorch.Tensor
    extra: list


def same(got, want):
    """Equal structure, types and values (tensors compared by value, not Proxies)."""
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, minitorch.Tensor):
        assert not isinstance(got, minitorch.Proxy)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            same(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    elif isinstance(want, Out):
        same(got.value, want.value)
        same(got.extra, want.extra)
    else:
        assert got == want or (got != got and want != want)


def grads_of(f, *arrays):
    """f's outputs and the gradient of their total w.r.t. every input."""
    xs = [minitorch.tensor(a, requires_grad=True) for a in arrays]
    out = f(*xs)
    leaves = [out] if isinstance(out, minitorch.Tensor) else list(_leaves(out))
    total = sum(t.sum() for t in leaves if t.requires_grad)
    if isinstance(total, minitorch.Tensor):
        total.backward()
    return out, [None if x.grad is None else x.grad.numpy() for x in xs]


def _leaves(x):
    if isinstance(x, minitorch.Tensor):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _leaves(v)
    elif isinstance(x, Out):
        yield from _leaves(x.value)


def conforms(f, *arrays, calls=2):
    """jit(f) equals f on ``calls`` different inputs: outputs, types and gradients."""
    jf = minitorch.jit(f)
    for k in range(calls):
        inputs = [a * (1 + k) - k for a in arrays]
        want, want_g = grads_of(f, *inputs)
        got, got_g = grads_of(jf, *inputs)
        same(got, want)
        for g, w in zip(got_g, want_g):
            assert (g is None) == (w is None)
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return jf


A = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.5]], dtype=np.float32)

# ---------------------------------------------------------------- nested outputs


def test_dict_output_is_rebuilt_each_call():
    jf = conforms(lambda t: {"a": t + 1, "b": [t * 2, (t.sum(), "tag")]}, A)
    assert jf.trace_count == 1


def test_namedtuple_and_dataclass_outputs():
    conforms(lambda t: Pair(t.exp(), {"n": 3, "s": t.sum()}), A)
    conforms(lambda t: Out(t * t, [t.sum(), 1.5]), A)


def test_traced_value_hidden_in_an_object_is_an_error():
    class Box:
        def __init__(self, v):
            self.v = v

    with pytest.raises(OpError, match="traced tensor inside a Box"):
        minitorch.jit(lambda t: Box(t + 1))(minitorch.tensor(A))


def test_escaped_tracer_raises_when_used():
    stash = []

    def f(t):
        stash.append(t * 2)  # escapes the trace
        return t + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minitorch.jit(f)(minitorch.tensor(A))
    with pytest.raises(OpError, match="used after that trace ended"):
        stash[0] + 1
    with pytest.raises(OpError, match="escaped"):
        stash[0].sum().item()


# ---------------------------------------------------------------- autograd semantics


def test_detach_is_recorded():
    jf = conforms(lambda t: (t * t.detach()).sum(), A)
    assert "detach" in jf.graphs[0].op_names()
    _, g = grads_of(jf, A)
    np.testing.assert_allclose(g[0], A)  # d/dt of t * const(t) is t, not 2t


def test_no_grad_inside_the_function():
    def f(t):
        with minitorch.no_grad():
            u = t * 2
        return (u * t).sum()

    conforms(f, A)


def test_requires_grad_reads_like_eager_and_is_guarded():
    def f(t):
        return t * 2 if t.requires_grad else t * 3

    jf = minitorch.jit(f)
    for rg in (False, True, False):
        x = minitorch.tensor(A, requires_grad=rg)
        same(jf(x), f(x))
    assert jf.recompiles == ["t.requires_grad changed from False to True"]
    assert jf.trace_count == 2


# ---------------------------------------------------------------- globals and closures

SCALE = 2.0
TABLE = minitorch.tensor(np.ones(3, dtype=np.float32))


def scaled(t):
    return t * SCALE + TABLE


def test_global_number_is_guarded():
    global SCALE
    jf = minitorch.jit(scaled)
    x = minitorch.tensor(A)
    try:
        for s in (2.0, 3.0, 3.0):
            SCALE = s
            same(jf(x), scaled(x))
    finally:
        SCALE = 2.0
    assert jf.recompiles == ["global SCALE changed from 2.0 to 3.0"]


def shifted(t):
    return t + TABLE


def test_global_tensor_is_a_graph_input():
    global TABLE
    jf = minitorch.jit(shifted)
    x = minitorch.tensor(A)
    old = TABLE
    try:
        for v in (1.0, 5.0):
            TABLE = minitorch.full((3,), v)  # rebound, same shape: no retrace
            same(jf(x), shifted(x))
        assert jf.trace_count == 1
        assert [n.name for n in jf.graphs[0].inputs] == ["t", "global_TABLE"]
        TABLE = minitorch.ones(2, 3)
        same(jf(x), shifted(x))
        assert jf.recompiles == ["global TABLE.shape changed from (3,) to (2, 3)"]
    finally:
        TABLE = old


def test_rebinding_a_captured_tensor():
    w = minitorch.ones(3)

    def f(t):
        return t * w

    jf = minitorch.jit(f)
    x = minitorch.tensor(A)
    same(jf(x), f(x))
    w = minitorch.full((3,), -2.0)  # noqa: F841 - read through the closure cell
    same(jf(x), f(x))
    assert jf.trace_count == 1


def test_a_captured_tensor_and_numbers_are_guarded_by_each_part_of_their_key():
    """The compiled guard (``guards.compile_check``) inlines the tensor and int/bool/str
    checks: each part still makes a retrace, and equal values keep the trace."""
    state = {"w": minitorch.ones(3), "k": 1, "how": "mul"}

    def f(t):
        w, k = state["w"], state["k"]
        return t * w * k if state["how"] == "mul" else t + w + k

    jf = minitorch.jit(f)
    x = minitorch.tensor(A)
    changes = [
        ("w", minitorch.full((3,), 2.0)),  # new values, same key: no retrace
        ("w", minitorch.ones(3, dtype=minitorch.float64)),
        ("w", minitorch.ones(3, requires_grad=True)),
        ("w", minitorch.ones(1, 3)),
        ("k", True),  # equal to 1, another type
        ("k", 2),
        ("how", "add"),
    ]
    same(jf(x), f(x))
    for n, (name, value) in enumerate(changes):
        state[name] = value
        same(jf(x), f(x))
        assert jf.trace_count == n + 1  # the first change keeps the trace
    assert jf.trace_count == len(changes)  # every change but the first retraced
    assert len(jf.recompiles) == len(changes) - 1, jf.recompiles
    assert "changed type from int to bool" in " ".join(jf.recompiles), jf.recompiles


def test_closures_over_one_code_object_share_the_cache_safely():
    def make(k):
        return lambda t: t * k

    x = minitorch.tensor(A)
    first = minitorch.jit(make(2.0))
    same(first(x), x * 2.0)
    again = minitorch.jit(make(2.0))  # same code, same captured value: reuses the trace
    same(again(x), x * 2.0)
    assert again.trace_count == 0 and again.store.trace_count == 1
    other = minitorch.jit(make(-1.0))  # same code, another value: guarded
    same(other(x), x * -1.0)
    assert other.store.trace_count == 2


def test_jit_made_in_a_loop_reuses_its_cache():
    x = minitorch.tensor(A)
    stores = set()
    for _ in range(4):
        jf = minitorch.jit(lambda t: t.exp() - 1)
        same(jf(x), x.exp() - 1)
        stores.add(id(jf.store))
    assert len(stores) == 1 and jf.store.trace_count == 1


# ---------------------------------------------------------------- floats, randomness, effects


def test_floats_are_keyed_by_their_bits():
    jf = minitorch.jit(lambda t, s: t / s)
    x = minitorch.tensor(A)
    assert np.isposinf(jf(x, 0.0).numpy()[0, 0])
    assert np.isneginf(jf(x, -0.0).numpy()[0, 0])
    assert jf.recompiles == ["s changed from 0.0 to -0.0"]
    nan = minitorch.jit(lambda t, s: t + s)
    for _ in range(3):
        assert np.isnan(nan(x, float("nan")).numpy()).all()
    assert nan.trace_count == 1


def test_random_numbers_are_drawn_on_every_call():
    def f(t):
        return t + minitorch.randn(2, 3)

    x = minitorch.tensor(A)
    minitorch.manual_seed(7)
    want = [f(x).numpy() for _ in range(3)]
    minitorch.manual_seed(7)
    jf = minitorch.jit(f)
    got = [jf(x).numpy() for _ in range(3)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)
    assert not np.allclose(got[0], got[1])
    info = minitorch.explain(f)(x)
    assert info.graph_break_count == 1 and "random numbers" in info.break_reasons[0].reason
    with pytest.raises(GraphBreakError, match="random numbers"):
        minitorch.jit(f, fullgraph=True)(x)


def test_side_effects_run_once_and_are_listed():
    log = []

    def f(t):
        log.append(t.shape)
        return t + 1

    jf = minitorch.jit(f)
    x = minitorch.tensor(A)
    with pytest.warns(RuntimeWarning, match="changed Python state: closure log changed size"):
        jf(x)
    jf(x)
    jf(x)
    assert log == [(2, 3)]  # ran at trace time only, as in JAX
    info = minitorch.explain(f)(x)
    assert info.side_effects == ["closure log changed size from 1 to 2"]
    assert "Side effects" in str(info)


# ---------------------------------------------------------------- methods and modules


class Net(minitorch.nn.Module):
    def __init__(self):
        minitorch.manual_seed(0)
        self.fc = minitorch.nn.Linear(3, 4)
        self.scale = 0.5

    def forward(self, x, *, bias=0.0):
        return {"y": self.fc(x).relu() * self.scale + bias}


class JitNet(Net):
    @minitorch.jit
    def forward(self, x, *, bias=0.0):
        return self.fc(x).tanh() * self.scale + bias


def test_module_parameters_are_inputs_and_an_optimizer_step_is_seen():
    net = Net()
    jnet = minitorch.jit(net)
    opt = minitorch.nn.SGD(net.parameters(), lr=0.1)
    x = minitorch.tensor(A)
    for _ in range(3):
        for f in (net, jnet):
            net.zero_grad()
            out = f(x, bias=1.0)
            out["y"].sum().backward()
            grads = [p.grad.numpy() for p in net.parameters()]
            if f is net:
                want_out, want_grads = out, grads
        same(out, want_out)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-5)
        opt.step()
    assert jnet.trace_count == 1
    names = [n.name for n in jnet.graphs[0].inputs]
    assert names == ["x", "self_fc_weight", "self_fc_bias"]  # parameters are graph inputs
    net.scale = 2.0  # a guarded attribute
    same(jnet(x, bias=1.0), net(x, bias=1.0))
    assert jnet.recompiles == ["self.scale changed from 0.5 to 2.0"]


def test_jit_on_a_method_and_on_forward_made_each_iteration():
    net = JitNet()
    x = minitorch.tensor(A)
    eager = Net.forward.__get__(net)  # same attributes, eager forward of the base
    want = net.fc(x).tanh() * 0.5 + 2.0
    same(net(x, bias=2.0), want)
    same(net.forward(x, bias=2.0), want)
    assert eager(x)["y"].shape == (2, 4)
    plain = Net()
    for _ in range(3):
        jf = minitorch.jit(plain.forward)
        same(jf(x), plain(x))
    assert jf.store.trace_count == 1


def test_kwargs_are_arguments():
    def f(x, **kw):
        return x * kw["scale"] + kw["shift"]

    jf = minitorch.jit(f)
    x = minitorch.tensor(A)
    same(jf(x, scale=2.0, shift=minitorch.ones(3)), f(x, scale=2.0, shift=minitorch.ones(3)))
    same(jf(x, shift=minitorch.ones(3), scale=2.0), f(x, scale=2.0, shift=minitorch.ones(3)))
    assert jf.trace_count == 1


# ---------------------------------------------------------------- breaks and cond


def test_graph_break_inside_a_cond_branch_is_a_clear_error():
    def f(x):
        return minitorch.cond(x.sum() > 0, lambda a: a * float(a.sum()), lambda a: -a, x)

    with pytest.raises(GraphBreakError, match="cond branches must be traceable") as e:
        minitorch.jit(f)(minitorch.tensor(A))
    assert "fullgraph=True" not in str(e.value)


def test_eager_cond_does_not_rerun_the_untaken_branch():
    runs = []

    def untaken(a):
        runs.append(1)
        return -a

    x = minitorch.tensor(A)
    for _ in range(3):
        minitorch.cond(minitorch.tensor(True), lambda a: a * 2, untaken, x)
    assert len(runs) <= 1  # traced once for the shape check, never run


def test_assign_and_backward_inside_jit_break_with_a_reason():
    p = minitorch.nn.Parameter(np.ones(3, dtype=np.float32))

    def step(x):
        loss = (x * p).sum()
        with minitorch.no_grad():
            p.assign_(p - x.sum(axis=0) * 0.1)
        return loss

    x = minitorch.tensor(A)
    want = [step(x).item() for _ in range(2)] + [p.numpy().copy()]
    p.assign_(minitorch.ones(3))
    jf = minitorch.jit(step)
    got = [jf(x).item() for _ in range(2)] + [p.numpy().copy()]
    np.testing.assert_allclose(got[:2], want[:2])
    np.testing.assert_allclose(got[2], want[2])
    info = minitorch.explain(step)(x)
    assert "assign_() reads the data of a traced tensor" in info.break_reasons[0].reason
    with pytest.raises(GraphBreakError, match="assign_"):
        minitorch.jit(step, fullgraph=True)(x)

    def train(x):
        loss = (x * x).sum()
        loss.backward()
        return loss

    xs = [minitorch.tensor(A, requires_grad=True) for _ in range(2)]
    train(xs[0])
    minitorch.jit(train)(xs[1])
    np.testing.assert_allclose(xs[1].grad.numpy(), xs[0].grad.numpy())
    assert "backward()" in minitorch.explain(train)(xs[0]).break_reasons[0].reason


# ---------------------------------------------------------------- dumps and text


def test_dump_names_are_unique_and_debug_alone_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINITORCH_DUMP_GRAPH", str(tmp_path / "dump"))
    x = minitorch.tensor(A)
    minitorch.jit(lambda t: t + 1)(x)
    minitorch.jit(lambda t: t * 2)(x)
    minitorch.jit(lambda t: t * 2)(minitorch.ones(4))
    dumped = list((tmp_path / "dump").iterdir())
    assert len([p for p in dumped if p.is_file()]) == 6  # text + DOT per trace
    assert len([p for p in dumped if p.is_dir()]) == 3  # chapter 6: one pass folder per trace
    monkeypatch.delenv("MINITORCH_DUMP_GRAPH")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    minitorch.jit(lambda t: t - 3, debug=True)(x)
    assert "sub(%t" in capsys.readouterr().out
    assert list((tmp_path / "tmp").iterdir()) == []


def test_graph_text_shows_devices():
    g = minitorch.jit(lambda t: t.sum() * 2).trace(minitorch.tensor(A))
    lines = g.text().splitlines()
    assert lines[0].endswith("# inputs on cpu")
    assert all(line.endswith("@cpu") for line in lines[1:-2])


# ---------------------------------------------------------------- random programs

G = [1.0]  # a global the programs read (a list: its contents are guarded too)


class Holder(minitorch.nn.Module):
    def __init__(self, steps, shape):
        self.steps = steps
        self.w = minitorch.nn.Parameter(np.full(shape, 0.5, dtype=np.float32))

    def forward(self, *xs):
        return run_program(self.steps, xs[0] * self.w, *xs[1:])

    def method(self, *xs):
        out, other = run_program(self.steps, *xs)
        return {"out": out, "rest": [other, Pair(out.detach(), other * G[0])]}


def _variant(kind, steps, shape):
    if kind == "nested":
        return lambda *xs: {"pair": run_program(steps, *xs), "n": len(steps)}
    if kind == "global":
        return lambda *xs: [y * G[0] for y in run_program(steps, *xs)]
    if kind == "detach":

        def f(*xs):
            out, other = run_program(steps, *xs)
            return out * other.detach()

        return f
    if kind == "no_grad":

        def g(*xs):
            with minitorch.no_grad():
                a, _ = run_program(steps, *xs)
            return a + run_program(steps, *xs)[1]

        return g
    if kind == "method":
        return Holder(steps, shape).method
    return Holder(steps, shape)  # a module with a parameter


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    programs(max_len=6),
    st.sampled_from(["nested", "global", "detach", "no_grad", "method", "module"]),
)
def test_random_programs_conform(program, kind):
    shape, arrays, steps = program
    f = _variant(kind, steps, shape)
    with np.errstate(all="ignore"):
        try:
            G[0] = 1.0
            jf = conforms(f, *arrays)
            assert jf.trace_count <= 1  # the second call reused the graph
            G[0] = -0.5  # the global changes between calls: retraced, still equal
            conforms(f, *arrays, calls=1)
        finally:
            G[0] = 1.0


def test_objects_passed_as_arguments_are_walked():
    net = Net()

    def f(model, x):
        return model.fc(x) * model.scale

    jf = minitorch.jit(f)
    x = minitorch.tensor(A)
    same(jf(net, x), f(net, x))
    net.scale = -1.0
    net.fc.weight.assign_(minitorch.ones(3, 4))
    same(jf(net, x), f(net, x))
    assert jf.recompiles == ["model.scale changed from 0.5 to -1.0"]
    assert "model_fc_weight" in [n.name for n in jf.graphs[-1].inputs]


def test_a_tensor_read_inside_a_cond_branch_is_guarded():
    def f(x):
        return minitorch.cond(x.sum() > 0, lambda a: a * TABLE, lambda a: a - 1, x)

    global TABLE
    old = TABLE
    jf = minitorch.jit(f)
    x = minitorch.tensor(A)
    try:
        same(jf(x), f(x))
        TABLE = minitorch.full((3,), 4.0)
        same(jf(x), f(x))
        assert jf.recompiles == ["global TABLE is a different object"]
    finally:
        TABLE = old


def test_grad_mode_of_the_call_is_part_of_the_key():
    jf = minitorch.jit(lambda t: (t * 2).sum())
    x = minitorch.tensor(A, requires_grad=True)
    with minitorch.no_grad():
        assert not jf(x).requires_grad
    assert "detach" not in jf.graphs[0].op_names()  # no history to cut in a no_grad call
    y = jf(x)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 2.0))
    assert jf.recompiles == ["grad mode changed from disabled (no_grad) to enabled"]


def test_in_place_update_with_an_untraced_value_runs_eagerly():
    buf = minitorch.nn.Parameter(np.zeros(3, dtype=np.float32))

    def f(x):
        out = x + buf
        with minitorch.no_grad():
            buf.assign_(buf.detach() + 1.0)  # no traced value: no break while tracing
        return out

    x = minitorch.tensor(A)
    want = [f(x).numpy() for _ in range(3)]
    buf.assign_(minitorch.zeros(3))
    jf = minitorch.jit(f)
    got = [jf(x).numpy() for _ in range(3)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)
    info = minitorch.explain(f)(x)
    assert "closure buf was updated in place (assign_)" in info.break_reasons[-1].reason


def test_a_parameter_argument_updated_in_place():
    def step(p, x):
        loss = (p * x).sum()
        with minitorch.no_grad():
            p.assign_(p - 0.5)
        return loss

    x = minitorch.tensor(A)
    p = minitorch.nn.Parameter(np.ones(3, dtype=np.float32))
    want = [step(p, x).item() for _ in range(3)] + [p.numpy().copy()]
    p.assign_(minitorch.ones(3))
    jf = minitorch.jit(step)
    got = [jf(p, x).item() for _ in range(3)] + [p.numpy().copy()]
    np.testing.assert_allclose(got[:3], want[:3])
    np.testing.assert_allclose(got[3], want[3])
    reasons = [b.reason for b in minitorch.explain(step)(p, x).break_reasons]
    assert reasons[0].startswith("assign_() of a traced tensor")


class Transposed(minitorch.nn.Module):
    def __init__(self):
        self.w = minitorch.nn.Parameter(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)

    def forward(self, x):
        w = self.w.T * 2.0  # ops on a parameter alone are recorded, not baked in
        if x.sum() > 100:  # a graph break: values are computed for real
            return x @ w * 0
        return x @ w


def test_ops_on_parameters_alone_follow_an_optimizer_step():
    net = Transposed()
    jnet = minitorch.jit(net)
    opt = minitorch.nn.SGD(net.parameters(), lr=0.1)
    x = minitorch.tensor(A)
    for _ in range(3):
        want = net(x)
        got = jnet(x)
        same(got, want)
        net.zero_grad()
        got.sum().backward()
        opt.step()
    assert "permute" in jnet.graphs[0].op_names()


def test_detach_of_a_parameter_alone_follows_an_optimizer_step():
    p = minitorch.nn.Parameter(np.ones(3, dtype=np.float32))

    def f(x):
        return x * p.detach() + p

    jf = minitorch.jit(f)
    x = minitorch.tensor(A)
    for step in range(3):
        same(jf(x), f(x))
        p.assign_(minitorch.full((3,), 2.0 + step))
    assert jf.trace_count == 1 and "detach" in jf.graphs[0].op_names()
