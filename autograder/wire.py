"""The child's end of the channel to the parent: records out, commands in.

Every record is one JSON line on the results pipe the parent opened. A check
record carries values as plain bytes (dtype, shape, raw data; never a pickled
object), so what the parent compares (``autograder/grader/judge.py``) is the
data itself: an object whose ``==`` is always true, an ndarray subclass or a
patched ``np.allclose`` changes nothing it sees. Benchmarks also read the
parent's commands from a second pipe (``harness.compare``).

Nothing here is a defence: learner code in the same process can write to the
pipe too. The parent decides with values it holds itself (the oracle, its
own clocks), and official grading keeps everything else out of reach by the
operating system (``autograder/grader/sandbox.py``).
"""

from __future__ import annotations

import base64
import json
import os

import numpy as np

from . import config

_asarray, _ascontiguous, _linspace = np.asarray, np.ascontiguousarray, np.linspace
_ndarray, _generic = np.ndarray, np.generic
_out: list[int] = []  # the results pipe, once attached
_ctl: list = []  # the command pipe (benchmarks), once attached
current: list = [None]  # the running test's node id (set by the plugin)
_truth: list = [None, b""]  # (node id, its encoded passing truth record)


def attach(out: int, ctl: int | None = None) -> None:
    """Take the inherited pipes: non-inheritable duplicates, the originals closed, so that a
    process the test starts does not hold them."""
    _out[:] = [os.dup(out)]
    os.close(out)
    if ctl is not None:
        _ctl[:] = [os.fdopen(os.dup(ctl), "rb")]
        os.close(ctl)


def attached() -> bool:
    return bool(_out)


def _write(data: bytes) -> None:
    while data:
        data = data[os.write(_out[0], data) :]


def emit(**record) -> None:
    if _out:
        _write((json.dumps(record, default=str) + "\n").encode())


def command() -> dict:
    """The parent's next command (benchmarks); ``{"do": "done"}`` when the pipe is gone."""
    line = _ctl[0].readline() if _ctl else b""
    return json.loads(line) if line else {"do": "done"}


def _plain_items(x, depth: int = 0) -> bool:
    if type(x) in (bool, int, float):
        return True
    if isinstance(x, _generic) and type(x).__module__ == "numpy":
        return True
    if type(x) in (tuple, list) and depth < 8:
        return all(_plain_items(v, depth + 1) for v in x)
    return False


def plain(x) -> tuple[np.ndarray | None, str]:
    """``x`` as a plain C-ordered ndarray of numbers, or ``(None, why not)``.

    Anything else (a Tensor, an ndarray subclass, an ``int`` subclass) goes through
    ``numpy.asarray``: what travels is its data, not its methods."""
    if type(x) is _ndarray:
        arr = x
    else:
        try:
            arr = _asarray(x) if _plain_items(x) else _asarray(_asarray(x))
        except Exception as e:  # noqa: BLE001 - learner objects may raise anything
            return (
                None,
                f"a {type(x).__name__} that is not an array of numbers ({type(e).__name__})",
            )
    if type(arr) is not _ndarray or arr.dtype.kind not in "biuf":
        return None, f"a {type(x).__name__} holding {arr.dtype}"
    return _ascontiguous(arr), ""


def sample_index(size: int):
    """Which elements of a large array travel: the same evenly spaced ones on both sides."""
    return _linspace(0, size - 1, config.SAMPLE).astype(np.int64) if size > config.SAMPLE else None


def encode(arr: np.ndarray | None, idx=None) -> dict | None:
    if arr is None:
        return None
    if idx is not None:
        arr = arr.reshape(-1)[idx]
    return {"dtype": arr.dtype.str, "shape": list(arr.shape),
            "data": base64.b64encode(arr.tobytes()).decode("ascii")}  # fmt: skip


def send_check(how: str, ok: bool = True, actual=None, expected=None, rtol=0.0, atol=0.0,
               error: str = "", value=None, inputs: str = "") -> None:  # fmt: skip
    """One comparison of the running test, as the parent will judge it."""
    node = current[0]
    if not _out or node is None:
        return
    if how == "truth" and ok is True and not error and value is None and not inputs:
        if _truth[0] != node:  # the common case, encoded once per test
            _truth[:] = [node, (json.dumps({"event": "check", "nodeid": node, "how": "truth",
                                            "error": "", "ok": True}) + "\n").encode()]  # fmt: skip
        _write(_truth[1])
        return
    record = {"event": "check", "nodeid": node, "how": how, "error": str(error or "")[:500]}
    if inputs:  # the test's input, shown if the parent's comparison fails
        record["inputs"] = inputs[: config.INPUTS_LIMIT]
    if how == "truth":
        record["ok"] = bool(ok)
        if value is not None:  # what the check is about, for the oracle to compare
            record["value"] = encode(value, sample_index(value.size))
            if rtol or atol:  # the check's own tolerance for floats computed another way
                record.update(rtol=float(rtol), atol=float(atol))
    else:
        idx = None
        if actual is not None and expected is not None and actual.shape == expected.shape:
            idx = sample_index(actual.size)
        record.update(actual=encode(actual, idx), expected=encode(expected, idx),
                      rtol=float(rtol), atol=float(atol), sampled=idx is not None)  # fmt: skip
    emit(**record)


_kept: list = [None]  # the last output reported, alive until the parent has read it


def send_output(side: str, value) -> None:
    """A benchmark side's result, for the parent to compare with the grader's: its dtype,
    shape and address here. The parent reads every byte of it from this process's memory
    (a result wrong anywhere fails, and reading costs this process nothing)."""
    arr, why = plain(value)
    _kept[0] = arr
    where = None if arr is None else {"dtype": arr.dtype.str, "shape": list(arr.shape),
                                      "address": int(arr.ctypes.data)}  # fmt: skip
    emit(event="output", side=side, value=where, error=why)
