"""Chapter 12's ring and the thread ranks graded tests run on: same results as MPI, MPI's rules."""

import numpy as np
import pytest

import solutions.reference.ch12_ring as ref
from minitorch.distributed import CountingComm, Deadlock, RankError, RankTimeout, run, run_threads

NS = [0, 1, 3, 4, 1001]


def _ring(comm, ns):
    out = []
    for n in ns:
        x = np.random.default_rng(comm.rank).integers(-9, 9, n).astype(np.float64)
        c = CountingComm(comm)
        out.append((ref.ring_allreduce(c, x), c.bytes_sent))
    return out


@pytest.mark.parametrize("p", [3, 4])
def test_the_ring_on_mpi_ranks_is_mpis_allreduce_with_the_threads_traffic(p):
    on_mpi = run(p, "tests.ch12_ranks:ring_against_mpi", {"ns": NS}, timeout=60)
    on_threads = run_threads(p, _ring, {"ns": NS})
    for rank in range(p):
        for (ring, mpi, sent), (t_ring, t_sent) in zip(on_mpi[rank], on_threads[rank]):
            assert np.array_equal(ring, mpi) and np.array_equal(ring, t_ring)
            assert sent == t_sent


def test_many_rings_in_a_row_never_see_a_false_deadlock():
    # a rank whose receive had matched but which had not woken yet once counted as stuck
    out = run_threads(4, _ring, {"ns": [3, 1001] * 40})
    assert all(len(r) == 80 for r in out)


def _send_first(comm):
    comm.send(np.ones(3), (comm.rank + 1) % comm.size)
    comm.recv(np.ones(3), (comm.rank - 1) % comm.size)


def test_send_before_recv_everywhere_is_a_deadlock_named_at_once():
    with pytest.raises(Deadlock, match=r"rank 0 in send to rank 1 \(tag 0, 24 bytes\); rank 1 in "):
        run_threads(3, _send_first, timeout=20)


def _wrong_size(comm):
    if comm.rank == 0:
        comm.send(np.ones(3), 1)
    else:
        comm.recv(np.ones(2), 0)


def test_a_receive_of_the_wrong_size_names_both():
    with pytest.raises(RankError, match=r"rank 1 of 2 raised:[\s\S]*recv: rank 1 got float64\[3\] "
                       r"from rank 0 into a buf of float64\[2\]"):  # fmt: skip
        run_threads(2, _wrong_size)


def _isend_reads_late(comm):
    """MPI reads an isend's buffer until it completes: a change before wait() is sent."""
    if comm.rank == 0:
        buf = np.zeros(2)
        req = comm.isend(buf, 1, tag=7)
        buf[:] = 5
        comm.barrier()
        req.wait()
        return None
    comm.barrier()
    return comm.recv(np.empty(2), 0, tag=7).tolist()


def test_isend_buffers_are_read_when_matched_and_collectives_meet():
    assert run_threads(2, _isend_reads_late)[1] == [5.0, 5.0]
    got = run_threads(3, lambda c: (c.allreduce(np.full(2, c.rank + 1.0)).tolist(),
                                    c.bcast_object(c.rank * 10, root=2), c.gather_object(c.rank)))  # fmt: skip
    assert got[0] == ([6.0, 6.0], 20, [0, 1, 2]) and got[1] == ([6.0, 6.0], 20, None)


def _in_order(comm):
    if comm.rank == 0:
        for v in range(5):
            comm.isend(np.full(1, float(v)), 1, tag=v % 2)
        return None
    odd = [comm.recv(np.empty(1), 0, tag=1)[0] for _ in range(2)]
    even = [comm.recv(np.empty(1), 0, tag=0)[0] for _ in range(3)]
    return odd + even


def test_messages_of_one_tag_arrive_in_order():
    assert run_threads(2, _in_order)[1] == [1.0, 3.0, 0.0, 2.0, 4.0]


def _raise_or_wait(comm):
    if comm.rank == 2:
        raise ValueError("rank two fails")
    comm.recv(np.empty(1), 2)


def _spin(comm):
    if comm.rank == 0:
        comm.recv(np.empty(1), 1)


def test_a_raising_rank_is_named_and_a_silent_one_costs_the_limit():
    with pytest.raises(RankError, match=r"rank 2 of 3 raised:[\s\S]*rank two fails"):
        run_threads(3, _raise_or_wait)
    with pytest.raises(RankError, match=r"rank 0 of 2 raised:[\s\S]*send: dest=5 is not a rank"):
        run_threads(2, lambda c: c.send(np.ones(1), 5))
    # rank 1 returns without sending: rank 0 waits alone, which is a deadlock too
    with pytest.raises(Deadlock, match=r"rank 0 in recv from rank 1"):
        run_threads(2, _spin, timeout=5)


def test_a_rank_still_busy_at_the_limit_is_a_timeout():
    import threading

    # rank 1 waits until the test lets it go; rank 0 returns at once, with seconds to spare
    # on a busy machine (a 1 s limit once caught rank 0 not yet scheduled)
    release = threading.Event()
    try:
        with pytest.raises(RankTimeout, match=r"ranks \[1\] of 2 still running after 3 s"):
            run_threads(2, lambda c: release.wait(60) if c.rank else None, timeout=3)
    finally:
        release.set()


def _stub(comm):
    raise NotImplementedError("Exercise 12.2: ring_allreduce")


def test_a_stub_on_a_rank_is_reported_as_not_implemented():
    with pytest.raises(NotImplementedError, match="Exercise 12.2") as e:
        run_threads(2, _stub)
    assert "raised on rank 0 of 2" in e.value.__notes__
