"""Hostile submissions (``tests/hostile/``) earn nothing, leave a report and leave no process."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = Path(__file__).resolve().parent / "hostile"
STUB = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
ATTACKS = sorted(p.stem for p in HOSTILE.glob("*.py"))


@pytest.fixture
def repo(tmp_path):
    for name in ["minitorch", "autograder", "solutions"]:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


TARGETS = {  # exercise: (file, its stub's body, the call that replaces it)
    "1.3": ("minitorch/tensor/indexing.py", STUB, "return attack(shape)"),
    "1.7": ("minitorch/tensor/views.py", 'raise NotImplementedError("Exercise 1.7: reshape_view")',
            "return attack(shape, strides, new_shape)"),
}  # fmt: skip


def target(attack: str) -> str:
    """The exercise a fixture attacks: 1.3, unless it says ``EXERCISE = "..."``."""
    found = re.search(r'^EXERCISE = "([\d.]+)"', (HOSTILE / f"{attack}.py").read_text(), re.M)
    return found.group(1) if found else "1.3"


def plant(repo: Path, attack: str) -> None:
    """The attack replaces the exercise's stub body; its module-level code runs at import."""
    rel, stub, call = TARGETS[target(attack)]
    path = repo / rel
    text = path.read_text()
    assert stub in text
    fixture = (HOSTILE / f"{attack}.py").read_text()
    path.write_text(text.replace(stub, call) + "\n\n" + fixture)


def grade(repo: Path, *args: str, code: int = 0, env: dict | None = None) -> dict:
    out = repo / "results.json"
    cmd = [sys.executable, "-m", "autograder", "--exercise", "1.3", "--json", str(out),
           "--timeout", "30", *args]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NUMBA_ENABLE_CUDASIM": "1", **(env or {})}
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == code, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    data["stdout"] = proc.stdout
    return data


def survivors(marker: bytes = b"hostile-") -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if marker in Path("/proc", entry, "cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_earns_nothing(repo, attack):
    site_packages = [Path(p) for p in sys.path if p.endswith("site-packages")]
    try:
        plant(repo, attack)
        data = grade(repo, "--exercise", target(attack))
        if attack == "pth_file":  # the planted .pth must not change the next run either
            data = grade(repo)
    finally:
        for sp in site_packages:
            (sp / "zz_hostile_fixture.pth").unlink(missing_ok=True)
    assert data["score"] == 0 and data["max_score"] > 0, data["tests"]
    assert len(data["tests"]) >= 1
    assert (repo / "results.json").stat().st_size < 100_000
    forged = [t for t in data["stdout"].splitlines() if t.startswith("Total") and "999" in t]
    assert not forged, data["stdout"]
    assert not survivors(), "a process outlived the grader"
    if attack == "daemon":
        before = (repo / "results.json").read_text()
        time.sleep(4)
        assert (repo / "results.json").read_text() == before
        assert not survivors()


@pytest.mark.parametrize("attack", ["read_frame", "gc_scan", "traceback_frame"])
def test_frame_attacks_earn_points_without_the_guard(repo, attack):
    """The control: with the audit hook only logging, each of these earns full marks."""
    plant(repo, attack)
    fd, log = tempfile.mkstemp(prefix="guard-", suffix=".log")  # writable by the child's user
    os.close(fd)
    os.chmod(log, 0o666)
    try:
        data = grade(repo, env={"AUTOGRADER_GUARD_LOG": log})
        assert "indexing.py" in Path(log).read_text()  # what the guard would have refused
    finally:
        os.unlink(log)
    assert data["score"] == data["max_score"] == 2, data["tests"]


def test_markup_is_escaped_and_cut(repo):
    plant(repo, "markup")
    data = grade(repo)
    output = data["tests"][0]["output"]
    assert "[/][/]" in output and len(output) < 3000
    assert "[/][/]" in data["stdout"]  # printed as text, not parsed as markup
    assert not any(
        line.startswith("Total for your code: 999") for line in data["stdout"].splitlines()
    )


def test_root_conftest_changes_nothing(repo):
    (repo / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    rep = outcome.get_result()\n    rep.outcome = 'passed'\n"
    )
    assert grade(repo)["score"] == 0


@pytest.mark.parametrize(
    "rel, old, new",
    [
        ("autograder/tests/conftest.py", '"""', '"""\nimport os\nos.environ["MINITORCH_MODE"] = "reference"\n"""'),
        ("autograder/tests/ch1/test_indexing.py", '@graded("1.3", points=2)', '@graded("1.3", points=200)'),
        ("minitorch/exercises.py", 'os.environ.get("MINITORCH_MODE", "learner")', '"reference"'),
    ],
)  # fmt: skip
def test_edited_grader_files_are_refused(repo, rel, old, new):
    path = repo / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    data = grade(repo, code=2)
    assert data["score"] == 0


def test_planting_a_correct_answer_earns_full_marks(repo):
    """The control: the same planting with honest code scores, so the zeros above mean something."""
    path = repo / "minitorch/tensor/indexing.py"
    honest = "out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n        run *= n\n    return tuple(reversed(out))"
    path.write_text(path.read_text().replace(STUB, honest))
    data = grade(repo)
    assert data["score"] == data["max_score"] == 2
