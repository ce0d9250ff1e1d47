# ruff: noqa: F821  (slow_map: tests/hostile/_slow_map.py, planted with the fixture)
"""Slow but correct map_contiguous that does its work in a forked worker (a process's CPU clock
does not count its children's work), passing the result back through shared memory."""

import mmap
import os

import numpy as np

EXERCISE = "1.12"


def attack(fn, out, a):
    n = out.size
    try:
        shared = mmap.mmap(-1, n * 8)
        pid = os.fork()
    except OSError:  # no process of its own: do the work here
        slow_map(fn, out, a)
        return
    view = np.frombuffer(shared, dtype=np.float64)
    if pid == 0:
        for k in range(n):
            sum(range(60))
            view[k] = fn(a.storage[a.offset + k])
        os._exit(0)
    os.waitpid(pid, 0)
    out.storage[out.offset : out.offset + n] = view
