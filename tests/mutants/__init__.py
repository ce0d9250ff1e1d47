"""Known-wrong implementations ("mutants") of the exercises, kept as data.

Each module ``chC.py`` holds plain top-level functions with exactly the stub's
signature, each standing for one plausible learner mistake::

    @mutant("1.5", "returns the big index unchanged: broadcasting ignored")
    def broadcast_index_unchanged(big_index, big_shape, shape):
        return tuple(big_index)

``python -m tests.mutants C`` installs each one in turn as the learner's code
of its exercise (isolated mode, focus on that exercise), runs only that
exercise's graded tests and says whether it lost points. ``tests/test_mutants.py``
requires every mutant to be caught and every exercise to have at least
:data:`MIN_PER_EXERCISE` of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

MIN_PER_EXERCISE = 3


@dataclass
class Mutant:
    exercise: str  # "C.N"
    name: str  # the function's name, unique in its module
    description: str  # the learner mistake it stands for
    fn: Callable

    @property
    def chapter(self) -> int:
        return int(self.exercise.split(".")[0])


MUTANTS: list[Mutant] = []


def mutant(exercise: str, description: str) -> Callable[[Callable], Callable]:
    """Register ``fn`` as a known-wrong implementation of ``exercise``."""

    def register(fn: Callable) -> Callable:
        MUTANTS.append(Mutant(exercise, fn.__name__, description, fn))
        return fn

    return register


def load(chapter: int) -> list[Mutant]:
    """The mutants of one chapter (none when it has no ``chC.py`` yet)."""
    try:
        importlib.import_module(f"{__name__}.ch{chapter}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.ch{chapter}":
            raise
    return [m for m in MUTANTS if m.chapter == chapter]
