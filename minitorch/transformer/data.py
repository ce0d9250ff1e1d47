"""The text, a character tokenizer and variable-length batches (exercise 11.6).

``data/genesis.txt`` is the Book of Genesis in the King James Version (1611,
public domain), one verse per line: 1533 verses, 197 KB, 60 distinct
characters. It was taken from Debian's ``bible-kjv-text`` package (version
4.38, whose copyright file states the text's copyright has expired) by
``bible -l10000 "Gen1:1-50:26"`` with the verse numbers and chapter headings
removed; see ``data/SOURCE.md``.

Each verse is cut at spaces into pieces of at most ``context + 1`` tokens
(a piece of ``L + 1`` tokens gives ``L`` inputs and ``L`` next-token targets),
characters here or byte-pair tokens (``bpe.py``), so the pieces have many
lengths: the variable-length batches that :func:`bucket_batches` groups by
padded length.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..core.errors import OpError  # noqa: F401  (what exercise 11.6 raises)
from ..core.tensor import Tensor
from ..exercises import exercise

TEXT = Path(__file__).parent / "data" / "genesis.txt"


def load_text() -> str:
    return TEXT.read_text(encoding="utf-8")


class CharTokenizer:
    """Characters to ids in sorted order; ``\\n`` (id 0) ends every verse."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> np.ndarray:
        return np.array([self.index[c] for c in s], dtype=np.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def pieces(text: str, tok, context: int) -> list[np.ndarray]:
    """Every verse (with its newline) as ``tok``'s ids, cut into arrays of 2 to ``context + 1``.

    ``tok`` is any tokenizer with ``encode``, ``decode`` and ``vocab``. A long verse
    is cut at the last token within reach that starts with a space (a space for
    characters, a word's first token for :class:`~minitorch.transformer.bpe.BPETokenizer`):
    that token ends one piece and starts the next, so every next-token target is kept.
    """
    space = np.array([tok.decode([i]).startswith(" ") for i in range(tok.vocab)])
    out = []
    for verse in text.splitlines():
        rest = tok.encode(verse + "\n")
        while len(rest) > 1:
            if len(rest) <= context + 1:
                cut = len(rest)
            else:
                at = np.flatnonzero(space[rest[1 : context + 1]])
                cut = int(at[-1]) + 2 if at.size else context + 1
            out.append(rest[:cut])
            rest = rest[cut - 1 :]  # the next piece starts with this one's last token
    return out


@exercise("11.6")
def bucket_batches(
    lengths: list[int], batch_size: int, multiple: int
) -> list[tuple[int, list[int]]]:
    """Group sequences into batches that pad to a few lengths: ``[(padded_len, indices), ...]``.

    ``lengths[i]`` is the length of sequence ``i``. Its padded length is
    ``lengths[i]`` rounded **up** to a multiple of ``multiple`` (a length of
    exactly 16 stays 16 with ``multiple=16``). Sequences of one padded length
    form a bucket; cut each bucket, indices in increasing order, into
    consecutive batches of ``batch_size`` (the last batch of a bucket may be
    smaller; keep it). Return the batches sorted by padded length, then by
    their first index.

    Raise ``OpError("bucket_batches", problem, hint)`` when ``batch_size`` or
    ``multiple`` is not a positive int (name the argument), or a length is below 1
    (name the sequence's length).

    Example:
        >>> bucket_batches([5, 16, 17, 3, 9], batch_size=2, multiple=8)
        [(8, [0, 3]), (16, [1, 4]), (24, [2])]
    """
    raise NotImplementedError("Exercise 11.6: bucket_batches")


def make_batch(seqs: list[np.ndarray], padded: int) -> tuple[Tensor, ...]:
    """``(ids (B,1,T), pos (1,1,T), targets (B,1,T,1), mask (B,1,T,1))`` with ``T = padded``.

    Padding (id 0) sits after each sequence; the mask is 0 there, so it adds
    nothing to the loss, and the causal mask keeps real positions from seeing it.
    """
    b = len(seqs)
    ids = np.zeros((b, 1, padded), np.int64)
    targets = np.zeros((b, 1, padded, 1), np.int64)
    mask = np.zeros((b, 1, padded, 1), np.float32)
    for r, s in enumerate(seqs):
        n = len(s) - 1
        ids[r, 0, :n] = s[:-1]
        targets[r, 0, :n, 0] = s[1:]
        mask[r, 0, :n, 0] = 1.0
    pos = np.arange(padded, dtype=np.int64).reshape(1, 1, padded)
    return Tensor(ids), Tensor(pos), Tensor(targets), Tensor(mask)


def batches(seqs, batch_size: int, multiple: int, rng=None):
    """One epoch of padded batches (shuffled by ``rng`` when given)."""
    groups = bucket_batches([len(s) - 1 for s in seqs], batch_size, multiple)
    order = rng.permutation(len(groups)) if rng is not None else range(len(groups))
    for k in order:
        padded, idx = groups[k]
        yield make_batch([seqs[i] for i in idx], padded)


def length_histogram(seqs, multiple: int) -> dict[int, int]:
    """How many pieces pad to each length (for the book's figure)."""
    out: dict[int, int] = {}
    for s in seqs:
        p = math.ceil((len(s) - 1) / multiple) * multiple
        out[p] = out.get(p, 0) + 1
    return dict(sorted(out.items()))
