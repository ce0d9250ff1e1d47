"""Graded tests, chapter 12 (compile): the compiled step's schedule (12.6), the all-reduce cost
model (12.7) and the open bucket choice (12.8).

12.6 is checked as a function on hand-made and drawn dependency lists, against the rule of its
docstring computed here (with bit sets, not walks), and on 2 thread ranks (``run_threads``): a compiled
data-parallel step whose graph holds the all-reduce starts and waits where the rule puts them,
with eager's losses and parameters bit for bit and one process's on the whole batch. 12.7 and
12.8 are pure functions: no ranks.

12.7 is checked against the formulas of its docstring, computed here, over every algorithm,
1 to 9 ranks (powers of two and not), sizes that ``p`` does not divide, empty buffers, a zero
latency and extreme sizes. 12.8 is open: any valid bucketing is an answer, and the points
grow with how low its modelled step time is on the frozen suite (``bucket_suite.SUITE``),
computed here (:func:`_step`, a ring) and compared with the reference's, frozen there.

Measured on the suite (mean over its 9 cases of step time / the reference's): one bucket
1.240, one bucket per gradient 1.313, a size limit of a quarter of the gradients 1.033, of a
tenth 1.017, the best size limit of each case (searched with the model) 1.001.
"""

from __future__ import annotations

import copy
import math
import re

import numpy as np

from autograder.harness import assert_close, check, graded, text
from minitorch.core.errors import OpError
from minitorch.distributed import run_threads
from minitorch.distributed.collective import overlap_order
from minitorch.distributed.cost import LinkModel, allreduce_time, choose_buckets

from .bucket_suite import SUITE
from .ranks_compile import data_parallel

# ---------------------------------------------------------------- 12.6 the schedule


def _rule(deps, starts, waits) -> list:
    """The docstring's three parts, with the needed-by sets as bit masks."""
    n = len(deps)
    up = [0] * n  # up[i]: i and every node it needs
    for i in range(n):
        up[i] = 1 << i
        for d in deps[i]:
            up[i] |= up[d]
    down = [0] * n  # down[i]: i and every node that needs it
    for i in reversed(range(n)):
        down[i] |= 1 << i
        for d in deps[i]:
            down[d] |= down[i]
    bits = lambda m: [i for i in range(n) if m >> i & 1]  # noqa: E731
    head, taken = [], 0
    for s in starts:
        head += bits(up[s] & ~taken)
        taken |= up[s]
    tail = []
    for w in reversed(waits):
        tail = bits(down[w] & ~taken) + tail
        taken |= down[w]
    return head + bits(((1 << n) - 1) & ~taken) + tail


def _drawn(seed, n=14):
    """A random step: gradients, a start and a wait per bucket, updates reading the waits."""
    rng = np.random.default_rng(seed)
    deps = [sorted({int(j) for j in rng.integers(0, i, rng.integers(0, 3))}) if i else []
            for i in range(n)]  # fmt: skip
    starts, waits = [], []
    for _ in range(int(rng.integers(1, 4))):
        src = sorted({int(j) for j in rng.integers(0, len(deps), 2)})
        starts.append(len(deps))
        deps.append(src)
        waits.append(len(deps))
        deps.append([starts[-1]])
    for w in waits:
        deps.append(sorted({w, int(rng.integers(0, n))}))  # an update: the reduce and a node
    return deps, starts, waits


SCHEDULES = [
    ([[], [0], [0], [1], [3]], [1], [3]),
    ([[], [], [0], [2], [1], [3]], [2], [3]),
    # two buckets: gradients 0, 2, 4 computed in a chain; the buckets are (0, 2) and (4)
    (
        [[], [0], [1], [2], [3], [0, 2], [5], [4], [7], [6], [8], [9, 1], [10, 3]],
        [6, 8],
        [9, 10],
    ),  # fmt: skip
] + [_drawn(seed) for seed in range(12)]


