"""Count memory traffic of kernels run on Numba's CUDA simulator.

A GPU kernel is usually limited by memory, not arithmetic, so the efficiency of
a kernel can be graded without a GPU by counting its memory accesses::

    with count_traffic() as traffic:
        c = a @ b                       # any kernels launched in the block
    traffic.reads(a)                    # global-memory element reads of a's storage
    traffic.max_reads_per_element(a)    # the most any one element of a was read
    traffic.shared_reads, traffic.shared_writes

Inside the block, every element access of a global (device) array and of a
shared array is counted, per array and per simulated thread. Registers and
``cuda.local`` arrays are not counted. This only works on the simulator (the
hardware gives no such counts; its profilers measure bytes instead).

How: the simulator wraps each global array argument in a
``FakeWithinKernelCUDAArray`` and makes shared arrays in ``FakeCUDAShared.array``;
while counting, their element access goes through counting wrappers.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator

import numpy as np

from .simulator import allocate


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _host_array(x) -> np.ndarray:
    """The simulator's ndarray behind a Tensor, TensorData or device array."""
    x = getattr(x, "_data", x)  # Tensor -> TensorData
    x = getattr(x, "storage", x)  # TensorData -> device array
    x = getattr(x, "_ary", x)  # FakeCUDAArray -> ndarray
    if not isinstance(x, np.ndarray):
        raise TypeError(
            f"count_traffic: cannot find a simulated device array in {type(x).__name__}"
        )
    return x


def _thread_key() -> tuple:
    t = threading.current_thread()
    return tuple(getattr(t, "blockIdx", ())), tuple(getattr(t, "threadIdx", ()))


def _count(idx, result) -> int:
    return int(np.size(result)) if isinstance(result, np.ndarray) else 1


class Traffic:
    """Access counts collected by :func:`count_traffic`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.global_reads: Counter = Counter()  # root array id -> element reads
        self.global_writes: Counter = Counter()
        self.element_reads: dict = defaultdict(Counter)  # root id -> {element: reads}
        self.shared_reads = 0
        self.shared_writes = 0
        self.per_thread: dict = defaultdict(Counter)  # (block, thread) -> counts by kind
        self._keep: list = []  # keep counted arrays alive so their ids stay unique

    # ---------------------------------------------------------------- recording
    def _global(self, ary: np.ndarray, idx, n: int, write: bool) -> None:
        root = _root(ary)
        key = id(root)
        with self._lock:
            if write:
                self.global_writes[key] += n
            else:
                self.global_reads[key] += n
                if n == 1 and ary.ndim == 1 and isinstance(idx, (int, np.integer)):
                    # element number within the root storage
                    start = ary.__array_interface__["data"][0] - root.__array_interface__["data"][0]
                    elem = (start + int(idx) * ary.strides[0]) // root.itemsize
                    self.element_reads[key][elem] += 1
            self.per_thread[_thread_key()]["global_writes" if write else "global_reads"] += n
            if len(self._keep) < 64 and all(r is not root for r in self._keep):
                self._keep.append(root)

    def _shared(self, n: int, write: bool) -> None:
        with self._lock:
            if write:
                self.shared_writes += n
            else:
                self.shared_reads += n
            self.per_thread[_thread_key()]["shared_writes" if write else "shared_reads"] += n

    # ---------------------------------------------------------------- queries
    def reads(self, x) -> int:
        """Global-memory element reads of ``x``'s storage (a Tensor, TensorData or device array)."""
        return self.global_reads[id(_root(_host_array(x)))]

    def writes(self, x) -> int:
        return self.global_writes[id(_root(_host_array(x)))]

    def max_reads_per_element(self, x) -> int:
        counts = self.element_reads.get(id(_root(_host_array(x))))
        return max(counts.values()) if counts else 0

    @property
    def total_global_reads(self) -> int:
        return sum(self.global_reads.values())

    @property
    def total_global_writes(self) -> int:
        return sum(self.global_writes.values())

    @property
    def threads(self) -> int:
        return len(self.per_thread)

    def max_per_thread(self, kind: str = "global_reads") -> int:
        return max((c[kind] for c in self.per_thread.values()), default=0)

    def summary(self) -> dict:
        return {
            "global_reads": self.total_global_reads,
            "global_writes": self.total_global_writes,
            "shared_reads": self.shared_reads,
            "shared_writes": self.shared_writes,
            "threads": self.threads,
        }


class _SharedCounter:
    """A shared array whose element accesses are counted."""

    __slots__ = ("_ary", "_traffic")

    def __init__(self, ary: np.ndarray, traffic: Traffic) -> None:
        self._ary, self._traffic = ary, traffic

    def __getitem__(self, idx):
        value = self._ary[idx]
        self._traffic._shared(_count(idx, value), write=False)
        return value

    def __setitem__(self, idx, value) -> None:
        self._ary[idx] = value
        self._traffic._shared(int(np.size(self._ary[idx])), write=True)

    def __len__(self) -> int:
        return len(self._ary)

    def __getattr__(self, name):  # shape, dtype, size ...
        return getattr(self._ary, name)


_active: list = []


@contextlib.contextmanager
def count_traffic() -> Iterator[Traffic]:
    """Count global and shared memory accesses of simulated kernels run inside the block."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        raise RuntimeError(
            "count_traffic needs Numba's CUDA simulator: set NUMBA_ENABLE_CUDASIM=1 before "
            "Python starts (on a GPU machine too; the hardware gives no per-access counts)"
        )
    if _active:
        raise RuntimeError("count_traffic blocks cannot be nested")
    from numba.cuda.simulator import kernelapi
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray as Arr

    traffic = Traffic()
    orig_get, orig_set, orig_shared = (
        Arr.__getitem__,
        Arr.__setitem__,
        kernelapi.FakeCUDAShared.array,
    )

    def getitem(self, idx):
        value = orig_get(self, idx)
        ary = self._item._ary
        traffic._global(ary, idx, _count(idx, getattr(value, "_item", value)), write=False)
        return value

    def setitem(self, idx, value):
        orig_set(self, idx, value)
        ary = self._item._ary
        traffic._global(ary, idx, int(np.size(ary[idx])), write=True)

    def shared_array(self, shape, dtype, alignment=None):
        if shape == 0:  # dynamic shared memory: no call-site bookkeeping
            return _SharedCounter(orig_shared(self, shape, dtype, alignment), traffic)
        return _SharedCounter(allocate(self, shape, dtype, sys._getframe(1)), traffic)

    Arr.__getitem__, Arr.__setitem__ = getitem, setitem
    kernelapi.FakeCUDAShared.array = shared_array
    _active.append(traffic)
    try:
        yield traffic
    finally:
        Arr.__getitem__, Arr.__setitem__ = orig_get, orig_set
        kernelapi.FakeCUDAShared.array = orig_shared
        _active.pop()
