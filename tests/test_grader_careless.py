"""Careless mistakes cost only themselves: the report is always written, names the cause,
and everything the mistake does not touch is graded (issue: correct code keeps full marks).

Each case starts from the references installed as a learner's answers
(``tests/install_references.py``), so whatever the mistake does not touch must
keep full marks.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.install_references import install

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("answered") / "submission"
    install(out)
    return out


@pytest.fixture
def submission(answered, tmp_path) -> Path:
    copy = tmp_path / "submission"
    shutil.copytree(answered, copy, symlinks=True)
    return copy


def grade(sub: Path, *args: str, python: str = sys.executable, prefix=(), env=None) -> dict:
    out = sub.parent / "results.json"
    cmd = [*prefix, python, "-m", "autograder", "--submission", str(sub), "--no-notebooks",
           "--json", str(out), *args]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(sub.parent), "NUMBA_ENABLE_CUDASIM": "1",
           **(env or {})}  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.exists(), f"no results.json\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    data = json.loads(out.read_text())
    data["stdout"], data["code"] = proc.stdout, proc.returncode
    return data


def scores(data: dict) -> dict[str, tuple[float, float, str]]:
    """Graded tests only: benchmarks' figures are another matter than careless mistakes."""
    return {t["name"]: (t["score"], t["max_score"], t["output"]) for t in data["tests"]
            if t["extra_data"]["kind"] != "benchmark"}  # fmt: skip


def test_a_symlinked_venv_grades_normally(submission, tmp_path):
    link = tmp_path / "venv-link"
    link.symlink_to(Path(sys.prefix), target_is_directory=True)
    data = grade(submission, "--exercise", "3.1", python=str(link / "bin" / "python"))
    assert data["score"] == data["max_score"] > 0, data["stdout"][-3000:]


def test_a_syntax_error_costs_only_the_exercises_of_its_file(submission):
    path = submission / "minitorch" / "onnx" / "export.py"
    path.write_text(path.read_text() + "\n\ndef broken(:\n    pass\n")
    line = path.read_text().splitlines().index("def broken(:") + 1
    data = grade(submission, "--chapter", "10")
    for name, (score, most, output) in scores(data).items():
        if name.startswith(("10.5 ", "10.6 ")):
            assert score == 0 and f"minitorch/onnx/export.py: line {line}: SyntaxError" in output
        else:
            assert score == most, (name, output)
    assert "minitorch/onnx/export.py" in data["extra_data"]["problems"]
    assert "Problems with your files" in data["stdout"]


def test_links_and_special_files_are_reported_not_followed(submission, tmp_path):
    (submission / "minitorch" / "notes.py").symlink_to(tmp_path / "nowhere.py")  # dangling
    os.mkfifo(submission / "minitorch" / "pipe")  # copying would block on it
    data = grade(submission, "--exercise", "1.3")
    assert data["score"] == data["max_score"] > 0, data["stdout"][-3000:]
    problems = data["extra_data"]["problems"]
    assert "symbolic link" in problems["minitorch/notes.py"]
    assert "not a regular file" in problems["minitorch/pipe"]
    assert not list(Path("/tmp").glob("grading-*/minitorch/notes.py"))


def test_a_hang_at_import_costs_one_time_limit(submission):
    path = submission / "minitorch" / "tensor" / "views.py"
    path.write_text(path.read_text() + "\nimport time\n\nwhile True:\n    time.sleep(0.05)\n")
    start = time.monotonic()
    data = grade(submission, "--chapter", "1", "--timeout", "15")
    took = time.monotonic() - start
    assert data["score"] == 0 and scores(data)
    outputs = [o for _, _, o in scores(data).values()]
    assert all("importing minitorch did not finish within 15 s" in o for o in outputs), outputs
    assert took < 90, f"{took:.0f} s: every exercise waited out its own time limit"


def _in_mount_namespace() -> list[str] | None:
    """A command prefix running in a mount namespace of its own (root, or a user namespace)."""
    for prefix in (["unshare", "-m"], ["unshare", "-r", "-m"]):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0:
                return prefix
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def test_a_full_disk_still_writes_a_report_and_cleans_up(submission, tmp_path):
    prefix = _in_mount_namespace()
    if prefix is None:
        pytest.skip("no mount namespace here to make a small full disk in")
    full = tmp_path / "full"
    full.mkdir()
    script = (f'mount -t tmpfs -o size=512k tmpfs {full} && "$@"; code=$?; '
              f'ls -A {full} > {tmp_path}/left.txt; exit $code')  # fmt: skip
    data = grade(submission, "--exercise", "1.3", prefix=[*prefix, "sh", "-c", script, "sh"],
                 env={"TMPDIR": str(full)})  # fmt: skip
    assert data["code"] == 2
    assert "No space left on device" in data["extra_data"]["error"]
    assert "the grader could not finish" in data["stdout"].lower()
    assert (tmp_path / "left.txt").read_text().strip() == "", "temporary trees were left"
