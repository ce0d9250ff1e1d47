"""Lab notebooks: release them with nbgrader and grade them with nbgrader's autograde.

Each chapter's source notebook ``solutions/notebooks/chC_<name>.ipynb`` is one
nbgrader assignment. Grading copies the learner's notebook into a throw-away
course directory, runs ``autograde`` (which restores the locked test cells from
the source, so editing a test cannot earn points) and reads the scores from
nbgrader's gradebook. It runs as a child process (``python -m
autograder.notebooks``) that reports over a pipe the grader opened; when it
ends, every process it left (the kernel, a daemon) is killed. If the whole
notebook crashes or hangs, each task is graded again alone in its own kernel,
so one cell's failure costs only its own task. The course's copy of the
source has its test cells rewritten to print what they compare, which the
parent checks against the reference notebook's (:mod:`autograder.labcheck`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from . import labcheck, sandbox
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


def _graded_tests(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"
            and c.get("metadata", {}).get("nbgrader", {}).get("grade")
            and not c["metadata"]["nbgrader"].get("solution")]  # fmt: skip


def _instrumented(nb: dict) -> dict:
    """``nb`` with its graded test cells reporting their comparisons (:mod:`.labcheck`)."""
    for cell in _graded_tests(nb):
        text = cell["source"]
        cell["source"] = labcheck.instrument("".join(text) if isinstance(text, list) else text)
    return nb


def _course(source: Path, instrument: bool = False) -> tuple[Path, object]:
    root = Path(tempfile.mkdtemp(prefix="nbgrader-"))
    (root / "source" / source.stem).mkdir(parents=True)
    copy = root / "source" / source.stem / source.name
    if instrument:  # the grader's copy only: what nbgrader restores into the learner's
        copy.write_text(json.dumps(_instrumented(json.loads(source.read_text(encoding="utf-8")))))
    else:
        shutil.copy(source, copy)
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


def _errors(notebook: Path) -> tuple[dict[str, str], dict[str, list]]:
    """The error each graded cell of an executed notebook printed, and the comparison
    records of each graded test cell, by grade_id."""
    out, seen = {}, {}
    try:
        nb = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return out, seen
    for cell in nb.get("cells", []):
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for o in cell.get("outputs", []):
            if gid and o.get("output_type") == "error":
                out[gid] = f"{o.get('ename', 'Error')}: {o.get('evalue', '')}".strip()[:1500]
            elif gid and o.get("name") == "stderr" and gid not in out:  # nbgrader: no credit
                text = "".join(o.get("text", "")).strip().splitlines()
                said = next((t for t in text if "Warning" in t), text[0] if text else "")
                out[gid] = f"the cell wrote to stderr, which nbgrader counts as a failure: {said}"
    for cell in _graded_tests(nb):
        seen[cell["metadata"]["nbgrader"].get("grade_id")] = labcheck.records(cell)
    return out, seen


def autograde(source: Path, submission: Path) -> dict[str, tuple[float, float, str, list]]:
    """``{grade_id: (score, max_score, error, comparison records)}`` of ``submission``."""
    from nbgrader.api import Gradebook

    warnings.filterwarnings("ignore")
    root, api = _course(source, instrument=True)
    try:
        target = root / "submitted" / "learner" / source.stem
        target.mkdir(parents=True)
        shutil.copy(submission, target / source.name)
        result = api.autograde(source.stem, "learner", force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader autograde failed:\n{result['log'][-2000:]}")
        errors, seen = _errors(root / "autograded" / "learner" / source.stem / source.name)
        with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
            nb = gb.find_submission_notebook(source.stem, source.stem, "learner")
            return {
                g.name: (float(g.score), float(g.max_score), errors.get(g.name, ""),
                         seen.get(g.name, []))
                for g in nb.grades
            }  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


def task_notebook(source: Path, submission: Path, grade_id: str) -> dict:
    """One task alone: the source's locked setup cells, the learner's answer cells up to the
    task, and the task's test cell from the source. Walk-through cells and other tasks'
    tests are left out, so their crash or hang cannot cost this task."""
    src = json.loads(source.read_text(encoding="utf-8"))
    sub = json.loads(submission.read_text(encoding="utf-8"))
    answers = {}
    for cell in sub.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("solution") and meta.get("grade_id"):
            answers[meta["grade_id"]] = cell
    cells = []
    for cell in src["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta:
            continue
        if meta.get("solution"):
            if meta.get("grade_id") in answers:
                cells.append(answers[meta["grade_id"]])
        elif meta.get("grade"):
            if meta.get("grade_id") == grade_id:
                cells.append(cell)
                break
        elif meta.get("locked"):
            cells.append(cell)
    for cell in cells:
        cell["outputs"], cell["execution_count"] = [], None
    return _instrumented({**src, "cells": cells})


def run_task(source: Path, submission: Path, grade_id: str) -> tuple[bool, str, list]:
    """Execute one task's notebook in its own kernel: (passed, error message, records)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    warnings.filterwarnings("ignore")
    nb = nbformat.reads(json.dumps(task_notebook(source, submission, grade_id)), as_version=4)
    if not nb.cells or nb.cells[-1].metadata.get("nbgrader", {}).get("grade_id") != grade_id:
        return False, f"test cell {grade_id} not found", []
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=False)
    try:
        client.execute(cwd=str(source.parent))
        return True, "", labcheck.records(nb.cells[-1])
    except CellExecutionError as e:
        lines = [t for t in str(e).splitlines() if t.strip()]
        return False, (lines[-1] if lines else "the cell raised an error")[:1500], []


