"""Chapter 8's stage of the compiler pipeline: the arena runner, ``memory.txt`` and the timeline."""

from __future__ import annotations

import logging
import os

from ..core import capability
from ..passes.pipeline import Stage, register_stage
from ..passes.plan import MEMORY_PLANNER
from .arena import MemoryPlan
from .executor import Executor

log = logging.getLogger("minitorch.memory")
PLANNER = (*(f"8.{n}" for n in range(1, 9)), "6.9", "6.10")  # the exercises the stage runs


def memory_plan_of(compiled) -> MemoryPlan:
    """``compiled.memory_plan()``: the arena its runner uses, or the one it would use."""
    runner = compiled.runner if in_arena(compiled.runner) else None
    runner = runner or Executor(arena=True, inplace=compiled.options.inplace)
    return runner.memory(compiled.plan)


def in_arena(runner) -> bool:
    """Does ``runner`` (a ``CompiledPlan.runner``) run its plan in a planned arena?"""
    return isinstance(runner, Executor) and runner.use_arena


def explain_lines(unit) -> list:
    """``minitorch.explain``'s chapter-8 lines: the planned arena against the lower bound."""
    compiled = unit.compiled
    if compiled is None or compiled.interpreted or capability.missing(PLANNER):
        return []
    mp = compiled.memory_plan()
    runner = compiled.runner
    if in_arena(runner) and runner.mem.name != "cpu":  # chapter 4's device: launches count
        return [
            f"Memory (one {runner.mem.name} allocation per "
            + ("compiled plan):" if runner.keep else "call):"),
            f"  {mp.summary()}",
            f"  last call: {runner.launches} kernel launches, peak {runner.peak_bytes} B",
        ]
    if in_arena(runner):
        return ["Memory:", f"  {mp.summary()}"]
    return ["Memory (not planned; CompileOptions(memory=True) would give):", f"  {mp.summary()}"]


def install(unit) -> None:
    """Make the unit's plan run in an arena: host memory for a CPU plan, device memory
    for a cuda one (``device.py``: no in-place merges there), none for a mix."""
    compiled = unit.compiled
    if len(compiled.devices) != 1:  # one arena lives on one device
        unit.skipped["memory"] = f"the plan runs on {', '.join(compiled.devices)}"
        return
    # minitorch.compile's modes (and a plan run as one generated function) keep the arena
    # and the kernels bound to it: no allocation and no binding per call
    options = compiled.options
    device = compiled.devices[0]
    keep = options.keep or options.mode != "default"
    inplace = options.inplace and device == "cpu"  # no in-place merges on the device
    compiled.runner = Executor(arena=True, inplace=inplace, keep=keep, device=device)


def _dump(unit, folder: str) -> None:
    if not in_arena(unit.compiled.runner):
        return
    mp = unit.compiled.memory_plan()
    with open(os.path.join(folder, "memory.txt"), "w", encoding="utf-8") as f:
        f.write(mp.text() + "\n")
    try:
        timeline_png(mp, os.path.join(folder, "memory.png"), title=unit.graph.name)
    except ImportError:  # matplotlib is optional outside the book
        log.info("matplotlib missing: no memory.png")


register_stage(
    Stage(
        "memory",
        40,
        install,
        wanted=lambda options: options.memory,
        needs=PLANNER,
        explain=explain_lines,
        dump=_dump,
    )
)
MEMORY_PLANNER.append(memory_plan_of)


def timeline_png(mp: MemoryPlan, path: str | None = None, title: str = "", ax=None):
    """Steps on x, arena offsets on y, one rectangle per buffer, and the live-bytes curve.

    Draws on ``ax`` when given (the book does), else saves a PNG to ``path``.
    """
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    own = ax is None
    if own:  # a Figure of its own, not pyplot's: the caller's backend stays as it was
        fig = Figure(figsize=(7, 3.5))
        ax = fig.subplots()
    cmap = matplotlib.colormaps["tab20"]
    for k, b in enumerate(sorted(mp.buffers, key=lambda b: b.start)):
        if not b.nbytes:
            continue
        ax.add_patch(
            Rectangle(
                (b.start - 0.45, b.offset / 1024),
                b.end - b.start + 0.9,
                b.nbytes / 1024,
                facecolor=cmap(k % 20),
                edgecolor="black",
                linewidth=0.4,
            )
        )
    curve = mp.live_curve()
    ax.step(
        range(len(curve)),
        [c / 1024 for c in curve],
        where="mid",
        color="black",
        label="bytes live (lower bound = its peak)",
    )
    ax.axhline(mp.arena_bytes / 1024, color="red", linestyle="--", label="arena")
    ax.set_xlim(-1, mp.num_steps + 1)
    ax.set_ylim(0, max(mp.arena_bytes, max(curve, default=0)) / 1024 * 1.1 + 1e-9)
    ax.set_xlabel("step")
    ax.set_ylabel("offset (KiB)")
    ax.set_title(title or f"memory plan: arena {mp.arena_bytes / 1024:.1f} KiB")
    # below the axes, so it never hides a buffer
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=9, frameon=False)
    if own:
        fig.tight_layout()
        if path:
            fig.savefig(path, dpi=100)
    return ax
