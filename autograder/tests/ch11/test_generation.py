"""Graded tests, chapter 11: bucketed variable-length batches (11.6) and sampling a token (11.7)."""

from __future__ import annotations

import math
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.harness import check, graded, text
from minitorch import OpError
from minitorch.transformer import bucket_batches, sample_next


def _raises(fn, *words) -> tuple[bool, str, str]:
    """Whether ``fn`` raises an OpError of op ``words[0]`` whose problem names every word (as
    a word: ``XXtop_kXX`` does not name ``top_k``), with the hint the contract promises
    (``OpError(op, problem, hint)``); its message; its op."""
    try:
        fn()
    except OpError as e:
        msg = str(e)
        if not e.hint:
            return False, f"{msg} (no hint: the contract raises OpError(op, problem, hint))", e.op
        # the problem names the argument (the contract), not only the hint
        problem = str(e.problem)
        named = all(re.search(rf"(?<![\w.]){re.escape(w)}(?![\w])", problem) for w in words[1:])
        return e.op == words[0] and bool(named), msg, e.op
    except Exception as e:  # noqa: BLE001 - the wrong kind of error
        return False, f"{type(e).__name__}: {e}", ""
    return False, "no error", ""


# ---------------------------------------------------------------- 11.6 bucket_batches


def _buckets(lengths, batch_size, multiple):
    """The contract written another way: sort indices by (padded length, index), then cut."""
    padded = [math.ceil(n / multiple) * multiple for n in lengths]
    order = sorted(range(len(lengths)), key=lambda i: (padded[i], i))
    out, k = [], 0
    while k < len(order):
        p = padded[order[k]]
        run = [i for i in order[k:] if padded[i] == p]
        out += [(p, run[s : s + batch_size]) for s in range(0, len(run), batch_size)]
        k += len(run)
    return out


@graded("11.6", points=1)
def test_bucket_batches_example_and_boundaries():
    cases = [
        (([5, 16, 17, 3, 9], 2, 8), [(8, [0, 3]), (16, [1, 4]), (24, [2])]),
        (([16, 16, 1], 5, 16), [(16, [0, 1, 2])]),  # exactly a multiple stays
        (([4, 2, 7], 1, 1), [(2, [1]), (4, [0]), (7, [2])]),
        (([], 3, 4), []),
    ]
    for args, want in cases:
        got = bucket_batches(*args)
        check(got == want, "11.6", f"bucket_batches{args}", value=text(got), got=got, expected=want)


@graded("11.6", points=2)
@settings(max_examples=40)
@given(
    lengths=st.lists(st.integers(1, 70), max_size=40),
    batch_size=st.integers(1, 7),
    multiple=st.sampled_from([1, 4, 16, 64]),
)
def test_bucket_batches_whole_output(lengths, batch_size, multiple):
    """contract: Sequences of one padded length form a bucket
    contract: Return the batches sorted by padded length
    """
    got = bucket_batches(lengths, batch_size, multiple)
    want = _buckets(lengths, batch_size, multiple)
    check(got == want, "11.6", "every batch, in order", value=text(got), got=got, expected=want,
          lengths=lengths, batch_size=batch_size, multiple=multiple)  # fmt: skip


@graded("11.6", points=1)
def test_bucket_batches_errors():
    """contract: Raise ``OpError("bucket_batches", problem, hint)``"""
    cases = [
        (lambda: bucket_batches([3, 0, 2], 2, 4), ("bucket_batches", "0")),
        (lambda: bucket_batches([3], 0, 4), ("bucket_batches", "batch_size")),
        (lambda: bucket_batches([3], 2, 0), ("bucket_batches", "multiple")),
        (lambda: bucket_batches([3], 2.5, 4), ("bucket_batches", "batch_size")),
        (lambda: bucket_batches([3], 2, 4.0), ("bucket_batches", "multiple")),
        (lambda: bucket_batches([], 0, 4), ("bucket_batches", "batch_size")),  # no lengths
    ]
    for k, (fn, words) in enumerate(cases):
        ok, msg, op = _raises(fn, *words)
        check(ok, "11.6", f"case {k} must raise OpError naming {words}", value=text(op), got=msg)


# ---------------------------------------------------------------- 11.7 sample_next


def _sample(logits, temperature, top_k, u):
    """The contract written another way: a loop over tokens in index order."""
    logits = [float(v) for v in logits]
    if temperature == 0:
        return max(range(len(logits)), key=lambda i: (logits[i], -i))
    z = [v / temperature for v in logits]
    ranked = sorted(range(len(z)), key=lambda i: (-z[i], i))
    kept = set(ranked if top_k is None else ranked[:top_k])
    top = max(z[i] for i in kept)
    w = [math.exp(z[i] - top) if i in kept else 0.0 for i in range(len(z))]
    total, acc = sum(w), 0.0
    for i in range(len(z)):
        acc += w[i] / total
        if i in kept and acc > u:
            return i
    return max(kept)


