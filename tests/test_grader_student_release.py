"""``make student-release``: a learner repository without solutions/ that still grades."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.student_release import build

STUB = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
SOLVED = "out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n        run *= n\n    return tuple(reversed(out))"
VAULT = "import zipfile\n    import autograder.vault as v\n    exec(zipfile.ZipFile(v.VAULT).read('solutions/reference/ch1.py'), g := {})\n    return g['strides_from_shape'](shape)"


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    return build(tmp_path_factory.mktemp("student") / "repo")


def grade(repo: Path, body: str) -> float:
    path = repo / "minitorch/tensor/indexing.py"
    original = path.read_text()
    path.write_text(original.replace(STUB, body))
    try:
        out = repo / "results.json"
        cmd = [sys.executable, "-m", "autograder", "--exercise", "1.3", "--json", str(out)]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NUMBA_ENABLE_CUDASIM": "1"}
        run = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        return json.loads(out.read_text())["score"]
    finally:
        path.write_text(original)
        shutil.rmtree(repo / "minitorch" / "__pycache__", ignore_errors=True)


def test_student_repository_has_no_solutions(student):
    assert not (student / "solutions").exists()
    assert (student / "autograder" / "vault.zip").exists()
    code = "import sys; sys.path.insert(0, '.'); import solutions.reference.ch1"
    probe = subprocess.run([sys.executable, "-S", "-c", code], cwd=student, capture_output=True)
    assert probe.returncode != 0


def test_student_repository_grades(student):
    assert grade(student, SOLVED) == 2
    assert grade(student, STUB) == 0


def test_reading_the_vault_finds_the_graded_reference_withheld_only_in_the_tree(student):
    """The vault is a zip, not a secret: a learner who unpacks it gets the references.

    Inside the grading tree the vault is not there (only minitorch/, the grader's
    autograder/ without vault.zip and the withheld references), so this earns nothing.
    """
    assert grade(student, VAULT) == 0
