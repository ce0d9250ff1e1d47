"""Where compiled code reports what it runs, for chapter 10's profiler.

Compiled plans (chapters 5-9) and CUDA launches (chapter 4) call :func:`kernel`
and :func:`launch` around their work; they cost one check while nothing
records. A running ``minitorch.profiler.Profile`` puts itself in ``_active``
(it lives here, not in the profiler's folder, because earlier chapters never
import a later one).
"""

from __future__ import annotations

import contextlib

_active: list = [None]  # the running Profile (one at a time)
LAUNCHES = [0]  # CUDA launches so far: a compiled plan's launches per call are a difference


def enabled() -> bool:
    """True while a profile records (compiled code checks this before timing a kernel)."""
    return _active[0] is not None


@contextlib.contextmanager
def kernel(name: str, shapes=(), backend: str = "", cat: str = "kernel", **args):
    """The hook compiled plans call around each kernel they launch (a no-op when off).

    ``args`` are shown in the trace, e.g. a CUDA kernel's ``grid`` and ``block``.
    """
    prof = _active[0]
    if prof is None:
        yield
        return
    t0 = prof.clock()
    try:
        yield
    finally:
        prof.add_event(name, cat, t0, prof.clock(), shapes, backend, **args)


def launch(kernel, grid, block, *args, name: str = "kernel"):
    """Launch a Numba CUDA kernel as ``kernel[grid, block](*args)``, recorded while profiling.

    The event carries the launch shape (``grid``, ``block``). On a GPU it is timed
    with CUDA events (the device time of the kernel alone, ``host_us`` in its args
    is the time the host waited); on the simulator by the host clock.
    """
    LAUNCHES[0] += 1
    prof = _active[0]
    if prof is None:
        return kernel[grid, block](*args)
    from numba import config, cuda

    t0 = prof.clock()
    if config.ENABLE_CUDASIM:
        kernel[grid, block](*args)
        t1 = prof.clock()
        prof.add_event(name, "kernel", t0, t1, (), "cuda-sim", grid=grid, block=block)
        return None
    start, end = cuda.event(), cuda.event()
    start.record()
    kernel[grid, block](*args)
    end.record()
    end.synchronize()
    device_ns = int(cuda.event_elapsed_time(start, end) * 1e6)
    host_us = (prof.clock() - t0) / 1e3
    prof.add_event(
        name, "kernel", t0, t0 + device_ns, (), "cuda", grid=grid, block=block, host_us=host_us
    )
    return None
