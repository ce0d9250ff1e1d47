"""Benchmarks' timing, the child's side: ``compare``, ``fresh``, ``perturb``, ``one_thread``.

Under the grader the parent times (``autograder/grader/bench.py``): ``compare``
reports its sides, then does what the parent's commands say. Without a parent
(plain pytest) it times itself with the process's CPU clock. Graded tests import
these from ``autograder.harness``. Kept apart from the harness's comparisons so
that tuning a benchmark leaves the references' recorded comparisons valid.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import config, wire


@dataclass
class Timings:
    """Seconds per call of each side of a ``compare``, one sample per round (as the parent
    measured them, when there is one)."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def best(self) -> dict[str, float]:
        return {k: min(v) for k, v in self.samples.items() if v}

    def ratio(self, num: str, den: str) -> float:
        """``num``'s fastest sample over ``den``'s: load only adds time, so minima cancel it."""
        return min(self.samples[num]) / min(self.samples[den])

    def figures_ms(self, suffix: str = "_ms") -> dict[str, float]:
        return {f"{k}{suffix}": v * 1e3 for k, v in self.best.items()}


def _materialise(result):
    """A side's result as plain data: a lazy result computes here, inside the timing."""
    numpy = getattr(result, "numpy", None)
    return numpy() if callable(numpy) else result


def compare(
    fns: dict[str, Callable[[], object]],
    rounds: int = 7,
    warmup: int = 2,
    verify: Callable[[str, object], None] | None = None,
    tol: tuple[float, float] = (1e-5, 1e-6),
    output: Callable | dict | None = _materialise,
    min_time: float = config.MIN_SAMPLE,
    constants: dict[str, float] | None = None,
    once: bool = False,
    stateful: bool = False,
    vary: Callable | None = None,
) -> Timings:
    """Time several functions in interleaved rounds (A B, B A, A B, ...).

    Under the grader the parent drives this (``autograder/grader/bench.py``):
    it warms every side up (``warmup`` calls), chooses how many calls make a
    sample of at least ``min_time``, then takes one sample of each side per
    round, in alternating order, reading the process's CPU clock from outside
    (``once``: one call of each, no warm-up: a first call). After each sample
    of a learner side the last call's result goes through ``output`` (one
    function, or one per side; ``None``: not compared), timed on its own (it
    must read as fast as the course's), and all of it is compared with what the
    course's own code returns (``tol``); ``verify(name, result)`` may check more
    (learner sides only). ``constants`` are numbers the ``formula`` may use;
    the parent takes them from the course's own run. ``stateful``: each call
    changes what the next returns (a training step): the course's code replays
    every call of a learner side before its result is compared. ``vary(rng)``
    (see :func:`perturb`) changes the inputs before every sample, inside its
    timing, from a seed the parent draws then: a result kept from an earlier
    call is then wrong, and the course's code computes the right one.

    Without a parent (plain pytest) it times itself the same way with
    ``time.process_time``.
    """
    outputs = output if isinstance(output, dict) else dict.fromkeys(fns, output)
    if wire.attached():
        settings = {"rounds": rounds, "warmup": warmup, "min_time": min_time, "once": once,
                    "stateful": stateful, "vary": vary is not None,
                    "tol": [float(tol[0]), float(tol[1])], "constants": constants or {},
                    "checked": [k for k in fns if outputs.get(k) is not None]}  # fmt: skip
        return _driven(fns, verify, outputs, settings, vary)
    return _here(fns, 1 if once else rounds, 0 if once else warmup, verify, min_time)


ROLE = ["learner"]  # "baseline" in the process that runs the course's own code


def _driven(fns, verify, outputs, settings, vary=None) -> Timings:
    wire.emit(event="sides", sides=list(fns), **settings)
    return _serve(fns, verify, outputs, vary)


