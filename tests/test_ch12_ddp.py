"""Chapter 12 (ddp): data-parallel training equals one process on the whole batch for the
MLP, the capstone's CNN and TinyGPT, on 2 and 4 ranks (one launch per rank count)."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch.distributed import run, shard, shard_scale
from minitorch.distributed.comm import world
from tests.ch12_ddp_ranks import train

CASES = [("mlp", "average"), ("mlp", "buckets", 256), ("cnn", "buckets", 512),
         ("gpt", "buckets", 1024), ("gpt", "average")]  # fmt: skip


@pytest.mark.parametrize("ranks", [2, 4])
def test_data_parallel_equals_one_process(ranks):
    got = run(ranks, "tests.ch12_ddp_ranks:every_model", {"cases": CASES}, timeout=240)
    one = {name: train(world(), name, "one") for name in ("mlp", "cnn", "gpt")}
    for c, (name, how, *_) in enumerate(CASES):
        want = one[name]
        for r in range(ranks):
            res = got[r][c]
            np.testing.assert_allclose(res["losses"], want["losses"], rtol=2e-5, atol=1e-6,
                                       err_msg=f"{name} {how} rank {r}")  # fmt: skip
            for a, b in zip(res["params"], want["params"]):
                np.testing.assert_allclose(
                    a, b, rtol=1e-4, atol=2e-6, err_msg=f"{name} {how} rank {r}"
                )
        if how == "buckets":
            assert len(got[0][c]["buckets"]) > 2, "the limit should make several buckets"


def test_shards_cover_the_batch_and_scales_average_to_one():
    for n in (0, 1, 3, 10, 11):
        for size in (1, 2, 3, 4):
            parts = [shard(n, r, size) for r in range(size)]
            assert [i for p in parts for i in range(p.start, p.stop)] == list(range(n))
            assert max(p.stop - p.start for p in parts) - min(p.stop - p.start for p in parts) <= 1
            if n:
                assert sum(shard_scale(n, r, size) for r in range(size)) / size == pytest.approx(1)
    with pytest.raises(ValueError, match="shard: .*rank=4"):
        shard(3, 4, 4)


def test_timeline_lanes_and_chrome_trace():
    """The book's measurement on 2 ranks, tiny: every schedule is timed, the bucketed one
    posts its first bucket before backward ends, and the trace has a lane per rank and kind."""
    from minitorch.distributed.timeline import chrome_events, lanes
    from minitorch.profiler.chrome import chrome_trace, validate_trace

    limits = [None, 512]
    got = run(2, "minitorch.distributed.timeline:measure",
              {"limits": limits, "width": 8, "depth": 3, "rows": 6, "steps": 1}, timeout=120)  # fmt: skip
    for r in got:
        none, bucketed = r[None], r[512]
        assert none["buckets"] == 1 and bucketed["buckets"] > 1
        assert none["messages"][0][0] >= none["backward"][1]  # no overlap: after backward
        assert bucketed["messages"][0][0] < bucketed["backward"][1]
        assert sum(m[2] for m in bucketed["messages"]) == r["grad_bytes"]
    events, threads = chrome_events(got, 512)
    validate_trace(chrome_trace(events, [], threads))
    assert sorted(threads.values()) == [
        "rank 0",
        "rank 0 all-reduce",
        "rank 1",
        "rank 1 all-reduce",
    ]
    assert len(lanes(got, None)) == 2 * (3 + 1)
