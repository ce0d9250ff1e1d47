"""Issue 40, classes 6 and 7: a trace's decisions on dynamic sizes are guarded, and
printing or formatting a traced tensor is a graph break (never the placeholder's text)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.tracing.sizes import Size, SizeLog, evaluate, failures, plain, watching


def _x(n, cols=2):
    return mt.tensor(np.arange(n * cols, dtype=np.float32).reshape(n, cols) / 7)


def _issue(x):
    return x * 2 if x.shape[0] > 12 else x * 3


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune"])
def test_a_branch_on_a_dynamic_size_retraces_with_a_reason(mode):
    cf = mt.compile(_issue, mode=mode)
    for n in (4, 6, 8, 16, 20, 5):
        np.testing.assert_allclose(cf(_x(n)).numpy(), _issue(_x(n)).numpy(), err_msg=f"n={n}")
    jf = cf._jit  # a function that trains nothing is jit's, with the mode's options
    assert any("x.shape[0] > 12 was False when traced and is True now" in r for r in jf.recompiles)
    assert jf.trace_count == 3  # 4, 6 (dynamic for sizes <= 12), 16 (dynamic for > 12)
    assert len(jf.dynamic) == 2


def test_mark_dynamic_guards_the_branch_and_explain_names_the_check():
    jf = mt.jit(_issue)
    for n in (4, 6, 8):
        jf(mt.mark_dynamic(_x(n), 0))
    assert jf.trace_count == 1
    x = mt.mark_dynamic(_x(16), 0)
    np.testing.assert_allclose(jf(x).numpy(), _x(16).numpy() * 2)
    assert "x.shape[0] > 12 was False when traced" in jf.recompiles[-1]
    out = mt.explain(jf)(mt.mark_dynamic(_x(5), 0))
    assert any("x.shape[0] > 12 is False" in line for line in out.dynamic)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x * 2 if min(x.shape[0], 12) == 12 else x * 3,  # min/max compare
        lambda x: x * 2 if len(list(range(x.shape[0]))) > 12 else x * 3,  # range
        lambda x: x * 2 if int(x.shape[0]) > 12 else x * 3,
        lambda x: x * 2 if (x.shape[0] * 3 - 1) // 2 >= 17 else x * 3,  # arithmetic first
        lambda x: x * 2 if x.shape[0] - 16 else x * 3,  # bool() of a size
        lambda x: x * 2 if x.shape[0] / 4 > 3 else x * 3,  # true division
        lambda x: x[: x.shape[0] // 2].sum(0) if len(x) > 12 else x.sum(0),
    ],
    ids=["min", "range", "int", "arith", "bool", "truediv", "len"],
)
def test_every_use_of_a_dynamic_size_is_guarded(fn):
    cf = mt.compile(fn)
    for n in (4, 6, 8, 16, 20, 9, 13):
        np.testing.assert_allclose(cf(_x(n)).numpy(), fn(_x(n)).numpy(), err_msg=f"n={n}")


def test_sizes_log_checks_and_keep_their_expression():
    log = SizeLog()
    a, b = Size(6, ("dim", "x", 0), log), Size(3, ("dim", "y", 1), log)
    c = (a * 2 - b) // 3
    assert c == 3 and isinstance(c, Size)
    assert evaluate(c.expr, lambda k, d: {"x": 10, "y": 1}[k]) == 6
    q, r = divmod(a, 4)
    assert [type(v) for v in (q, r, a >> 1, a & 3, round(a), -a)] == [Size] * 6
    assert max(a, b) is a and a > 5 and not a < b  # max asks b > a
    got = [(op, r) for op, _, _, r, _ in log.checks]
    assert got == [("==", True), (">", False), (">", True), ("<", False)]
    with watching(log):
        assert list(range(1, a)) == [1, 2, 3, 4, 5]
    assert log.checks[-1][4] == "used as a Python int (range)" and range is not None
    assert type(plain((a, [b]))[1][0]) is int
    sizes = {"x": 2, "y": 3}
    got = failures(log.checks[1:3], lambda k, d: sizes[k], lambda k, d: f"{k}.shape[{d}]")
    assert len(got) == 2 and "y.shape[1] > x.shape[0] was False when traced and is True" in got[0]
    assert got[1].startswith("x.shape[0] > 5 was True when traced and is False now")
    log.live = False
    n = len(log.checks)
    assert a > 1 and int(a) == 6 and len(log.checks) == n  # after the trace: plain ints


@pytest.mark.parametrize("mark", [True, False])
def test_a_compiled_training_step_guards_its_branch_on_the_time_axis(mark):
    def run(compiled):
        w = mt.nn.Parameter(mt.tensor(np.linspace(-1, 1, 36, dtype=np.float32).reshape(6, 6)))
        opt = mt.nn.SGD([w], lr=0.1, momentum=0.9)

        def step(x):  # x (B, T, 6), as test_ch9_dynamic's heads step, and a branch on T
            opt.zero_grad()
            b, t, c = x.shape
            h = (x @ w).reshape(b, t, 2, 3)
            loss = (h.tanh() * h).sum() * (0.03 if t > 8 else 0.01)
            loss.backward()
            opt.step()
            return loss

        f = mt.compile(step) if compiled else step
        losses = []
        for k, (b, t) in enumerate([(4, 5), (4, 7), (3, 7), (5, 2), (6, 9), (3, 10), (3, 7)]):
            x = mt.tensor(np.random.default_rng(k).normal(size=(b, t, 6)).astype(np.float32))
            if compiled and mark:
                mt.mark_dynamic(mt.mark_dynamic(x, 0), 1)
            losses.append(f(x).item())
        return losses, w.numpy().copy(), f

    want, want_w, _ = run(False)
    got, got_w, cf = run(True)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5)
    assert any("x.shape[1] > 8 was False when traced and is True" in r for r in cf.recompiles), (
        cf.recompiles,
        cf.dynamic_notes,
    )
    assert cf.trace_count == (2 if mark else 4), cf.recompiles  # automatic: T, B, then T > 8


# ---------------------------------------------------------------- printing a traced tensor

FORMATS = {
    "str": lambda y: str(y),
    "repr": lambda y: repr(y),
    "f-string": lambda y: f"y is {y}",
    "format": lambda y: format(y),
}


@pytest.mark.parametrize("how", list(FORMATS))
def test_formatting_a_traced_tensor_gives_eagers_text_and_breaks(how):
    text = FORMATS[how]

    def f(x):
        y = x * 2
        return y + len(text(y))  # a value computed from the text

    jf = mt.jit(f)
    for n in (2, 3, 3):
        np.testing.assert_allclose(jf(_x(n)).numpy(), f(_x(n)).numpy())
    out = mt.explain(jf)(_x(3))
    assert out.graph_break_count == 1 and "traced tensor" in str(out.break_reasons[0])
    with pytest.raises(mt.GraphBreakError, match="of a traced tensor|formatting a traced"):
        mt.jit(f, fullgraph=True)(_x(2))


def test_print_inside_a_traced_function_prints_the_values(capsys):
    def f(x):
        y = x + 1
        print(y)
        return y * 2

    f(_x(2))
    want = capsys.readouterr().out
    mt.jit(f)(_x(2))
    assert capsys.readouterr().out == want and "Proxy" not in want
    t = mt.tracing.Tracer()
    assert "Proxy(" in repr(t.input(_x(2).spec))  # not being traced: the placeholder


def test_a_compiled_training_step_that_prints_its_loss_runs_eagerly_and_says_why(capsys):
    def run(compiled):
        w = mt.nn.Parameter(mt.tensor([0.5, -1.0]))
        opt = mt.nn.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (x * w).sum() ** 2
            print(f"loss {loss}")
            loss.backward()
            opt.step()
            return loss

        f = mt.compile(step) if compiled else step
        losses = [f(mt.tensor([1.0, float(k)])).item() for k in range(3)]
        return losses, capsys.readouterr().out, f

    want, want_out, _ = run(False)
    with pytest.warns(RuntimeWarning, match=r"formatting a traced tensor"):
        got, got_out, f = run(True)
    assert got == want and got_out == want_out and "Proxy" not in got_out
    assert "formatting a traced tensor" in f.eager_reason
    with pytest.raises(mt.GraphBreakError, match="formatting a traced tensor"):
        mt.compile(lambda x: print(f"{x * 2}") or x * 2, fullgraph=True)(mt.tensor([1.0]))


def test_an_ops_error_naming_a_traced_input_is_still_that_error():
    # the op layer formats its inputs for the message: no break, the placeholder's text
    with pytest.raises(mt.OpError, match=r"reshape: shape must be an int, got Proxy\("):
        mt.jit(lambda x: x.reshape(x * 2), fullgraph=True)(mt.ones(2))
