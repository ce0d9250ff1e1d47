"""Graded tests, chapter 11: the fused q/k/v projection (11.8), the model's forward (11.9) and
the language-model loss (11.10), against numpy written from the parameters."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded, text
from autograder.strategies import values
from minitorch.core.registry import Spec
from minitorch.tracing.tracer import trace_function
from minitorch.transformer import TinyGPT, lm_loss, project_qkv

from .test_generation import _raises
from .util import attention_ref, t


def _parts(h, w, heads):
    """q, k, v by the per-head definition: one column block of ``w`` per head and part."""
    e = w.shape[1] // 3
    d = e // heads
    return [np.stack([h[:, 0] @ w[:, s * e + j * d : s * e + (j + 1) * d] for j in range(heads)], 1)
            for s in range(3)]  # fmt: skip


# ---------------------------------------------------------------- 11.8 project_qkv


@graded("11.8", points=2)
@settings(max_examples=20)
@given(data=st.data())
def test_project_qkv_matches_per_head_columns(data):
    """contract: Returns ``(q, k, v)``, each ``(B, heads, T, D)`` of ``h``'s dtype
    contract: Every result equals the per-head computation"""
    b, tt, heads, d = (data.draw(st.integers(1, 3)) for _ in range(4))
    c = data.draw(st.integers(1, 5))
    h = data.draw(values((b, 1, tt, c), special=False, families=("quarters",)))
    w = data.draw(values((c, 3 * heads * d), special=False, families=("quarters",)))
    got = project_qkv(t(h), t(w), heads)
    check(isinstance(got, tuple) and len(got) == 3, "11.8", "return the tuple (q, k, v)")
    for name, g, want in zip("qkv", got, _parts(h, w, heads)):
        check(g.shape == (b, heads, tt, d), "11.8", f"{name} is (B, heads, T, D)",
              value=g.shape, expected=(b, heads, tt, d))  # fmt: skip
        check(g.dtype == np.float64, "11.8", f"{name} keeps h's dtype", value=text(str(g.dtype)))
        assert_close(g.numpy(), want, "11.8", rtol=1e-12, atol=1e-12, part=name, heads=heads)


@graded("11.8", points=2)
def test_project_qkv_is_one_matmul_and_keeps_sizes_free():
    """contract: the traced program holds only one ``matmul``
    contract: under ``mark_dynamic`` one trace serves every batch size and length"""
    specs = [Spec((2, 1, 5, 8), np.dtype(np.float32)), Spec((8, 24), np.dtype(np.float32))]
    graph = trace_function(lambda h, w: project_qkv(h, w, 2), specs)
    ops = [n.op for n in graph.nodes]
    check(ops.count("matmul") == 1, "11.8", "one matmul for q, k, v of every head",
          value=ops.count("matmul"), ops=ops)  # fmt: skip
    rng = np.random.default_rng(0)
    w = t(rng.standard_normal((8, 24)))
    jf = minitorch.jit(lambda h, w: project_qkv(h, w, 2)[1])
    first = t(rng.standard_normal((2, 1, 5, 8)))
    jf(minitorch.mark_dynamic(minitorch.mark_dynamic(first, 0), 2), w)
    for b, tt in ((3, 7), (4, 2), (2, 9)):
        h = rng.standard_normal((b, 1, tt, 8))
        assert_close(jf(t(h), w).numpy(), _parts(h, w.numpy(), 2)[1], "11.8", B=b, T=tt)
    check(jf.trace_count == 1, "11.8", "new B and T must not retrace",
          value=jf.trace_count, reasons=jf.recompiles)  # fmt: skip


@graded("11.8", points=1)
def test_project_qkv_errors():
    """contract: Raise ``OpError("project_qkv", problem, hint)`` naming the argument"""
    h, w = t(np.ones((2, 1, 3, 4))), t(np.ones((4, 12)))
    for what, fn, word in (
        ("h without the 1 in dim 1", lambda: project_qkv(t(np.ones((2, 3, 4))), w, 2), "h"),
        ("w_qkv rows not the width", lambda: project_qkv(h, t(np.ones((5, 12))), 2), "w_qkv"),
        ("columns not 3 * heads * D", lambda: project_qkv(h, t(np.ones((4, 10))), 2), "w_qkv"),
        ("12 columns, 3 heads: 12 is not a multiple of 9", lambda: project_qkv(h, w, 3), "w_qkv"),
        ("heads = 0", lambda: project_qkv(h, w, 0), "heads"),
    ):
        ok, msg, raised = _raises(fn, "project_qkv", word)
        check(ok, "11.8", f"{what}: raise OpError('project_qkv', ...) naming {word}", got=msg,
              value=text(raised))  # fmt: skip


# ---------------------------------------------------------------- 11.9 gpt_forward


def _gpt_numpy(model, ids, pos):
    """TinyGPT's logits in float64 from its parameters, written with numpy alone."""
    p = {k: v.numpy().astype(np.float64) for k, v in model.named_parameters()}

    def norm(x, name):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * p[f"{name}.weight"] + p[f"{name}.bias"]

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))

    x = p["tok.weight"][ids[:, 0]] + p["pos.weight"][pos[0, 0]]  # (B, T, C)
    for i in range(len(model.blocks)):
        pre = f"blocks.{i}."
        q, k, v = _parts(norm(x, pre + "ln1")[:, None], p[pre + "attn.w_qkv"], model.heads)
        o = attention_ref(q, k, v, True, None)  # (B, H, T, D)
        o = np.concatenate(list(np.moveaxis(o, 1, 0)), axis=-1)  # heads side by side
        x = x + o @ p[pre + "attn.wo"] + p[pre + "attn.bo"]
        hid = gelu(norm(x, pre + "ln2") @ p[pre + "mlp.w1"] + p[pre + "mlp.b1"])
        x = x + hid @ p[pre + "mlp.w2"] + p[pre + "mlp.b2"]
    return (norm(x, "ln_f") @ p["w_out"] + p["b_out"])[:, None]


