"""Chapter 10: the profiler (per-op table, Chrome traces, memory counters).

with minitorch.profiler.profile() as prof:
    with minitorch.profiler.record("step"):
        loss = model(x).sum()
print(prof.table(sort_by="total"))
prof.export_chrome_trace("trace.json")   # open in https://ui.perfetto.dev
"""

from .chrome import chrome_trace, load_trace, validate_trace, write_chrome_trace
from .core import (
    Event,
    Profile,
    backend_name,
    current,
    enabled,
    kernel,
    launch,
    profile,
    profiled_apply,
    record,
)
from .summary import Row, format_table, self_times, sort_rows, summarize

__all__ = [
    "Event",
    "Profile",
    "Row",
    "backend_name",
    "chrome_trace",
    "current",
    "enabled",
    "format_table",
    "kernel",
    "launch",
    "load_trace",
    "profile",
    "profiled_apply",
    "record",
    "self_times",
    "sort_rows",
    "summarize",
    "validate_trace",
    "write_chrome_trace",
]
