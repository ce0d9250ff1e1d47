"""Chapter 11's training loop around exercises 11.11-11.13 (not graded): AdamW's choice of
what decays, AdamW in a compiled step, ``train_lm`` and the FLOP counter."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch as mt
from minitorch.transformer import CharTokenizer, TinyGPT, lm_loss, pieces
from minitorch.transformer.measure import make_step
from minitorch.transformer.train import AdamW, lr_at, step_flops, train_lm

TEXT = "In the beginning God created the heaven and the earth.\nAnd the earth was void.\n"


@pytest.fixture(scope="module")
def data():
    tok = CharTokenizer(TEXT)
    seqs = pieces(TEXT, tok, 16)
    return tok, seqs


def _model(tok, seed=1):
    return TinyGPT(tok.vocab, context=16, width=16, heads=2, layers=1, seed=seed)


def test_adamw_decays_matrices_and_embeddings_but_not_biases_or_norms(data):
    tok, _ = data
    model = _model(tok)
    before = {n: p.numpy().copy() for n, p in model.named_parameters()}
    opt = AdamW(model, lr=0.1, weight_decay=0.5)
    for _, p in model.named_parameters():
        p.grad = mt.zeros(p.shape)  # no gradient: only the decay moves a parameter
    opt.step()
    for name, p in model.named_parameters():
        want = before[name] * (0.95 if p.ndim >= 2 else 1.0)
        np.testing.assert_allclose(p.numpy(), want, rtol=1e-6, err_msg=name)
    assert {n for n, p in model.named_parameters() if p.ndim < 2} >= {"b_out", "ln_f.weight"}


def test_adamw_in_a_compiled_step_trains_like_eager(data):
    tok, seqs = data
    from minitorch.transformer.data import make_batch

    batch = make_batch(seqs[:4], 16)
    losses = {}
    for compiled in (False, True):
        model = _model(tok)
        opt = AdamW(model, lr=3e-3, weight_decay=0.1)
        step = make_step(model, opt)
        step = mt.compile(step) if compiled else step
        losses[compiled] = [float(step(*batch).item()) for _ in range(4)]
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)
    assert losses[False][-1] < losses[False][0]
    # the rate is a guarded Python value (AdamW's docstring): a new one traces again
    traces = step.trace_count
    opt.defaults["lr"] = 1e-3
    step(*batch)
    assert step.trace_count == traces + 1, step.recompiles


def test_train_lm_follows_the_schedule_clips_and_learns(data):
    tok, seqs = data
    model = _model(tok)
    run = train_lm(model, seqs, 30, batch_size=4, multiple=8, peak_lr=1e-2, warmup=5,
                   max_norm=0.5)  # fmt: skip
    assert run.lrs == [lr_at(s, 1e-2, 5, 30, 1e-3) for s in range(30)]
    assert len(run.losses) == len(run.norms) == 30 and run.skipped == 0
    assert np.mean(run.losses[-5:]) < np.mean(run.losses[:5]) - 0.5


def test_train_lm_skips_a_step_whose_gradient_is_not_finite(data, monkeypatch):
    tok, seqs = data
    model = _model(tok)
    before = {n: p.numpy().copy() for n, p in model.named_parameters()}
    real = lm_loss

    def nan_loss(logits, targets, mask):  # a NaN that flows into every gradient
        return real(logits, targets, mask) * float("nan")

    monkeypatch.setattr("minitorch.transformer.train.lm_loss", nan_loss)
    run = train_lm(model, seqs, 2, batch_size=4, multiple=8)
    assert run.skipped == 2 and all(math.isnan(n) for n in run.norms)
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.numpy(), before[name], err_msg=name)


def test_step_flops_counts_the_traced_matmuls(data):
    """The formula against the matmuls a traced forward runs (2 m n k each, 3x for training)."""
    tok, _ = data
    width, layers, context, batch = 16, 2, 16, 3
    model = TinyGPT(tok.vocab, context=context, width=width, heads=2, layers=layers, seed=0)
    from minitorch.core.dtypes import DTYPES
    from minitorch.tracing import trace_function

    i64 = DTYPES["int64"]
    specs = [mt.Spec((batch, 1, context), i64), mt.Spec((1, 1, context), i64)]
    graph = trace_function(model, specs)
    flops = 0
    for n in graph.nodes:
        if n.op == "matmul":
            a, b = (x.spec.shape for x in n.inputs)
            flops += 2 * int(np.prod(n.spec.shape)) * a[-1]
    assert 3 * flops == step_flops(width, layers, tok.vocab, context, batch)


def test_the_budget_table_rewards_choosing():
    """11.14's frozen table: no candidate picked at every budget reaches the top tier (a mean
    gap of 0.03 nats to each budget's best), so the outcome tests grade a choice, not a guess."""
    from autograder.tests.ch11 import budget_table as table

    loss = {(b, w, n): v for b, w, n, _, v in table.ROWS}
    best = {b: min(v for (bb, _, _), v in loss.items() if bb == b) for b in table.BUDGETS}
    for c in table.CANDIDATES:
        gaps = [loss[(b, *c)] - best[b] for b in table.BUDGETS]
        assert sum(gaps) / len(gaps) > 0.03, c
