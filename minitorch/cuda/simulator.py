"""Numba's CUDA simulator, with a block's threads run as greenlets instead of OS threads.

The simulator runs each thread of a block as a Python thread and finds out that
all of them reached ``cuda.syncthreads()`` by polling them in a loop. Starting a
thread and every trip through that loop hand the interpreter lock over, so a
launch cost about a third of a millisecond per simulated thread, and a barrier
milliseconds: most of the time of a simulated training step.

Here a block's threads are greenlets (``greenlet``, cooperative coroutines in one
OS thread): the block runs thread 0 until it returns or reaches a barrier, then
thread 1, and so on; once every thread still running waits at the barrier, all
go on. What a kernel computes does not change, nor the simulator's rules: a
thread that has returned no longer takes part in later barriers, and an
exception in one thread ends the block and is raised from the launch, naming the
thread. A kernel that forgets a barrier is caught at least as surely as before:
each thread runs as far as it can before the next one starts. ``cuda.threadIdx``
and friends read the running thread's indices from ``threading.current_thread()``,
where the scheduler sets them before each switch (and removes them afterwards).

Warp shuffles (``cuda.shfl_sync``, ``shfl_up_sync``, ``shfl_down_sync``,
``shfl_xor_sync``), which numba's simulator lacks, are a rendezvous of a warp's lanes
(``threadIdx`` flattened, 32 to a warp), run by the same scheduler: a lane at a shuffle
waits until every live lane named in the mask is at it, then each gets its source
lane's value. A barrier waits while any warp shuffles. Where CUDA leaves the result
undefined the simulator raises instead: a source lane that is not at the shuffle
(outside the mask, exited, or beyond a partial warp), a caller outside its own mask,
lanes of one mask that disagree on it or wait at a barrier instead.

Applied only on the simulator, and only to the numba-cuda block manager this was
written against; without ``greenlet`` the simulator stays as it is.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

_SYNC = object()  # what a thread's greenlet passes to the scheduler at a barrier
# what numba.cuda.simulator.kernelapi reads off threading.current_thread()
_ATTRS = ("threadIdx", "blockIdx", "thread_id", "syncthreads", "syncthreads_count",
          "syncthreads_and", "syncthreads_or", "shfl")  # fmt: skip
WARP = 32
# a shuffle's source lane from the caller's lane and its argument, per intrinsic;
# None: outside the warp, where CUDA returns the caller's own value
_SOURCE = {
    "shfl_sync": lambda lane, src: src % WARP,
    "shfl_up_sync": lambda lane, d: lane - d if lane - d >= 0 else None,
    "shfl_down_sync": lambda lane, d: lane + d if lane + d < WARP else None,
    "shfl_xor_sync": lambda lane, m: lane ^ m if (lane ^ m) < WARP else None,
}


class _Shuffle:
    """What a lane's greenlet passes to the scheduler at a shuffle."""

    def __init__(self, kind, mask, value, arg):
        self.kind, self.mask, self.value, self.arg = kind, int(mask) & 0xFFFFFFFF, value, int(arg)


def _exchange(requests: dict, at_barrier: set) -> dict:
    """``{flat thread id: result or exception}`` for the lanes waiting at shuffles."""
    answers = {}
    for flat, req in requests.items():
        warp, lane = divmod(flat, WARP)
        members = [warp * WARP + b for b in range(WARP) if req.mask >> b & 1]
        where = f"{req.kind} in lane {lane} of warp {warp} (mask {req.mask:#010x})"
        if not req.mask >> lane & 1:
            answers[flat] = RuntimeError(f"{where}: the calling lane must be in its mask")
            continue
        late = [m % WARP for m in members if m in at_barrier]
        odd = [m % WARP for m in members if m in requests and
               (requests[m].mask, requests[m].kind) != (req.mask, req.kind)]  # fmt: skip
        if late or odd:
            why = (
                f"lanes {late} wait at syncthreads"
                if late
                else f"lanes {odd} call another shuffle or mask"
            )
            answers[flat] = RuntimeError(
                f"{where}: {why}; every live lane in the mask must take it"
            )
            continue
        src = _SOURCE[req.kind](lane, req.arg)
        if src is None:
            answers[flat] = req.value
        elif warp * WARP + src in requests and req.mask >> src & 1:
            answers[flat] = requests[warp * WARP + src].value
        else:
            answers[flat] = RuntimeError(
                f"{where} reads lane {src}, which is not at this shuffle (outside the mask, exited "
                "or beyond the block): CUDA leaves that value undefined"
            )
    return answers


