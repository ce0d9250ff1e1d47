"""Chapter 12's cost model (12.7) and bucket choice (12.8): the framework around the exercises."""

import re

import pytest

from minitorch import OpError
from minitorch.distributed import LinkModel, run, step_time
from minitorch.distributed.cost import check_buckets
from solutions.reference.ch12_compile import choose_buckets


@pytest.fixture(autouse=True)
def _reference():
    import minitorch

    mode, focus = minitorch.get_mode()
    minitorch.set_mode("reference")
    yield
    minitorch.set_mode(mode, focus)  # as the session had it


def test_step_time_plays_the_schedule():
    m = LinkModel(p=2, latency=1e-3, bandwidth=1e6)  # a bucket of n bytes: 2 ms + n us
    sizes, ready = [4000, 8, 8], [0.0, 0.006, 0.006]
    assert step_time([[0], [1, 2]], sizes, ready, m) == pytest.approx(0.006 + 0.002016)
    # one bucket waits for the backward, then sends everything
    assert step_time([[0, 1, 2]], sizes, ready, m) == pytest.approx(0.006 + 0.002 + 0.004016)
    # a reduce that ends before the backward does costs nothing: the backward's end counts
    assert step_time([[0], [1, 2]], sizes, ready, m, backward_end=0.02) == 0.02
    assert step_time([], [], [], m) == 0.0


@pytest.mark.parametrize("buckets, why", [
    ([[1, 0], [2]], "bucket 0 holds 1 where gradient 0 comes next"),
    ([[0], [], [1, 2]], "bucket 1 is []"),
    ([[0, 1]], "the buckets hold 2 gradients of 3"),
    ([[0, 1, 2, 3]], "the buckets hold 4 gradients of 3"),
    ([[0, True, 2]], "bucket 0 holds True"),
    ((i for i in range(3)), "buckets is a generator"),
])  # fmt: skip
def test_bad_buckets_are_named(buckets, why):
    with pytest.raises(OpError, match=re.escape(why)) as e:
        check_buckets(buckets, 3)
    assert e.value.op == "step_time" and e.value.hint


def test_the_reference_is_the_best_bucketing():
    """Exhaustive over every split of six gradients: the dynamic programme finds the least."""
    import itertools

    sizes, ready = [900, 10, 10, 4000, 20, 700], [0.0, 1e-3, 1.5e-3, 4e-3, 4.2e-3, 6e-3]
    for m in (LinkModel(2, 1e-3, 1e6), LinkModel(4, 1e-5, 1e5), LinkModel(3, 5e-4, 2e6, "tree")):
        best = min(
            step_time([list(range(a, b)) for a, b in zip((0,) + cuts, cuts + (6,))], sizes, ready, m)
            for k in range(6) for cuts in itertools.combinations(range(1, 6), k)
        )  # fmt: skip
        assert step_time(choose_buckets(sizes, ready, m), sizes, ready, m) == pytest.approx(best)


def test_measured_link_and_reductions_on_two_ranks():
    """One launch: the fitted link is positive and every rank gets rank 0's figures; the
    measured reductions gave the right sums (checked in the ranks) and are positive."""
    out = run(
        2,
        "minitorch.distributed.cost:measure_reductions",
        {"sizes": [8, 1 << 16], "repeats": 3},
        timeout=90,
    )
    assert out[0] == out[1]
    (latency, bandwidth) = out[0]["link"]
    assert latency >= 0 and bandwidth > 0
    assert all(t > 0 for t in out[0]["mpi"] + out[0]["naive"])


def test_measure_link_needs_two_ranks():
    from minitorch.distributed.comm import world
    from minitorch.distributed.cost import measure_link

    with pytest.raises(OpError, match="measure_link: the communicator has 1 rank"):
        measure_link(world())