def _small(seed=0, **kw):
    return TinyGPT(7, **{"context": 8, "width": 8, "heads": 2, "layers": 2, "seed": seed, **kw})


def _ids(rng, b, tt, vocab=7):
    return rng.integers(0, vocab, (b, 1, tt)), np.arange(tt).reshape(1, 1, tt)


@graded("11.9", points=3)
@settings(max_examples=8)
@given(seed=st.integers(0, 2**16), b=st.integers(1, 3), tt=st.integers(1, 8),
       layers=st.integers(1, 2), heads=st.sampled_from([1, 2, 4]))  # fmt: skip
def test_gpt_forward_gives_the_reference_logits(seed, b, tt, layers, heads):
    """contract: The logits must equal the reference's on the same parameters
    contract: to logits ``(B, 1, T, vocab)`` of the parameters' dtype"""
    model = _small(seed, layers=layers, heads=heads)
    rng = np.random.default_rng(seed)
    for prm in model.parameters():  # biases and norms away from 0 and 1
        prm.assign_(t(prm.numpy() + rng.normal(0, 0.3, prm.shape).astype(np.float32)))
    ids, pos = _ids(rng, b, tt)
    got = model(t(ids), t(pos))
    check(got.shape == (b, 1, tt, 7), "11.9", "logits (B, 1, T, vocab)", value=got.shape)
    check(got.dtype == np.float32, "11.9", "logits in float32", value=text(str(got.dtype)))
    assert_close(got.numpy(), _gpt_numpy(model, ids, pos), "11.9", rtol=1e-4, atol=1e-4,
                 layers=layers, heads=heads, ids=ids)  # fmt: skip


@graded("11.9", points=1)
def test_gpt_forward_is_causal():
    """contract: a position's logits depend only on the tokens at or before it"""
    model, rng = _small(3), np.random.default_rng(3)
    ids, pos = _ids(rng, 2, 8)
    base = model(t(ids), t(pos)).numpy()
    later = ids.copy()
    later[:, :, 5:] = (later[:, :, 5:] + 1) % 7
    got = model(t(later), t(pos)).numpy()
    check(np.array_equal(got[:, :, :5], base[:, :, :5]), "11.9",
          "changing tokens 5..7 changed the logits of positions 0..4",
          value=got[:, :, :5])  # fmt: skip
    check(not np.allclose(got[:, :, 5:], base[:, :, 5:]), "11.9",
          "changing tokens 5..7 must change their own logits")  # fmt: skip


@graded("11.9", points=1)
def test_gpt_forward_errors():
    """contract: Raise ``OpError("TinyGPT", problem, hint)`` naming ``ids`` when it is not"""
    model = _small()
    ids, pos = t(np.zeros((2, 1, 4), np.int64)), t(np.arange(4).reshape(1, 1, 4))
    for what, fn, word in (
        ("ids (B, T)", lambda: model(t(np.zeros((2, 4), np.int64)), pos), "ids"),
        ("pos of another length", lambda: model(ids, t(np.arange(3).reshape(1, 1, 3))), "pos"),
        ("pos (T,)", lambda: model(ids, t(np.arange(4))), "pos"),
        (
            "position 8 of a context of 8",
            lambda: model(ids, t(np.arange(5, 9).reshape(1, 1, 4))),
            "pos",
        ),
    ):
        ok, msg, raised = _raises(fn, "TinyGPT", word)
        check(ok, "11.9", f"{what}: raise OpError('TinyGPT', ...) naming {word}", got=msg,
              value=text(raised))  # fmt: skip


