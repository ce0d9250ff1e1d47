"""Graded tests, chapter 11: the byte-pair tokenizer, merges learnt (11.17) and applied (11.18).

The answers come from the contract written another way: every pair recounted
over every word of the text after each merge (no distinct words, no
incremental counts), and encoding as the merges applied one after the other.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.harness import check, graded, text
from autograder.tests.ch11.test_generation import _raises
from minitorch.transformer import decode_bpe, encode_bpe, load_text, split_words, train_bpe


def _replace(ids, pair, new):
    out = []
    for i in ids:  # the new id differs from pair[0], so a pair just made never matches again
        if out and (out[-1], i) == pair:
            out[-1] = new
        else:
            out.append(i)
    return out


def _train(text_, n):
    """Merges and the words' final ids: every occurrence of every word, recounted each time."""
    words = [list(w.encode("utf-8")) for w in split_words(text_)]
    merges = []
    while len(merges) < n:
        counts = {}
        for w in words:
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + 1
        if not counts:
            break
        top = max(counts.values())
        pair = min(p for p, c in counts.items() if c == top)
        words = [_replace(w, pair, 256 + len(merges)) for w in words]
        merges.append(pair)
    return merges, words


def _encode(text_, merges):
    """Each merge in turn over every word (the same as lowest rank first)."""
    words = [list(w.encode("utf-8")) for w in split_words(text_)]
    for k, pair in enumerate(merges):
        words = [_replace(w, tuple(pair), 256 + k) for w in words]
    return [i for w in words for i in w]


# a few letters, spaces, newlines and multi-byte characters: pairs repeat, ties are common
_TEXTS = st.text(alphabet=st.sampled_from("ab a\n\n  é☃"), max_size=40) | st.text(max_size=20)
_GENESIS = load_text()[:4000]


# ---------------------------------------------------------------- 11.17 train_bpe


@graded("11.17", points=1)
def test_train_bpe_examples_and_edges():
    """contract: ties go to the smallest pair
    contract: stop early, returning fewer, when no word has two ids left
    contract: Return the merges as a list of ``(left, right)`` tuples of Python ints
    """
    cases = [
        (("aaab aab", 3), [(97, 97), (32, 256), (97, 98)]),  # the docstring's example
        (("aaa", 5), [(97, 97), (256, 97)]),  # overlapping pairs count twice; then no pair left
        (("ab ab\nab", 9), [(97, 98), (32, 256)]),  # never across a space or a newline
        (("é", 3), [(195, 169)]),  # bytes, not characters
        (("abc", 0), []),
        (("", 4), []),
        (("ba ba ab ab", 1), [(32, 97)]),  # (32, 97), (97, 98), (98, 97) tie at 2: the smallest
        (("zy\nzy\nab", 1), [(122, 121)]),  # a word that occurs twice counts twice
    ]
    for args, want in cases:
        got = train_bpe(*args)
        check(got == want, "11.17", f"train_bpe{args}", value=text(got), got=got, expected=want)
        plain = isinstance(got, list) and all(
            type(m) is tuple and len(m) == 2 and all(type(x) is int for x in m) for m in got
        )
        check(plain, "11.17", f"train_bpe{args} returns a list of tuples of two Python ints",
              got=[type(m).__name__ for m in got] if isinstance(got, list) else type(got).__name__)  # fmt: skip


@graded("11.17", points=2)
@settings(max_examples=60)
@given(t=_TEXTS, n=st.integers(0, 12))
def test_train_bpe_whole_output(t, n):
    """contract: Each merge takes the pair of adjacent ids that occurs most often
    contract: replaces its occurrences in every word, left to right
    contract: Each word of ``split_words(text)`` starts as its UTF-8 bytes (ids 0..255)
    """
    got = train_bpe(t, n)
    want = _train(t, n)[0]
    check(got == want, "11.17", "every merge, in order", value=text(got), got=got, expected=want,
          text=t, num_merges=n)  # fmt: skip


@graded("11.17", points=1)
def test_train_bpe_on_genesis():
    """contract: counted inside words over the whole text (a word that occurs 3 times counts 3"""
    got = train_bpe(_GENESIS, 60)
    want = _train(_GENESIS, 60)[0]
    check(got == want, "11.17", "60 merges of the first 4000 characters of genesis.txt",
          value=text(got), got=got, expected=want)  # fmt: skip


@graded("11.17", points=1)
def test_train_bpe_errors():
    """contract: Raise ``OpError("train_bpe", problem, hint)``"""
    cases = [
        (lambda: train_bpe(b"abc", 2), ("train_bpe", "text")),
        (lambda: train_bpe(None, 2), ("train_bpe", "text")),
        (lambda: train_bpe("abc", -1), ("train_bpe", "num_merges")),
        (lambda: train_bpe("abc", 2.0), ("train_bpe", "num_merges")),
        (lambda: train_bpe("abc", "3"), ("train_bpe", "num_merges")),
    ]
    for k, (fn, words) in enumerate(cases):
        ok, msg, op = _raises(fn, *words)
        check(ok, "11.17", f"case {k} must raise OpError naming {words}", value=text(op), got=msg)


