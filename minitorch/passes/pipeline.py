"""The compiler pipeline: one list of stages over one compile unit, with instruments.

``compile_graph`` is the whole compiler. A :class:`CompileUnit` (the traced graph,
the working copy every stage rewrites, then the plan and its runner) goes through
:data:`STAGES` in order. Each :class:`Stage` says when it is wanted (from the
:class:`CompileOptions`), which exercises it runs (``needs``, checked once when the
pipeline is built: a stage whose exercises are not done is left out, with the
reason in ``explain``), and what it adds to ``explain`` and to the dumps.

Chapter 6 registers the passes and the lowering; later chapters register their
own stages when they are imported (fusion 7, memory 8, the runner modes and the
thread pool 9): this file imports none of them. What every stage gets from the
pipeline, not from its own code (the instruments): its time, ``verify`` after a
stage that rewrites the graph (``debug``), the dump folder (``MINITORCH_DUMP_GRAPH``)
and the explain lines.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from ..core import capability
from ..core.errors import OpError
from ..tracing.graph import COMPILER, Graph
from ..tracing.jit import EXPLAIN_HOOKS
from .manager import PASSES_NEED, dump_folder, optimize
from .options import DEFAULT, CompileOptions
from .rewrite import clone_graph

log = logging.getLogger("minitorch.passes")


@dataclass
class CompileUnit:
    """What the stages share: every stage reads and extends it, in order."""

    traced: Graph  # as traced; never changed
    graph: Graph  # the copy every stage rewrites
    backend: str | None
    options: CompileOptions
    passes: object = None  # pass names for the passes stage (None: the default pipeline)
    debug: bool = False
    dump: str | None = None  # this compile's dump folder, or None
    stats: list = field(default_factory=list)  # chapter 6: one PassStat per pass run
    fusion: object = None  # chapter 7: a FusionReport
    compiled: object = None  # from lowering on: the CompiledPlan (plan and runner)
    times: dict = field(default_factory=dict)  # stage name -> seconds
    skipped: dict = field(default_factory=dict)  # stage name -> why it did not run


@dataclass
class Stage:
    name: str
    order: int  # passes 10, fuse 20, collectives 25, lower 30, memory 40, mode 50, parallel 60
    run: Callable[[CompileUnit], None]
    wanted: Callable[[CompileOptions], bool] = lambda options: True
    needs: Callable[[CompileUnit], tuple] | tuple = ()  # exercises it runs
    explain: Callable[[CompileUnit], list] | None = None
    dump: Callable[[CompileUnit, str], None] | None = None
    rewrites: bool = False  # changes the graph: verified after it under ``debug``
    left_out: Callable[[CompileUnit], None] | None = None  # what runs instead, if anything


STAGES: list[Stage] = []


def register_stage(stage: Stage) -> Stage:
    """Add (or replace, by name) a stage; the list stays in ``order``."""
    STAGES[:] = [s for s in STAGES if s.name != stage.name] + [stage]
    STAGES.sort(key=lambda s: s.order)
    return stage


def build(options: CompileOptions, unit: CompileUnit | None = None) -> list[tuple[Stage, str]]:
    """The stages ``options`` turns on, each with why it is left out ("" when it runs)."""
    out = []
    for s in STAGES:
        if not s.wanted(options):
            continue
        needs = s.needs(unit) if callable(s.needs) else s.needs
        missing = capability.missing(needs)
        why = f"exercise {', '.join(missing)} not done yet" if missing else ""
        out.append((s, why))
    return out


_dumps: dict[str, int] = {}  # dumps per graph name, so a retrace does not overwrite


def compile_graph(graph: Graph, backend=None, passes=None, debug=False, options=None):
    """Verify ``graph``, then run every wanted stage on a copy; return the ``CompiledPlan``."""
    options = options or DEFAULT
    if not isinstance(options, CompileOptions):
        raise OpError("compile", f"options must be a CompileOptions, got {options!r}")
    graph.verify()
    unit = CompileUnit(graph, clone_graph(graph), backend, options, passes, debug)
    folder = dump_folder(debug)
    if folder:
        _dumps[graph.name] = _dumps.get(graph.name, 0) + 1
        unit.dump = os.path.join(folder, f"{graph.name}_{_dumps[graph.name]}_passes")
        os.makedirs(unit.dump, exist_ok=True)
    stages = build(options, unit)
    for stage, why in stages:
        if why:
            unit.skipped[stage.name] = why
            log.info("%s: stage %s left out: %s", graph.name, stage.name, why)
            if stage.left_out is not None:
                stage.left_out(unit)
            continue
        t0 = time.perf_counter()
        stage.run(unit)
        unit.times[stage.name] = time.perf_counter() - t0
        if debug and stage.rewrites:
            try:
                unit.graph.verify()
            except OpError as e:
                raise OpError(
                    "compile", f"the graph is broken after stage {stage.name}: {e}"
                ) from e
    if unit.dump:
        for stage, why in stages:
            if stage.dump is not None and (not why or stage.left_out is not None):
                stage.dump(unit, unit.dump)
    unit.compiled.unit = unit
    unit.compiled.stages = [s for s, _ in stages]
    return unit.compiled


def explain_lines(compiled) -> list[str]:
    """What every stage says about ``compiled`` (a CompiledPlan), and the stages left out."""
    unit = getattr(compiled, "unit", None)
    if unit is None:
        return []
    lines = []
    for s in STAGES:
        if s.explain is not None and s.name not in unit.skipped:
            lines += s.explain(unit)
    for name, why in unit.skipped.items():
        lines.append(f"Stage {name} left out: {why}")
    return lines


# ---------------------------------------------------------------- chapter 6's stages


def _passes(unit: CompileUnit) -> None:
    unit.stats = optimize(unit.graph, unit.passes, debug=unit.debug, dump=unit.dump)


def _passes_need(unit: CompileUnit | None) -> tuple:
    from .manager import resolve

    names = [n for n, _ in resolve(None if unit is None else unit.passes)]
    return ("6.8", *dict.fromkeys(e for n in names for e in PASSES_NEED.get(n, ())))


def _lower(unit: CompileUnit) -> None:
    from .plan import CompiledPlan

    unit.compiled = CompiledPlan(unit.traced, unit.graph, unit.backend, unit.stats, unit.options)
    unit.compiled.fusion = unit.fusion


def _lower_left_out(unit: CompileUnit) -> None:
    """Lowering's exercises are not done: the plan is interpreted (chapter 5's way)."""
    _lower(unit)
    unit.compiled.interpreted = True


def _plan_dump(unit: CompileUnit, folder: str) -> None:
    with open(os.path.join(folder, "plan.txt"), "w", encoding="utf-8") as f:
        if unit.compiled.interpreted:
            f.write(f"no plan: {unit.skipped.get('lower', 'interpreted')}\n")
        else:
            f.write(unit.compiled.plan.text() + "\n")


def _explain_passes(unit: CompileUnit) -> list[str]:
    return []  # jit's explain prints the PassStats itself ("Passes:")


register_stage(
    Stage("passes", 10, _passes, needs=_passes_need, rewrites=True, explain=_explain_passes)
)
register_stage(
    Stage("lower", 30, _lower, needs=("6.9", "6.10"), dump=_plan_dump, left_out=_lower_left_out)
)
# ``Graph.compile`` and jit's ``explain`` reach the pipeline here (chapter 5 imports no later one)
COMPILER.append(compile_graph)
EXPLAIN_HOOKS.append(explain_lines)
