"""Chapter 12: data-parallel training on MPI.

* ``comm``: the communicator minitorch uses (rank, size, blocking and non-blocking
  point-to-point messages, MPI's own collectives as the baseline), backed by
  ``mpi4py``, and ``CountingComm``, which records every message so tests and
  benchmarks can see the traffic;
* ``launch``: ``run(n, "module:function", args)`` starts ``n`` ranks with ``mpiexec``
  and returns what each rank's function returned (a hung rank costs its time limit).

The same code runs across machines: ``mpiexec`` takes MPI's own host file
(``mpiexec -f hosts -n 8 ...`` with MPICH); nothing here assumes one machine.
"""

from .comm import Comm, CountingComm, Request, world
from .ddp import average_gradients, make_buckets, ready_order, reduce_in_buckets, shard, shard_scale
from .launch import RankError, RankTimeout, run
