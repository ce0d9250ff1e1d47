"""Check records: what a graded test's comparisons send to the parent, and how it decides.

In the child, :func:`autograder.harness.check` and ``assert_close`` call
:func:`send_check`: the values travel as plain bytes (dtype, shape, raw data;
never a pickled object), so an object whose ``==`` is always true, an ndarray
subclass or a patched ``np.allclose`` changes nothing the parent sees. In the
parent, :func:`decide` compares them with the grader's own numpy; a test's
pass record counts only when every check record it sent holds and it sent at
least as many as the grader counted in its source (``manifest.Item.checks``).

The numpy functions used here are bound when the plugin is attached, before
any learner code runs, so rebinding ``numpy.asarray`` later does not reach them.
"""

from __future__ import annotations

import base64
import builtins
import json
import math
import operator
import re
import time

import numpy as np
import numpy.linalg
import numpy.testing

_asarray, _ascontiguous, _linspace = np.asarray, np.ascontiguousarray, np.linspace
_ndarray, _generic = np.ndarray, np.generic
_clock = time.monotonic


def _dumps(record: dict) -> bytes:
    return (json.dumps(record) + "\n").encode()


SAMPLE = 1 << 12  # larger arrays travel as the same evenly spaced sample of both sides
_DTYPE = re.compile(r"^[<>|=]?[biuf][1248]$")
TOL_CAP = 0.05  # a test asking for looser tolerances than this gets this
INPUTS_LIMIT = 600  # characters of a check's shown input
_current: list = [None]  # the running test's node id (set by the plugin)
_truth: list = [None, b""]  # (node id, its encoded passing truth record)
_last_watch: list = [0.0]  # when tampered() last ran (the plugin resets it per test)
# What tests compute expected values and comparisons with: learner code that
# rebinds any of it (``numpy.allclose``, ``builtins.tuple``) voids the checks.
_WATCHED = (builtins, math, operator, np, np.linalg, np.testing)
_snapshot = [(vars(m), tuple(k for k in vars(m) if not k.startswith("__"))) for m in _WATCHED]
_snapshot = [(now, keys, tuple(map(now.get, keys))) for now, keys in _snapshot]


def tampered() -> str:
    """The first watched name rebound since the plugin was attached, or "" (~30 us)."""
    for now, keys, values in _snapshot:
        if not all(map(operator.is_, map(now.get, keys), values)):
            bad = next(k for k, v in zip(keys, values) if now.get(k) is not v)
            module = now.get("__name__", "a module")
            return f"{module}.{bad} was replaced during the test"
    return ""


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

    Anything else (a Tensor, an ndarray subclass, an ``int`` subclass) goes
    through ``numpy.asarray`` as bound at start-up: what travels is its data,
    so a redefined ``==`` or ``__array_function__`` has nothing left to fool.
    """
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


def _encode(arr: np.ndarray | None, idx) -> dict | None:
    if arr is None:
        return None
    if idx is not None:
        arr = arr.reshape(-1)[idx]
    return {"dtype": arr.dtype.str, "shape": list(arr.shape),
            "data": base64.b64encode(arr.tobytes()).decode("ascii")}  # fmt: skip


def send_check(how: str, ok: bool = True, actual=None, expected=None, rtol=0.0, atol=0.0,
               error: str = "", value=None, inputs: str = "") -> None:  # fmt: skip
    from . import plugin

    if not plugin._channel or _current[0] is None:
        return
    now = _clock()
    if now - _last_watch[0] > 0.002:  # every test's first check, then at most every 2 ms
        _last_watch[0] = now
        error = tampered() or error
    if how == "truth" and ok is True and not error and value is None and not inputs:
        if _truth[0] != _current[0]:
            _truth[:] = [_current[0], _dumps({"event": "check", "nodeid": _current[0],
                                              "how": "truth", "error": "", "ok": True})]  # fmt: skip
        plugin._write(_truth[1])
        return
    record = {"event": "check", "nodeid": _current[0], "how": how, "error": str(error or "")[:500]}
    if inputs:  # the test's input, shown if the parent's comparison fails
        record["inputs"] = inputs[:INPUTS_LIMIT]
    if how == "truth":
        record["ok"] = bool(ok)
        if value is not None:  # what the check is about, for the oracle to compare
            idx = (
                _linspace(0, value.size - 1, SAMPLE).astype(np.int64)
                if value.size > SAMPLE
                else None
            )
            record["value"] = _encode(value, idx)
            if rtol or atol:  # the check's own tolerance for floats computed another way
                record.update(rtol=float(rtol), atol=float(atol))
    else:
        idx = None
        if actual is not None and expected is not None and actual.size > SAMPLE:
            if actual.shape == expected.shape:
                idx = _linspace(0, actual.size - 1, SAMPLE).astype(np.int64)
        record.update(actual=_encode(actual, idx), expected=_encode(expected, idx),
                      rtol=float(rtol), atol=float(atol), sampled=idx is not None)  # fmt: skip
    plugin._emit(**record)


# --- the parent's side -------------------------------------------------------------


def _decode(d) -> np.ndarray:
    if not (isinstance(d, dict) and set(d) == {"dtype", "shape", "data"}):
        raise ValueError("an array record of the wrong form")
    dtype, shape = d["dtype"], d["shape"]
    if not (isinstance(dtype, str) and _DTYPE.match(dtype)):
        raise ValueError(f"an array of dtype {str(dtype)[:20]!r}")
    if not (isinstance(shape, list) and len(shape) <= 32):
        raise ValueError("an array record with a bad shape")
    if not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError("an array record with a bad shape")
    data = base64.b64decode(d["data"], validate=True)
    dt = np.dtype(dtype)
    if len(data) != math.prod(shape) * dt.itemsize:
        raise ValueError("an array record whose data does not fit its shape")
    return np.frombuffer(data, dtype=dt).reshape(shape)


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
                _decode(rec["value"])
            return (rec.get("ok") is True), "a check() was false"
        if rec.get("how") != "close":
            return False, "a check record of unknown kind"
        actual, expected = _decode(rec.get("actual")), _decode(rec.get("expected"))
        rtol, atol = rec.get("rtol"), rec.get("atol")
        if not all(type(t) in (int, float) and 0 <= t < math.inf for t in (rtol, atol)):
            return False, "a comparison with a bad tolerance"
        if actual.shape != expected.shape:
            return False, f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        rtol, atol = min(rtol, TOL_CAP), min(atol, TOL_CAP)
        if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
            return False, f"values differ {first_mismatch(actual, expected, rtol, atol)}"
        return True, ""
    except Exception as e:  # noqa: BLE001 - a record the checks above missed: a failure
        return False, f"an unreadable check record ({type(e).__name__})"
