"""Chapter 8's stage of ``compile_graph``: install the arena runner, dump ``memory.txt`` and the timeline."""

from __future__ import annotations

import logging
import os

from ..tracing.jit import EXPLAIN_HOOKS
from .arena import ArenaRunner, MemoryPlan

log = logging.getLogger("minitorch.memory")


def explain_lines(compiled) -> list:
    """``minitorch.explain``'s chapter-8 lines: the planned arena against the lower bound."""
    try:
        mp = compiled.memory_plan()
    except (NotImplementedError, AttributeError):  # not lowered, or chapter 6/8 not done
        return []
    if isinstance(compiled.runner, ArenaRunner):
        return ["Memory:", f"  {mp.summary()}"]
    return ["Memory (not planned; CompileOptions(memory=True) would give):", f"  {mp.summary()}"]


EXPLAIN_HOOKS.append(explain_lines)


def install(compiled, dump: str | None = None) -> None:
    """Make ``compiled`` (a CompiledPlan) run in an arena; write the reports into ``dump``."""
    if any(d != "cpu" for d in compiled.devices):  # the arena is host memory
        log.info("%s: not planned, it runs on %s", compiled.graph.name, compiled.devices)
        return
    keep = compiled.options.mode == "reduce-overhead"  # chapter 9: no allocation per call
    compiled.runner = ArenaRunner(inplace=compiled.options.inplace, keep=keep)
    if not dump:
        return
    try:
        mp = compiled.memory_plan()
    except NotImplementedError as e:  # chapter 6 or 8 not done yet
        with open(os.path.join(dump, "memory.txt"), "w", encoding="utf-8") as f:
            f.write(f"no memory plan: {e}\n")
        return
    with open(os.path.join(dump, "memory.txt"), "w", encoding="utf-8") as f:
        f.write(mp.text() + "\n")
    try:
        timeline_png(mp, os.path.join(dump, "memory.png"), title=compiled.graph.name)
    except ImportError:  # matplotlib is optional outside the book
        log.info("matplotlib missing: no memory.png")


def timeline_png(mp: MemoryPlan, path: str | None = None, title: str = "", ax=None):
    """Steps on x, arena offsets on y, one rectangle per buffer, and the live-bytes curve.

    Draws on ``ax`` when given (the book does), else saves a PNG to ``path``.
    """
    import matplotlib

    if ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7, 3.5))
    cmap = plt.get_cmap("tab20")
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
    ax.set_title(title or "memory plan")
    ax.legend(loc="upper right", fontsize=7)
    if own:
        fig.tight_layout()
        if path:
            fig.savefig(path, dpi=100)
        plt.close(fig)
    return ax