# ---------------------------------------------------------------- 11.18 encode_bpe


def _is_ids(got) -> bool:
    return isinstance(got, np.ndarray) and got.dtype == np.int64 and got.ndim == 1


@graded("11.18", points=1)
def test_encode_bpe_examples_and_merge_order():
    """contract: take the pair that comes first in ``merges``
    contract: ``text`` as token ids (1-D ``int64``)
    """
    cases = [
        (("aaab", [(97, 97), (97, 98)]), [256, 257]),  # the docstring's example
        (("abc", [(98, 99), (97, 98)]), [97, 256]),  # rank order, not left to right
        (("abc", [(97, 98), (98, 99)]), [256, 99]),
        (("abcd", [(99, 100), (98, 99), (97, 98), (97, 256), (258, 99)]), [258, 256]),
        (("aaa", [(97, 97)]), [256, 97]),  # left to right
        (("aaaa", [(97, 97), (256, 256)]), [257]),
        (("a b", [(97, 32)]), [97, 32, 98]),  # never across words
        (("a b", [(32, 98)]), [97, 256]),
        (("é\n", []), [195, 169, 10]),
        (("", [(97, 98)]), []),
    ]
    for args, want in cases:
        got = encode_bpe(*args)
        ok = _is_ids(got) and got.tolist() == want
        check(ok, "11.18", f"encode_bpe{args}", value=text(np.asarray(got).tolist()),
              got=got, expected=want)  # fmt: skip


@graded("11.18", points=2)
@settings(max_examples=60)
@given(t=_TEXTS, other=_TEXTS, n=st.integers(0, 10), same=st.booleans())
def test_encode_bpe_round_trip(t, other, n, same):
    """contract: whose ids :func:`decode_bpe` turns back into ``text`` exactly
    contract: Return the words' ids one after the other
    """
    merges = _train(t if same else other + t[::2], n)[0]
    got = encode_bpe(t, merges)
    want = _encode(t, merges)
    ok = _is_ids(got) and got.tolist() == want
    check(ok, "11.18", "the ids", value=text(np.asarray(got).tolist()), got=got, expected=want,
          text=t, merges=merges)  # fmt: skip
    back = decode_bpe(got, merges) if ok else None
    check(back == t, "11.18", "decode_bpe(encode_bpe(text)) == text", got=back, expected=t)


@graded("11.18", points=1)
def test_encode_bpe_gives_trainings_ids():
    """contract: Encoding the text the merges were learnt on gives the ids training's merging left"""
    merges, words = _train(_GENESIS, 60)
    got = encode_bpe(_GENESIS, merges)
    want = [i for w in words for i in w]
    ok = _is_ids(got) and got.tolist() == want
    check(ok, "11.18", "genesis.txt's first 4000 characters by its own 60 merges",
          value=text(np.asarray(got)[:300].tolist()), got=got, expected=want)  # fmt: skip


@graded("11.18", points=1)
def test_encode_bpe_new_array():
    """contract: one after the other: a new array"""
    merges = [(97, 98), (256, 99)]
    first = encode_bpe("abc abc", merges)
    want = np.asarray(first).copy()
    first[...] = -1  # the caller owns it: a second call must not see this
    again = encode_bpe("abc abc", merges)
    check(bool(np.array_equal(again, want)), "11.18", "a second call's ids after the first's were overwritten",
          value=text(np.asarray(again).tolist()), got=again, expected=want)  # fmt: skip


@graded("11.18", points=1)
def test_encode_bpe_errors():
    """contract: Raise ``OpError("encode_bpe", problem, hint)``
    contract: merge ``k`` may use ids below ``256 + k``
    contract: the bound ``256 + k`` its ids must stay below
    """
    late, negative = [(97, 98), (256, 99), (97, 258)], [(97, 98), (-1, 98)]
    cases = [
        (lambda: encode_bpe(b"ab", []), ("encode_bpe", "text")),
        (lambda: encode_bpe("ab", [(97, 256)]), ("encode_bpe", "merges", "0", "256")),  # not yet
        (lambda: encode_bpe("ab", late), ("encode_bpe", "merges", "2", "258")),
        (lambda: encode_bpe("ab", negative), ("encode_bpe", "merges", "1", "257")),
        (lambda: encode_bpe("ab", [(97, 98, 99)]), ("encode_bpe", "merges", "0", "256")),
    ]
    for k, (fn, words) in enumerate(cases):
        ok, msg, op = _raises(fn, *words)
        check(ok, "11.18", f"case {k} must raise OpError naming {words}", value=text(op), got=msg)
    # the boundary: merge k may use id 256 + k - 1, the one made just before it
    got = encode_bpe("abc", [(97, 98), (256, 99)])
    check(_is_ids(got) and got.tolist() == [257], "11.18", "merge 1 joins id 256, made by merge 0",
          value=text(np.asarray(got).tolist()), got=got)  # fmt: skip
