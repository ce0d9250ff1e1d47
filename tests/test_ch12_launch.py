"""Chapter 12's launcher and communicator: ranks start, talk, fail and hang as documented."""

import numpy as np
import pytest

from minitorch import OpError
from minitorch.distributed import RankError, RankTimeout, run
from minitorch.distributed.comm import world


def test_ranks_talk_and_are_counted():
    out = run(3, "tests.ch12_ranks:ring_shift", timeout=60)
    assert [o[0] for o in out] == [[2.0] * 3, [0.0] * 3, [1.0] * 3]
    assert {o[1:] for o in out} == {(12, 1, 3)}


def test_mpi_allreduce_is_the_sum():
    assert run(2, "tests.ch12_ranks:mpi_allreduce", {"n": 5}, timeout=60) == [[3.0] * 5] * 2


def test_a_raising_rank_is_named_and_the_others_stopped():
    with pytest.raises(RankError, match=r"rank 1 of 2 raised:[\s\S]*rank one fails"):
        run(2, "tests.ch12_ranks:raises_on_rank_1", timeout=60)


def test_a_hung_rank_costs_its_limit():
    with pytest.raises(RankTimeout, match=r"ranks \[1\] of 2 still running after 8 s"):
        run(2, "tests.ch12_ranks:sleeps_on_rank_1", timeout=8)


def test_bad_buffers_name_the_argument():
    comm = world()  # one rank, without mpiexec
    assert comm.size == 1 and comm.allreduce(np.ones(2)).tolist() == [1.0, 1.0]
    with pytest.raises(OpError, match="send: buf is not contiguous"):
        comm.send(np.ones((4, 4))[:, 1], 0)
    with pytest.raises(OpError, match=r"recv: source=3 is not a rank.*ranks are 0 \.\. 0"):
        comm.recv(np.ones(2), 3)
    with pytest.raises(OpError, match="isend: buf has dtype complex128"):
        comm.isend(np.ones(2, complex), 0)
