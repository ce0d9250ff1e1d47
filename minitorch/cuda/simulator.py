"""Numba's CUDA simulator, with a barrier that waits instead of polling.

The simulator runs each thread of a block as a Python thread. Its block manager
finds out that every thread has reached ``cuda.syncthreads()`` by polling them in
a loop, so a barrier costs as many trips through that loop as the threads need
to arrive, each holding the interpreter lock: a reduction of a few hundred rows
took a third of a second. Here a thread that arrives counts itself under a lock
and sleeps until the last one wakes them all. What a kernel computes does not
change, nor the simulator's rules: a thread that has returned no longer takes
part in later barriers, and an exception in one thread stops the others and is
raised from the launch. Applied only on the simulator, only to the numba-cuda
whose block manager this was written against (``patch`` says whether it was).
"""

from __future__ import annotations

import threading

import numpy as np


class _Barrier:
    """``cuda.syncthreads()`` for one block: releases when every thread still running waits."""

    def __init__(self, parties: int):
        self.cond = threading.Condition()
        self.live, self.waiting, self.generation, self.aborted = parties, 0, 0, False

    def wait(self) -> None:
        with self.cond:
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads call")
            self.waiting += 1
            if self.waiting == self.live:
                self._release()
                return
            generation = self.generation
            while generation == self.generation and not self.aborted:
                self.cond.wait()
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads clear")

    def leave(self) -> None:
        """A thread returned: later barriers no longer wait for it."""
        with self.cond:
            self.live -= 1
            if self.waiting and self.waiting == self.live:
                self._release()

    def abort(self) -> None:
        with self.cond:
            self.aborted = True
            self.cond.notify_all()

    def _release(self) -> None:
        self.waiting, self.generation = 0, self.generation + 1
        self.cond.notify_all()


def _syncthreads(self) -> None:
    self._manager._barrier.wait()


def _run(self, grid_point, *args) -> None:
    from numba.cuda.simulator.kernel import BlockThread

    barrier = self._barrier = _Barrier(int(np.prod(self._block_dim)))

    def target():
        try:
            self._f(*args)
        except BaseException:
            barrier.abort()  # the others stop at their next barrier
            raise
        finally:
            barrier.leave()

    threads = [BlockThread(target, self, grid_point, point, self._debug)
               for point in np.ndindex(*self._block_dim)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # the first exception that is not another thread's abort
    failed = [t.exception for t in threads if t.exception]
    first = next(
        (e for e in failed if "abort flag" not in str(e[0])), failed[0] if failed else None
    )
    if first is not None:
        raise first[0].with_traceback(first[1])


def patch() -> bool:
    """Install the barrier into the simulator's block manager; False when its shape is not
    the one this was written for (then the simulator stays as it is)."""
    from numba.cuda.simulator import kernel

    manager, thread = getattr(kernel, "BlockManager", None), getattr(kernel, "BlockThread", None)
    if manager is None or thread is None or manager.run is _run:
        return manager is not None and manager.run is _run
    if not all(hasattr(thread, n) for n in ("syncthreads", "run")):
        return False
    manager.run, thread.syncthreads = _run, _syncthreads
    return True
