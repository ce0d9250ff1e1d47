"""Chapter 11's framework code: the model, the cached decoder, dynamic dims, ONNX, data (not graded)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.transformer import (
    CharTokenizer,
    TinyGPT,
    decode_step,
    empty_cache,
    generate,
    greedy_full,
    lm_loss,
    make_batch,
    pieces,
)
from minitorch.transformer import measure as M


@pytest.fixture(scope="module")
def small():
    text = "In the beginning God created the heaven and the earth.\nAnd the earth was void.\n"
    tok = CharTokenizer(text)
    model = TinyGPT(tok.vocab, context=16, width=16, heads=2, layers=2, seed=1)
    return text, tok, model


def test_pieces_chain_targets_and_respect_the_context(small):
    text, tok, _ = small
    seqs = pieces(text, tok, 16)
    assert all(2 <= len(s) <= 17 for s in seqs)
    # consecutive pieces of a verse overlap by one character, so every target is predicted once
    joined = tok.decode(seqs[0])
    for prev, s in zip(seqs, seqs[1:]):
        joined += tok.decode(s if tok.decode(prev).endswith("\n") else s[1:])
    assert joined == text


def test_decode_step_matches_the_full_forward(small):
    _, tok, model = small
    ids = tok.encode("And the earth")
    with mt.no_grad():
        full = model(
            mt.tensor(ids.reshape(1, 1, -1)), mt.tensor(np.arange(len(ids)).reshape(1, 1, -1))
        )
        cache = empty_cache(model)
        for p, t in enumerate(ids):
            out = decode_step(
                model, mt.tensor(np.array([[[t]]])), mt.tensor(np.array([[[p]]])), *cache
            )
            cache = list(out[1:])
            np.testing.assert_allclose(
                out[0].numpy()[0, 0, 0], full.numpy()[0, 0, p], rtol=1e-4, atol=1e-5
            )


def test_generation_restarts_a_full_cache_and_matches_greedy_within_the_context(small):
    _, tok, model = small
    prompt = tok.encode("And")
    cached = generate(model, prompt, 10, temperature=0)

    def forward(i, p):
        with mt.no_grad():
            return model(mt.tensor(i), mt.tensor(p)).numpy()

    assert cached == greedy_full(forward, prompt, 10, model.context)
    assert len(generate(model, prompt, 40, temperature=1.0, top_k=3, seed=2)) == len(prompt) + 40


def test_padding_does_not_change_the_loss(small):
    text, tok, model = small
    seqs = pieces(text, tok, 16)[:3]
    short = make_batch(seqs, max(len(s) for s in seqs) - 1)
    padded = make_batch(seqs, 16)
    with mt.no_grad():
        a = lm_loss(model(*short[:2]), *short[2:]).item()
        b = lm_loss(model(*padded[:2]), *padded[2:]).item()
    assert abs(a - b) < 1e-5


def test_one_trace_over_lengths_and_batch_sizes(small):
    text, tok, model = small
    seqs = pieces(text, tok, 16)
    out = M.dynamic_forward(model, seqs, batch_size=2, multiple=4)
    # sizes 0 and 1 are specialised (chapter 9): a batch of one piece is the one extra trace
    ones = sum(
        1
        for p, idx in mt.transformer.bucket_batches([len(s) - 1 for s in seqs], 2, 4)
        if len(idx) == 1
    )
    assert out["shapes"] >= 3 and out["traces"] <= 1 + (ones > 0), out
    assert out["max_abs_diff"] < 1e-5
    assert any("dynamic" in line for line in out["dynamic"])


@pytest.mark.parametrize("mark", [True, False])
def test_compiled_training_over_lengths_and_batch_sizes_traces_a_handful(small, mark):
    text, tok, _ = small
    seqs = pieces(text, tok, 16)
    out = M.dynamic_training(
        tok.vocab, seqs, 12, batch_size=2, multiple=4, mark=mark,
        context=16, width=16, heads=2, layers=1,
    )  # fmt: skip
    assert out["shapes"] >= 3 and not out["eager_fallback"], out
    assert out["traces"] <= (2 if mark else 4), out["recompiles"]
    assert out["max_abs_diff"] < 1e-5
    assert any("is dynamic" in line for line in out["dynamic"]), out["dynamic"]


def test_onnx_greedy_matches(small):
    pytest.importorskip("onnxruntime")
    _, tok, model = small
    out = M.onnx_greedy(model, tok.encode("In"), n=10)
    assert out["match"], out
    assert out["inputs"][0] == ["batch", 1, "time"]


def test_compiled_step_trains_like_eager(small):
    text, tok, _ = small
    seqs = pieces(text, tok, 16)
    batch = make_batch([s[:9] for s in seqs if len(s) >= 9][:4], 8)
    row, step = M.step_comparison(
        tok.vocab, [batch] * 3, batch, context=16, width=16, heads=2, layers=1
    )
    np.testing.assert_allclose(row.eager_losses, row.compiled_losses, rtol=1e-5)
    assert step.trace_count <= 2
    assert 0 < row.second_first_call_s < float("inf")  # the book's "2nd s" column, measured


def test_book_counts_words_and_op_sizes():
    text = "And God said unto Abram, Get thee out"
    assert M.known_words(["And Abram zqx said", "unto qq"], text) == 4 / 6
    assert M.known_words(["And God"], text, prompt_chars=4) == 1.0  # the prompt is not counted
    fake = M.frequency_samples(text, 3, 50)
    assert len(fake) == 3 and all(len(f) == 50 and set(f) <= set(text) for f in fake)
    from minitorch import profiler

    with profiler.profile() as prof:
        with profiler.record("range"):  # a range is not an op call
            mt.ones(2, 3) + mt.ones(1, 3)
            mt.ones(4) * 2.0
    assert M.op_sizes(prof) == (2, 5.0)  # largest inputs: 6 and 4 elements