@graded("12.6", points=2)
def test_overlap_order_follows_the_rule():
    """contract: Return a new order of ``range(len(deps))`` (a list holding every index once) built in three parts
    contract: So a start comes right after the last node it needs, and a wait right before the first node that needs it
    contract: for each start in its order: the nodes it needs (its inputs, their inputs, ...) not placed yet, in program order, then the start itself
    contract: every node that is not in part 1 or part 3, in program order
    contract: for each wait in its order: the wait, then the nodes that need it (read it, or read a node that does, ...) and do not need a later wait, in program order
    """
    want = [_rule(*c) for c in SCHEDULES]
    got, wrong = [], {}
    for k, c in enumerate(SCHEDULES):
        order = overlap_order(*copy.deepcopy(c))
        got.append(list(order) if isinstance(order, (list, tuple)) else order)
        if got[-1] != want[k]:
            wrong[k] = (c, got[-1])
    check(not wrong, "12.6", "the order of the three parts: what each start needs, then the "
          "rest, then each wait and what needs it", value=text(got),
          first_wrong=next(iter(wrong.values()), None))  # fmt: skip


@graded("12.6", points=1)
def test_overlap_order_keeps_every_node_after_its_inputs():
    """contract: Every node still comes after the nodes it reads
    contract: Leave the lists of ``deps`` unchanged
    """
    bad, changed = {}, []
    for k, c in enumerate(SCHEDULES):
        deps = copy.deepcopy(c[0])
        order = overlap_order(deps, list(c[1]), list(c[2]))
        if deps != c[0]:
            changed.append(k)
        if sorted(order) != list(range(len(deps))):
            bad[k] = "not every index once"
            continue
        at = {i: j for j, i in enumerate(order)}
        if any(at[d] > at[i] for i, ds in enumerate(deps) for d in ds):
            bad[k] = "a node before a node it reads"
    check(not bad and not changed, "12.6", "a valid order of every node, deps left as it was",
          value=len(SCHEDULES), bad=bad, changed=changed)  # fmt: skip


@graded("12.6", points=1)
def test_overlap_order_boundaries():
    """contract: A node needed by a start is placed in part 1 even when it needs a wait"""
    cases = [
        ([], [], []),
        ([[], [0], [1]], [], []),  # nothing to schedule: program order
        ([[], [0], [1]], [1], [2]),  # a wait no node reads ends the order
        # bucket 1's start needs node 4, which reads bucket 0's wait: part 1 takes both
        ([[], [0], [1], [], [2, 3], [4], [5], [6, 2]], [1, 5], [2, 6]),
        ([[], [], [], [1], [0]], [3], []),  # a start without a wait goes first
    ]
    want = [_rule(*c) for c in cases]
    got = [overlap_order(*copy.deepcopy(c)) for c in cases]
    check(got == want, "12.6", "boundaries: no nodes, no collectives, a wait nobody reads, a "
          "node a start needs after a wait", value=text(got), got=got)  # fmt: skip


@graded("12.6", points=3)
def test_compiled_data_parallel_step_on_two_ranks():
    """On 2 thread ranks: the compiled step's graph holds a start and a wait per bucket,
    each start right after the node it reduces and each wait right before its first reader,
    the first bucket issued before the last bucket's gradients exist; eager's losses and
    parameters bit for bit, and one process training on the whole batch within float32."""
    out = run_threads(2, data_parallel, {"steps": 3}, timeout=80)
    facts, equal, close = {}, [], []
    whole = out[0]["whole batch"]
    for name in ("two", "per parameter"):
        for r in (0, 1):
            o, g = out[r][name], out[r][name]["graph"]
            buckets = 2 if name == "two" else 6
            facts[f"{name} {r}"] = g and (
                g["ops"] == ["all_reduce_start", "all_reduce_wait"]
                and len(g["starts"]) == len(g["waits"]) == buckets
                and all(s == last + 1 for s, last in g["starts"])
                and all(first == w + 1 for w, first in g["waits"])
                and g["starts"][0][0] < g["starts"][-1][1]
            )
            equal.append(
                o["losses"] == o["eager_losses"]
                and all(np.array_equal(a, b) for a, b in zip(o["params"], o["eager_params"]))
            )
            close.append(all(np.allclose(a, b, rtol=1e-5, atol=1e-6)
                             for a, b in zip(o["params"], whole["params"])))  # fmt: skip
        mean = [(a + b) / 2 for a, b in zip(out[0][name]["losses"], out[1][name]["losses"])]
        close.append(bool(np.allclose(mean, whole["losses"], rtol=1e-5)))
    check(all(facts.values()), "12.6", "the compiled step's all-reduces: split into a start and "
          "a wait, issued early, waited late", value=True, facts=facts)  # fmt: skip
    check(all(equal), "12.6", "the compiled step gives the eager step's losses and parameters",
          value=True)  # fmt: skip
    check(all(close), "12.6", "data-parallel training gives one process's training on the "
          "whole batch", value=True)  # fmt: skip


