"""The pass manager: named passes, run in order to a fixed point (exercise 6.8).

A pass is a function ``graph -> int`` (how many changes it made) registered
under a name with :func:`register_pass`. :func:`optimize` runs a list of names
round after round until a whole round changes nothing, or ``max_rounds`` is
reached; it records what each pass did and, when asked, verifies the graph and
writes it to a file after every pass (``00-traced.txt``, ``01-dce.txt``...).
"""

from __future__ import annotations

import os
import time  # noqa: F401  (used by the solutions)
from dataclasses import dataclass
from typing import Callable

from ..core.errors import OpError
from ..exercises import exercise
from ..tracing.graph import Graph
from .cleanup import common_subexpressions, dead_code_elimination
from .extra import simplify_more
from .fold import constant_fold
from .patterns import SAFE, UNSAFE, apply_patterns

PASSES: dict[str, Callable[[Graph], int]] = {}

# Folding and simplifying leave dead nodes behind: DCE runs last so each round ends clean.
DEFAULT_PIPELINE = ("cse", "fold", "simplify", "dce")
# The default pipeline and your own pass (exercise 6.11): ``jit(fn, passes=MORE_PIPELINE)``.
MORE_PIPELINE = ("cse", "fold", "simplify", "simplify_more", "dce")


def register_pass(name: str):
    """Decorator: make ``fn(graph) -> int`` available as ``compile(passes=[name])``."""

    def deco(fn):
        if name in PASSES:
            raise ValueError(f"register_pass: a pass named {name!r} is already registered")
        PASSES[name] = fn
        return fn

    return deco


register_pass("dce")(dead_code_elimination)
register_pass("cse")(common_subexpressions)
register_pass("fold")(constant_fold)
register_pass("simplify_more")(simplify_more)

# The exercises each built-in pass runs (the pipeline leaves the passes out until done).
PASSES_NEED = {
    "dce": ("6.1", "6.2"),
    "cse": ("6.1", "6.3"),
    "fold": ("6.1", "6.4"),
    "simplify": ("6.1", "6.5", "6.6", "6.7"),
    "simplify_unsafe": ("6.1", "6.5", "6.6", "6.7"),
    "simplify_more": ("6.11",),
}


@register_pass("simplify")
def simplify(graph: Graph) -> int:
    return sum(apply_patterns(graph, SAFE).values())


@register_pass("simplify_unsafe")
def simplify_unsafe(graph: Graph) -> int:
    return sum(apply_patterns(graph, UNSAFE).values())


@dataclass
class PassStat:
    """What one run of one pass did."""

    name: str
    round: int
    changes: int
    nodes_before: int
    nodes_after: int
    seconds: float

    def __str__(self) -> str:
        delta = self.nodes_after - self.nodes_before
        return (
            f"round {self.round} {self.name:>10}: {self.changes:4d} change(s), "
            f"{self.nodes_before} -> {self.nodes_after} ops ({delta:+d}), "
            f"{self.seconds * 1e3:.2f} ms"
        )


@exercise("6.8")
def run_to_fixed_point(graph: Graph, passes: list, max_rounds: int, after_pass: Callable) -> int:
    """Run ``passes`` (a list of ``(name, fn)``) in order, round after round; return the rounds run.

    A round runs every pass once, in list order, ``changes = fn(graph)``, and
    after each pass calls ``after_pass(name, round_index, changes, seconds)``
    (``round_index`` counts from 0; ``seconds`` is a float, that pass's own run
    time, from ``time.perf_counter()``, not the time since the round began).
    Stop after the first round in which *no* pass changed anything (a fixed
    point: running again would do nothing), or after ``max_rounds`` rounds.
    Return the number of rounds run.

    Example:
        >>> run_to_fixed_point(g, [("dce", dead_code_elimination)], 5, lambda *a: None)
        2    # round 0 removed something, round 1 found nothing to do

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.8: run_to_fixed_point")


def resolve(passes) -> list[tuple[str, Callable]]:
    """Names (or functions) -> ``(name, fn)`` pairs, with a clear error for unknown names."""
    out = []
    for p in DEFAULT_PIPELINE if passes is None else passes:
        if callable(p):
            out.append((getattr(p, "__name__", "pass"), p))
        elif p in PASSES:
            out.append((p, PASSES[p]))
        else:
            raise OpError(
                "compile",
                f"unknown pass {p!r}",
                hint=f"registered passes: {', '.join(sorted(PASSES))}; "
                "add your own with @minitorch.register_pass(name)",
            )
    return out


def dump_folder(debug: bool) -> str | None:
    """Where to write per-pass graphs: ``MINITORCH_DUMP_GRAPH`` only (``debug`` prints, never writes)."""
    return os.environ.get("MINITORCH_DUMP_GRAPH") or None


def optimize(graph: Graph, passes=None, max_rounds: int = 8, debug: bool = False, dump=None):
    """Rewrite ``graph`` in place with ``passes``; return the list of :class:`PassStat`.

    ``debug`` verifies the graph after every pass (naming the pass that broke
    it); ``dump`` is a folder that receives ``00-traced.txt`` and one file per pass.
    """
    pipeline = resolve(passes)
    stats: list[PassStat] = []
    files = [0]
    if dump:
        os.makedirs(dump, exist_ok=True)
        _write(dump, "00-traced", graph)
    before = [len(graph)]

    def after_pass(name, rnd, changes, seconds):
        if debug:
            try:
                graph.verify()
            except OpError as e:
                raise OpError("compile", f"the graph is broken after pass {name!r}: {e}") from e
        n = len(graph)
        stats.append(PassStat(name, rnd, int(changes), before[0], n, seconds))
        before[0] = n
        if dump:
            files[0] += 1
            _write(dump, f"{files[0]:02d}-{name}", graph)

    run_to_fixed_point(graph, pipeline, max_rounds, after_pass)
    return stats


def _write(folder: str, stem: str, graph: Graph) -> None:
    with open(os.path.join(folder, stem + ".txt"), "w", encoding="utf-8") as f:
        f.write(graph.text() + "\n")
