"""Lab notebooks, the parent's side: what to run, and whether each task passed.

Each chapter's source notebook ``solutions/notebooks/chC_<name>.ipynb`` holds
the tasks, their points and the reference answers (released to learners
without the answers by ``make release``). To grade a learner's notebook the
parent builds the notebook to run itself (:func:`prepare`): the learner's
answer cells and extra cells, with every locked and test cell taken from the
source, so an edited test cell changes nothing. The graded test cells are
rewritten to report their comparisons (:func:`instrument`,
``autograder/labkernel.py``). A child runs it cell by cell
(``autograder/labrun.py``); if that child crashes or hangs, each task runs
again alone (:func:`task_cells`: the locked setup cells, the answers up to the
task, its test cell), so one cell's failure costs only its own task; a notebook
that hung while importing ``minitorch`` is not run again.

A task passes as nbgrader would pass it (its test cell raised nothing and
wrote nothing to stderr) and, when the oracle is loaded, only when the cell's
records agree with the reference notebook's (:func:`judge`) and those hold a
value (:func:`valued`): an answer whose ``==`` is always true, a rebound
``np.allclose`` or a forged report of the cell passes in the learner's process
but not here. The source notebook never enters a grading tree.
"""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import numpy as np

from .. import config
from ..labkernel import CALLS, MARK  # noqa: F401 - MARK: what labrun reads
from . import sandbox
from .children import exit_reason
from .manifest import Item
from .protocol import Forged, Result
from .runner import Reader

# --- what runs: the grader's copy of the notebook ---------------------------------------


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def is_test(cell: dict) -> bool:
    m = _meta(cell)
    return cell.get("cell_type") == "code" and bool(m.get("grade")) and not m.get("solution")


class _Rewrite(ast.NodeTransformer):
    def __init__(self):
        self.in_assert = False

    def visit_Assert(self, node):
        self.in_assert = True
        node.test = self.visit(node.test)
        self.in_assert = False
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if not self.in_assert or len(node.ops) != 1:
            return node
        op = type(node.ops[0]).__name__
        return ast.Call(ast.Name("_lc_cmp", ast.Load()),
                        [ast.Constant(op), node.left, node.comparators[0]], [])  # fmt: skip

    def visit_Call(self, node):
        self.generic_visit(node)
        name = ast.unparse(node.func).replace("numpy.", "np.")
        if name not in CALLS:
            return node
        return ast.Call(ast.Name("_lc_call", ast.Load()),
                        [ast.Constant(name), node.func, *node.args], node.keywords)  # fmt: skip


def instrument(source: str) -> str:
    """``source`` with its comparisons reporting themselves (``autograder/labkernel.py``)."""
    try:
        tree = ast.fix_missing_locations(_Rewrite().visit(ast.parse(source)))
    except SyntaxError:  # IPython syntax (a magic): graded by its outcome alone
        return source
    head = "from autograder.labkernel import cmp as _lc_cmp, call as _lc_call\n"
    return head + ast.unparse(tree) + "\n"


def _cell(cell: dict, grade_id: str | None = None) -> dict:
    text = _text(cell)
    return {"source": instrument(text) if is_test(cell) else text, "grade_id": grade_id}


def prepare(source: dict, learner: dict) -> list[dict]:
    """The code cells to run: the learner's notebook in its own order, every locked and
    test cell replaced by the source's, and any the learner deleted put back at the end."""
    course = {_meta(c).get("grade_id"): c for c in source["cells"]
              if _meta(c).get("grade_id") and c.get("cell_type") == "code"}  # fmt: skip
    cells, seen = [], set()
    for cell in learner.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        gid = _meta(cell).get("grade_id")
        if gid in course and not _meta(course[gid]).get("solution"):
            cells.append(_cell(course[gid], gid))
            seen.add(gid)
        elif gid in course:
            cells.append({"source": _text(cell), "grade_id": gid})
            seen.add(gid)
        elif not gid:  # the learner's own scratch cell
            cells.append({"source": _text(cell), "grade_id": None})
    cells += [
        _cell(c, gid)
        for gid, c in course.items()
        if gid not in seen and not _meta(c).get("solution")
    ]
    return cells


