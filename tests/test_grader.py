"""The grader survives learner code that crashes, hangs or exits, and scores per exercise."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo(tmp_path):
    """A copy of the framework, grader and solutions that a test may break."""
    for name in ["minitorch", "autograder", "solutions"]:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def grade(repo: Path, *args: str) -> dict:
    out = repo / "results.json"
    cmd = [sys.executable, "-m", "autograder", "--chapter", "1", "--no-notebooks",
           "--json", str(out), "--timeout", "20", *args]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    data["stdout"] = proc.stdout
    return data


def by_exercise(data: dict) -> dict:
    scores: dict = {}
    for t in data["tests"]:
        ex = t["name"].split()[0]
        got, possible = scores.get(ex, (0, 0))
        scores[ex] = (got + t["score"], possible + t["max_score"])
    return scores


def edit(repo: Path, rel: str, old: str, new: str) -> None:
    path = repo / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_filling_one_exercise_earns_exactly_its_points(repo):
    edit(repo, "minitorch/tensor/indexing.py",
         'raise NotImplementedError("Exercise 1.3: strides_from_shape")',
         "out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n"
         "        run *= n\n    return tuple(reversed(out))")  # fmt: skip
    scores = by_exercise(grade(repo))
    assert scores["1.3"][0] == scores["1.3"][1] > 0
    assert all(got == 0 for ex, (got, _) in scores.items() if ex != "1.3"), scores


def test_crash_at_import_still_gives_a_complete_report(repo):
    edit(repo, "minitorch/tensor/views.py", "from __future__ import annotations\n",
         "from __future__ import annotations\nimport os\nos._exit(3)\n")  # fmt: skip
    data = grade(repo)
    expected = sum(1 for _ in data["tests"])
    assert expected > 20 and data["score"] == 0
    assert all("not run" in t["output"] for t in data["tests"]), data["tests"][0]


def test_hang_and_exit_cost_only_their_tests(repo):
    edit(
        repo,
        "minitorch/tensor/indexing.py",
        'raise NotImplementedError("Exercise 1.2: to_index")',
        "while True:\n        pass",
    )
    edit(repo, "minitorch/tensor/indexing.py",
         'raise NotImplementedError("Exercise 1.3: strides_from_shape")',
         "import os\n    os._exit(7)")  # fmt: skip
    edit(repo, "minitorch/tensor/indexing.py",
         'raise NotImplementedError("Exercise 1.1: index_to_position")',
         "return offset + sum(i * s for i, s in zip(index, strides))")  # fmt: skip
    data = grade(repo)
    status = {t["name"]: t["extra_data"]["status"] for t in data["tests"]}
    assert status["1.2 test_to_index_is_row_major"] == "timeout"
    assert status["1.3 test_strides_from_shape"] == "crashed"
    scores = by_exercise(data)
    assert scores["1.1"][0] == scores["1.1"][1] > 0, scores  # tests after the crash still ran
    assert len(data["tests"]) == len(status)


def test_learner_output_stays_out_of_the_report(repo):
    edit(repo, "minitorch/tensor/indexing.py",
         'raise NotImplementedError("Exercise 1.1: index_to_position")',
         'print("LEARNER-NOISE")\n    raise NotImplementedError("Exercise 1.1: x")')  # fmt: skip
    data = grade(repo)
    assert "LEARNER-NOISE" not in data["stdout"]


def test_classroom_reads_the_points_of_results_json(tmp_path):
    """The Classroom workflow hands these to autograding-grading-reporter, which adds up the
    tests' scores and posts `Points x/y` where GitHub Classroom reads them."""
    import base64

    from autograder.tools.classroom import runner_results

    results = {"score": 3, "max_score": 5, "tests": [
        {"name": "1.3 test_a", "score": 2, "max_score": 2, "status": "passed", "output": ""},
        {"name": "1.4 test_b", "score": 1, "max_score": 3, "status": "failed", "output": "x"}]}  # fmt: skip
    got = runner_results(results)
    assert got["max_score"] == 5 and sum(t["score"] for t in got["tests"]) == 3
    assert [t["status"] for t in got["tests"]] == ["pass", "fail"] and got["status"] == "fail"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    out = subprocess.run([sys.executable, "-m", "autograder.tools.classroom", str(path)],
                         cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(base64.b64decode(out.stdout)) == got
