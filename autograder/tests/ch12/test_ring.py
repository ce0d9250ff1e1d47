"""Graded tests, chapter 12: the ring's chunks (12.1) and ring all-reduce (12.2).

The ranks are threads of the test's process with MPI's strict message semantics
(``minitorch.distributed.threads``); each test starts them once per rank count.
"""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from autograder.harness import assert_close, check, graded, text
from minitorch import OpError
from minitorch.distributed import ring_chunks, run_threads

from .ranks_ring import allreduce_cases, errors

LIMIT = 30  # seconds for one start of the ranks


def _bounds(n: int, p: int) -> list:
    """The contract written another way: numpy's split into p near-equal pieces."""
    return [0, *np.cumsum([len(a) for a in np.array_split(np.arange(n), p)]).tolist()]


def _named(problem: str, word: str) -> bool:
    return bool(re.search(rf"(?<![\w.]){re.escape(word)}(?![\w])", problem))


# ---------------------------------------------------------------- 12.1 ring_chunks


@graded("12.1", points=1)
def test_ring_chunks_example_and_boundaries():
    """contract: Returns a new list of ``p + 1`` ints"""
    for n, p in [(10, 4), (12, 3), (2, 4), (0, 3), (0, 1), (7, 1), (5, 5), (6, 5), (1, 2)]:
        got = ring_chunks(n, p)
        ok = type(got) is list and all(type(b) is int for b in got) and got == _bounds(n, p)
        check(ok, "12.1", "chunk bounds", value=text(got), n=n, p=p, expected=_bounds(n, p))
    a, b = ring_chunks(9, 2), ring_chunks(9, 2)
    check(a is not b, "12.1", "each call returns a new list")


@graded("12.1", points=1)
@given(st.integers(0, 300), st.integers(1, 9))
def test_ring_chunks_any_n_and_p(n, p):
    """contract: Returns a new list of ``p + 1`` ints"""
    got = ring_chunks(n, p)
    check(got == _bounds(n, p), "12.1", "chunk bounds", value=text(got), n=n, p=p)


@graded("12.1", points=1)
def test_ring_chunks_errors():
    """contract: Raises ``OpError("ring_chunks", problem, hint)`` naming ``n``
    contract: naming ``p`` when it is not an int of at least 1 (a bool is not an int here)"""
    for args, word in [((-1, 2), "n"), ((2.5, 2), "n"), ((True, 2), "n"), (("3", 2), "n"),
                       ((4, 0), "p"), ((4, -2), "p"), ((4, 1.0), "p"), ((4, False), "p")]:  # fmt: skip
        try:
            ring_chunks(*args)
            got = ("", "no error", "")
        except OpError as e:
            got = (e.op, str(e.problem), e.hint or "")
        except Exception as e:  # noqa: BLE001 - the wrong kind of error
            got = ("", f"{type(e).__name__}: {e}", "")
        ok = got[0] == "ring_chunks" and _named(got[1], word) and bool(got[2])
        check(ok, "12.1", f"OpError('ring_chunks', ...) naming {word}, with a hint",
              value=text([got[0], word]), args=args, got=got)  # fmt: skip


# ---------------------------------------------------------------- 12.2 ring_allreduce


def _expected(bufs: list) -> np.ndarray:
    out = bufs[0].astype(np.float64)  # not np.sum: it starts from +0.0, and -0.0 + 0.0 is +0.0
    with np.errstate(all="ignore"):
        for b in bufs[1:]:
            out = out + b
        return out.astype(bufs[0].dtype)


def _judge(ranks: list, cases: list, p: int) -> None:
    for i, case in enumerate(cases):
        outs = [r[i] for r in ranks]
        want = _expected([o["buf"] for o in outs])
        got = outs[0]["got"]
        check(isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype,
              "12.2", "a numpy array of buf's shape and dtype",
              value=text([getattr(got, "shape", None), str(getattr(got, "dtype", None))]),
              p=p, case=case)  # fmt: skip
        exact = case[2] == "ints"
        assert_close(got, want, "12.2", rtol=0 if exact else 1e-5, atol=0 if exact else 1e-6,
                     p=p, case=case)  # fmt: skip
        same = all(o["got"].tobytes() == got.tobytes() for o in outs)
        check(same, "12.2", "every rank returns the same bits", p=p, case=case)
        kept = all(o["new"] and o["unchanged"] for o in outs)
        check(kept, "12.2", "a new array, buf not changed", p=p, case=case)


