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


def _optimizer(kind, m):
    if kind == "sgd":
        return nn.SGD(m.parameters(), lr=0.1)
    if kind == "momentum":
        return nn.SGD(m.parameters(), lr=0.1, momentum=0.9)
    return nn.Adam(m.parameters(), lr=0.01)


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
        o = _optimizer(opt, m)
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


# ---------------------------------------------------------------- issue 40: sizes and printing
# Generated cases (issue 40, classes 6 and 7): a Python branch on a dynamic size, for
# every comparison and for sizes reached through arithmetic, min/max, int() and range(),
# on dim 0 or 1, over size orders that cross the threshold after the dim turned dynamic;
# and printing or formatting a traced tensor. Every compile mode, and jit with
# mark_dynamic. The result must be eager's at every call.

import operator  # noqa: E402

from minitorch.compile import options_for  # noqa: E402

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
        "==": operator.eq, "!=": operator.ne}  # fmt: skip
_SIZE_OF = {  # how the branch reads the size n
    "n": lambda n: n,
    "arith": lambda n: (n * 3 + 1) // 2 - 4,
    "min": lambda n: min(n, 11) + max(n - 30, 0),
    "int": lambda n: int(n),
    "range": lambda n: len([i for i in range(n) if i % 2]),
}
RUNNERS = MODES + ["jit"]


def _size_cases(count=6):
    rng = np.random.default_rng(40)
    cases = []
    for op, how, dim in itertools.product(_OPS, _SIZE_OF, (0, 1)):
        threshold = int(_SIZE_OF[how](int(rng.integers(6, 12))))
        low = [int(x) for x in rng.permutation(np.arange(3, 9))[:3]]  # dynamic below...
        high = [int(x) for x in rng.integers(9, 20, size=count - 3)]  # ...then crossing
        cases.append((op, how, dim, threshold, tuple(low + high)))
    return cases


def _brancher(op, how, dim, threshold):
    test, size_of = _OPS[op], _SIZE_OF[how]

    def f(x):
        if test(size_of(x.shape[dim]), threshold):
            return (x * 2.0).sum(dim)
        return (x * 3.0 - 1.0).sum(dim)

    return f


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", _size_cases(), ids=lambda c: f"{c[0]}-{c[1]}-dim{c[2]}")
def test_a_branch_on_a_dynamic_size_follows_eager(case, runner):
    op, how, dim, threshold, sizes = case
    f = _brancher(op, how, dim, threshold)
    cf = mt.jit(f) if runner == "jit" else mt.compile(f, mode=runner)
    for n in sizes:
        shape = (n, 3) if dim == 0 else (3, n)
        x = mt.tensor(np.arange(n * 3, dtype=np.float32).reshape(shape) / 10)
        if runner == "jit":
            mt.mark_dynamic(x, dim)
        np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-6, err_msg=f"{case} n={n}")


def _tiny_gpt_case():
    from minitorch.transformer.model import TinyGPT

    model = TinyGPT(16, context=32, width=16, heads=2, layers=1)

    def f(ids, pos):  # batch and time dynamic, a branch on T
        logits = model(ids, pos)
        return logits.sum(-1) * 2.0 if ids.shape[2] > 6 else logits.sum(-1) * 3.0

    return f


@pytest.mark.parametrize("runner", RUNNERS)
def test_tiny_gpt_with_a_branch_on_time_follows_eager(runner):
    f = _tiny_gpt_case()
    cf = mt.jit(f) if runner == "jit" else mt.compile(f, mode=runner)
    for b, t in [(2, 3), (3, 4), (2, 5), (4, 8), (2, 9), (3, 4)]:
        ids = mt.tensor(np.arange(b * t).reshape(b, 1, t) % 16)
        pos = mt.tensor(np.arange(t).reshape(1, 1, t))
        if runner == "jit":
            mt.mark_dynamic(mt.mark_dynamic(ids, 0), 2)
            mt.mark_dynamic(pos, 2)
        np.testing.assert_allclose(
            cf(ids, pos).numpy(), f(ids, pos).numpy(), rtol=1e-5, err_msg=f"B={b} T={t}"
        )


_TEXTS = {
    "str": str,
    "repr": repr,
    "format": lambda y: format(y, ""),
    "f-string": lambda y: f"<{y}>",
    "str of a sum": lambda y: str(y.sum()),
}


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("how", list(_TEXTS))
def test_formatting_a_traced_tensor_follows_eager(how, runner, capsys):
    text = _TEXTS[how]

    def f(x):
        y = x * 2.0 + 1.0
        print(text(y))
        return y * float(len(text(y)))  # a value derived from the text

    def run(g):
        outs = [g(mt.tensor(np.arange(n, dtype=np.float32) * 0.25)).numpy() for n in (2, 3, 3)]
        return outs, capsys.readouterr().out

    want, want_out = run(f)
    options = None if runner == "jit" else options_for(runner)
    jf = mt.jit(f, options=options)
    got, got_out = run(jf)
    assert got_out == want_out and "Proxy" not in got_out
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    out = mt.explain(jf)(mt.tensor([1.0, 2.0]))
    capsys.readouterr()
    assert out.graph_break_count == 2 and "a traced tensor" in str(out.break_reasons[0])
    with pytest.raises(mt.GraphBreakError, match="traced tensor"):
        mt.jit(f, fullgraph=True, options=options)(mt.tensor([1.0]))


