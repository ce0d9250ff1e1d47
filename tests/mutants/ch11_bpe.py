"""Chapter 11 (bpe) known-wrong implementations: train_bpe (11.17) and encode_bpe (11.18)."""

from __future__ import annotations

import functools

import numpy as np

from minitorch.core.errors import OpError
from minitorch.transformer.bpe import split_words
from solutions.reference import ch11_bpe as ref

from . import mutant


def _units(text, chars=False, words=True):
    parts = split_words(text) if words else [text]
    return [[ord(c) for c in w] if chars else list(w.encode("utf-8")) for w in parts]


def _merge(ids, pair, new, right_to_left=False):
    if right_to_left:
        return _merge(ids[::-1], pair[::-1], new)[::-1]
    return ref._merge(ids, pair, new)


def _count(ids, overlap=True):
    if overlap:
        return list(zip(ids, ids[1:]))
    out, i = [], 0
    while i + 1 < len(ids):  # a pair just counted cannot start the next one
        out.append((ids[i], ids[i + 1]))
        i += 2 if ids[i] == ids[i + 1] else 1
    return out


def _most_then_smallest(counts):
    return min(counts, key=lambda p: (-counts[p], p))


def _train(text, num_merges, *, distinct=False, pick=None, overlap=True, chars=False,
           words=True, right_to_left=False, check=True):  # fmt: skip
    if check:
        ref.train_bpe(text, num_merges)  # the errors, as the reference raises them
    units = _units(text, chars, words)
    if distinct:
        units = [list(u) for u in {tuple(u): None for u in units}]
    merges = []
    while len(merges) < num_merges:
        counts: dict = {}
        for u in units:
            for q in _count(u, overlap):
                counts[q] = counts.get(q, 0) + 1
        if not counts:
            break
        pair = (pick or _most_then_smallest)(counts)
        units = [_merge(u, pair, 256 + len(merges), right_to_left) for u in units]
        merges.append(pair)
    return merges


# ---------------------------------------------------------------- 11.17 train_bpe


@mutant("11.17", "ties go to the largest pair")
def train_bpe_largest_tie(text, num_merges):
    return _train(text, num_merges, pick=lambda c: max(c, key=lambda p: (c[p], p)))


@mutant("11.17", "ties go to the pair seen first (Counter.most_common's order)")
def train_bpe_first_seen(text, num_merges):
    return _train(text, num_merges, pick=lambda c: max(c, key=c.get))


@mutant("11.17", "counts each distinct word once, not as often as it occurs")
def train_bpe_distinct_words(text, num_merges):
    return _train(text, num_merges, distinct=True)


@mutant("11.17", "counts overlapping pairs once: aaa holds (a, a) once")
def train_bpe_no_overlap(text, num_merges):
    return _train(text, num_merges, overlap=False)


@mutant("11.17", "characters (ord) as the base alphabet, not UTF-8 bytes")
def train_bpe_characters(text, num_merges):
    return _train(text, num_merges, chars=True)


@mutant("11.17", "pairs counted across words: the text is one sequence")
def train_bpe_across_words(text, num_merges):
    return _train(text, num_merges, words=False)


@mutant("11.17", "replaces a pair's occurrences right to left: aaa becomes [97, 256]")
def train_bpe_right_to_left(text, num_merges):
    return _train(text, num_merges, right_to_left=True)


@mutant("11.17", "returns numpy ints, not Python ints")
def train_bpe_numpy_ints(text, num_merges):
    return [tuple(np.array(m, np.int64)) for m in ref.train_bpe(text, num_merges)]


@mutant("11.17", "no check of num_merges: a float or a negative count runs (range does the rest)")
def train_bpe_no_check(text, num_merges):
    if not isinstance(text, str):
        return ref.train_bpe(text, 0)
    return _train(text, max(0, int(num_merges)), check=False)


# ---------------------------------------------------------------- 11.18 encode_bpe


def _encode(text, merges, *, scan=False, once=False, words=True, offset=256, check=True):
    if check:
        ref.encode_bpe(text, merges)  # the errors, as the reference raises them
    rank = {tuple(m): k for k, m in enumerate(merges)}
    out = []
    for ids in _units(text, words=words):
        if scan:  # one pass, left to right, any pair of merges as it comes
            done = []
            for i in ids:
                k = rank.get((done[-1], i)) if done else None
                done[-1:] = [offset + k] if k is not None else done[-1:] + [i]
            ids = done
        else:
            for k, m in enumerate(merges):
                if once and tuple(m) in zip(ids, ids[1:]):
                    j = list(zip(ids, ids[1:])).index(tuple(m))
                    ids = ids[:j] + [offset + k] + ids[j + 2 :]
                elif not once:
                    ids = _merge(ids, tuple(m), offset + k)
        out += ids
    return np.array(out, np.int64)


@mutant("11.18", "one pass left to right, merging any pair of merges as it comes, not by rank")
def encode_bpe_scan(text, merges):
    return _encode(text, merges, scan=True)


@mutant("11.18", "each merge replaces only its first occurrence in a word")
def encode_bpe_first_only(text, merges):
    return _encode(text, merges, once=True)


@mutant("11.18", "merges across words: the text is one sequence")
def encode_bpe_across_words(text, merges):
    return _encode(text, merges, words=False)


@mutant("11.18", "off by one: merge k makes id 255 + k")
def encode_bpe_off_by_one(text, merges):
    return _encode(text, merges, offset=255)


@mutant("11.18", "returns int32 ids")
def encode_bpe_int32(text, merges):
    return ref.encode_bpe(text, merges).astype(np.int32)


@mutant("11.18", "no check of merges: an id not yet made passes")
def encode_bpe_no_check(text, merges):
    if not isinstance(text, str):
        return ref.encode_bpe(text, [])
    return _encode(text, merges, check=False)


@mutant("11.18", "the error names the merge but not the bound its ids must stay below")
def encode_bpe_no_bound(text, merges):
    try:
        return ref.encode_bpe(text, merges)
    except OpError as e:
        problem = e.problem.split(" is not a pair")[0] + " names an id that does not exist yet"
        raise OpError(e.op, problem, "use ids made by earlier merges") from None


@functools.lru_cache(maxsize=64)
def _cached(text, merges):
    return ref.encode_bpe(text, list(merges))


@mutant("11.18", "a cache across calls hands back the same array: the caller's writes show")
def encode_bpe_shared_cache(text, merges):
    if not isinstance(text, str):
        return ref.encode_bpe(text, merges)
    return _cached(text, tuple(tuple(m) for m in merges))
