"""Lab notebooks: release them with nbgrader and grade them with nbgrader's autograde.

Each chapter's source notebook ``solutions/notebooks/chC_<name>.ipynb`` is one
nbgrader assignment. Grading copies the learner's notebook into a throw-away
course directory, runs ``autograde`` (which restores the locked test cells from
the source, so editing a test cannot earn points) and reads the scores from
nbgrader's gradebook. It runs as a child process (``python -m
autograder.notebooks``) so that a notebook that crashes or hangs costs only the
notebook's points.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from .manifest import ROOT, Item
from .runner import Result, child_env

CELL_TIMEOUT = 300  # nbgrader's default of 30 s is too short for Numba compiles
EXERCISES = ROOT / "exercises"


def _api(root: Path):
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = "minitorch"
    c.Exchange.root = str(root / "exchange")
    c.Execute.timeout = CELL_TIMEOUT
    c.ExecutePreprocessor.timeout = CELL_TIMEOUT
    return NbGraderAPI(config=c)


def _course(source: Path) -> tuple[Path, object]:
    root = Path(tempfile.mkdtemp(prefix="nbgrader-"))
    (root / "source" / source.stem).mkdir(parents=True)
    shutil.copy(source, root / "source" / source.stem / source.name)
    # nbgrader shells out to `alembic`, which lives next to this Python.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    api = _api(root)
    result = api.generate_assignment(source.stem, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"nbgrader could not generate {source.name}:\n{result['log'][-2000:]}")
    return root, api


def release(source: Path, dest: Path) -> Path:
    """Write the learner's version of ``source`` (solutions stripped) to ``dest/``."""
    root, _ = _course(source)
    try:
        released = root / "release" / source.stem / source.name
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(released, dest / source.name)
        return dest / source.name
    finally:
        shutil.rmtree(root, ignore_errors=True)


def autograde(source: Path, submission: Path) -> dict[str, tuple[float, float]]:
    """Scores ``{grade_id: (score, max_score)}`` of ``submission`` against ``source``."""
    from nbgrader.api import Gradebook

    warnings.filterwarnings("ignore")
    root, api = _course(source)
    try:
        target = root / "submitted" / "learner" / source.stem
        target.mkdir(parents=True)
        shutil.copy(submission, target / source.name)
        result = api.autograde(source.stem, "learner", force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader autograde failed:\n{result['log'][-2000:]}")
        with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
            nb = gb.find_submission_notebook(source.stem, source.stem, "learner")
            return {g.name: (float(g.score), float(g.max_score)) for g in nb.grades}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def grade_lab(
    items: list[Item], source: Path, submission: Path, mode: str, timeout: float = 600
) -> dict[str, Result]:
    """Grade one lab notebook in a child process; every item gets a result."""
    if not submission.exists():
        return {
            i.nodeid: Result(
                i, "not run", message=f"not run: {submission.relative_to(ROOT)} is missing"
            )
            for i in items
        }
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "scores.json")
        cmd = [sys.executable, "-m", "autograder.notebooks", str(source), str(submission), str(out)]
        env = child_env(mode, focus=None if mode == "reference" else str(items[0].chapter))
        env["MINITORCH_MODE_FIXED"] = "1"
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip
            problem = proc.stderr.strip().splitlines()[-3:] if proc.returncode else None
        except subprocess.TimeoutExpired:
            problem = [f"the notebook ran past {timeout:.0f} s"]
        scores = json.loads(out.read_text()) if out.exists() and not problem else {}
    results = {}
    for item in items:
        gid = item.nodeid.split("::")[-1]
        if problem:
            results[item.nodeid] = Result(item, "not run", message="not run: " + " ".join(problem))
        elif gid not in scores:
            results[item.nodeid] = Result(
                item, "failed", message="this task's test cell was not graded"
            )
        else:
            score, _ = scores[gid]
            status = "passed" if score >= item.points else "failed"
            msg = (
                "" if status == "passed" else f"test cell {gid} failed: run the notebook to see why"
            )
            results[item.nodeid] = Result(
                item, status, score, msg, where=str(submission.relative_to(ROOT))
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description="autograde one notebook (used by the grader)")
    parser.add_argument("source")
    parser.add_argument("submission")
    parser.add_argument("out")
    args = parser.parse_args()
    scores = autograde(Path(args.source), Path(args.submission))
    Path(args.out).write_text(json.dumps(scores))


if __name__ == "__main__":
    main()
