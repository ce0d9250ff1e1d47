"""A byte-pair tokenizer: merges learnt from the text (exercise 11.17), encoding by them (11.18).

The base alphabet is the 256 byte values of UTF-8: any text encodes, whatever
its characters, and decoding concatenates bytes. Merge ``k`` joins two ids
into the new id ``256 + k``. Merges never cross a word of :func:`split_words`,
so a token is a piece of one word (with its leading space), and the data
pipeline can cut token arrays where a token starts with a space, as it cuts
characters at spaces.
"""

from __future__ import annotations

import re

import numpy as np

from ..core.errors import OpError
from ..exercises import exercise

BYTES = 256  # ids 0..255 are the bytes; merge k makes id 256 + k

_WORD = re.compile(r" ?[^ \n]+|[ \n]")


def split_words(text: str) -> list[str]:
    """The words pairs are counted in: a run of characters other than space and newline,
    with the one space before it (if any) at its front; every other space and every
    newline is a word of its own. The words concatenate back to ``text``."""
    return _WORD.findall(text)


@exercise("11.17")
def train_bpe(text: str, num_merges: int) -> list[tuple[int, int]]:
    """The first ``num_merges`` byte-pair merges learnt from ``text``, in the order learnt.

    Each word of ``split_words(text)`` starts as its UTF-8 bytes (ids 0..255).
    Each merge takes the pair of adjacent ids that occurs most often, counted
    inside words over the whole text (a word that occurs 3 times counts 3
    times; in the ids of ``aaa`` the pair ``(97, 97)`` occurs twice); ties go
    to the smallest pair, compared as a tuple ``(left, right)``. Merge ``k``
    (from 0) gives that pair the new id ``256 + k`` and replaces its
    occurrences in every word, left to right (``aaa`` becomes ``[256, 97]``).
    Return the merges as a list of ``(left, right)`` tuples of Python ints;
    stop early, returning fewer, when no word has two ids left.

    Raise ``OpError("train_bpe", problem, hint)`` when ``text`` is not a str or
    ``num_merges`` is not an int of at least 0; the problem names the argument.

    Hint 1: the text has far fewer distinct words than words. Count each
    distinct word once, with how often it occurs, and work on those.

    Hint 2: recounting every pair after each merge is correct but slow on the
    whole text. A merge changes only the words that contain its pair: take
    their pairs out of the counts, merge, and put their new pairs back.

    Example:
        >>> train_bpe("aaab aab", 3)   # words "aaab", " aab"; then three pairs tie at 1
        [(97, 97), (32, 256), (97, 98)]
    """
    raise NotImplementedError("Exercise 11.17: train_bpe")


@exercise("11.18")
def encode_bpe(text: str, merges: list[tuple[int, int]]) -> np.ndarray:
    """``text`` as token ids (1-D ``int64``), by ``merges`` as :func:`train_bpe` returns them.

    Each word of ``split_words(text)`` starts as its UTF-8 bytes; while two
    adjacent ids form a pair of ``merges``, take the pair that comes first in
    ``merges`` (merge ``k`` makes id ``256 + k``) and replace its occurrences in
    the word, left to right. Return the words' ids one after the other: a new
    array, whose ids :func:`decode_bpe` turns back into ``text`` exactly. Encoding
    the text the merges were learnt on gives the ids training's merging left.

    Raise ``OpError("encode_bpe", problem, hint)`` when ``text`` is not a str,
    or a merge is not a pair of ids that exist before it (merge ``k`` may use
    ids below ``256 + k``); the problem names the argument (``merges``, the
    merge's index ``k`` and the bound ``256 + k`` its ids must stay below).

    Hint 1: encode each distinct word once and reuse its ids.

    Hint 2: a dict from pair to its index in ``merges`` tells, among a word's
    adjacent pairs, which one to merge next.

    Example:
        >>> encode_bpe("aaab", [(97, 97), (97, 98)])
        array([256, 257])
    """
    raise NotImplementedError("Exercise 11.18: encode_bpe")


def vocabulary(merges) -> list[bytes]:
    """The bytes of every id: the 256 single bytes, then each merge's two parts joined."""
    table = [bytes([b]) for b in range(BYTES)]
    for k, (a, b) in enumerate(merges):
        if not all(type(x) in (int, np.int64) and 0 <= x < BYTES + k for x in (a, b)):
            raise OpError(
                "vocabulary",
                f"merges[{k}] = {(a, b)} names an id that does not exist before it",
                hint=f"merge {k} may join ids below {BYTES + k}",
            )
        table.append(table[a] + table[b])
    return table


def decode_bpe(ids, merges) -> str:
    """The text of ``ids`` (UTF-8; a byte sequence cut inside a character reads as U+FFFD)."""
    arr = np.asarray(ids)
    table = vocabulary(merges)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise OpError("decode_bpe", f"ids of shape {arr.shape} and dtype {arr.dtype}",
                      hint="pass a 1-D sequence of int ids")  # fmt: skip
    if arr.size and (arr.min() < 0 or arr.max() >= len(table)):
        bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
        raise OpError("decode_bpe", f"id {bad} is outside the vocabulary [0, {len(table)})",
                      hint="decode with the merges the ids were encoded with")  # fmt: skip
    return b"".join(table[i] for i in arr.tolist()).decode("utf-8", errors="replace")


class BPETokenizer:
    """``encode``/``decode``/``vocab`` as :class:`~minitorch.transformer.data.CharTokenizer` has them."""

    def __init__(self, merges):
        self.merges = [(int(a), int(b)) for a, b in merges]
        self.table = vocabulary(self.merges)

    @classmethod
    def train(cls, text: str, num_merges: int) -> BPETokenizer:
        return cls(train_bpe(text, num_merges))

    @property
    def vocab(self) -> int:
        return len(self.table)

    def encode(self, s: str) -> np.ndarray:
        return encode_bpe(s, self.merges)

    def decode(self, ids) -> str:
        return decode_bpe(ids, self.merges)

    def token(self, i: int) -> str:
        """One token's text (for showing merges), a partial character as U+FFFD."""
        return self.table[i].decode("utf-8", errors="replace")