# ---------------------------------------------------------------- 11.10 lm_loss


def _loss_numpy(logits, targets, mask):
    top = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(-1, keepdims=True)) + top
    picked = np.take_along_axis(logits, targets, -1)
    return float((mask * (lse - picked)).sum() / mask.sum())


@graded("11.10", points=2)
@settings(max_examples=25)
@given(data=st.data())
def test_lm_loss_is_the_masked_mean(data):
    """contract: Returns a 0-d tensor equal to
    contract: a masked position adds nothing"""
    b, tt, v = (
        data.draw(st.integers(1, 3)),
        data.draw(st.integers(1, 4)),
        data.draw(st.integers(1, 5)),
    )
    logits = data.draw(values((b, 1, tt, v), special=False,
                              families=("quarters", "large_negative", "huge_small_spread")))  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    targets = rng.integers(0, v, (b, 1, tt, 1))
    mask = (rng.random((b, 1, tt, 1)) < 0.6).astype(np.float64)
    mask.flat[rng.integers(mask.size)] = 1.0
    got = lm_loss(t(logits), t(targets), t(mask))
    check(got.shape == (), "11.10", "a 0-d tensor", value=got.shape)
    assert_close(got.numpy(), _loss_numpy(logits, targets, mask), "11.10", rtol=1e-9, atol=1e-9,
                 mask=mask, targets=targets)  # fmt: skip


@graded("11.10", points=1)
def test_lm_loss_with_minus_inf_logits_and_dynamic_sizes():
    """contract: a position's loss stays finite when other tokens' logits are ``-inf``
    contract: one trace serves every length under ``mark_dynamic``"""
    logits = np.array([[[[0.0, -np.inf, 1.0], [-np.inf, 2.0, -np.inf]]]])
    targets, mask = np.array([[[[2], [1]]]]), np.ones((1, 1, 2, 1))
    got = lm_loss(t(logits), t(targets), t(mask)).item()
    want = (np.log(1 + np.e) - 1.0 + 0.0) / 2
    check(np.isclose(got, want, rtol=1e-12), "11.10", "-inf logits of other tokens: finite loss",
          value=got, expected=want)  # fmt: skip
    rng = np.random.default_rng(1)
    jf = minitorch.jit(lm_loss)

    def call(b, tt, mark=False):
        lg, tg = rng.standard_normal((b, 1, tt, 5)), rng.integers(0, 5, (b, 1, tt, 1))
        mk = np.ones((b, 1, tt, 1))
        args = [t(lg), t(tg), t(mk)]
        if mark:
            args = [minitorch.mark_dynamic(minitorch.mark_dynamic(a, 0), 2) for a in args]
        assert_close(jf(*args).numpy(), _loss_numpy(lg, tg, mk), "11.10", B=b, T=tt)

    call(2, 6, mark=True)
    for b, tt in ((3, 4), (5, 9)):
        call(b, tt)
    check(jf.trace_count == 1, "11.10", "new B and T must not retrace",
          value=jf.trace_count, reasons=jf.recompiles)  # fmt: skip


@graded("11.10", points=1)
def test_lm_loss_errors():
    """contract: Raise ``OpError("lm_loss", problem, hint)`` naming ``targets`` or ``mask``
    contract: a target outside ``[0, V)`` raises through"""
    lg, tg, mk = (
        t(np.zeros((2, 1, 3, 4))),
        t(np.zeros((2, 1, 3, 1), np.int64)),
        t(np.ones((2, 1, 3, 1))),
    )
    for what, fn, word in (
        ("targets (B, 1, T)", lambda: lm_loss(lg, t(np.zeros((2, 1, 3), np.int64)), mk), "targets"),
        ("mask of another length", lambda: lm_loss(lg, tg, t(np.ones((2, 1, 2, 1)))), "mask"),
        ("float targets", lambda: lm_loss(lg, t(np.zeros((2, 1, 3, 1))), mk), "targets"),
        ("target 4 of 4 tokens", lambda: lm_loss(lg, t(np.full((2, 1, 3, 1), 4)), mk), "targets"),
    ):
        ok, msg, raised = _raises(fn, "lm_loss", word)
        check(ok, "11.10", f"{what}: raise OpError('lm_loss', ...) naming {word}", got=msg,
              value=text(raised))  # fmt: skip