def _run(self, grid_point, *args) -> None:
    """``BlockManager.run``: every thread of the block at ``grid_point``, to the end."""
    from greenlet import greenlet
    from numba.cuda.simulator.kernel import Dim3

    me, scheduler = threading.current_thread(), greenlet.getcurrent()
    saved = {k: me.__dict__[k] for k in _ATTRS if k in me.__dict__}
    block = Dim3(*self._block_dim)
    tasks = []
    for point in np.ndindex(*self._block_dim):
        idx = Dim3(*point)
        flat = idx.x + block.x * (idx.y + block.y * idx.z)
        tasks.append((greenlet(lambda *_: self._f(*args), parent=scheduler), idx, flat))

    def sync():
        scheduler.switch(_SYNC)

    def collective(reduce_):  # syncthreads_count/_and/_or: the block's values, then a barrier
        def call(value):
            idx = me.threadIdx
            self.block_state[idx.x, idx.y, idx.z] = value
            sync()
            result = reduce_(self.block_state)
            sync()
            return result

        return call

    def shfl(kind, mask, value, arg):
        return scheduler.switch(_Shuffle(kind, mask, value, arg))

    me.__dict__.update(
        blockIdx=Dim3(*grid_point), syncthreads=sync, shfl=shfl,
        syncthreads_count=collective(np.count_nonzero),
        syncthreads_and=collective(lambda s: 1 if np.all(s) else 0),
        syncthreads_or=collective(lambda s: 1 if np.any(s) else 0),
    )  # fmt: skip
    self.block_state = np.zeros(tuple(self._block_dim), dtype=np.bool_)
    try:
        run = [(task, None) for task in tasks]  # (task, what its switch returns there)
        barrier: dict = {}  # flat id -> task waiting at syncthreads
        while run:
            shuffles, shuffling = {}, {}
            for task, send in run:
                g, idx, flat = task
                me.threadIdx, me.thread_id = idx, flat
                try:
                    got = g.throw(send) if isinstance(send, Exception) else g.switch(send)
                    if got is _SYNC:
                        barrier[flat] = task
                    elif isinstance(got, _Shuffle):
                        shuffles[flat], shuffling[flat] = got, task
                except Exception as e:  # as BlockThread.run words it
                    where = f"tid={list(idx)} ctaid={list(grid_point)}"
                    tb = sys.exc_info()[2]
                    raise type(e)(f"{where}: {e}" if str(e) else where).with_traceback(tb) from None
            if shuffles:  # warps first: a barrier waits for every lane still shuffling
                answers = _exchange(shuffles, set(barrier))
                run = [(shuffling[f], answers[f]) for f in shuffles]
            else:
                run, barrier = [(task, None) for task in barrier.values()], {}
    finally:
        for k in _ATTRS:
            me.__dict__.pop(k, None)
        me.__dict__.update(saved)


def allocate(shared, shape, dtype, frame):
    """The shared array of the ``cuda.shared.array`` call made on ``frame``'s line: the
    simulator tells allocations apart by call site (one per launch, blocks run in turn)."""
    from numba.cuda.simulator import kernelapi

    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    caller = (frame.f_code.co_filename, frame.f_lineno)
    res = shared._allocations.get(caller)
    if res is None:
        res = shared._allocations[caller] = np.empty(shape, dtype)
    return res


def _shared_array(self, shape, dtype, alignment=None):
    """``FakeCUDAShared.array``, its caller found without ``traceback.extract_stack`` (which
    read the whole stack, source lines included, on every call of every thread)."""
    if alignment is not None or shape == 0:
        return _ORIGINAL_SHARED[0](self, shape, dtype, alignment)
    return allocate(self, shape, dtype, sys._getframe(1))


_ORIGINAL_SHARED: list = []


def patch() -> bool:
    """Run blocks as greenlets; False (the simulator unchanged) without ``greenlet`` or when
    numba-cuda's block manager is not the one this was written for."""
    try:
        import greenlet  # noqa: F401
        from numba.cuda.simulator import kernel
    except ImportError:
        return False
    manager = getattr(kernel, "BlockManager", None)
    if manager is None or not hasattr(kernel, "Dim3"):
        return False
    from numba.cuda.simulator import kernelapi

    if not _ORIGINAL_SHARED:
        _ORIGINAL_SHARED.append(kernelapi.FakeCUDAShared.array)
    manager.run, kernelapi.FakeCUDAShared.array = _run, _shared_array
    for kind in _SOURCE:  # cuda.shfl_*_sync(mask, value, arg) inside a simulated kernel
        setattr(kernelapi.FakeCUDAModule, kind, _intrinsic(kind))
    return True


def _intrinsic(kind):
    def call(self, mask, value, arg):
        return threading.current_thread().shfl(kind, mask, value, arg)

    call.__name__ = kind
    return call