@graded("11.7", points=1)
def test_sample_next_examples_and_edges():
    p = np.log(np.array([0.5, 0.25, 0.25]))
    cases = [
        ((p, 1.0, None, 0.6), 1),
        ((p, 1.0, None, 0.0), 0),
        ((np.array([1.0, 3.0, 2.0]), 1.0, 1, 0.99), 1),
        ((np.array([1.0, 3.0, 3.0]), 0.0, None, 0.7), 1),  # greedy: the first maximum
        ((np.array([5.0, 1.0, 5.0, 0.0]), 1.0, 1, 0.9), 0),  # a tie at top-1: the lower index
        ((np.array([-1e9, 0.0, 0.0]), 1.0, 2, 0.0), 1),  # token 0 is masked: probability 0
        ((np.array([1000.0, 999.0]), 1.0, None, 0.1), 0),  # large logits: subtract the max
        ((np.array([2.0, 1.0]), 100.0, None, 0.45), 0),  # high temperature: nearly uniform
        ((np.array([2.0, 1.0]), 100.0, None, 0.51), 1),
        ((np.zeros(2), 1.0, None, 0.5), 1),  # p[0] is exactly 0.5: it does not exceed u
        # 7 equal logits: the probabilities add up to 0.9999999999999998 < u, so rounding
        # leaves no token whose running sum exceeds u: the last kept one is drawn
        ((np.zeros(7), 1.0, None, float(np.nextafter(1.0, 0.0))), 6),
        # ties at the top-k boundary among many tokens: the lower indices are kept (a sort
        # that is not stable keeps others)
        ((np.random.default_rng(1).integers(0, 3, 100).astype(float), 1.0, 1, 0.5), 2),
        ((np.random.default_rng(0).integers(0, 3, 100).astype(float), 1.0, 3, 0.99), 11),
        # logits below -1e9: a token top-k removed has probability 0, whatever stands in for it
        ((np.array([-3e9, -2e9, -4e9]), 1.0, 1, 0.5), 1),
        ((np.array([-3e9, -2e9, -4e9]), 2.0, 2, 0.99), 1),
        # rounding leaves the kept total below u: the last *kept* token, never the removed 7
        ((np.append(np.zeros(7), -5.0), 1.0, 7, float(np.nextafter(1.0, 0.0))), 6),
    ]
    got = [sample_next(*args) for args, _ in cases]
    want = [w for _, w in cases]
    check(got == want, "11.7", "sample_next on the listed cases", value=got, expected=want)
    check(
        all(type(g) is int for g in got),
        "11.7",
        "return a plain int",
        value=text([type(g).__name__ for g in got]),
    )


@graded("11.7", points=2)
@settings(max_examples=60)
@given(
    logits=st.lists(st.integers(-8, 8).map(lambda k: k / 2), min_size=1, max_size=8),
    temperature=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
    top_k=st.one_of(st.none(), st.integers(1, 9)),
    u=st.integers(0, 99).map(lambda k: k / 100 + 0.003),
)
def test_sample_next_against_a_loop(logits, temperature, top_k, u):
    """contract: otherwise divide the logits by ``temperature``
    contract: softmax over the kept tokens (subtract their maximum first)
    """
    got = sample_next(np.array(logits), temperature, top_k, u)
    want = _sample(logits, temperature, top_k, u)
    check(got == want, "11.7", "the drawn token", value=int(got) if isinstance(got, (int, np.integer)) else -1,
          logits=logits, temperature=temperature, top_k=top_k, u=u)  # fmt: skip


@graded("11.7", points=1)
def test_sample_next_errors():
    """contract: Raise ``OpError("sample_next", problem, hint)``"""
    z = np.zeros(3)
    cases = [
        (lambda: sample_next(np.zeros((2, 2)), 1.0, None, 0.5), ("sample_next", "(2, 2)")),
        (lambda: sample_next(np.zeros(0), 1.0, None, 0.5), ("sample_next", "(0,)")),
        (lambda: sample_next(z, -1.0, None, 0.5), ("sample_next", "temperature")),
        (lambda: sample_next(z, 1.0, 0, 0.5), ("sample_next", "top_k")),
        (lambda: sample_next(z, 1.0, 1.5, 0.5), ("sample_next", "top_k")),
        (lambda: sample_next(z, 1.0, None, 1.0), ("sample_next", "u")),
        (lambda: sample_next(z, 1.0, None, -0.1), ("sample_next", "u")),
    ]
    for k, (fn, words) in enumerate(cases):
        ok, msg, op = _raises(fn, *words)
        check(ok, "11.7", f"case {k} must raise OpError naming {words}", value=text(op), got=msg)
