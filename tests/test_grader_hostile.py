"""Hostile submissions (``tests/hostile/``) earn nothing they did not solve, under official grading.

Each fixture is planted in a copy of the repository as a learner would write it
and graded as Gradescope grades (``--official``: learner code as an unprivileged
user in a world of its own). The report must come from the grader, complete,
and no process may be left. Official grading needs root: without it these
tests are skipped (and ``test_official_grading_refuses_without_root`` shows
that the grader refuses rather than grade with less).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = Path(__file__).resolve().parent / "hostile"
ATTACKS = sorted(p.stem for p in HOSTILE.glob("*.py") if not p.stem.startswith("_"))
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="official grading needs root")

TARGETS = {  # exercise: (file, its stub's body, the call that replaces it)
    "1.3": ("minitorch/tensor/indexing.py",
            'raise NotImplementedError("Exercise 1.3: strides_from_shape")', "return attack(shape)"),
    "1.7": ("minitorch/tensor/views.py", 'raise NotImplementedError("Exercise 1.7: reshape_view")',
            "return attack(shape, strides, new_shape)"),
    "1.12": ("minitorch/tensor/loops.py",
             'raise NotImplementedError("Exercise 1.12: map_contiguous")', "return attack(fn, out, a)"),
    "3.2": ("minitorch/fast/kernels.py", 'raise NotImplementedError("Exercise 3.2: tensor_zip")',
            "return attack(fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides)"),
    "3.4": ("minitorch/fast/kernels.py", 'raise NotImplementedError("Exercise 3.4: matmul_simple")',
            "return attack(out, a, b)"),
    "3.6": ("minitorch/fast/kernels.py", 'raise NotImplementedError("Exercise 3.6: matmul")',
            "return attack(tile, out, a, b)"),
    "8.4": ("minitorch/memory/planner.py", 'raise NotImplementedError("Exercise 8.4: greedy_by_size")',
            "return attack(buffers, alignment)"),
}  # fmt: skip
PLANTED_WITH = {
    "1.12": "_slow_map.py",
    "8.4": "_quadratic_planner.py",
}  # what the fixtures build on


@pytest.fixture
def repo(tmp_path):
    for name in ["minitorch", "autograder", "solutions"]:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def setting(attack: str, name: str, default=None):
    found = re.search(rf"^{name} = (.+)$", (HOSTILE / f"{attack}.py").read_text(), re.M)
    return eval(found.group(1)) if found else default  # noqa: S307 - our own fixture files


def plant(repo: Path, attack: str) -> str:
    """The attack replaces the exercise's stub body; its module-level code runs at import."""
    exercise = setting(attack, "EXERCISE", "1.3")
    rel, stub, call = TARGETS[exercise]
    path = repo / rel
    text = path.read_text()
    assert stub in text
    fixture = (HOSTILE / f"{attack}.py").read_text()
    if exercise in PLANTED_WITH:
        fixture = (HOSTILE / PLANTED_WITH[exercise]).read_text() + "\n\n" + fixture
    path.write_text(text.replace(stub, call) + "\n\n" + fixture)
    return exercise


def grade(repo: Path, *args: str, code: int = 0, cwd: Path | None = None) -> dict:
    out = repo / "results.json"
    cmd = [sys.executable, "-m", "autograder", "--official", "--submission", str(repo),
           "--json", str(out), "--timeout", "30", *args]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run(cmd, cwd=cwd or repo, env=env, capture_output=True, text=True,
                          timeout=900)  # fmt: skip
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


def grading_user_processes() -> list[int]:
    import pwd

    try:
        uid = pwd.getpwnam("minitorch-grader").pw_uid
    except KeyError:
        return []
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _owner(p) == uid]