# ---------------------------------------------------------------- 12.7 the cost model


def _expected(algorithm, nbytes, p, latency, bandwidth) -> float:
    if p == 1 or nbytes == 0:
        return 0.0
    rounds, each = {
        "ring": (2 * (p - 1), nbytes / p),
        "tree": (2 * math.ceil(math.log2(p)), nbytes),
        "naive": (2 * (p - 1), nbytes),
    }[algorithm]
    return rounds * (latency + each / bandwidth)


CASES = [
    (a, n, p, lat, bw)
    for a in ("ring", "tree", "naive")
    for p in (1, 2, 3, 4, 5, 8, 9)
    for n in (0, 1, 7, 1000, 4096, 10**12)
    for lat, bw in ((1e-5, 1e9), (0.0, 3e8), (2e-3, 1.5e6))
]


@graded("12.7", points=3)
def test_allreduce_time_matches_the_model():
    """contract: Returns the modelled time as a float"""
    got, want, wrong = [], [], []
    for case in CASES:
        t = allreduce_time(*case)
        if not isinstance(t, float):
            wrong.append((case, type(t).__name__))
            continue
        got.append(t)
        want.append(_expected(*case))
    check(not wrong, "12.7", "allreduce_time returns a float", returned=wrong[:3])
    assert_close(got, want, "12.7", rtol=1e-12, atol=0.0, cases=CASES[:4])


@graded("12.7", points=1)
def test_allreduce_time_nothing_to_send_costs_zero():
    """contract: One rank (``p == 1``) or an empty buffer (``nbytes == 0``) sends nothing and costs ``0.0``"""
    cases = [(a, n, 1, 1e-3, 1e6) for a in ("ring", "tree", "naive") for n in (0, 5, 1e9)]
    cases += [(a, 0, p, 1e-3, 1e6) for a in ("ring", "tree", "naive") for p in (2, 3, 4)]
    got = [allreduce_time(*c) for c in cases]
    check(all(g == 0.0 and isinstance(g, float) for g in got), "12.7",
          "nothing to send costs 0.0 (one rank, or an empty buffer)", value=got,
          cases=cases)  # fmt: skip
    # the smallest message still pays its latency
    check(allreduce_time("ring", 1, 2, 1e-3, 1e6) > 2e-3, "12.7",
          "one byte on two ranks pays the latency of both rounds", value=True)  # fmt: skip


ARGS = ("algorithm", "nbytes", "p", "latency", "bandwidth")
BAD = [  # (arguments, the one to refuse)
    (("butterfly", 8, 2, 1e-5, 1e9), "algorithm"),
    (("Ring", 8, 2, 1e-5, 1e9), "algorithm"),
    (("ring", -1, 2, 1e-5, 1e9), "nbytes"),
    (("tree", -1, 1, 1e-5, 1e9), "nbytes"),  # checked before one rank returns 0.0
    (("ring", 8, 0, 1e-5, 1e9), "p"),
    (("ring", 8, 2.0, 1e-5, 1e9), "p"),
    (("ring", 8, True, 1e-5, 1e9), "p"),
    (("naive", 0, -3, 1e-5, 1e9), "p"),  # checked before an empty buffer returns 0.0
    (("ring", 8, 2, -1e-9, 1e9), "latency"),
    (("ring", 8, 2, 1e-5, 0.0), "bandwidth"),
    (("ring", 0, 2, 1e-5, -1.0), "bandwidth"),
]