def task_cells(source: dict, learner: dict, grade_id: str, skip=frozenset()) -> list[dict]:
    """One task alone: the source's cells before the task's test cell (its locked and
    walk-through cells, the learner's answers), then that test cell. Other tasks' tests and
    the cells in ``skip`` (the one that crashed or hung the whole notebook) are left out,
    so they cannot cost this task."""
    answers = {_meta(c).get("grade_id"): c for c in learner.get("cells", [])
               if isinstance(c, dict) and c.get("cell_type") == "code" and _meta(c).get("solution")}  # fmt: skip
    cells = []
    for cell in source["cells"]:
        gid = _meta(cell).get("grade_id")
        if cell.get("cell_type") != "code" or not gid or (gid in skip and gid != grade_id):
            continue
        if _meta(cell).get("solution"):
            if gid in answers:
                cells.append({"source": _text(answers[gid]), "grade_id": gid})
        elif is_test(cell):
            if gid == grade_id:
                cells.append(_cell(cell, grade_id))
                break
        else:
            cells.append(_cell(cell, gid))
    return cells


# --- running it ----------------------------------------------------------------------


def _run(cells: list[dict], grading, chapter: int, timeout: float) -> tuple[dict, str]:
    """Run ``cells`` in one child: ``{index: ran record}``, and why it stopped early ("")."""
    g = grading
    withheld = sandbox.Withheld(chapters=frozenset({chapter}))
    tree = g.tree(withheld) if g.launcher.official else g.tree()
    where = (tree if g.launcher.official else g.launcher.work) / f"lab-{time.monotonic_ns()}.json"
    where.write_text(json.dumps({"cells": cells}))
    where.chmod(0o644)
    path = f"/grading/{where.name}" if g.launcher.official else str(where)
    focus = str(chapter) if g.mode == "isolated" else None
    child = g.launcher.start({"kind": "lab", "notebook": path, "mode": g.mode, "focus": focus},
                             tree, g.mode, focus)  # fmt: skip
    ran, why = {}, ""
    if isinstance(child, str):
        why = child.splitlines()[0] if child else "the notebook could not start"
        if "did not finish" in why:  # local grading: its server's import hung
            g.import_hang = why
        return ran, why
    reader = Reader(child, set())
    start = cell_start = time.monotonic()
    current = -1
    try:
        while True:
            ev = reader.next(0.1)
            index = ev.get("index") if ev is not None else None
            if type(index) is not int or not 0 <= index < len(cells):
                index = None  # only the notebook's own cells are kept (memory bounded)
            if ev is not None and index is not None:
                if ev["event"] == "cell" and index > current:  # a cell's limit starts once
                    current, cell_start, reader.volume = index, time.monotonic(), 0
                elif ev["event"] == "ran":  # what _outcome reads, cut as the child cuts it
                    records = ev.get("records") if cells[index]["grade_id"] else None
                    ran[index] = {"error": str(ev.get("error") or "")[:1500],
                                  "stderr": str(ev.get("stderr") or "")[:500],
                                  "records": records[: config.LAB_RECORDS]
                                  if isinstance(records, list) else []}  # fmt: skip
            elif ev is None and reader.eof and child.exit_code() is not None:
                if len(ran) < len(cells):
                    why = exit_reason(child.exit_code())
                break
            # Checked after every record too: a cell that keeps sending is stopped in time.
            now = time.monotonic()
            if current < 0 and now - start > g.test_timeout:  # minitorch's import, as in tests
                why = g.import_hang = (f"importing minitorch did not finish within "
                                       f"{g.test_timeout:.0f} s (a loop or a wait at import time?)")  # fmt: skip
                break
            if now - cell_start > config.CELL_TIMEOUT or now - start > timeout:
                why = f"a cell ran past {min(config.CELL_TIMEOUT, timeout):.0f} s"
                break
    except Forged as e:
        ran, why = {}, f"the notebook's results pipe received {e}"
    finally:
        g.launcher.finish(child)
        g.drop(tree)
        where.unlink(missing_ok=True)
    return ran, why