CASES = [((n,), dt, "random") for n in (0, 1, 2, 3, 5, 17) for dt in ("float32", "float64")]
CASES += [((3, 5), "float64", "random"), ((4, 3), "float32", "view"), ((7,), "int64", "ints"),
          ((9,), "int32", "ints"), ((2, 3, 2), "float64", "ints")]  # fmt: skip


@graded("12.2", points=3)
def test_ring_allreduce_values_on_1_to_4_ranks():
    """contract: Returns a new array of ``buf``'s shape and dtype
    contract: ``buf`` itself is not changed
    contract: Every rank returns the same bits
    contract: pass the summed chunks around the ring, copied, not added
    contract: Any ``n`` works: not divisible by ``p``, smaller than ``p``, or 0"""
    for p in [1, 2, 3, 4]:
        _judge(run_threads(p, allreduce_cases, {"cases": CASES}, timeout=LIMIT), CASES, p)


EXTREME = [((n,), dt, "extreme") for n in (8, 11) for dt in ("float32", "float64")]


@graded("12.2", points=2)
def test_ring_allreduce_extreme_values():
    """contract: The elementwise sum of every rank's ``buf``, on every rank"""
    for p in [2, 3, 4]:
        ranks = run_threads(p, allreduce_cases, {"cases": EXTREME}, timeout=LIMIT)
        _judge(ranks, EXTREME, p)
        for i, case in enumerate(EXTREME):  # the sign of a zero sum: -0.0 + -0.0 is -0.0
            zero = _expected([r[i]["buf"] for r in ranks]) == 0  # a NaN's sign depends on the order
            want = np.signbit(_expected([r[i]["buf"] for r in ranks]))[zero]
            got = np.signbit(ranks[0][i]["got"])[zero]
            check(bool((got == want).all()), "12.2", "signs of zero", value=got.astype(np.int8),
                  p=p, case=case)  # fmt: skip


TRAFFIC = [
    ((n,), dt, "random") for n, dt in [(1000, "float32"), (1001, "float64"), (4099, "float32")]
]


@graded("12.2", points=2)
def test_ring_allreduce_bytes_per_rank_against_the_bound():
    """contract: use only its point-to-point messages
    contract: irecv``), never its collectives
    contract: The ranks together send exactly ``2 (p - 1) n`` elements
    contract: each rank within 1% of the bound ``2 (p - 1) / p * n`` for large ``n``
    contract: With one rank it returns a copy and sends nothing"""
    for p in [1, 2, 3, 4]:
        ranks = run_threads(p, allreduce_cases, {"cases": TRAFFIC}, timeout=LIMIT)
        for i, case in enumerate(TRAFFIC):
            outs = [r[i] for r in ranks]
            nbytes = outs[0]["buf"].nbytes
            bound = 2 * (p - 1) / p * nbytes
            sent = [o["sent"] for o in outs]
            check(sum(sent) == 2 * (p - 1) * nbytes, "12.2", "bytes sent by all ranks",
                  value=sum(sent), p=p, case=case)  # fmt: skip
            near = all(abs(s - bound) <= 0.01 * bound for s in sent)
            check(near, "12.2", "bytes sent per rank within 1% of 2(p-1)/p n", p=p, case=case,
                  sent=sent, bound=bound)  # fmt: skip
            few = all(o["messages"] <= 2 * (p - 1) for o in outs)
            only = all(set(o["kinds"]) <= {"send", "recv"} for o in outs)
            check(few and only, "12.2", "at most 2(p-1) point-to-point messages per rank",
                  p=p, case=case, messages=[o["messages"] for o in outs],
                  kinds=[o["kinds"] for o in outs])  # fmt: skip
            assert_close(
                outs[0]["got"], _expected([o["buf"] for o in outs]), "12.2", p=p, case=case
            )


@graded("12.2", points=1)
def test_ring_allreduce_errors():
    """contract: Raises ``OpError("ring_allreduce", problem, hint)`` naming ``buf`` and its type
    contract: and ``buf`` and its dtype when that is not float32, float64, int32 or int64"""
    bad = [[1.0, 2.0], np.ones(3, np.complex128), np.ones(3, np.float16), np.ones(3, bool)]
    what = ["list", "complex128", "float16", "bool"]
    for p in [1, 2]:
        for rank in run_threads(p, errors, {"bufs": bad}, timeout=LIMIT):
            for buf, word, (op, problem, hint) in zip(bad, what, rank):
                named = _named(problem, "buf") and _named(problem, word)
                ok = op == "ring_allreduce" and named and bool(hint)
                check(ok, "12.2", "OpError('ring_allreduce', ...) naming buf, with a hint",
                      value=text(op), p=p, buf=buf, got=(op, problem, hint))  # fmt: skip
