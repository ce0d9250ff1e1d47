"""Correct implementations other than the references keep full marks (``tests/variants/``).

The mutants prove the tests catch wrong code; these prove the grader's own
strictness (the oracle's recorded values and tolerances, ``autograder/oracle.py``)
does not fail right code that differs from the reference: another valid order,
another stride where any is right, sums added in another order. Each fixture
replaces its exercise's stub, as a learner's answer would, and the exercise is
graded the way ``make grade`` grades it.
"""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grader import manifest

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = Path(__file__).resolve().parent / "variants"


def _exercise(name: str) -> str:
    return re.search(r'^EXERCISE = "([\d.]+)"', (VARIANTS / f"{name}.py").read_text(), re.M)[1]


def plant(repo: Path, name: str) -> str:
    """Replace the exercise's stub body with a call to the fixture's ``variant``."""
    ex = _exercise(name)
    info = manifest.exercises()[ex]
    path = repo / info.path
    text = path.read_text()
    fn = next(f for f in ast.walk(ast.parse(text)) if getattr(f, "name", None) == info.name)
    args = ", ".join(a.arg for a in fn.args.args)
    stub = f'raise NotImplementedError("Exercise {ex}: {info.name}")'
    assert text.count(stub) == 1, stub
    fixture = (VARIANTS / f"{name}.py").read_text()
    path.write_text(text.replace(stub, f"return variant({args})") + "\n\n" + fixture)
    return ex


@pytest.mark.parametrize("name", sorted(p.stem for p in VARIANTS.glob("*.py")))
def test_a_correct_variant_keeps_full_marks(tmp_path, name):
    for part in ["minitorch", "autograder", "solutions"]:
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    ex = plant(tmp_path, name)
    out = tmp_path / "results.json"
    cmd = [sys.executable, "-m", "autograder", "--exercise", ex, "--no-notebooks",
           "--json", str(out)]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    data = json.loads(out.read_text())
    lost = [(t["name"], t.get("message", "")[:300]) for t in data["tests"]
            if t["score"] < t["max_score"]]  # fmt: skip
    assert proc.returncode == 0 and not lost, (lost, proc.stdout[-2000:])
    assert data["score"] == data["max_score"] > 0
