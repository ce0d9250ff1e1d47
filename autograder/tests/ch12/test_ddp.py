"""Graded tests, chapter 12 (ddp): gradient averaging (12.3), buckets in backward order (12.4),
bucketed all-reduce overlapped with backward (12.5). Ranks run as threads of the test's
process (``run_threads``: MPI's message rules, one rank at a time; official grading starts no
processes), one run per rank count with every case inside it."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch.core.errors import OpError
from minitorch.distributed import average_gradients, make_buckets, reduce_in_buckets, run_threads
from minitorch.nn import Parameter

from . import ranks_ddp as R

LIMIT = 80  # seconds a run of the ranks may take (under a second when well)


@functools.lru_cache(maxsize=8)
def _launch(n: int, fn: str, how: str | None, impl: tuple | None, cases: tuple = ()):
    args = {"impl": impl} if how is None else {"how": how, "impl": impl, "cases": list(cases)}
    return run_threads(n, getattr(R, fn), args, timeout=LIMIT)


def _equal_to_one_process(ex: str, results: list[dict], what: str) -> None:
    losses, params = R.single_process()
    for r, got in enumerate(results):
        assert_close(np.array(got["losses"]), np.array(losses), ex, rtol=1e-4, atol=1e-5,
                     what=f"{what}: rank {r}'s losses over {R.STEPS} steps")  # fmt: skip
        for k, (a, b) in enumerate(zip(got["params"], params)):
            assert_close(a, b, ex, rtol=1e-4, atol=1e-5, what=f"{what}: rank {r}, parameter {k}")


# ---------------------------------------------------------------- 12.3


@graded("12.3", points=3)
def test_averaged_training_equals_one_process():
    """Two and four ranks, each on its shard of an 11-row batch (6+5, 3+3+3+2), train an MLP
    three SGD steps; losses and parameters are those of one process on the whole batch.

    contract: Replace every parameter's ``.grad`` by its average over the ranks
    contract: is the same on every rank
    contract: averaging equals training on the whole batch only when
    """
    for n in (2, 4):
        out = _launch(n, "train", "average", R.spec("12.3"), ((0, False),))
        _equal_to_one_process("12.3", [o[0] for o in out], f"{n} ranks")


@graded("12.3", points=2)
def test_average_is_exact_in_the_dtype_and_fills_missing_gradients():
    """Gradients that differ by 1e-9 between ranks, a 0-d and an empty parameter, float32 and
    float64 ones, one of each without a gradient, a float64 gradient on a float32 parameter.

    contract: the sum of the ranks' gradients divided by ``comm.size``, in the parameter's dtype
    contract: takes part as zeros, so every parameter ends with a ``.grad``
    contract: It returns ``None`` (the parameters hold the result)
    contract: Gradients travel in their parameter's dtype
    """
    want_bytes = sum(int(np.prod(sh)) * np.dtype(dt).itemsize for sh, dt in R.SHAPES)
    for n in (2, 4):
        got = _launch(n, "average_direct", None, R.spec("12.3"))
        scale = 1 + np.mean(np.arange(n)) * 1e-9
        for r, (none, sent, *grads) in enumerate(got):
            check(none, "12.3", "average_gradients returned something, not None", ranks=n)
            check(sent == want_bytes, "12.3", "all-reduced bytes are not the gradients' in their "
                  "parameters' dtypes", got=sent, expected=want_bytes, ranks=n, value=text(sent))  # fmt: skip
            for k, ((sh, dt), g) in enumerate(zip(R.SHAPES, grads)):
                check(g is not None and g[0] == dt and tuple(g[1]) == sh, "12.3",
                      f"parameter {k} (shape {sh}, {dt}) has .grad {g and g[:2]}",
                      ranks=n, rank=r)  # fmt: skip
                size = int(np.prod(sh))
                want = scale * np.arange(1, size + 1).reshape(sh) * 10.0**k
                want = np.zeros(sh) if k in R.NO_GRAD else want.astype(dt)
                assert_close(np.array(g[2], dt), want, "12.3", rtol=1e-13 if dt == "float64" else 1e-6,
                             atol=0, ranks=n, rank=r, parameter=k)  # fmt: skip


def _raises_on_one_rank(comm, fn, bad, args):
    with pytest.raises(OpError) as e:
        fn(comm, bad, *args)
    return e.value


def _names_a_wrong_parameter(ex, fn, *args):
    bad = [Parameter(np.zeros(2)), minitorch.tensor([1.0])]
    (err,) = run_threads(1, _raises_on_one_rank, {"fn": fn, "bad": bad, "args": args})
    named = "params[1]" in (err.problem or "") and err.hint
    check(err.op == fn.__name__ and bool(named), ex,
          f"raised {err!s}: want {fn.__name__}, params[1] named and a hint",
          value=text(err.op))  # fmt: skip
    return bad


@graded("12.3", points=1)
def test_average_names_a_wrong_parameter():
    """contract: is not a ``Parameter`` raises ``OpError`` naming ``average_gradients`` and its index"""
    _names_a_wrong_parameter("12.3", average_gradients)


# ---------------------------------------------------------------- 12.4


def _ps(*sizes, dtype=np.float32):
    return [Parameter(np.zeros(s, dtype)) for s in sizes]


@graded("12.4", points=2)
def test_buckets_follow_the_order_under_the_limit():
    """contract: Group the indices of ``params`` into buckets to all-reduce, in backward order
    contract: stay at most ``limit_bytes``; otherwise start a new bucket
    contract: A parameter larger than the limit is a bucket on its own
    contract: concatenated, they are ``order``
    contract: Returns a new list of lists
    """
    cases = [
        (_ps(4, 4, 8), 32, [2, 1, 0], [[2], [1, 0]]),  # the docstring's example
        (_ps(4, 4, 8), 64, [0, 1, 2], [[0, 1, 2]]),  # exactly at the limit: one bucket
        (_ps(4, 1, 8), 1, [1, 2, 0], [[1], [2], [0]]),  # the smallest limit: one each
        (_ps(4, 4, 8), 63, [0, 1, 2], [[0, 1], [2]]),  # one byte under
        (_ps(100, 1, 1, 100, 2), 40, [4, 3, 2, 1, 0], [[4], [3], [2, 1], [0]]),  # too large alone
        (_ps((2, 3), (), 5, dtype=np.float64), 48, [1, 0, 2], [[1], [0], [2]]),  # itemsize 8
        (_ps(3, 0, 3), 12, [0, 1, 2], [[0, 1], [2]]),  # an empty parameter costs nothing
        ([], 8, [], []),
    ]
    for params, limit, order, want in cases:
        given = list(order)
        got = make_buckets(params, limit, order)
        check(got == want and order == given and all(isinstance(b, list) for b in got), "12.4",
              "wrong buckets", sizes=[p.shape for p in params], limit_bytes=limit, order=given,
              got=got, expected=want, value=text(got))  # fmt: skip


@graded("12.4", points=1)
def test_buckets_name_a_bad_limit_or_order():
    """contract: ``limit_bytes`` that is not a positive int raises ``OpError`` naming ``limit_bytes``
    contract: ``order`` that is not a permutation of ``range(len(params))`` raises ``OpError``
    contract: lists every index of ``params`` once
    """
    ps = _ps(2, 2)
    for limit, order, word in [(0, [0, 1], "limit_bytes"), (-8, [0, 1], "limit_bytes"),
                               (8.0, [0, 1], "limit_bytes"), (8, [0], "order"),
                               (8, [0, 0], "order"), (8, [0, 1, 2], "order"), (8, [1, 2], "order")]:  # fmt: skip
        with pytest.raises(OpError) as e:
            make_buckets(ps, limit, order)
        named = re.search(rf"\b{word}\b", e.value.problem or "") and e.value.hint
        check(e.value.op == "make_buckets" and bool(named), "12.4",
              f"raised {e.value!s}: want make_buckets, {word} named and a hint", limit_bytes=limit,
              order=order, value=text([e.value.op, word]))  # fmt: skip


# ---------------------------------------------------------------- 12.5

CASES = (
    (1, "no unused"),
    (2, "ready"),
    (100, "ready"),
    (2, "reversed"),
    (2, "unused first"),
)  # (parameters per bucket, how the buckets are listed: ranks_ddp.train)


def _bucket_runs(n):
    return _launch(n, "train", "buckets", R.spec("12.5"), CASES)


@graded("12.5", points=3)
def test_bucketed_training_equals_one_process():
    """Two and four ranks, buckets of 1, 2 and every parameter, buckets listed against
    backward's order, and all of them behind the bucket of a parameter no loss uses (every one
    left for finish): the same losses and parameters as one process on the whole batch.

    contract: The result equals ``average_gradients``
    contract: a gradient that never came counts as zeros
    contract: writes each parameter's average (sum over ranks / ``comm.size``, in its dtype, its shape) into its ``.grad``
    contract: it removes the hooks, so the next step calls ``reduce_in_buckets`` again
    """
    for n in (2, 4):
        out = _bucket_runs(n)
        for c, case in enumerate(CASES):
            _equal_to_one_process("12.5", [o[c] for o in out], f"{n} ranks, buckets {case}")
            zero = case[1] == "no unused" or all(o[c]["unused"] == [0.0, 0.0] for o in out)
            check(zero, "12.5", "the parameter no loss uses should end with a zero .grad",
                  got=[o[c]["unused"] for o in out], case=case)  # fmt: skip


@graded("12.5", points=3)
def test_each_bucket_is_posted_as_soon_as_it_is_ready():
    """Read from the message log, not the clock: after the hook of a bucket's last gradient,
    that bucket and every one before it have been posted, no later one; one message each, of
    the bucket's bytes; a bucket listed before one that is ready holds it back, and finish
    posts every bucket still held.

    contract: once a bucket's last gradient is ready
    contract: start its non-blocking all-reduce
    contract: Buckets are posted in their list order, on every rank alike
    contract: a bucket that is ready waits for the ones before it
    contract: concatenate its gradients (flattened, in the bucket's order) into one buffer
    contract: ``finish()`` posts the buckets not posted yet
    contract: Call it before ``loss.backward()``; it registers a grad hook on every parameter
    """
    sizes = [p.size * 4 for p in R.Net().parameters()]
    for n in (2, 4):
        for c, case in enumerate(CASES):
            for r, o in enumerate(_bucket_runs(n)):
                for step in o[c]["posted"]:
                    buckets = step["buckets"]
                    ready, want = set(), []
                    for i, _ in step["seen"]:  # what a correct reducer has posted by then
                        ready.add(i)
                        k = len(want[-1:]) and want[-1]
                        while k < len(buckets) and set(buckets[k]) <= ready:
                            k += 1
                        want.append(k)
                    got = [posted for _, posted in step["seen"]]
                    bytes_ = [sum(sizes[i] for i in b) for b in buckets]
                    ok = got == want and step["sizes"] == bytes_ and step["during"] == want[-1]
                    check(ok, "12.5", "buckets were not posted as soon as they were ready",
                          ranks=n, rank=r, case=case, buckets=buckets,
                          hooks_in_order=[i for i, _ in step["seen"]], posted_after_each=got,
                          expected=want, message_bytes=step["sizes"], bucket_bytes=bytes_,
                          value=text([got, step["sizes"]]))  # fmt: skip


@graded("12.5", points=1)
def test_reducer_names_a_wrong_parameter():
    """contract: is not a ``Parameter`` raises ``OpError`` naming ``reduce_in_buckets`` and its index
    contract: before any hook is registered
    """
    bad = _names_a_wrong_parameter("12.5", reduce_in_buckets, [[0, 1]])
    hooks = bad[0].__dict__.get("_grad_hooks", [])
    check(not hooks, "12.5", f"{len(hooks)} hook(s) left on params[0] after the error",
          value=text(len(hooks)))  # fmt: skip
