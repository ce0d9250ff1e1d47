"""Chapter 7's stage of the compiler pipeline (``CompileOptions(fuse=True)``).

:func:`fuse` groups a graph in place and returns a :class:`FusionReport`. The
stage registered below runs it after the passes; the pipeline verifies the graph
after it (``debug``), and the stage adds the ``NN-fused.txt`` dump (graph text plus
the refusal table), the generated kernels' source and its ``explain`` lines.
"""

from __future__ import annotations

import os

from ..passes.pipeline import Stage, register_stage
from ..passes.plan import NODE_KERNELS
from ..tracing.graph import VERIFIERS, Graph
from .group import build_fused_node, find_groups, is_compute
from .ir import FUSED, fused_kernel, verify_with_fused
from .plan_groups import choose_groups, fuse_planned
from .reasons import FusionReport


def fuse(graph: Graph) -> FusionReport:
    """Replace every group of two or more compute ops in ``graph`` by a fused node."""
    report = FusionReport(nodes_before=len(graph))
    groups, report.refusals, report.recomputed = find_groups(graph)
    for group in groups:
        if sum(1 for m in group.members if is_compute(m)) < 2:
            continue  # one op alone gains nothing from a generated kernel
        report.groups.append(build_fused_node(graph, group, f"fused_{len(report.groups)}"))
    report.nodes_after = len(graph)
    return report


def fuse_stage(graph: Graph, debug=False, dump=None, number=1, grouping="greedy") -> FusionReport:
    """Run :func:`fuse` on ``graph`` (or, with ``grouping="planned"``, build the groups of
    7.11's ``choose_groups``); with ``debug`` print the report (the book's view)."""
    if grouping == "planned":
        report = fuse_planned(graph, choose_groups(graph))
    else:
        report = fuse(graph)
    if debug:
        print("\n".join(report.lines()))
    return report


# ---------------------------------------------------------------- the pipeline's stage


def _run(unit) -> None:
    unit.fusion = fuse_stage(unit.graph, debug=unit.debug, grouping=unit.options.grouping)
    if any(n.spec.device == "cuda" for n in unit.graph.inputs):
        unfuse_for_cuda(unit.graph, unit.fusion)
    for n in unit.graph.nodes if unit.options.fast_math else ():  # the code generator reads it
        if n.op == FUSED:
            n.attrs["fast_math"] = True


def unfuse_for_cuda(graph, report: FusionReport) -> None:
    """On cuda, a group with no generated kernel would run op by op inside one step, each
    op's result a temporary outside chapter 8's arena: its ops become steps again (each
    result planned in the arena, the same launches). The report says which and why."""
    from ..core import capability
    from .codegen_cuda import why_not_generated
    from .ir import unfuse
    from .runtime import CODEGEN

    if capability.missing(CODEGEN):  # exercises 7.6-7.10 not written: nothing is generated
        return
    why = {}

    def pick(node) -> bool:
        why[node] = why_not_generated(node)
        return why[node] is not None

    for node in unfuse(graph, pick):
        report.unfused.append((node.attrs["name"], why[node]))
        report.groups.remove(node)
    report.nodes_after = len(graph)


def _explain(unit) -> list[str]:
    if unit.fusion is None:
        return []
    from .runtime import explain_lines  # how each group runs (codegen)

    return ["Fusion:", *(f"  {line}" for line in unit.fusion.lines())] + explain_lines(
        unit.fusion.groups
    )


def _dump(unit, folder: str) -> None:
    from .runtime import dump_kernels

    number = len(unit.stats) + 1
    with open(os.path.join(folder, f"{number:02d}-fused.txt"), "w", encoding="utf-8") as f:
        f.write(unit.graph.text() + "\n\n" + "\n".join(unit.fusion.lines()) + "\n")
    dump_kernels(unit.graph, folder)  # the generated source of every fused group


def _needs(unit) -> tuple:
    planned = unit is not None and unit.options.grouping == "planned"
    return tuple(f"7.{n}" for n in range(1, 6)) + (("7.11",) if planned else ())


register_stage(
    Stage(
        "fuse",
        20,
        _run,
        wanted=lambda options: options.fuse,
        needs=_needs,
        explain=_explain,
        dump=_dump,
        rewrites=True,
    )
)
NODE_KERNELS[FUSED] = fused_kernel  # a plan runs a fused node with a generated kernel
VERIFIERS[FUSED] = verify_with_fused  # verify checks each group, then the graph inlined