def _serve(fns, verify, outputs, vary=None) -> Timings:
    """Do what the parent says until it is done (see ``autograder/grader/bench.py``)."""
    last: dict[str, object] = {}
    while True:
        cmd = wire.command()
        do, side = cmd.get("do"), cmd.get("side")
        if do == "done":
            return Timings(
                {str(k): [float(x) for x in v] for k, v in cmd.get("samples", {}).items()}
            )
        fn = fns.get(side)
        if fn is None:
            wire.emit(event="sampled", side=side, error=f"no side {side!r}")
            continue
        if do == "collect":  # before a sample, outside its timing: the last result is done with
            last.pop(side, None)
            gc.collect()
            gc.disable()
        elif do in ("sample", "expect"):
            try:
                if vary is not None and "seed" in cmd:
                    vary(np.random.default_rng(int(cmd["seed"])))
                for _ in range(int(cmd.get("n", 1)) - 1):
                    fn()
                last[side] = fn()
            finally:
                gc.enable()
        elif do == "output":  # timed on its own: a result that computes when read shows here
            wire.send_output(side, outputs[side](last.get(side)))
            continue
        elif do == "verify" and verify is not None and ROLE[0] == "learner":
            verify(side, last.get(side))
        wire.emit(event="sampled", side=side)


def perturb(*arrays: np.ndarray, count: int = 16) -> Callable:
    """A ``vary`` for ``compare``: new values in [0, 1) at ``count`` random places of each
    array (in place: pass a tensor's storage, ``t._data.storage``), the places of the last
    call restored first, so the inputs depend only on the seed."""
    flats = [a.reshape(-1) for a in arrays]
    originals = [f.copy() for f in flats]
    touched: list = []

    def vary(rng) -> None:
        for flat, original, idx in touched:
            flat[idx] = original[idx]
        touched.clear()
        for flat, original in zip(flats, originals):
            idx = rng.integers(0, flat.size, count)
            flat[idx] = rng.random(count).astype(flat.dtype)
            touched.append((flat, original, idx))

    return vary


def fresh(programs: dict[str, str]) -> Timings:
    """Run each program in a fresh process of its own, in order, the processes sharing one
    Numba cache folder. Each program times its one call with ``compare({name: fn}, once=True)``
    (the name it is given here as ``NAME``); returns their timings. Under the grader the
    parent starts the processes and takes the programs' text from the course's own run."""
    if wire.attached():
        wire.emit(event="fresh", programs=programs)
        cmd = wire.command()
        return Timings({str(k): [float(x) for x in v] for k, v in cmd.get("samples", {}).items()})
    import os
    import subprocess
    import tempfile

    timings = Timings()
    with tempfile.TemporaryDirectory() as cache:
        for name, program in programs.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"NAME = {name!r}\n{program}"], check=True,
                           env={**os.environ, "NUMBA_CACHE_DIR": cache})  # fmt: skip
            timings.samples[name] = [time.perf_counter() - t0]
    return timings


def _here(fns, rounds, warmup, verify, min_time) -> Timings:
    """Without a parent: the same rounds, timed here with the process's CPU clock."""
    clock = time.perf_counter if sys.platform == "win32" else time.process_time
    loops = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        n = 1
        while True:  # a side that waits (sleep, I/O) uses no CPU: wall time bounds it too
            t0, w0 = clock(), time.perf_counter()
            for _ in range(n):
                fn()
            if clock() - t0 >= min_time or time.perf_counter() - w0 >= 1.0 or n >= 1 << 20:
                break
            n *= 2
        loops[name] = n
    timings = Timings({name: [] for name in fns})
    names = list(fns)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            fn, n = fns[name], loops[name]
            gc.collect()
            gc.disable()
            try:
                t0 = clock()
                for _ in range(n):
                    result = fn()
                timings.samples[name].append((clock() - t0) / n)
            finally:
                gc.enable()
            if verify is not None:
                verify(name, result)
    return timings


@contextlib.contextmanager
def one_thread():
    """Numba's parallel loops and numpy's BLAS each on one thread, restored afterwards.

    A parallel kernel timed against a single-threaded baseline measures the
    machine's idle cores, not the code: with other processes busy, one of its
    threads waits for a core and the ratio collapses. At one thread each, load
    slows both sides alike.
    """
    import numba
    from threadpoolctl import threadpool_limits

    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        numba.set_num_threads(threads)