def _owner(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


@pytest.mark.parametrize("attack", ATTACKS)
def test_attack_earns_nothing(repo, attack):
    exercise = plant(repo, attack)
    if setting(attack, "CHAPTER"):
        data = grade(repo, "--chapter", exercise.split(".")[0], "--no-notebooks")
    else:
        data = grade(repo, "--exercise", exercise)
    mine = [t for t in data["tests"] if t["name"].split()[0] == exercise]
    if attack.startswith("bench_"):  # a slow but correct answer: its tests pass, its benchmarks not
        earned = {"test": 0, "benchmark": 0}
        for t in mine:
            earned[t["extra_data"]["kind"]] += t["score"]
        assert earned["benchmark"] == 0 and len(mine) > 1, mine
        assert earned["test"] == 0 if setting(attack, "VOIDS") else earned["test"] > 0, mine
    else:
        assert sum(t["score"] for t in mine) == 0 and mine, mine
    assert data["extra_data"].get("official") is True
    assert (repo / "results.json").stat().st_size < 400_000
    assert not [t for t in data["stdout"].splitlines() if t.startswith("Total") and "1000" in t]
    assert not survivors() and not grading_user_processes(), "a process outlived the grader"


def test_markup_is_escaped_and_cut(repo):
    plant(repo, "markup")
    data = grade(repo, "--exercise", "1.3")
    output = data["tests"][0]["output"]
    assert "[/][/]" in output and len(output) < 3000
    assert "[/][/]" in data["stdout"]  # printed as text, not parsed as markup
    assert not any(
        line.startswith("Total for your code: 999") for line in data["stdout"].splitlines()
    )


def test_links_into_the_graders_files_are_not_followed(repo):
    """A module of the submission that links to a reference, and one that links to the oracle:
    the parent (root) copies no link, so neither is there to read."""
    stub = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
    (repo / "minitorch/tensor/_answer.py").symlink_to(repo / "solutions/reference/ch1.py")
    (repo / "minitorch/tensor/_values.gz").symlink_to(repo / "autograder/oracle.json.gz")
    path = repo / "minitorch/tensor/indexing.py"
    path.write_text(path.read_text().replace(stub, "from ._answer import strides_from_shape as f\n"
                                                   "    return f(shape)"))  # fmt: skip
    data = grade(repo, "--exercise", "1.3")
    assert data["score"] == 0, data["tests"]
    problems = data["extra_data"]["problems"]
    assert "symbolic link" in problems["minitorch/tensor/_answer.py"]
    assert "symbolic link" in problems["minitorch/tensor/_values.gz"]


def test_a_slowed_learner_baseline_does_not_raise_a_figure(repo):
    """7.8's epilogue figure was fused against the learner's own jit without fusion: made slow,
    it raised the learner's speedup. The baseline now runs on the course's own code."""
    from tests.install_references import install

    sub = repo / "sub"
    install(sub)
    jit = sub / "minitorch/tracing/jit.py"
    jit.write_text(jit.read_text() + "\n\n" + (HOSTILE / "_slow_baseline.txt").read_text())
    data = grade(sub, "--exercise", "7.8")
    epilogue = next(t for t in data["tests"] if "epilogue" in t["name"])
    figure = epilogue["extra_data"]["figures"].get("speedup", 0)
    assert figure < 3, epilogue  # slowed, the old baseline made it 100 and more


def test_planting_a_correct_answer_earns_full_marks(repo):
    """The control: the same planting with honest code scores, so the zeros above mean something."""
    path = repo / "minitorch/tensor/indexing.py"
    honest = ("out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n"
              "        run *= n\n    return tuple(reversed(out))")  # fmt: skip
    path.write_text(
        path.read_text().replace(
            'raise NotImplementedError("Exercise 1.3: strides_from_shape")', honest
        )
    )
    data = grade(repo, "--exercise", "1.3")
    assert data["score"] == data["max_score"] == 2


@pytest.mark.parametrize(
    "rel, old, new",
    [
        ("autograder/tests/conftest.py", '"""', '"""\nimport os\nos.environ["MINITORCH_MODE"] = "reference"\n"""'),
        ("autograder/tests/ch1/test_indexing.py", '@graded("1.3", points=2)', '@graded("1.3", points=200)'),
        ("minitorch/exercises.py", 'os.environ.get("MINITORCH_MODE", "learner")', '"reference"'),
    ],
)  # fmt: skip
def test_edited_grader_files_are_refused_or_ignored(repo, rel, old, new):
    """The grader's own copy is checked against its hashes; the submission's copies of the
    grader's files are never used (only its minitorch/, with the grader's exercises.py)."""
    if rel.startswith("autograder/"):  # the grader's own copy: refused
        edit_at, graded, code = repo, repo, 2
    else:  # the submission's copy (a folder of its own): never used
        graded = edit_at = repo / "submission"
        shutil.copytree(repo / "minitorch", graded / "minitorch")
        code = 0
    path = edit_at / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    data = grade(graded, "--exercise", "1.3", code=code, cwd=repo)
    assert data["score"] == 0
