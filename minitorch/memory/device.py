"""Chapter 8 on the cuda device: the arena in device memory, and device bytes counted.

The cuda backend makes every device buffer through ``device_empty`` (chapter 4's
``backend.py``). The arena is one such buffer, sliced as on the CPU. A kernel there
takes no ``dest=``: the executor offers the step its place (``SERVE``) while it runs,
and the first buffer of that size and dtype the kernel makes is that place. When a
kernel made a scratch buffer of that size before its result (``where``, ``mean``),
the result is copied into place afterwards (one launch more). A scratch buffer may
thus land in the step's place, so a device arena merges no step in place: the place
never holds one of the step's inputs.

``track_device`` counts what the backend allocates (results and scratch alike) while
it is on, for eager and compiled calls alike: ``track_memory`` reports it on cuda.
"""

from __future__ import annotations

import contextlib
import sys
import weakref

import numpy as np

from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape


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
    """The executor's memory operations for plans on the cuda device (``Executor.mem``)."""

    name = "cuda"
    donates = False  # donation swaps host buffers; a device arena keeps parameters as they are

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
    def bind(st, dest, args: list):
        """``st.kernel`` with ``dest`` offered to its result (see the module's docstring)."""
        if dest is None:
            return st.kernel
        cb, kernel, shape = _backend(), st.kernel, st.spec.shape
        result = TensorData(dest, shape, tuple(strides_from_shape(shape)), 0)

        def into_place(*a, **kw):
            cb.SERVE.dest = dest
            try:
                r = kernel(*a, **kw)
            finally:
                cb.SERVE.dest = None
            if r.storage is dest and r.offset == 0 and r.is_contiguous():
                return r
            cb.copy_into(result, r)
            return result

        return into_place


DEVICE = DeviceMemory()


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