def _raised(args) -> OpError | str:
    """The OpError ``allreduce_time(*args)`` raised, or in words what it did instead."""
    try:
        allreduce_time(*args)
    except OpError as e:
        return e if e.op == "allreduce_time" else f"OpError names op {e.op!r}"
    except Exception as e:  # noqa: BLE001 - the learner's error, reported
        return f"raised {type(e).__name__}: {e}"
    return "returned instead of raising"


def _refused(args, arg) -> str | None:
    """What went wrong when ``allreduce_time(*args)`` should refuse ``arg``; None if it did."""
    e = _raised(args)
    if isinstance(e, str):
        return e
    if not e.hint:
        return "OpError without a hint of what would work"
    if arg not in str(e).replace("=", " ").split():
        return f"OpError does not name the argument {arg}: {e}"
    return None


@graded("12.7", points=2)
def test_allreduce_time_refuses_bad_arguments():
    """contract: Raises ``OpError("allreduce_time", ...)`` naming the argument for an unknown ``algorithm``, ``nbytes < 0``, ``p`` that is not an int of at least 1 (a bool is not), ``latency < 0`` or ``bandwidth <= 0``
    contract: its hint says what would work
    """
    good = ("ring", 8, 2, 1e-5, 1e9)
    wrong = {f"{args}": why for args, arg in BAD if (why := _refused(args, arg))}
    check(not wrong, "12.7", "refuse each bad argument with OpError('allreduce_time', ...) "
          "naming it and saying what would work", wrong=wrong)  # fmt: skip
    # at the boundaries: a zero latency and the smallest bandwidth are allowed
    ok = [allreduce_time(*good), allreduce_time("ring", 8, 2, 0.0, 1e-300),
          allreduce_time("tree", 8, 2, 0.0, 5e-324)]  # fmt: skip
    check(all(isinstance(t, float) for t in ok), "12.7",
          "a zero latency and any positive bandwidth are allowed", value=ok)  # fmt: skip


def _shows(problem: str, value) -> bool:
    """``value`` written in ``problem`` as str or repr, not as part of a longer number or word
    (the 0 of ``p=0`` is not the 0 of ``10``)."""
    return any(re.search(rf"(?<![\w.]){re.escape(v)}(?!\w|\.\d)", problem)
               for v in {str(value), repr(value)})  # fmt: skip


@graded("12.7", points=1)
def test_allreduce_time_errors_show_the_value_given():
    """contract: The error's problem shows the value that was given"""
    wrong, shown = {}, []
    for args, arg in BAD:
        e, value = _raised(args), args[ARGS.index(arg)]
        shown.append(not isinstance(e, str) and _shows(e.problem or "", value))
        if not shown[-1]:
            wrong[f"{args}"] = e if isinstance(e, str) else f"{arg}={value!r} not in {e.problem!r}"
    check(not wrong, "12.7", "the problem of each refusal shows the value it refused",
          value=text(shown), wrong=wrong)  # fmt: skip


# ---------------------------------------------------------------- 12.8 the bucket choice

EXTRA = {  # edge cases, checked for validity only
    "no gradients": ([], [], LinkModel(2, 1e-4, 1e9)),
    "one gradient": ([4096], [1e-3], LinkModel(4, 1e-4, 1e9)),
    "all ready at once": ([64] * 5, [2e-3] * 5, LinkModel(4, 1e-3, 1e6)),
    "empty gradients": ([0, 16, 0, 0, 8], [0.0, 1e-4, 1e-4, 2e-4, 3e-4], LinkModel(3, 1e-5, 1e8)),
    # every reduce takes inf seconds (12.7 allows any positive bandwidth): no bucketing is
    # faster than another, and a choice must still come back
    "a network too slow for a float": ([8, 8, 16], [0.0, 1e-3, 1e-3], LinkModel(2, 1e-4, 5e-324)),
}


def _step(buckets, sizes, ready, p, latency, bandwidth) -> float:
    """The modelled step time (a ring; each bucket's reduce after its last gradient and
    the bucket before it), counted here and not through the learner's 12.7."""
    end = 0.0
    for b in buckets:
        n = sum(sizes[i] for i in b)
        cost = 2 * (p - 1) * (latency + n / p / bandwidth) if p > 1 and n else 0.0
        end = max(end, ready[b[-1]]) + cost
    return max(end, ready[-1] if ready else 0.0)


