"""The parent's verdict on one check record: decoded with its own numpy, never the child's.

A check record carries plain bytes (``autograder/wire.py``); :func:`decide`
compares the two arrays of an ``assert_close`` with the grader's tolerances
(capped), or reads a ``check``'s truth. Never raises: a record of the wrong
shape is a failure with a reason.
"""

from __future__ import annotations

import base64
import math
import re

import numpy as np

from .. import config
from . import sandbox

_DTYPE = re.compile(r"^[<>|=]?[biuf][1248]$")
TOL_CAP = config.TOL_CAP


def _header(d, keys: set) -> tuple[np.dtype, list]:
    if not (isinstance(d, dict) and set(d) == keys):
        raise ValueError("an array record of the wrong form")
    dtype, shape = d["dtype"], d["shape"]
    if not (isinstance(dtype, str) and _DTYPE.match(dtype)):
        raise ValueError(f"an array of dtype {str(dtype)[:20]!r}")
    if not (isinstance(shape, list) and len(shape) <= 32):
        raise ValueError("an array record with a bad shape")
    if not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError("an array record with a bad shape")
    return np.dtype(dtype), shape


def decode(d) -> np.ndarray:
    dt, shape = _header(d, {"dtype", "shape", "data"})
    data = base64.b64decode(d["data"], validate=True)
    if len(data) != math.prod(shape) * dt.itemsize:
        raise ValueError("an array record whose data does not fit its shape")
    return np.frombuffer(data, dtype=dt).reshape(shape)


def read_array(pid: int, d, like: np.ndarray | None = None) -> np.ndarray:
    """The whole array a benchmark's child says it holds (``wire.send_output``: dtype, shape,
    address), read from that process's memory by the parent; with ``like`` (the course's
    result), only if it has that shape: a learner's result costs the parent no more memory
    than the course's (``_header`` allows up to 8 bytes an element)."""
    dt, shape = _header(d, {"dtype", "shape", "address"})
    nbytes = math.prod(shape) * dt.itemsize
    if like is not None and tuple(shape) != like.shape:
        raise ValueError(f"shape {tuple(shape)} of {dt}, expected {like.shape} of {like.dtype}")
    if not (type(d["address"]) is int and d["address"] > 0) or nbytes > config.OUTPUT_LIMIT:
        raise ValueError(f"a result of {nbytes} bytes at {str(d['address'])[:20]}")
    data = sandbox.read_memory(pid, d["address"], nbytes)
    return np.frombuffer(data, dtype=dt).reshape(shape)


def close(actual: np.ndarray, expected: np.ndarray, rtol, atol) -> tuple[bool, str]:
    """Whether two arrays agree within the (capped) tolerances; why not."""
    if not all(type(t) in (int, float) and 0 <= t < math.inf for t in (rtol, atol)):
        return False, "a comparison with a bad tolerance"
    if actual.shape != expected.shape:
        return False, f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    rtol, atol = min(rtol, TOL_CAP), min(atol, TOL_CAP)
    if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
        return False, f"values differ {first_mismatch(actual, expected, rtol, atol)}"
    return True, ""


def short(arr: np.ndarray, limit: int = 160) -> str:
    """A value as a learner reads it: ``[1. 2. 3.]``, ``7``, ``"relu"`` (text checks)."""
    if arr.dtype == np.uint8 and arr.ndim == 1:  # harness.text(): JSON bytes
        try:
            text = arr.tobytes().decode()
            return text if len(text) <= limit else text[:limit] + " ..."
        except UnicodeDecodeError:
            pass
    text = str(arr.item()) if arr.ndim == 0 else np.array2string(arr, threshold=12, edgeitems=3)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def first_mismatch(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> str:
    """``"at index (1, 2): 0.5, expected 0.25"`` for two arrays of one shape."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    bad = np.argwhere(~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True))
    if not bad.size:
        return ""
    where = tuple(int(i) for i in bad[0]) if a.ndim else ()
    got, want = a[where].item(), e[where].item()
    return f"at index {where}: {got!r}, expected {want!r} ({len(bad)} of {a.size} differ)"


def decide(rec: dict) -> tuple[bool, str]:
    """The parent's verdict on one check record: ``(holds, why not)``. Never raises."""
    try:
        if rec.get("error"):
            return False, str(rec["error"])[:500]
        if rec.get("how") == "truth":
            if "value" in rec:
                decode(rec["value"])
            return (rec.get("ok") is True), "a check() was false"
        if rec.get("how") != "close":
            return False, "a check record of unknown kind"
        actual, expected = decode(rec.get("actual")), decode(rec.get("expected"))
        return close(actual, expected, rec.get("rtol"), rec.get("atol"))
    except Exception as e:  # noqa: BLE001 - a record the checks above missed: a failure
        return False, f"an unreadable check record ({type(e).__name__})"
