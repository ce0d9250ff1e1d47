"""``make gradescope``'s zip grades a submission in a local fake ``/autograder`` tree."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from autograder.gradescope import build

ROOT = Path(__file__).resolve().parent.parent
STUB = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
SOLVED = "out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n        run *= n\n    return tuple(reversed(out))"
DELEGATE = "from solutions.reference.ch1 import strides_from_shape as f\n    return f(shape)"


def fake_autograder(tmp_path: Path, body: str) -> Path:
    ag = tmp_path / "autograder"
    with zipfile.ZipFile(build(tmp_path / "gradescope.zip")) as z:
        z.extractall(ag)
    for name in ("run_autograder", "setup.sh"):
        (ag / name).chmod(0o755)
    repo = ag / "submission" / "my-minitorch"  # an upload of the learner's repository
    shutil.copytree(
        ROOT / "minitorch", repo / "minitorch", ignore=shutil.ignore_patterns("__pycache__")
    )
    path = repo / "minitorch/tensor/indexing.py"
    path.write_text(path.read_text().replace(STUB, body))
    return ag


def nobody_can_run_python() -> bool:
    try:
        return (
            subprocess.run([sys.executable, "-c", "0"], user="nobody", timeout=60).returncode == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


def run(ag: Path, **env) -> dict:
    if os.geteuid() == 0 and not nobody_can_run_python():  # e.g. a Python under /root
        env.setdefault("AUTOGRADER_CHILD_USER", "")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ag), "AUTOGRADER_ROOT": str(ag),
           "PYTHON": sys.executable, "AUTOGRADER_ARGS": "--exercise 1.3", **env}  # fmt: skip
    out = subprocess.run([str(ag / "run_autograder")], env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads((ag / "results" / "results.json").read_text())


def test_zip_grades_a_submission(tmp_path):
    ag = fake_autograder(tmp_path, SOLVED)
    assert {"setup.sh", "run_autograder"} <= {p.name for p in ag.iterdir()}
    data = run(ag)
    assert data["score"] == data["max_score"] == 2, data
    assert all(t["max_score"] > 0 for t in data["tests"])


def test_zip_refuses_delegation_and_runs_learner_code_as_nobody(tmp_path):
    ag = fake_autograder(tmp_path, DELEGATE)
    data = run(ag)
    assert data["score"] == 0, data
    if os.geteuid() == 0:  # the class setup: references unreadable to learner code
        assert (ag / "source" / "solutions").stat().st_mode & 0o077 == 0
