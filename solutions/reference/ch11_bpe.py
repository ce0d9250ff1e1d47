"""Chapter 11 references, the byte-pair tokenizer (11.17, 11.18)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from minitorch.core.errors import OpError
from minitorch.transformer.bpe import BYTES, split_words

__all__ = ["encode_bpe", "train_bpe"]


def _merge(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _pairs(ids: list[int]) -> Counter:
    return Counter(zip(ids, ids[1:]))


# ---------------------------------------------------------------- 11.17


def train_bpe(text, num_merges):
    if not isinstance(text, str):
        raise OpError("train_bpe", f"text is a {type(text).__name__}, not a str",
                      hint="pass the text itself (bytes: decode them first)")  # fmt: skip
    if type(num_merges) is not int or num_merges < 0:
        raise OpError("train_bpe", f"num_merges = {num_merges!r} is not an int of at least 0",
                      hint="ask for 0 or more merges, as an int")  # fmt: skip
    freq = Counter(split_words(text))
    words = [list(w.encode("utf-8")) for w in freq]
    times = list(freq.values())
    counts: Counter = Counter()  # pair -> occurrences over the text
    where: dict[tuple[int, int], set[int]] = {}  # pair -> the distinct words holding it
    for w, (ids, n) in enumerate(zip(words, times)):
        for p, c in _pairs(ids).items():
            counts[p] += c * n
            where.setdefault(p, set()).add(w)
    merges = []
    while len(merges) < num_merges and counts:
        pair = min(counts, key=lambda p: (-counts[p], p))
        new = BYTES + len(merges)
        for w in where.pop(pair):
            ids, n = words[w], times[w]
            for p, c in _pairs(ids).items():  # take the word's pairs out ...
                counts[p] -= c * n
                if counts[p] == 0:
                    del counts[p]
            words[w] = ids = _merge(ids, pair, new)
            for p, c in _pairs(ids).items():  # ... and put its new ones back
                counts[p] += c * n
                where.setdefault(p, set()).add(w)
        merges.append(pair)
    return merges


# ---------------------------------------------------------------- 11.18


def encode_bpe(text, merges):
    if not isinstance(text, str):
        raise OpError("encode_bpe", f"text is a {type(text).__name__}, not a str",
                      hint="pass the text itself (bytes: decode them first)")  # fmt: skip
    rank = {}
    for k, m in enumerate(merges):
        ok = isinstance(m, (tuple, list)) and len(m) == 2
        if not (ok and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                           and 0 <= x < BYTES + k for x in m)):  # fmt: skip
            raise OpError("encode_bpe", f"merges[{k}] = {m!r} is not a pair of ids below {BYTES + k}",
                          hint=f"merge {k} may join only bytes and the ids of merges before it")  # fmt: skip
        rank.setdefault((int(m[0]), int(m[1])), k)
    done: dict[str, list[int]] = {}
    out: list[int] = []
    for word in split_words(text):
        if word not in done:
            ids = list(word.encode("utf-8"))
            while len(ids) > 1:
                k = min(rank.get(p, len(merges)) for p in zip(ids, ids[1:]))
                if k == len(merges):
                    break
                ids = _merge(ids, (int(merges[k][0]), int(merges[k][1])), BYTES + k)
            done[word] = ids
        out += done[word]
    return np.array(out, dtype=np.int64)
