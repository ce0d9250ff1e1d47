"""Recording: the ``profile()`` context, ``record()`` ranges and the dispatch hook.

While a :class:`Profile` is active, :func:`minitorch.dispatch` sends every eager
op call through :func:`profiled_apply` (exercise 10.1) instead of straight to
the eager path. When no profile is active the hook is ``None`` and dispatch
pays one ``is not None`` check, nothing else.

Compiled plans (chapter 5's ``CompiledGraph`` and the plans of later chapters)
report their kernels with :func:`kernel`; hot loops guard it with :func:`enabled`.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field

from ..backends import base as backends
from ..core import registry
from ..exercises import exercise
from ..memory.device import track_device


@dataclass
class Event:
    """One timed call: an eager op, a compiled kernel or plan, or a user range."""

    name: str
    cat: str  # "op", "kernel", "plan" or "range"
    tid: int  # 0 for the thread that started the profile, then 1, 2, ... in order of appearance
    start: int  # nanoseconds since the profile started
    end: int
    shapes: tuple = ()  # input shapes
    backend: str = ""
    alloc: int = 0  # bytes of new storage the call created
    freed: int = 0  # bytes of that storage released again before the profile stopped
    args: dict = field(default_factory=dict)  # anything else worth showing (launch shapes...)

    @property
    def duration(self) -> int:
        return self.end - self.start


# Where earlier chapters report kernels (``kernel``, ``launch``) lives in chapter 1's
# ``core.instrument``; a running Profile puts itself in ``_active`` there.
from ..core.instrument import _active, enabled, kernel, launch  # noqa: E402, F401


def current() -> Profile | None:
    return _active[0]


class Profile:
    """What one ``with profile() as prof:`` block recorded; read it with ``table`` or export it."""

    def __init__(self):
        self.events: list[Event] = []
        self.counters: list[tuple[int, int]] = []  # (time ns, live bytes) after each alloc/free
        self.threads: dict[int, str] = {}  # small tid -> thread name
        self._tids: dict[int, int] = {}
        self._live = 0
        self._refs: dict[int, tuple] = {}  # id(weakref) -> (weakref, event, nbytes)
        self._t0 = 0
        self.running = False
        self.device = None  # chapter 8's DeviceStats while cuda is in use: device bytes
        self._device_block = None

    # ------------------------------------------------------------ clock and threads
    def clock(self) -> int:
        """Nanoseconds since the profile started."""
        return time.perf_counter_ns() - self._t0

    def tid(self) -> int:
        ident = threading.get_ident()
        t = self._tids.get(ident)
        if t is None:
            t = self._tids[ident] = len(self._tids)
            self.threads[t] = threading.current_thread().name
        return t

    def add_event(self, name, cat, start, end, shapes=(), backend="", **args) -> Event:
        ev = Event(name, cat, self.tid(), start, end, tuple(shapes), backend, args=args)
        self.events.append(ev)
        return ev

    # ------------------------------------------------------------ memory
    def track(self, ev: Event, out, inputs) -> None:
        """Charge ``out``'s storage to ``ev`` unless it shares an input's storage (a view)."""
        storage = out._data.storage
        for x in inputs:
            if getattr(x, "_data", None) is not None and x._data.storage is storage:
                return
        nbytes = int(getattr(storage, "nbytes", 0))
        if not nbytes:
            return
        ev.alloc += nbytes
        self._live += nbytes
        self.counters.append((self.clock(), self._live))
        try:
            ref = weakref.ref(storage, self._on_free)
        except TypeError:  # storage that cannot be watched: counted as allocated only
            return
        self._refs[id(ref)] = (ref, ev, nbytes)

    def _on_free(self, ref) -> None:
        entry = self._refs.pop(id(ref), None)
        if entry is None or not self.running:
            return
        _, ev, nbytes = entry
        ev.freed += nbytes
        self._live -= nbytes
        self.counters.append((self.clock(), self._live))

    # ------------------------------------------------------------ start / stop
    def start(self) -> Profile:
        if _active[0] is not None:
            raise RuntimeError("profile: another profile is already recording")
        self._t0 = time.perf_counter_ns()
        self.running = True
        self.tid()  # the starting thread is track 0
        _active[0] = self
        registry._profile_hook = _hook
        self._device_block = track_device()
        self.device = self._device_block.__enter__()
        return self

    def stop(self) -> None:
        registry._profile_hook = None
        _active[0] = None
        self.running = False
        self._refs.clear()
        if self._device_block is not None:
            self._device_block.__exit__(None, None, None)
            self._device_block = None

    @property
    def launches(self) -> int:
        """CUDA kernels launched while recording (each one is an event, ``cat == "kernel"``)."""
        return sum(1 for e in self.events if e.cat == "kernel" and e.backend.startswith("cuda"))

    def __enter__(self) -> Profile:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------ reading (see summary.py, chrome.py)
    def summary(self, sort_by: str = "total"):
        from .summary import sort_rows, summarize

        return sort_rows(summarize(self.events), sort_by)

    def table(self, sort_by: str = "total", limit: int | None = 20) -> str:
        from .summary import format_table

        text = format_table(self.summary(sort_by), limit=limit)
        if self.launches or (self.device is not None and self.device.allocations):
            peak = self.device.peak if self.device is not None else 0
            text += f"\ncuda: {self.launches} kernel launches, device memory peak {peak} B"
        return text

    def export_chrome_trace(self, path) -> str:
        """Write the Chrome trace-event JSON (open it in https://ui.perfetto.dev); returns path."""
        from .chrome import write_chrome_trace

        return write_chrome_trace(self, path)

    def __repr__(self) -> str:
        return f"<Profile: {len(self.events)} events, {len(self.threads)} thread(s)>"


def profile() -> Profile:
    """``with minitorch.profiler.profile() as prof:`` records every op call in the block."""
    return Profile()


def backend_name(device: str) -> str:
    return backends.current(device).name


@exercise("10.1")
def profiled_apply(prof: Profile, op, inputs: tuple, attrs: dict):
    """Run one eager op call and record it in ``prof``; return the op's result.

    The dispatch hook calls this for every op while a profile is active. The result
    is what ``registry._eager_apply(op, inputs, attrs)`` returns. The call is one
    event, ``ev = prof.add_event(op.name, "op", t0, t1, shapes=..., backend=...)``:

    * ``t0`` and ``t1`` are ``prof.clock()`` just before and just after the call
      (the call is timed, nothing else);
    * ``shapes`` is the input shapes as a tuple of tuples, ``backend`` is
      ``backend_name(out.device)``;
    * ``prof.track(ev, out, inputs)`` gives it the bytes the output allocated.

    Op calls nested in this one (a backward rule calling dispatch) record their own
    events. If the op raises, record nothing and let the error through.

    Graded by a benchmark: profiling stays cheap; for full credit, ops profiled take at
    most 2x the time they take with the profiler off.

    Example:
        >>> with profile() as prof:
        ...     y = minitorch.ones(2, 3) + 1.0
        >>> prof.events[-1].name, prof.events[-1].shapes
        ('add', ((2, 3), ()))
    """
    raise NotImplementedError("Exercise 10.1: profiled_apply")


def _hook(op, inputs, attrs):
    prof = _active[0]
    if prof is None:  # a thread still in flight after stop()
        return registry._eager_apply(op, inputs, attrs)
    return profiled_apply(prof, op, inputs, attrs)


def record(name: str):
    """A user range, e.g. ``with record("data loading"):``, shown as its own row and bar."""
    return kernel(name, cat="range")
