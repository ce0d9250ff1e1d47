"""A benchmark's figure cannot be raised by learner code that wastes time.

The parent times the learner's sides and the course's (``baseline=``) and grades
``formula`` over them (``autograder/grader/bench.py``). If a learner-timed side
divides a higher-is-better figure (or a lower-is-better one is divided by it),
a submission that burns CPU time in that side, a padded call, raises its figure:
8.4's ``n8000 / n1000`` gave a quadratic planner full marks once its 1000-buffer
call was padded, 3.6's ``uncached / cached`` a learner whose first process wasted
seconds. Here every graded formula is evaluated at random timings, each learner
side slowed in turn, and the figure must not get better.
"""

import ast
import random

import pytest

from autograder.grader.bench import figure
from autograder.grader.manifest import ROOT, chapters, graded_items

ITEMS = [i for c in chapters() for i in graded_items(c) if i.kind == "benchmark" and i.formula]

# Formulas that still reward a padded learner side: each a known gap, to be fixed
# like 8.4 and 3.6 (a grader-timed side in the place of the learner's). The test fails
# when one is fixed and left here, or when a new one appears.
PADDABLE: dict[str, str] = {}


def _names(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - {"min", "max"}


def _constants(item) -> set[str]:
    """Names a benchmark passes as ``constants=`` (sizes the course's run fixes, not times)."""
    path, func = item.nodeid.split("::")
    tree = ast.parse((ROOT / path).read_text())
    fn = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == func)
    return {k.value for node in ast.walk(fn) if isinstance(node, ast.keyword) and
            node.arg == "constants" and isinstance(node.value, ast.Dict)
            for k in node.value.keys if isinstance(k, ast.Constant)}  # fmt: skip


def _padding_helps(item) -> str:
    """A learner side whose slowing improves the figure at some random timings, or ""."""
    rng = random.Random(0)
    names = _names(ast.parse(item.formula, mode="eval"))
    learner = sorted(names - set(item.baseline) - _constants(item))
    for _ in range(200):
        t = {n: rng.uniform(1e-4, 1.0) for n in names}
        before = figure(item.formula, t)
        for side in learner:
            after = figure(item.formula, {**t, side: t[side] * rng.uniform(1.5, 50)})
            better = after > before if item.higher_is_better else after < before
            if better and abs(after - before) > 1e-9 * abs(before):
                return side
    return ""


@pytest.mark.parametrize("item", ITEMS, ids=lambda i: f"{i.exercise}-{i.name}")
def test_wasted_time_in_a_learner_side_never_raises_a_figure(item):
    side = _padding_helps(item)
    known = item.exercise in PADDABLE
    assert bool(side) == known, (
        f"{item.exercise} {item.name}: slowing the learner's side {side!r} improves "
        f"{item.formula!r}"
        if side
        else f"{item.exercise} is fixed: drop it from PADDABLE"
    )