# ---------------------------------------------------------------- issue 40: value checks in compiled plans
# Generated ids (in range, negative, past the table) and integer exponents (some negative)
# through every compile mode on every backend that runs compiled plans: the compiled call
# returns eager's values or raises eager's OpError, word for word (OpDef.check runs before
# whichever kernel a plan step got: numpy's take would wrap -1 around to the last row).

import contextlib  # noqa: E402

import minitorch.cuda.backend  # noqa: E402, F401  (the cuda kernels; NUMBA_ENABLE_CUDASIM in conftest)
from minitorch.core.registry import dispatch  # noqa: E402

PLAN_BACKENDS = ["numpy", "numba", "cuda"]  # cuda: a device; the others: CPU backends


def _outcome(fn, *args):
    """What a call gives: ("value", arrays) or ("OpError", message); any other error fails."""
    try:
        out = fn(*args)
    except mt.OpError as e:
        return "OpError", str(e)
    return "value", [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def _same_outcome(got, want, label):
    assert got[0] == want[0], f"{label}: compiled {got}, eager {want}"
    if want[0] == "OpError":
        assert got[1] == want[1], label
    else:
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=label)


def _id_cases(seed: int, count: int = 18):
    """(kind, rows, ids): a third each in range, with a negative id, with an id >= rows."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        rows, shape = int(rng.choice([5, 8])), [(3,), (2, 3)][k % 2]
        ids = rng.integers(0, rows, size=shape)
        kind = ("in range", "negative", "past the end")[k % 3]
        if kind != "in range":
            bad = (
                -int(rng.integers(1, rows + 1))
                if kind == "negative"
                else rows + int(rng.integers(0, 3))
            )
            ids.reshape(-1)[int(rng.integers(0, ids.size))] = bad
        yield kind, rows, ids


def _lookup(w, ids):
    return dispatch("embedding", w, ids) * 2.0 + 1.0  # an elementwise neighbour to fuse with


def _int_pow(a, b):
    return a**b + a  # integer pow: its check keeps it out of the fused add


@pytest.mark.parametrize("backend", PLAN_BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_compiled_lookup_checks_ids_as_eager(mode, backend):
    device = "cuda" if backend == "cuda" else "cpu"
    ctx = mt.use_backend(backend) if device == "cpu" else contextlib.nullcontext()
    tables = {r: mt.randn(r, 4).to(device) for r in (5, 8)}
    with ctx:
        f = mt.compile(_lookup, mode=mode)
        for kind, rows, ids in _id_cases(40 + len(mode)):
            w, t = tables[rows], mt.tensor(ids, dtype="int64", device=device)
            want = _outcome(_lookup, w, t)
            assert (want[0] == "value") == (kind == "in range"), (kind, want)
            _same_outcome(
                _outcome(f, w, t), want, f"{mode} {backend} {kind} {ids.tolist()} rows={rows}"
            )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_compiled_training_step_checks_ids_as_eager(mode, backend):
    """A step whose graph holds embedding and its gradient (embedding_grad): a bad id raises
    before any parameter changes, as in eager."""

    def run(compiled: bool):
        mt.manual_seed(3)
        with mt.use_backend(backend):
            w = nn.Parameter(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32))
            opt = nn.SGD([w], lr=0.1)

            def step(ids):
                opt.zero_grad()
                loss = (dispatch("embedding", w, ids) ** 2).sum()
                loss.backward()
                opt.step()
                return loss

            f = mt.compile(step, mode=mode) if compiled else step
            outcomes = [_outcome(f, mt.tensor(ids, dtype="int64")) for _, _, ids in _id_cases(7)
                        if ids.size == 3 and ids.max() < 8]  # fmt: skip
            return outcomes, w.numpy().copy()

    (got, got_w), (want, want_w) = run(True), run(False)
    assert {o[0] for o in want} == {"value", "OpError"}
    for k, (g, e) in enumerate(zip(got, want)):
        _same_outcome(g, e, f"{mode} {backend} call {k}")
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_compiled_integer_pow_checks_exponents_as_eager(mode, backend):
    rng = np.random.default_rng(41)
    with mt.use_backend(backend):
        f = mt.compile(_int_pow, mode=mode)
        kinds = set()
        for _ in range(12):
            a = mt.tensor(rng.integers(1, 4, size=4), dtype="int64")
            b = mt.tensor(
                rng.integers(-1, 3, size=4) if rng.random() < 0.5 else rng.integers(0, 3, size=4),
                dtype="int64",
            )
            want = _outcome(_int_pow, a, b)
            kinds.add(want[0])
            _same_outcome(_outcome(f, a, b), want, f"{mode} {backend} {b.numpy().tolist()}")
        assert kinds == {"value", "OpError"}


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
    o = _optimizer(opt, m)
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
