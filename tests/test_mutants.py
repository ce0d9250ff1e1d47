"""The graded tests catch wrong code: every known-wrong implementation loses points.

For each chapter, one child process (``python -m tests.mutants C``) installs
each mutant of ``tests/mutants/chC.py`` as the learner's code of its exercise
and grades only that exercise. Every exercise the package defines, in any
chapter, needs at least three mutants, and none may keep full marks.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grader import manifest

ROOT = Path(__file__).resolve().parent.parent
MIN_PER_EXERCISE = 3


def _chapters() -> list[int]:
    ids = manifest.exercises()
    return sorted({int(e.split(".")[0]) for e in ids})


@pytest.mark.parametrize("chapter", _chapters())
def test_every_known_wrong_implementation_loses_points(chapter, tmp_path):
    out = tmp_path / "mutants.json"
    cmd = [sys.executable, "-m", "tests.mutants", str(chapter), "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.exists(), f"the mutant check crashed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    result = json.loads(out.read_text())

    few = {e: n for e, n in result["exercises"].items() if n < MIN_PER_EXERCISE}
    assert not few, (
        f"exercises with fewer than {MIN_PER_EXERCISE} known-wrong implementations in "
        f"tests/mutants/ch{chapter}.py: {few}"
    )
    bad = [r for r in result["rows"] if r["status"] != "caught"]
    assert not bad, "known-wrong implementations that keep full marks (or could not run):\n" + (
        "\n".join(
            f"  {r['exercise']} {r['name']} [{r['status']}] {r['description']}: {r['detail']}"
            for r in bad
        )
    )


@pytest.mark.parametrize("exercise", ["1.3", "5.7"])
def test_the_checker_lets_a_correct_implementation_keep_its_marks(exercise):
    """The control: the reference, installed the way mutants are, passes every test."""
    cmd = [sys.executable, "-m", "tests.mutants", exercise.split(".")[0], "--exercise", exercise,
           "--control"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
