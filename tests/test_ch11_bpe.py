"""Chapter 11's byte-pair tokenizer as the chapter uses it: the whole text, pieces, a model (not graded)."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch.core.errors import OpError
from minitorch.transformer import (
    BPETokenizer,
    CharTokenizer,
    TinyGPT,
    decode_bpe,
    load_text,
    pieces,
)
from minitorch.transformer import measure as M


@pytest.fixture(scope="module")
def genesis():
    text = load_text()
    return text, BPETokenizer.train(text, 200)


def test_the_whole_text_round_trips_and_is_shorter(genesis):
    text, tok = genesis
    ids = tok.encode(text)
    assert tok.vocab == 256 + 200 and ids.max() < tok.vocab
    assert tok.decode(ids) == text
    assert len(ids) < 0.5 * len(text)  # 200 merges of common words and endings


def test_bpe_pieces_chain_whole_tokens_and_respect_the_context(genesis):
    text, tok = genesis
    context = 16
    verses = text.splitlines()[:40]
    seqs = pieces("\n".join(verses) + "\n", tok, context)
    assert all(2 <= len(s) <= context + 1 for s in seqs)
    # a verse's pieces overlap by one token: joined, they are the verse's own encoding, so
    # every next-token target is kept and none is made up at a cut
    k = 0
    for verse in verses:
        want = tok.encode(verse + "\n")
        got = list(seqs[k])
        while len(got) < len(want):
            k += 1
            assert seqs[k][0] == got[-1]
            got += list(seqs[k][1:])
        assert got == want.tolist()
        k += 1
    assert k == len(seqs)
    # a long verse is cut before a word's first token, as characters are cut at a space
    cuts = [s[-1] for a, s in zip(seqs[1:], seqs) if a[0] == s[-1]]
    assert cuts and all(tok.decode([c]).startswith(" ") for c in cuts)


def test_character_pieces_are_cut_at_spaces():
    text = load_text()[:3000]
    tok = CharTokenizer(text)
    want = []  # the character rule, on strings
    for verse in text.splitlines():
        rest = verse + "\n"
        while len(rest) > 1:
            cut = len(rest) if len(rest) <= 17 else (rest.rfind(" ", 1, 17) + 1 or 17)
            want.append(rest[:cut])
            rest = rest[cut - 1 :]
    assert [tok.decode(s) for s in pieces(text, tok, 16)] == want


def test_a_model_trains_on_bpe_batches(genesis):
    text, tok = genesis
    seqs = pieces(text[:2000], tok, 16)[:8]
    model = TinyGPT(tok.vocab, context=16, width=16, heads=2, layers=1, seed=0)
    run = M.train(model, seqs, 30, batch_size=8, multiple=16, lr=1e-2, seed=0)
    assert run.losses[-1] < run.losses[0] - 2.0, run.losses  # it learns these 8 pieces


def test_decode_names_an_unknown_id(genesis):
    _, tok = genesis
    with pytest.raises(OpError) as e:
        tok.decode([3, tok.vocab])
    assert e.value.op == "decode_bpe" and str(tok.vocab) in e.value.problem
    with pytest.raises(OpError, match="1-D"):
        decode_bpe(np.zeros((2, 2), np.int64), [])
    assert decode_bpe([0xE2, 0x98], []) == "\ufffd"  # a character cut short
