"""Shared strategies for the chapter-4 graded tests: small strided tensors on the cuda device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

import minitorch
from autograder import wire
from minitorch.cuda import backend as cb

# The simulator runs every CUDA thread in Python: keep it tiny there.
SIDE = 6 if cb.SIMULATOR else 64
# More elements than the simulator launches threads, so grid-stride loops matter.
BIG = 4 * cb.THREADS * cb.MAX_BLOCKS // 3 if cb.SIMULATOR else 1 << 20


@st.composite
def arrays(draw, min_dims=1, max_dims=3, shape=None, dtype=np.float64, positive=False):
    """A numpy array (from a drawn seed) of a drawn or given shape."""
    if shape is None:
        ndim = draw(st.integers(min_dims, max_dims))
        shape = tuple(draw(st.integers(1, SIDE)) for _ in range(ndim))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype == np.int64:
        return rng.integers(-9, 10, size=shape)
    x = rng.standard_normal(shape)
    return np.abs(x) + 0.1 if positive else x


def padded(array):
    """``array`` inside a wider one (a column of 77 on each side of the last axis)."""
    wide = np.full(array.shape[:-1] + (array.shape[-1] + 2,), 77, dtype=array.dtype)
    wide[..., 1:-1] = array
    return wide


@st.composite
def layouts(draw, array):
    """``array`` on the cuda device as a strided view: as is, transposed, sliced with an offset,
    narrowed (an offset and a last stride of 1, rows further apart than they are long), or a
    view of a view (a transposed tensor, narrowed)."""
    kinds = ["contiguous", "transposed", "sliced", "narrowed", "view of a view"]
    kind = draw(st.sampled_from(kinds)) if array.ndim else "contiguous"
    if kind == "transposed" and array.ndim >= 2:
        t = minitorch.tensor(np.ascontiguousarray(array.T)).to("cuda").T
    elif kind == "narrowed":
        t = minitorch.tensor(padded(array)).to("cuda")[..., 1:-1]
    elif kind == "view of a view" and array.ndim >= 2:
        wide = padded(array)
        t = minitorch.tensor(np.ascontiguousarray(wide.T)).to("cuda").T[..., 1:-1]
    elif kind == "sliced":
        # every other element from the second on: an offset and a stride, other values between
        wide = np.full(array.shape[:-1] + (2 * array.shape[-1] + 1,), 77, dtype=array.dtype)
        wide[..., 1::2] = array
        t = minitorch.tensor(wide).to("cuda")[..., 1::2]
    else:
        t = minitorch.tensor(array).to("cuda")
    assert t.shape == array.shape
    return t


def on_device(array) -> minitorch.Tensor:
    return minitorch.tensor(array).to("cuda")


# Set to 1, a machine without a GPU takes a GPU machine's path (CI tests that path).
RERUN = "MINITORCH_RERUN_ON_SIMULATOR"


def rerun_on_simulator(request) -> dict | None:
    """Run a traffic test on the CUDA simulator even on a GPU machine.

    Memory traffic is counted only by the simulator, which must be chosen before
    numba.cuda loads. On the simulator this returns None and the test runs here;
    on a GPU the test reruns in a child process on the simulator, with the same
    mode and focus: its comparisons are passed on to the grader as if made here,
    and this returns the figures it reported (or raises its failure, with what
    the child printed when it gave no result).
    """
    if cb.SIMULATOR and os.environ.get(RERUN) != "1":
        return None
    mode, focus = minitorch.get_mode()
    root = Path(__file__).resolve().parents[3]
    args = ["-q", "-p", "no:cacheprovider", "-o", "python_files=test_*.py bench_*.py",
            "-o", "python_functions=test_* bench_*", request.node.nodeid]  # fmt: skip
    with tempfile.TemporaryFile() as events:  # the child's plugin writes its records here
        fd = events.fileno()
        boot = (
            "import sys, pytest\nfrom autograder import plugin, wire\n"
            f"wire.attach({fd})\nsys.exit(pytest.main({args!r}, plugins=[plugin]))\n"
        )
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", MINITORCH_MODE=mode,
                   MINITORCH_FOCUS=",".join(sorted(focus)))  # fmt: skip
        env[RERUN] = "0"
        proc = subprocess.run([sys.executable, "-c", boot], cwd=root, env=env, pass_fds=(fd,),
                              capture_output=True, text=True)  # fmt: skip
        events.seek(0)
        records = [json.loads(line) for line in events.read().decode().splitlines()]
    for rec in records:
        if rec.get("event") == "check" and wire.current[0] is not None:
            wire.emit(**{**rec, "nodeid": wire.current[0]})
    results = [r for r in records if r.get("event") == "result"]
    if not results:
        said = "\n".join(s[-1500:].strip() for s in (proc.stderr, proc.stdout) if s.strip())
        raise AssertionError(
            f"the simulator run (a child process) gave no result; it exited with code "
            f"{proc.returncode} and printed:\n{said or '(nothing)'}"
        )
    if results[-1]["outcome"] != "passed":
        raise AssertionError(results[-1].get("message", "failed on the simulator"))
    return results[-1].get("figures", {})