def _child(cmd: list[str], env: dict, timeout: float) -> tuple[str | None, str]:
    """Run a grading child with a results pipe; (its JSON line or None, why not)."""
    read_end, write_end = os.pipe()
    tmp = tempfile.mkdtemp(prefix="lab-")  # the child's temp files: removed here, killed or not
    env = {**env, "TMPDIR": tmp}
    try:
        proc = subprocess.Popen([*cmd, "--fd", str(write_end)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, pass_fds=(write_end,),
                                preexec_fn=lambda: sandbox.limit_resources(switch_user=False))  # fmt: skip
    finally:
        os.close(write_end)
    problem = ""
    try:
        _, err = proc.communicate(timeout=timeout)
        if proc.returncode:
            tail = err.decode(errors="replace").strip().splitlines()[-2:]
            problem = " ".join(tail)[-500:] or f"exit code {proc.returncode}"
    except subprocess.TimeoutExpired:
        problem = f"ran past {timeout:.0f} s"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        sandbox.kill_descendants()  # the kernel and anything it left running
        sandbox.remove_tree(Path(tmp))
    with os.fdopen(read_end, "rb") as f:
        data = f.read(16 << 20)
    return (data.decode(errors="replace") if data and not problem else None), problem


def grade_lab(
    items: list[Item], source: Path, submission: Path, mode: str, timeout: float = 600,
    task_timeout: float = 240, oracle: dict | None = None, record: dict | None = None,
    package: Path = ROOT,
) -> dict[str, Result]:  # fmt: skip
    """Grade one lab notebook; every item gets a result.

    The whole notebook runs in nbgrader first. If that run crashes or hangs,
    each task runs again alone (:func:`task_notebook`) in its own child and kernel.
    A task passes when its test cell passed and, where ``oracle`` holds the
    reference notebook's comparison records for it, the cell's records agree
    (:func:`labcheck.judge`). ``record`` receives every task's records.
    ``package``: the folder whose ``minitorch/`` the notebook runs on.
    """
    if not submission.exists():
        return {i.nodeid: Result(i, "not run", message=f"not run: {submission} is missing")
                for i in items}  # fmt: skip
    env = child_env(mode, focus=None if mode == "reference" else str(items[0].chapter))
    env["MINITORCH_MODE_FIXED"] = "1"
    # The kernel imports the submission's minitorch (a grading tree first on its path),
    # not the one the grader's own environment has installed.
    tree = sandbox.build_tree(package, mode, None, set())
    env["PYTHONPATH"] = str(tree)
    base = [sys.executable, "-m", "autograder.notebooks", str(source), str(submission)]
    try:
        raw, problem = _child(base, env, timeout)
        scores = _parse_scores(raw)
        if scores is None:
            scores = {}
            for item in items:
                gid = item.nodeid.split("::")[-1]
                raw_task, why = _child([*base, "--task", gid], env, task_timeout)
                one = _parse_scores(raw_task) or {}
                if gid in one:
                    scores[gid] = (item.points if one[gid][0] else 0.0, item.points, *one[gid][2:])
                else:
                    scores[gid] = (0.0, item.points, f"this task alone: {why or 'no result'}", [])
    finally:
        sandbox.remove_tree(tree)
    where = (
        str(submission.relative_to(ROOT)) if submission.is_relative_to(ROOT) else submission.name
    )
    results = {}
    for item in items:
        gid = item.nodeid.split("::")[-1]
        if gid not in scores:
            results[item.nodeid] = Result(
                item, "failed", message="this task's test cell was not graded"
            )
            continue
        score, _, error, seen = scores[gid]
        score = min(max(score, 0.0), item.points)
        if record is not None:
            record[item.nodeid] = seen
        want = (oracle or {}).get(item.nodeid)
        if score > 0 and want is not None:
            agree, why = labcheck.judge(want, seen)
            if not agree:
                score, error = 0.0, why
        status = "passed" if score >= item.points else "failed"
        if error.startswith("NotImplementedError") and len(error) < 40:
            error = "not implemented yet (the answer cell still raises NotImplementedError)"
        msg = (
            ""
            if status == "passed"
            else f"test cell {gid} failed: {error or 'run the notebook to see why'}"
        )
        results[item.nodeid] = Result(item, status, score, msg, where=where)
    return results


def _parse_scores(raw: str | None) -> dict | None:
    """``{grade_id: (score, max, error, records)}`` from a child's line, or None."""
    try:
        data = json.loads(raw) if raw else None
        return {str(k): (float(v[0]), float(v[1]), str(v[2])[:1500], list(v[3]))
                for k, v in data.items()}  # fmt: skip
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description="autograde one notebook (used by the grader)")
    parser.add_argument("source")
    parser.add_argument("submission")
    parser.add_argument("--task", help="run only this graded task, in its own kernel")
    parser.add_argument("--fd", type=int, required=True, help="the results pipe")
    args = parser.parse_args()
    out = os.fdopen(args.fd, "w")  # kernels are started with close_fds: they never see it
    if args.task:
        ok, error, seen = run_task(Path(args.source), Path(args.submission), args.task)
        scores = {args.task: (1.0 if ok else 0.0, 1.0, error, seen)}
    else:
        scores = autograde(Path(args.source), Path(args.submission))
    out.write(json.dumps(scores))
    out.close()


if __name__ == "__main__":
    main()
