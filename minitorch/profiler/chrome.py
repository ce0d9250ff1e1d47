"""The Chrome trace-event format (exercise 10.4): what Perfetto and chrome://tracing open.

A trace is ``{"traceEvents": [...]}``; each event is a dict with a phase ``ph``:
``"X"`` a complete slice (``ts`` and ``dur`` in microseconds) on the track
``(pid, tid)``, ``"C"`` a counter sample (``args`` maps series to values) and
``"M"`` metadata such as a track's name.
"""

from __future__ import annotations

import json
import os

from ..exercises import exercise
from .core import Event, Profile

PID = 1  # one process: minitorch


@exercise("10.4")
def chrome_trace(events: list[Event], counters: list[tuple[int, int]], threads: dict) -> dict:
    """The trace-event JSON object (a dict) for a profile.

    * one ``"M"`` event per thread: ``{"ph": "M", "name": "thread_name", "pid": PID,
      "tid": tid, "args": {"name": threads[tid]}}``;
    * one ``"X"`` event per :class:`Event`: ``name``, ``cat``, ``"ph": "X"``,
      ``pid``, ``tid``, ``ts`` = start and ``dur`` = duration, both in
      **microseconds** (floats: ns / 1000), and ``args`` with ``shapes`` (a list of
      lists), ``backend``, ``alloc`` and ``freed`` plus the event's own ``args``;
    * one ``"C"`` event per counter sample ``(t_ns, live)``: ``"name": "memory"``,
      ``pid``, ``"tid": 0``, ``ts`` in microseconds, ``"args": {"live bytes": live}``.

    Return ``{"traceEvents": [...], "displayTimeUnit": "ms"}``. Read ``events`` only: an
    event's own ``args`` is not changed (a profile may be exported twice).

    Example:
        >>> chrome_trace([Event("add", "op", 0, 1000, 3500, ((2,), (2,)), "numpy")], [], {0: "main"})
        {'traceEvents': [{'ph': 'M', ...}, {'name': 'add', 'cat': 'op', 'ph': 'X', 'pid': 1,
         'tid': 0, 'ts': 1.0, 'dur': 2.5, 'args': {'shapes': [[2], [2]], ...}}], 'displayTimeUnit': 'ms'}
    """
    raise NotImplementedError("Exercise 10.4: chrome_trace")


def write_chrome_trace(prof: Profile, path) -> str:
    trace = chrome_trace(prof.events, prof.counters, prof.threads)
    path = os.fspath(path)
    with open(path, "w") as f:
        json.dump(trace, f)
    return path


def validate_trace(trace) -> None:
    """Raise ``ValueError`` unless ``trace`` follows the trace-event format (the parts we use)."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError('a trace is an object with a "traceEvents" list')
    need = {
        "X": ("name", "ph", "pid", "tid", "ts", "dur"),
        "C": ("name", "ph", "pid", "ts", "args"),
        "M": ("name", "ph", "pid", "args"),
        "i": ("name", "ph", "pid", "tid", "ts"),
        "B": ("name", "ph", "pid", "tid", "ts"),
        "E": ("ph", "pid", "tid", "ts"),
    }
    for k, ev in enumerate(trace["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") not in need:
            raise ValueError(f"event {k}: unknown or missing phase in {ev!r}")
        missing = [f for f in need[ev["ph"]] if f not in ev]
        if missing:
            raise ValueError(f"event {k} ({ev['ph']}): missing {missing}")
        for f in ("ts", "dur"):
            if f in ev and (not isinstance(ev[f], (int, float)) or ev[f] < 0):
                raise ValueError(f"event {k}: {f} must be a non-negative number, got {ev[f]!r}")
        for f in ("pid", "tid"):
            if f in ev and not isinstance(ev[f], int):
                raise ValueError(f"event {k}: {f} must be an integer, got {ev[f]!r}")
        if "args" in ev and not isinstance(ev["args"], dict):
            raise ValueError(f"event {k}: args must be an object")
        if ev["ph"] == "C" and not all(isinstance(v, (int, float)) for v in ev["args"].values()):
            raise ValueError(f"event {k}: counter values must be numbers")
        if ev["ph"] == "M" and ev["name"] == "thread_name" and "tid" not in ev:
            raise ValueError(f"event {k}: thread_name metadata needs a tid")
    json.dumps(trace)  # and it must be JSON


def load_trace(path) -> dict:
    with open(path) as f:
        trace = json.load(f)
    validate_trace(trace)
    return trace
