"""Chapter 8 on the cuda device: the arena in device memory, and device bytes counted.

The cuda backend makes every device buffer through ``device_empty`` (chapter 4's
``backend.py``). The arena is one such buffer, sliced as on the CPU. A kernel there
takes no ``dest=``: the executor offers the step its place (``SERVE.offer``) while it
runs, and the first buffer of that size and dtype the kernel makes is that place.
When a kernel made a scratch buffer of that size before its result (``where``,
``mean``, a batched ``matmul``), the result is copied into place (one launch more),
and from the next call on the place goes to the buffer that became the result (an
:class:`Offer` skips the ones before it). A scratch buffer may thus land in the
step's place, so a device arena merges no step in place: the place never holds one
of the step's inputs.

``track_device`` counts what the backend allocates (results and scratch alike) while
it is on, for eager and compiled calls alike: ``track_memory`` reports it on cuda.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import weakref

import numpy as np

from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from .arena import plan_memory


def _backend():
    from ..cuda import backend

    return backend


def address(storage) -> int:
    """The device address of ``storage``'s first byte (the simulator's: its host array's)."""
    ary = getattr(storage, "_ary", None)  # Numba's simulated device array wraps a numpy one
    if ary is not None:
        return ary.__array_interface__["data"][0]
    return storage.__cuda_array_interface__["data"][0]


def overlaps(a, b) -> bool:
    """Do the byte ranges of two device arrays meet? (bounds only, as np.may_share_memory)"""
    if not a.size or not b.size:
        return False
    x, y = address(a), address(b)
    return x < y + b.nbytes and y < x + a.nbytes


class DeviceMemory:
    """The executor's memory operations for plans on the cuda device (``Executor.mem``,
    one per executor: it remembers, per step, which buffer became the result)."""

    name = "cuda"
    donates = False  # donation swaps host buffers; a device arena keeps parameters as they are

    def __init__(self):
        self.learnt: dict = {}  # id(plan step) -> [rank of its result among its size's buffers]

    @staticmethod
    def new_arena(nbytes: int, alignment: int):
        raw = _backend().device_empty(nbytes + alignment, np.uint8)
        shift = (-address(raw)) % alignment
        return raw[shift : shift + nbytes]

    @staticmethod
    def views(arena, buffers: list) -> dict:
        """Exercise 8.8's views, of a device arena (slices of it: no copy)."""
        return {
            b.slot: arena[b.offset : b.offset + b.nbytes].view(np.dtype(b.dtype)) for b in buffers
        }

    address = staticmethod(address)
    shares = may_share = staticmethod(overlaps)

    @staticmethod
    def copy_out(d: TensorData) -> TensorData:
        return _backend()._BACKEND.copy(d)

    @staticmethod
    def plan(plan, inplace: bool):
        """Chapter 8's plan, but a buffer an output views (a reshaped gradient) is made by
        its kernel, as an output is, rather than copied out of the arena by a launch on
        every call; and no kernel's result is copied in (its place is offered)."""
        mp = plan_memory(plan, inplace=inplace)
        outputs = set(plan.outputs)
        viewed = [b.slot for b in mp.buffers if outputs.intersection(b.views)]
        if viewed:
            mp = plan_memory(
                dataclasses.replace(plan, outputs=list(plan.outputs) + viewed), inplace
            )
        mp.copied = []
        return mp

    def bind(self, st, dest, args: list):
        """``st.kernel`` with ``dest`` offered to its result (see the module's docstring)."""
        if dest is None:
            return st.kernel
        cb, kernel, shape = _backend(), st.kernel, st.spec.shape
        result = TensorData(dest, shape, tuple(strides_from_shape(shape)), 0)
        learnt = self.learnt.setdefault(id(st), [0])  # kept while the plan is: default mode rebinds

        def into_place(*a, **kw):
            offer = cb.SERVE.offer = Offer(dest, learnt[0])
            try:
                r = kernel(*a, **kw)
            finally:
                cb.SERVE.offer = None
            if r.storage is dest:
                if r.offset == 0 and r.is_contiguous():
                    return r
                r = cb._BACKEND.copy(r)  # a strided view of its place: never copy over itself
            learnt[0] = offer.fresh.get(id(r.storage), learnt[0])
            cb.copy_into(result, r)
            return result

        return into_place


class Offer:
    """A step's place in the arena, given to the ``skip``-th buffer of its size and dtype
    that its kernel makes (the one that became its result on the last call: a kernel
    may make scratch buffers of that size first)."""

    def __init__(self, dest, skip: int):
        self.dest, self.skip, self.seen = dest, skip, 0
        self.size, self.dtype = dest.size, dest.dtype
        self.fresh: dict = {}  # id of each such buffer allocated instead -> its rank

    def take(self, size: int, dtype):
        if size != self.size or dtype != self.dtype:
            return None
        self.seen += 1
        if self.dest is None or self.seen <= self.skip:
            return None
        dest, self.dest = self.dest, None
        return dest

    def note(self, arr) -> None:
        if arr.size == self.size and arr.dtype == self.dtype:
            self.fresh[id(arr)] = self.seen - 1


class DeviceStats:
    """Device bytes the backend allocated inside a block: live now, the most at once."""

    def __init__(self):
        self.current = self.peak = self.allocations = self.allocated = 0

    def _alloc(self, arr) -> None:
        n = int(arr.nbytes)
        self.current += n
        self.peak = max(self.peak, self.current)
        self.allocations += 1
        self.allocated += n
        weakref.finalize(arr, self._free, n)

    def _free(self, n: int) -> None:
        self.current -= n

    def summary(self) -> str:
        return (
            f"device memory: current {self.current} B, peak {self.peak} B, "
            f"{self.allocations} allocations ({self.allocated} B)"
        )


@contextlib.contextmanager
def track_device():
    """Count device allocations inside the block (``None`` when cuda was never used:
    tracking it would import Numba for nothing)."""
    if "minitorch.cuda.backend" not in sys.modules:
        yield None
        return
    cb = _backend()
    stats, outer = DeviceStats(), cb.ON_ALLOC[0]

    def hook(arr):
        stats._alloc(arr)
        if outer is not None:
            outer(arr)

    cb.ON_ALLOC[0] = hook
    try:
        yield stats
    finally:
        cb.ON_ALLOC[0] = outer