def _valid(buckets, n) -> str | None:
    if not isinstance(buckets, list):
        return f"returned a {type(buckets).__name__}, not a list of buckets"
    if not all(isinstance(b, list) and b for b in buckets):
        return "a bucket is not a non-empty list"
    flat = [i for b in buckets for i in b]
    ints = all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in flat)
    if not ints or flat != list(range(n)):
        return f"the buckets hold {flat[:12]}: every index 0 .. {n - 1} once, in order"
    return None


def _run(cases) -> tuple[dict, dict]:
    """{case: what went wrong} and {case: the buckets}; the inputs are copies."""
    wrong, chosen = {}, {}
    for name, (sizes, ready, model) in cases.items():
        s, r = list(sizes), list(ready)
        try:
            buckets = choose_buckets(s, r, model)
        except Exception as e:  # noqa: BLE001 - the learner's error, reported per case
            wrong[name] = f"choose_buckets raised {type(e).__name__}: {e}"
            continue
        why = _valid(buckets, len(sizes)) or (
            (s != list(sizes) or r != list(ready)) and "changed sizes or ready_times"
        )
        if why:
            wrong[name] = why
        else:
            chosen[name] = copy.deepcopy(buckets)
    return wrong, chosen


def _suite() -> dict:
    return {n: (c["sizes"], c["ready"], LinkModel(c["p"], c["latency"], c["bandwidth"]))
            for n, c in SUITE.items()}  # fmt: skip


def _baseline() -> list:
    return [c["reference"] for c in SUITE.values()]


@graded("12.8", points=2)
def test_buckets_are_valid():
    """contract: Return a list of buckets, each a non-empty list of gradient indices, that takes every gradient exactly once, in backward order"""
    wrong, _ = _run({**_suite(), **EXTRA})
    check(not wrong, "12.8", "return buckets that take every gradient once, in backward order "
          "(consecutive runs: [[0, 1], [2], [3, 4]])", value=_baseline(), wrong=wrong)  # fmt: skip


@graded("12.8", points=1)
def test_buckets_leave_the_inputs_unchanged():
    """contract: Decide only: leave ``sizes`` and ``ready_times`` unchanged"""
    changed = []
    for name, (sizes, ready, model) in {**_suite(), **EXTRA}.items():
        s, r = list(sizes), list(ready)
        try:
            choose_buckets(s, r, model)
        except Exception as e:  # noqa: BLE001 - the learner's error, reported per case
            changed.append(f"{name}: raised {type(e).__name__}")
            continue
        if s != list(sizes) or r != list(ready):
            changed.append(name)
    check(not changed, "12.8", "choose_buckets changed its inputs: decide only",
          value=len(SUITE), cases=changed)  # fmt: skip


def _outcome(mean_limit: float, each_limit: float) -> None:
    wrong, chosen = _run(_suite())
    check(not wrong, "12.8", "a choice was not valid", wrong=wrong)
    ratios = {}
    for name, c in SUITE.items():
        args = (c["sizes"], c["ready"], c["p"], c["latency"], c["bandwidth"])
        ratios[name] = _step(chosen[name], *args) / c["reference"]
    mean, worst = sum(ratios.values()) / len(ratios), max(ratios.values())
    check(mean <= mean_limit and worst <= each_limit, "12.8",
          f"step time / the reference's: mean {mean:.3f} (this tier needs {mean_limit} or "
          f"less), worst {worst:.3f} (needs {each_limit}); one bucket 1.240, one per "
          "gradient 1.313", value=_baseline(),
          ratios="; ".join(f"{n} {r:.3f}" for n, r in ratios.items()))  # fmt: skip


@graded("12.8", points=1)
def test_buckets_outcome_beat_one_bucket_and_one_per_gradient():
    _outcome(1.20, math.inf)


@graded("12.8", points=2)
def test_buckets_outcome_within_five_percent():
    _outcome(1.05, 1.15)


@graded("12.8", points=2)
def test_buckets_outcome_near_the_best():
    # the best fixed size limit of each case, searched with the model: 1.001, worst 1.004
    _outcome(1.01, 1.03)
