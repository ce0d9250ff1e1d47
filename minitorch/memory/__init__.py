"""Chapter 8: memory planning. Lives of buffers, one arena, and what eager mode allocates."""

from .arena import MemoryPlan, bind_views, new_arena, plan_memory
from .eager import memory_summary, temp_allocator, track_memory
from .executor import LOOP, Executor, Way, bind_steps
from .peaks import Peaks, measure_peaks, traced_peak
from .planner import (
    ALIGNMENT,
    Buffer,
    align,
    check_assignment,
    first_fit,
    greedy_by_size,
    inplace_source,
    is_elementwise,
    is_view,
    liveness,
    lower_bound,
    no_reuse,
    place_buffers,
    step_nbytes,
)
from .report import install, timeline_png

__all__ = [
    "ALIGNMENT",
    "Buffer",
    "Executor",
    "LOOP",
    "MemoryPlan",
    "align",
    "bind_steps",
    "bind_views",
    "check_assignment",
    "first_fit",
    "greedy_by_size",
    "inplace_source",
    "install",
    "is_elementwise",
    "is_view",
    "liveness",
    "lower_bound",
    "memory_summary",
    "new_arena",
    "measure_peaks",
    "no_reuse",
    "place_buffers",
    "Peaks",
    "traced_peak",
    "plan_memory",
    "step_nbytes",
    "temp_allocator",
    "timeline_png",
    "track_memory",
    "Way",
]
