"""Lab grading: a crashing walk-through cell or a kernel-side daemon costs only what it breaks."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "solutions" / "notebooks"

GRADE = """
import json, sys
from pathlib import Path
from autograder import manifest, sandbox
from autograder.notebooks import grade_lab
sandbox.become_subreaper()
items = manifest.notebook_items(1)
res = grade_lab(items, manifest.notebook_path(1), Path(sys.argv[1]), "reference", timeout={timeout})
print(json.dumps({{n.split("::")[-1]: [r.score, r.item.points, r.message] for n, r in res.items()}}))
"""


def lab(tmp_path: Path, walk: str, timeout: float = 300) -> dict:
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
    out = subprocess.run([sys.executable, "-c", GRADE.format(timeout=timeout), str(sub)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_segfaulting_walkthrough_cell_costs_no_task(tmp_path):
    scores = lab(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert scores and all(s == p for s, p, _ in scores.values()), scores


def test_a_kernel_daemon_cannot_rewrite_scores(tmp_path):
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