def _outcome(rec: dict | None) -> tuple[bool, str, list]:
    """(passed as nbgrader would pass it, why not, the cell's comparison records)."""
    if rec is None:
        return False, "this task's test cell did not run", []
    records = rec.get("records") if isinstance(rec.get("records"), list) else []
    if rec.get("error"):
        return False, str(rec["error"])[:1500], records
    if rec.get("stderr"):
        return False, ("the cell wrote to stderr, which nbgrader counts as a failure: "
                       f"{str(rec['stderr']).splitlines()[0][:300]}"), records  # fmt: skip
    return True, "", records


def grade_lab(items: list[Item], source: Path, submission: Path, grading,
              oracle: dict | None = None, record: dict | None = None) -> dict[str, Result]:  # fmt: skip
    """Grade one lab notebook; every item gets a result. ``record`` receives every task's
    comparison records (``make oracle``)."""
    if not submission.is_file():
        return {i.nodeid: Result(i, "not run", message=f"not run: exercises/{submission.name} is missing")
                for i in items}  # fmt: skip
    try:
        if submission.stat().st_size > config.MAX_NOTEBOOK_BYTES:
            raise ValueError(f"larger than {config.MAX_NOTEBOOK_BYTES >> 20} MiB")
        learner = json.loads(submission.read_text(encoding="utf-8"))
        if not isinstance(learner, dict):
            raise ValueError("not a notebook")
    except (OSError, ValueError) as e:
        return {i.nodeid: Result(i, "failed", message=f"exercises/{submission.name} cannot be read: {e}")
                for i in items}  # fmt: skip
    src = json.loads(source.read_text(encoding="utf-8"))
    chapter = items[0].chapter
    cells = prepare(src, learner)
    # A package that hung at import hangs every child again: one time limit is enough.
    ran, why = ({}, grading.import_hang) if grading.import_hang else _run(
        cells, grading, chapter, config.LAB_TIMEOUT)  # fmt: skip
    stopped = next((i for i in range(len(cells)) if i not in ran), None)  # crashed or hung there
    skip = {cells[stopped]["grade_id"]} if stopped is not None else set()
    outcomes = {}
    for item in items:
        gid = item.nodeid.split("::")[-1]
        index = next((i for i, c in enumerate(cells) if c["grade_id"] == gid), None)
        if not why:
            outcomes[gid] = _outcome(ran.get(index))
            continue
        if grading.import_hang:
            outcomes[gid] = False, f"not run: {grading.import_hang}", []
            continue
        alone = task_cells(src, learner, gid, skip)  # the notebook crashed or hung: this task alone
        ran_alone, why_alone = _run(alone, grading, chapter, config.LAB_TASK_TIMEOUT)
        last = len(alone) - 1 if alone and alone[-1]["grade_id"] == gid else None
        ok, error, records = _outcome(ran_alone.get(last))
        if why_alone and not ok:
            error = f"this task alone: {why_alone}" + (f" ({error})" if error else "")
        outcomes[gid] = ok, error, records
    results = {}
    for item in items:
        gid = item.nodeid.split("::")[-1]
        ok, error, seen = outcomes[gid]
        if record is not None:
            record[item.nodeid] = seen
        if ok and oracle and record is None:  # the parent's comparisons decide, not the cell
            want = oracle.get(item.nodeid)
            ok, error = judge(want, seen) if valued(want) else (False, (
                "the grader holds no recorded values for this task, so it cannot pass "
                "(run `make oracle`)"))  # fmt: skip
        if error.startswith("NotImplementedError") and len(error) < 40:
            error = "not implemented yet (the answer cell still raises NotImplementedError)"
        msg = "" if ok else f"test cell {gid} failed: {error or 'run the notebook to see why'}"
        results[item.nodeid] = Result(item, "passed" if ok else "failed", item.points if ok else 0.0,
                                      msg, where=f"exercises/{submission.name}")  # fmt: skip
    return results


