"""Lab grading: a crashing walk-through cell or a daemon a cell leaves costs only what it breaks,
and an answer that fools the test cell in its own process earns nothing (`autograder/grader/labs.py`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "solutions" / "notebooks"

SETUP = """
import json, os, sys, tempfile
from pathlib import Path
from autograder.grader import labs, manifest, oracle, sandbox
from autograder.grader.children import Launcher
from autograder.grader.runner import Grading
sandbox.become_subreaper()
work = Path(tempfile.mkdtemp(prefix="lab-test-"))
os.chmod(work, 0o700)
grading = Grading(Launcher(official=False, work=work), "{mode}", manifest.ROOT / "minitorch")
"""
GRADE = (
    SETUP
    + """
items = manifest.notebook_items(1)
res = labs.grade_lab(items, manifest.notebook_path(1), Path(sys.argv[1]), grading)
grading.close()
sandbox.remove_tree(work)
print(json.dumps({{n.split("::")[-1]: [r.score, r.item.points, r.message] for n, r in res.items()}}))
"""
)


def lab(tmp_path: Path, walk: str) -> dict:
    """Grade the reference answers of lab 1 with ``walk`` as the first walk-through cell."""
    source = sorted(SOURCE.glob("ch1_*.ipynb"))[0]
    nb = json.loads(source.read_text())
    cell = next(
        c
        for c in nb["cells"]
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "").startswith("walk_")
    )
    cell["source"] = walk
    sub = tmp_path / source.name
    sub.write_text(json.dumps(nb))
    env = {**os.environ, "MINITORCH_MODE": "reference", "NUMBA_ENABLE_CUDASIM": "1"}
    out = subprocess.run([sys.executable, "-c", GRADE.format(mode="reference"), str(sub)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_segfaulting_walkthrough_cell_costs_no_task(tmp_path):
    scores = lab(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert scores and all(s == p for s, p, _ in scores.values()), scores


def test_a_daemon_a_cell_leaves_cannot_rewrite_scores(tmp_path):
    daemon = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)  # h11b-lab-daemon'])\n"
        "    os._exit(0)\n"
    )
    scores = lab(tmp_path, daemon)
    assert all(s == p for s, p, _ in scores.values()), scores
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"h11b-lab-daemon" in Path(f"/proc/{pid}/cmdline").read_bytes():
                left.append(pid)
        except OSError:
            pass
    assert not left


ATTACK = (
    SETUP
    + """
recorded, why = oracle.load()
assert recorded is not None, why
recorded = recorded if {judged} else None
ch = {chapter}
items = manifest.notebook_items(ch)
res = labs.grade_lab(items, manifest.notebook_path(ch), Path(sys.argv[1]), grading, oracle=recorded)
grading.close()
sandbox.remove_tree(work)
print(json.dumps({{n.split("::")[-1]: [r.score, r.item.points, r.message] for n, r in res.items()}}))
"""
)


def attack(tmp_path: Path, chapter: int, answers: dict[str, str], judged: bool = True) -> dict:
    """Grade the released lab ``chapter`` with some answer cells replaced, against the
    oracle (``judged``) or by nbgrader alone."""
    source = next((ROOT / "exercises").glob(f"ch{chapter}_*.ipynb"))
    nb = json.loads(source.read_text())
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell["source"] = answers.pop(gid)
    assert not answers, f"no answer cells {list(answers)}"
    sub = tmp_path / source.name
    sub.write_text(json.dumps(nb))
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    script = ATTACK.format(mode="isolated", chapter=chapter, judged=judged)
    out = subprocess.run([sys.executable, "-c", script, str(sub)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


ALWAYS_EQUAL = """
class Same:
    def __eq__(self, other):
        return True

def peak_memory(counters):
    return Same(), Same()
"""


@pytest.mark.parametrize("judged", [True, False])
def test_an_answer_that_equals_anything_earns_nothing(tmp_path, judged):
    """The test cell's ``==`` passes in the learner's process (the control: without the
    reference notebook's records it earns the points); the records show a ``Same`` where
    the reference compared 8000."""
    scores = attack(tmp_path, 10, {"peak_memory": ALWAYS_EQUAL}, judged)
    score, points, why = scores["peak_memory_tests"]
    if not judged:
        assert score == points, scores
    else:
        assert score == 0 and "the reference notebook's" in why, scores


PATCHED_ALLCLOSE = """
np.allclose = lambda *args, **kwargs: True

def scale_add(out, a, b, alpha):
    for i in prange(out.shape[0]):
        out[i] = 0.0
"""


@pytest.mark.parametrize("judged", [True, False])
def test_an_answer_that_rebinds_allclose_earns_nothing(tmp_path, judged):
    scores = attack(tmp_path, 3, {"scale_add": PATCHED_ALLCLOSE}, judged)
    score, points, why = scores["scale_add_tests"]
    if not judged:
        assert score == points, scores
    else:
        assert score == 0 and "the reference notebook's" in why, scores
