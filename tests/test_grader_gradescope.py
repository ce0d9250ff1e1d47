"""``make gradescope``'s zip grades a submission, labs included, in a local fake ``/autograder``
tree, as Gradescope runs it: as root, official grading (learner code as the grading user)."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder import config
from autograder.grader import sandbox
from autograder.tools.gradescope import build
from tests.install_references import install

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="official grading needs root")
STUB = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
SOLVED = ("out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n"
          "        run *= n\n    return tuple(reversed(out))")  # fmt: skip
LAB_ATTACK = (Path(__file__).parent / "hostile" / "_lab_kill_grader.txt").read_text()


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("answered") / "submission"
    install(out)
    return out


def fake_autograder(tmp_path: Path, submission: Path) -> Path:
    ag = tmp_path / "autograder"
    with zipfile.ZipFile(build(tmp_path / "gradescope.zip")) as z:
        z.extractall(ag)
    for name in ("run_autograder", "setup.sh"):
        (ag / name).chmod(0o755)
    repo = ag / "submission" / "my-minitorch"  # an upload of the learner's repository
    shutil.copytree(submission, repo)
    (ag / "results").mkdir()
    (ag / "results" / "results.json").write_text('{"score": 1000, "tests": []}')  # left over
    return ag


def run(ag: Path, args: str) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ag), "AUTOGRADER_ROOT": str(ag),
           "PYTHON": sys.executable, "AUTOGRADER_ARGS": args}  # fmt: skip
    out = subprocess.run([str(ag / "run_autograder")], env=env, capture_output=True, text=True,
                         timeout=1500)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads((ag / "results" / "results.json").read_text())


def test_zip_holds_the_grader_and_a_setup_for_python_3_11(tmp_path):
    with zipfile.ZipFile(build(tmp_path / "gradescope.zip")) as z:
        names = set(z.namelist())
        setup = z.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "source/autograder/oracle.json.gz"} <= names
    assert "source/solutions/reference/ch1.py" in names and "source/minitorch/__init__.py" in names
    assert "python3.11" in setup and "sys.version_info >= (3, 11)" in setup
    users = re.search(r"^for n in .*?^done$", setup, re.M | re.S).group(0)
    subprocess.run(["bash", "-euc", users], check=True)  # the pool's users, as setup.sh makes them
    for n in range(config.GRADER_USERS):  # every one a grading user official grading takes
        assert sandbox.grading_user(f"{config.GRADER_USER}-{n}", create=False)


def test_zip_grades_a_submission_with_its_labs(tmp_path, answered):
    """Chapter 1 of the references installed as a learner's answers: full marks, labs on the
    submission's own code; a leftover results.json is replaced."""
    ag = fake_autograder(tmp_path, answered)
    data = run(ag, "--chapter 1")
    assert data["score"] == data["max_score"] > 0, [
        t for t in data["tests"] if t["score"] < t["max_score"]
    ]
    assert any(t["extra_data"]["kind"] == "notebook" for t in data["tests"])
    assert data["extra_data"]["official"] is True


def test_a_lab_answer_that_kills_the_grader_earns_nothing(tmp_path, answered):
    """The issue's worst attack: a lab answer cell, then a kernel running as root, found the
    grader through /proc, killed it and wrote a 1000/1000 results.json that stood. Now it
    runs as the grading user in a world where the grader, its results and /autograder are
    not; its task earns nothing, the rest is graded and the grader writes the report."""
    nb_path = next((answered / "exercises").glob("ch1_*.ipynb"))
    nb = json.loads(nb_path.read_text())
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    results = tmp_path / "autograder" / "results" / "results.json"  # the attack knows where
    cell["source"] = LAB_ATTACK.replace("RESULTS", str(results)) + "\n" + "".join(cell["source"])
    sub = tmp_path / "sub"
    shutil.copytree(answered, sub)
    (sub / "exercises" / nb_path.name).write_text(json.dumps(nb))
    ag = fake_autograder(tmp_path, sub)
    data = run(ag, "--chapter 1")
    assert data["max_score"] != 1000 and data["extra_data"]["official"] is True
    assert data["score"] == data["max_score"], [
        t for t in data["tests"] if t["score"] < t["max_score"]
    ]
    assert len(data["tests"]) > 10  # the grader's complete report, not the forged one