# --- judging: the records against the reference notebook's ----------------------------------


def _num(x):
    if type(x) in (bool, int):
        return float(x)
    if isinstance(x, dict) and set(x) == {"f"}:
        return float(x["f"])
    return None


def _same(a, b, tol) -> bool:
    na, nb = _num(a), _num(b)
    if na is not None or nb is not None:
        return na is not None and nb is not None and _close(np.array([na]), np.array([nb]), tol)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return False
        if "a" in a:
            if a.get("shape") != b.get("shape") or len(a["a"]) != len(b["a"]):
                return False
            return _close(np.array(a["a"], dtype=float), np.array(b["a"], dtype=float), tol)
        return all(_same(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, tol) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def _close(a: np.ndarray, b: np.ndarray, tol) -> bool:
    rtol, atol = (max(tol[0], config.FLOOR[0]), max(tol[1], config.FLOOR[1])) if tol else (0.0, 0.0)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol, atol, equal_nan=True))


VALUED = ("Eq", "Is", "call")  # records holding values (the others hold only kinds)


def valued(want: list | None) -> bool:
    """Does a recorded task compare at least one value the reference computed? A task
    recorded with only kinds (``x < y`` of two numbers) would pass on the cell's word."""
    return isinstance(want, list) and any(w != "*" and w[0] in VALUED for w in want)


def judge(want: list, got: list) -> tuple[bool, str]:
    """Do a task's records ``got`` agree with the reference run's ``want``?

    ``"*"`` in ``want`` stands for a record that differed between two reference runs.
    """
    if not isinstance(got, list) or len(got) != len(want):
        n = len(got) if isinstance(got, list) else "no"
        return False, f"{n} comparisons, the reference notebook makes {len(want)}"
    for i, (w, g) in enumerate(zip(want, got)):
        if w == "*":
            continue
        try:
            # A test cell's tolerance T bounds a right answer's distance from the exact
            # value, and the reference's too: a right answer is within 2T of the reference's.
            tol = config.FLOOR if w[0] != "call" else [2 * t for t in (w[-1] or (0.0, 0.0))]
            body_w, body_g = (w[:-1], g[:-1]) if w[0] == "call" else (w, g)
            same = isinstance(g, list) and _same(body_w, body_g, tol)
        except Exception:  # noqa: BLE001 - a made-up record of any shape: a failure
            same = False
        if not same:
            return False, (f"comparison {i + 1} of the test cell: yours compared {_shown(g)}, "
                           f"the reference notebook's {_shown(w)}")  # fmt: skip
    return True, ""


def _shown(record, limit: int = 200) -> str:
    """A comparison record as a learner reads it: ``np.allclose([1.0, 2.0], [1.0, 2.5])``."""

    def value(x):
        if isinstance(x, dict) and "a" in x:
            return str([round(v, 6) for v in x["a"][:8]])[:-1] + (
                ", ...]" if len(x["a"]) > 8 else "]"
            )
        if isinstance(x, dict) and set(x) == {"f"}:
            return repr(x["f"])
        if isinstance(x, dict) and "o" in x:
            return f"a {x['o']}"
        return json.dumps(x)[:80]

    try:
        if record[0] == "call":
            text = f"{record[1]}({', '.join(value(v) for v in record[2:-1])})"
        else:
            text = f"{value(record[1])} {record[0]} {value(record[2])}"
    except (TypeError, IndexError, KeyError):
        text = json.dumps(record)
    return text if len(text) <= limit else text[:limit] + " ..."


def merge(first: list, second: list) -> list | None:
    """One oracle entry from two reference runs: differing records become ``"*"``."""
    if len(first) != len(second):
        return None
    return [a if judge([a], [b])[0] else "*" for a, b in zip(first, second)]
