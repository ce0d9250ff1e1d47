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
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = Path(__file__).resolve().parent / "hostile"
ATTACKS = sorted(p.stem for p in HOSTILE.glob("*.py") if not p.stem.startswith("_"))
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="official grading needs root")

TARGETS = {  # exercise: (file, its stub's body, the call that replaces it)
    "1.3": ("minitorch/tensor/indexing.py",
            'raise NotImplementedError("Exercise 1.3: strides_from_shape")', "return attack(shape)"),
    "1.6": ("minitorch/tensor/views.py", 'raise NotImplementedError("Exercise 1.6: permute_view")',
            "return attack(shape, strides, order)"),
    "1.7": ("minitorch/tensor/views.py", 'raise NotImplementedError("Exercise 1.7: reshape_view")',
            "return attack(shape, strides, new_shape)"),
    "2.8": ("minitorch/autograd/backprop.py",
            'raise NotImplementedError("Exercise 2.8: backpropagate")', "return attack(root, grad)"),
    "8.2": ("minitorch/memory/planner.py", 'raise NotImplementedError("Exercise 8.2: lower_bound")',
            "return attack(buffers, alignment)"),
    "8.4": ("minitorch/memory/planner.py",
            'raise NotImplementedError("Exercise 8.4: greedy_by_size")', "return attack(buffers, alignment)"),
    "1.12": ("minitorch/tensor/loops.py",
             'raise NotImplementedError("Exercise 1.12: map_contiguous")', "return attack(fn, out, a)"),
    "3.2": ("minitorch/fast/kernels.py", 'raise NotImplementedError("Exercise 3.2: tensor_zip")',
            "return attack(fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides)"),
    "3.4": ("minitorch/fast/kernels.py", 'raise NotImplementedError("Exercise 3.4: matmul_simple")',
            "return attack(out, a, b)"),
    "3.6": ("minitorch/fast/kernels.py", 'raise NotImplementedError("Exercise 3.6: matmul")',
            "return attack(tile, out, a, b)"),
}  # fmt: skip
PLANTED_WITH = {
    "1.12": "_slow_map.py",
    "8.4": "_quadratic_planner.py",
    "2.8": "_plain_backprop.py",
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


def start(repo: Path, *args: str, cwd: Path | None = None) -> subprocess.Popen:
    """An official grading of ``repo``, running."""
    cmd = [sys.executable, "-m", "autograder", "--official", "--submission", str(repo),
           "--json", str(repo / "results.json"), "--timeout", "30", *args]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NUMBA_ENABLE_CUDASIM": "1"}
    return subprocess.Popen(cmd, cwd=cwd or repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def finished(repo: Path, proc: subprocess.Popen, code: int = 0) -> dict:
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == code, stdout[-3000:] + stderr[-3000:]
    data = json.loads((repo / "results.json").read_text())
    data["stdout"] = stdout
    return data


def grade(repo: Path, *args: str, code: int = 0, cwd: Path | None = None) -> dict:
    return finished(repo, start(repo, *args, cwd=cwd), code)


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


def grading_uids() -> set[int]:
    """The pool's users (minitorch-grader-N)."""
    import pwd

    return {u.pw_uid for u in pwd.getpwall() if u.pw_name.startswith("minitorch-grader-")}


def _held_uids() -> set[int]:
    """The pool's users an official run holds now (its lock file is locked)."""
    import fcntl
    import pwd

    from autograder import config

    held = set()
    for u in pwd.getpwall():
        if u.pw_name.startswith(f"{config.GRADER_USER}-"):
            try:
                fd = os.open(f"{config.GRADER_LOCKS}/{u.pw_name}.lock", os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: never blocks a run
            except BlockingIOError:
                held.add(u.pw_uid)
            finally:
                os.close(fd)
    return held


def leftovers() -> list[int]:
    """Processes of pool users no run holds: what a finished grading left behind (a user
    another grading on the machine holds now runs that grading's children)."""
    held = _held_uids()
    return [p for p in grading_user_processes() if _owner(str(p)) not in held]


def grading_user_processes() -> list[int]:
    uids = grading_uids()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _owner(p) in uids]


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
    assert not survivors() and not leftovers(), "a process outlived the grader"


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


HONEST = ("out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n"
          "        run *= n\n    return tuple(reversed(out))")  # fmt: skip


def plant_honest(repo: Path, first: str = "") -> None:
    """An honest 1.3; ``first``: what its body does before (a statement)."""
    path = repo / "minitorch/tensor/indexing.py"
    stub = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
    path.write_text(path.read_text().replace(stub, f"{first}\n    {HONEST}" if first else HONEST))


def test_an_exercise_sharing_the_graded_answers_helper_runs_your_code_and_says_so(repo):
    """8.4's and 8.5's references share ``_place``: withheld with 8.4's answer, it takes 8.5's
    reference with it, and the report says so. 8.4's tests never run 8.5 (``plan_memory``
    computes first-fit's comparison only when read), so 8.4 right and 8.5 not done still
    earns all of 8.4."""
    import ast

    from tests.install_references import install

    sub = repo / "sub"
    install(sub)
    path = sub / "minitorch/memory/planner.py"
    text = path.read_text()
    fn = next(n for n in ast.parse(text).body if getattr(n, "name", "") == "first_fit")
    lines = text.splitlines(keepends=True)
    lines[fn.body[0].end_lineno : fn.end_lineno] = [
        '    raise NotImplementedError("Exercise 8.5")\n'
    ]
    path.write_text("".join(lines))
    data = grade(sub, "--exercise", "8.4")
    assert data["extra_data"]["run_as_yours"] == {"8.4": ["8.5"]}
    assert "While 8.4 is graded, 8.5 run(s) your own code" in data["stdout"]
    passed = [t["name"] for t in data["tests"] if t["status"] == "passed"]
    assert len(passed) == 5 and data["score"] == data["max_score"], passed


def test_planting_a_correct_answer_earns_full_marks(repo):
    """The control: the same planting with honest code scores, so the zeros above mean something."""
    plant_honest(repo)
    data = grade(repo, "--exercise", "1.3")
    assert data["score"] == data["max_score"] == 2


def test_two_runs_at_once_each_grade_their_own_submission(repo, tmp_path):
    """Two official gradings at once once shared the grading user: one read the other's
    solved 1.3 through /proc and killed its test process (49/49 fell to 5/49). Graded at
    the same time, a hostile submission (``_peer_run.py``) earns nothing and the honest one,
    which takes its time, earns full marks. Not under the official lock: this is the test
    that two runs at once are safe."""
    peer = tmp_path / "peer"
    shutil.copytree(repo, peer)
    plant_honest(peer, "import time\n    time.sleep(0.05)")  # 100 calls: 5 s, a peer to find
    path = repo / "minitorch/tensor/indexing.py"
    stub = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
    path.write_text(path.read_text().replace(stub, "return attack(shape)") + "\n\n"
                    + (HOSTILE / "_peer_run.py").read_text())  # fmt: skip
    graders, both, stop = set(), [], threading.Event()

    def watch():  # the users of both runs' children while both run one (another run's aside)
        while not stop.is_set():
            users = {}
            for pid in grading_user_processes():
                if _parent(pid) in graders:
                    users[_parent(pid)] = _owner(str(pid))
            if len(users) == 2:
                both.append(set(users.values()))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    try:
        runs = {"hostile": (repo, start(repo, "--exercise", "1.3")),
                "honest": (peer, start(peer, "--exercise", "1.3"))}  # fmt: skip
        graders.update(proc.pid for _, proc in runs.values())
        watcher.start()
        graded = {name: finished(*run) for name, run in runs.items()}
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
    assert both, "the two runs' children never ran at the same time"
    assert all(len(users) == 2 for users in both), "two runs at once shared a grading user"
    hostile, honest = graded["hostile"], graded["honest"]
    assert hostile["score"] == 0, hostile["tests"]
    assert honest["score"] == honest["max_score"] == 2, honest["tests"]
    left = [p for p in leftovers() if _owner(str(p)) in set.union(*both)]
    assert not left, "a process outlived the grader"


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


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
