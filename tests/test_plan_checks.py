"""Issue 40: an op's value checks (``OpDef.check``) run in compiled plans as in eager.

The differential section of ``test_differential_compiled.py`` draws ids and exponents
through every mode and backend; here, one test per part of the mechanism: the wrapper
keeps what the executor relies on, user ops get it too, checked ops stay out of fused
loops, and the composites that read indices (losses, TinyGPT's positions) check them as
a step of their graphs.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.backends import base as backends
from minitorch.core.registry import dispatch, get_op
from minitorch.fast.cnn import cross_entropy as cnn_loss
from minitorch.fusion.group import fusable_op
from minitorch.passes.plan import checked_kernel
from minitorch.transformer.model import TinyGPT, lm_loss

MODES = ["default", "reduce-overhead", "max-autotune"]


def _node(fn, *xs):
    graph = mt.jit(fn).trace(*xs)
    return next(n for n in graph.nodes if n.op not in ("input", "const"))


def test_checked_kernel_keeps_bind_and_checks_the_bound_kernel():
    a, b = mt.tensor([2, 3]), mt.tensor([1, -1])
    node = _node(lambda a, b: a**b, a, b)
    numpy = backends.get_backend("numpy")
    op = get_op("pow")
    kernel = numpy.prepare(op, node.spec, [i.spec for i in node.inputs])
    assert kernel is not None and hasattr(kernel, "bind")
    wrapped = checked_kernel(node, kernel)
    assert wrapped is not kernel and wrapped.writes_into == getattr(kernel, "writes_into", False)
    dest = np.empty(2, np.int64)
    bound = wrapped.bind(dest, [None, None])
    assert bound is not None
    with pytest.raises(mt.OpError, match="negative integer power"):
        bound(a._data, b._data, out=node.spec)
    ok = bound(a._data, mt.tensor([1, 2])._data, out=node.spec)
    assert ok.to_numpy().tolist() == [2, 9]


def test_unchecked_specs_keep_their_kernel():
    x = mt.tensor([2.0, 3.0])
    node = _node(lambda a, b: a**b, x, x)
    kernel = object()
    assert checked_kernel(node, kernel) is kernel  # float pow cannot refuse: no wrapper


def test_integer_pow_stays_out_of_fused_loops_float_pow_fuses():
    i, f = mt.tensor([2, 3]), mt.tensor([2.0, 3.0])
    assert not fusable_op(_node(lambda a, b: a**b, i, i))
    assert fusable_op(_node(lambda a, b: a**b, f, f))


def test_a_custom_op_check_runs_in_compiled_plans():
    @mt.custom_op("issue40_sqrt_nonneg", infer=lambda a: a, check=lambda a: _nonneg(a))
    def sqrt_nonneg(x):
        return np.sqrt(x)

    def _nonneg(a):
        if (a.numpy() < 0).any():
            raise mt.OpError("issue40_sqrt_nonneg", "x holds a negative value", hint="abs first")

    f = mt.compile(lambda x: sqrt_nonneg(x) * 2.0)
    np.testing.assert_allclose(f(mt.tensor([4.0, 9.0])).numpy(), [4.0, 6.0])
    with pytest.raises(mt.OpError, match="issue40_sqrt_nonneg: x holds a negative"):
        f(mt.tensor([4.0, -9.0]))


@pytest.mark.parametrize("mode", MODES)
def test_compiled_cnn_loss_checks_targets(mode):
    logits = mt.tensor(np.zeros((2, 3), np.float32))
    f = mt.compile(cnn_loss, mode=mode)
    assert f(logits, mt.tensor([0, 2])).item() == pytest.approx(np.log(3), rel=1e-6)
    for bad, word in (([0, 3], "3"), ([-1, 0], "-1")):
        with pytest.raises(mt.OpError) as e:
            f(logits, mt.tensor(bad))
        assert e.value.op == "cross_entropy" and word in str(e.value) and "[0, 3)" in str(e.value)


def _gpt_inputs(t, batch=1):
    ids = mt.tensor(np.zeros((batch, 1, t), np.int64))
    pos = mt.tensor(np.arange(t, dtype=np.int64).reshape(1, 1, t))
    return ids, pos


@pytest.mark.parametrize("mode", [None, "jit", *MODES])
def test_tinygpt_longer_than_its_context_names_the_model_in_every_mode(mode):
    model = TinyGPT(10, context=8, width=8, heads=2, layers=1)
    f = {None: model, "jit": mt.jit(model)}.get(mode) or mt.compile(model, mode=mode)
    for t in (3, 5, 8):  # new lengths: compile makes the length dynamic
        assert f(*_gpt_inputs(t)).shape == (1, 1, t, 10)
    with pytest.raises(mt.OpError) as e:
        f(*_gpt_inputs(12))
    message = str(e.value)  # the last position of the 12 tokens, 11, and the context, 8
    assert e.value.op == "TinyGPT" and "8" in message and "pos holds 11" in message


@pytest.mark.parametrize("mode", MODES)
def test_compiled_lm_loss_checks_targets(mode):
    logits = mt.tensor(np.zeros((1, 1, 3, 5), np.float32))
    mask = mt.tensor(np.ones((1, 1, 3, 1), np.float32))
    f = mt.compile(lm_loss, mode=mode)
    targets = mt.tensor(np.array([1, 2, 4]).reshape(1, 1, 3, 1))
    assert f(logits, targets, mask).item() == pytest.approx(np.log(5), rel=1e-6)
    with pytest.raises(mt.OpError, match=r"lm_loss: targets holds 5, outside \[0, 5\)"):
        f(logits, mt.tensor(np.array([1, 5, 0]).reshape(1, 1, 3, 1)), mask)


def test_index_check_refuses_bad_arguments():
    ids = mt.tensor([0, 1])
    with pytest.raises(mt.OpError, match="size must be >= 1"):
        dispatch("index_check", ids, size=0)
    with pytest.raises(mt.OpError, match="caller must be a str"):
        dispatch("index_check", ids, size=2, caller=3)
    with pytest.raises(mt.OpError, match="int64"):
        dispatch("index_check", mt.tensor([0.0]), size=2, what="targets")
    assert dispatch("index_check", ids, size=2).numpy().tolist() == [0, 1]


def test_a_plan_checks_an_inputs_spec_again_when_its_data_changes():
    """``CompiledPlan.run`` checks a spec once per data it sees (a parameter comes back with
    the same data on every call); new data of another shape or dtype is refused."""
    w, x = mt.ones(3), mt.tensor(np.arange(3, dtype=np.float32))
    compiled = mt.jit(lambda t, u: t * u).trace(x, w).compile()
    for _ in range(2):
        assert np.array_equal(compiled(x, w).numpy(), [0.0, 1.0, 2.0])
    for bad in (mt.ones(4), mt.ones(3, dtype=mt.float64)):
        x._data = bad._data  # the same tensor, new data
        with pytest.raises(mt.OpError):
            compiled(x, w)


@pytest.mark.parametrize("bad", [-1, 5])
def test_one_token_id_is_checked_as_many_are(bad):
    """A decode step's single id takes a shorter road through the range check."""
    w = mt.ones(5, 3)
    for ids in (np.array([[bad]]), np.array([[0, bad]]), np.array([[bad]]).reshape(1, 1, 1)):
        with pytest.raises(mt.OpError, match=f"embedding: ids holds {bad}, outside"):
            dispatch("embedding", w, mt.tensor(ids))
    assert dispatch("embedding", w, mt.tensor(np.array([[4]]))).shape == (1, 1, 3)
