"""What eager mode allocates: ``track_memory``, ``memory_summary`` and ``temp_allocator``.

Eager execution makes each op's result storage inside ``eager_apply``; one
hook there (``core.tensor._alloc_hook``, ``None`` unless one of these contexts
is active, so the cost when off is one comparison per op) sees every result.
A result that shares memory with an input is a view, not an allocation. Device
bytes (the cuda backend's, scratch included) are counted by ``device.py``'s hook.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..core import tensor as _tensor
from .device import DeviceStats, track_device
from .planner import ALIGNMENT, align


def _fresh(inputs, data) -> np.ndarray | None:
    st = data.storage
    if not isinstance(st, np.ndarray) or st.nbytes == 0:
        return None
    for x in inputs:
        other = getattr(getattr(x, "_data", None), "storage", None)
        if isinstance(other, np.ndarray) and np.may_share_memory(st, other):
            return None
    return st


@dataclass
class MemoryStats:
    """Bytes of eager results: live now, the most live at once, and who allocated them."""

    current: int = 0
    peak: int = 0
    allocations: int = 0
    by_op: dict = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # op -> [n, bytes]
    device: DeviceStats | None = None  # the cuda device's bytes (None: cuda not in use)

    def _alloc(self, op: str, nbytes: int) -> None:
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        self.allocations += 1
        entry = self.by_op[op]
        entry[0] += 1
        entry[1] += nbytes

    def _free(self, nbytes: int) -> None:
        self.current -= nbytes

    def summary(self) -> str:
        lines = [
            f"eager memory: current {self.current} B, peak {self.peak} B, "
            f"{self.allocations} allocations",
            f"  {'op':<14} {'count':>7} {'bytes':>12}",
        ]
        for op, (n, b) in sorted(self.by_op.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"  {op:<14} {n:>7} {b:>12}")
        if self.device is not None:
            lines.append(self.device.summary())
        return "\n".join(lines)

    __str__ = summary


_last: list = [MemoryStats()]
_trackers: list = []


def _dispatch_hook() -> None:
    hooks = list(_trackers)
    if _serving:
        hooks.append(_serving[-1].serve)

    def hook(op, inputs, data):
        for h in hooks:
            data = h(op, inputs, data) or data
        return data

    _tensor._alloc_hook = hook if hooks else None


@contextlib.contextmanager
def track_memory():
    """Count eager results made inside the block: ``with track_memory() as m: ...; m.peak``
    (and, when the cuda device is in use, every device buffer: ``m.device.peak``).

    Storage freed inside the block is subtracted when numpy frees it (a weakref
    finaliser), so ``current`` and ``peak`` follow Python's reference counting.
    """
    stats = MemoryStats()

    def track(op, inputs, data):
        st = _fresh(inputs, data)
        if st is not None:
            stats._alloc(op.name, st.nbytes)
            weakref.finalize(st, stats._free, st.nbytes)

    _trackers.append(track)
    _dispatch_hook()
    try:
        with track_device() as stats.device:
            yield stats
    finally:
        _trackers.remove(track)
        _dispatch_hook()
        _last[0] = stats


def memory_summary(stats: MemoryStats | None = None) -> str:
    """The report of ``stats`` (default: the last ``track_memory`` block)."""
    return (stats or _last[0]).summary()


class TempAllocator:
    """A bump arena for eager results: each result is placed at the next aligned offset.

    On exit everything is released at once (the offset goes back to 0, the memory
    stays for the next block); a result still referenced after the block is moved
    out to its own storage first, so it never sees the next block's values.
    """

    def __init__(self, nbytes: int = 1 << 20):
        self.chunk = np.empty(nbytes, np.uint8)
        self.top = 0
        self.served = self.overflow = 0
        self._handed: list = []  # weakrefs to TensorData placed in the arena

    def serve(self, op, inputs, data):
        if _fresh(inputs, data) is None or not data.is_contiguous() or data.offset:
            return None
        st = data.storage
        size = align(st.nbytes, ALIGNMENT)
        if self.top + size > self.chunk.size:
            self.overflow += 1  # does not fit: the result keeps its own storage
            return None
        view = self.chunk[self.top : self.top + st.nbytes].view(st.dtype)
        view[...] = st
        self.top += size
        self.served += 1
        data.storage = view
        self._handed.append(weakref.ref(data))
        return data

    def release(self) -> int:
        """Move out what is still referenced; free the rest. Returns how many moved."""
        moved = 0
        for ref in self._handed:
            d = ref()
            if d is not None and np.may_share_memory(d.storage, self.chunk):
                d.storage = d.storage.copy()
                moved += 1
        self._handed.clear()
        self.top = 0
        return moved


_serving: list = []
_allocators: dict = {}


@contextlib.contextmanager
def temp_allocator(nbytes: int = 1 << 20):
    """Serve eager results made inside the block from one reusable arena of ``nbytes``.

    ``with minitorch.temp_allocator() as a: ...`` then ``a.served`` results came from
    the arena; repeated blocks reuse the same arena (no new allocation).
    """
    alloc = _allocators.get(nbytes)
    if alloc is None or alloc in _serving:
        alloc = TempAllocator(nbytes)
        _allocators.setdefault(nbytes, alloc)
    _serving.append(alloc)
    _dispatch_hook()
    try:
        yield alloc
    finally:
        _serving.remove(alloc)
        _dispatch_hook()
        alloc.release()
