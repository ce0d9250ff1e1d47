"""Chapter 12: data-parallel training on MPI.

* ``comm``: the communicator minitorch uses (rank, size, blocking and non-blocking
  point-to-point messages, MPI's own collectives as the baseline), backed by
  ``mpi4py``, and ``CountingComm``, which records every message so tests and
  benchmarks can see the traffic;
* ``launch``: ``run(n, "module:function", args)`` starts ``n`` ranks with ``mpiexec``
  and returns what each rank's function returned (a hung rank costs its time limit);
* ``threads``: ``run_threads(n, fn, args)``, ranks as threads of one process with MPI's
  message semantics (what graded tests run: the grader's sandbox starts no processes);
* ``ring``: ring all-reduce from point-to-point messages (12.1, 12.2);
* ``collective``: the ``all_reduce`` op, split by the compiler into a start and a wait
  scheduled by ``overlap_order`` (12.6); ``cost``: the latency-bandwidth cost model
  (12.7) and the open task of choosing buckets (12.8);
* ``ddp``: gradients averaged over ranks (12.3), buckets in backward order (12.4) and
  their all-reduces started during backward (12.5); ``timeline``: the book's per-rank timelines.

The same code runs across machines: ``mpiexec`` takes MPI's own host file
(``mpiexec -f hosts -n 8 ...`` with MPICH); nothing here assumes one machine.
"""

from .collective import overlap_order, reduce_gradients, use
from .comm import Comm, CountingComm, Request, world
from .cost import LinkModel, allreduce_time, choose_buckets, measure_link, step_time
from .ddp import average_gradients, make_buckets, ready_order, reduce_in_buckets, shard, shard_scale
from .launch import RankError, RankTimeout, run
from .ring import ring_allreduce, ring_chunks
from .threads import Deadlock, ThreadComm, run_threads

__all__ = [
    "Comm",
    "CountingComm",
    "Deadlock",
    "LinkModel",
    "RankError",
    "RankTimeout",
    "Request",
    "ThreadComm",
    "allreduce_time",
    "average_gradients",
    "choose_buckets",
    "make_buckets",
    "measure_link",
    "overlap_order",
    "ready_order",
    "reduce_gradients",
    "reduce_in_buckets",
    "ring_allreduce",
    "ring_chunks",
    "run",
    "run_threads",
    "shard",
    "shard_scale",
    "step_time",
    "use",
    "world",
]
