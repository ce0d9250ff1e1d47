"""What there is to grade, read from the source files without importing them.

The grader's own process never imports learner code: it reads the graded
tests' decorators, the exercise stubs and the source notebooks as text. The
score is computed against this list, so a test that is skipped, not collected
or never reported earns nothing.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import config

ROOT = config.ROOT
TESTS = ROOT / "autograder" / "tests"
NOTEBOOKS = ROOT / "solutions" / "notebooks"
if not NOTEBOOKS.is_dir():  # a student release: the released notebooks, kept by the grader
    NOTEBOOKS = ROOT / "autograder" / "labs"
PACKAGE = ROOT / "minitorch"


@dataclass
class Item:
    """One graded test, benchmark or notebook task."""

    nodeid: str  # pytest node id, or "lab:<notebook>::<grade_id>"
    exercise: str  # "C.N", or "lab C"
    points: float
    kind: str = "test"  # test | benchmark | notebook
    metric: str | None = None
    bands: list = field(default_factory=list)
    higher_is_better: bool = True
    needs: str | None = None
    checks: int = 0  # check records a pass needs at least (see ``min_checks``)
    formula: str | None = None  # a benchmark's figure from its sides' timings (``bench.py``)
    baseline: tuple = ()  # the sides timed on the course's own code

    @property
    def chapter(self) -> int:
        return int(self.exercise.split(".")[0].replace("lab ", ""))

    @property
    def name(self) -> str:
        return self.nodeid.split("::")[-1]


def chapters() -> list[int]:
    return sorted(int(p.name[2:]) for p in TESTS.glob("ch*") if p.name[2:].isdigit())


def _literal(node: ast.AST):
    return ast.literal_eval(node)


CHECKERS = {"check", "assert_close"}


def min_checks(fn: ast.FunctionDef, module: ast.Module) -> int:
    """1 when ``fn`` surely reaches a harness comparison on success, else 0.

    A call counts when it sits in the function's straight-line body, or in a
    ``for`` loop over a non-empty literal (or a module-level name bound to
    one), directly or through a helper defined in the same file; calls under
    ``if``/``try``/``with pytest.raises``, in nested functions or lambdas,
    and ``check(False, ...)`` count for nothing. Under-counting only weakens
    the rule; over-counting would fail a correct submission.
    """
    helpers = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
    literals = {
        t.id
        for a in module.body
        if isinstance(a, ast.Assign) and isinstance(a.value, (ast.List, ast.Tuple, ast.Dict))
        and (a.value.keys if isinstance(a.value, ast.Dict) else a.value.elts)
        for t in a.targets
        if isinstance(t, ast.Name)
    }  # fmt: skip
    skip = (ast.If, ast.Try, ast.While, ast.Match, ast.With, ast.FunctionDef, ast.Lambda,
            ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.IfExp)  # fmt: skip

    def surely_loops(loop: ast.For) -> bool:
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
            it = it.func.value if it.func.attr in ("items", "keys", "values") else it
        if isinstance(it, (ast.List, ast.Tuple)):
            return bool(it.elts)
        return isinstance(it, ast.Name) and it.id in literals

    def raises(with_: ast.With) -> bool:
        for item in with_.items:
            f = item.context_expr.func if isinstance(item.context_expr, ast.Call) else None
            if getattr(f, "attr", getattr(f, "id", "")) in ("raises", "warns", "RaisesGroup"):
                return True
        return False

    def calls(node):
        if isinstance(node, skip):
            return
        if isinstance(node, ast.Call):
            yield node
        for child in ast.iter_child_nodes(node):
            yield from calls(child)

    def reaches(body, seen) -> bool:
        for stmt in body:
            if isinstance(stmt, ast.With) and not raises(stmt):
                if reaches(stmt.body, seen):
                    return True
                continue
            if isinstance(stmt, ast.For) and surely_loops(stmt):
                if reaches(stmt.body, seen):
                    return True
                continue
            for node in calls(stmt):
                if not isinstance(node.func, ast.Name):
                    continue
                name = node.func.id
                if name in CHECKERS:
                    first = node.args[0] if node.args else None
                    if not (name == "check" and isinstance(first, ast.Constant)):
                        return True
                elif name in helpers and name not in seen:
                    if reaches(helpers[name].body, seen | {name}):
                        return True
        return False

    return int(reaches(fn.body, {fn.name}))


def graded_items(chapter: int) -> list[Item]:
    items = []
    folder = TESTS / f"ch{chapter}"
    files = sorted(folder.glob("test_*.py")) + sorted(folder.glob("bench_*.py"))
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(ROOT).as_posix()
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith(("test_", "bench_")):
                continue
            for deco in fn.decorator_list:
                if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name)):
                    continue
                kind = {"graded": "test", "benchmark": "benchmark"}.get(deco.func.id)
                if kind is None:
                    continue
                args = [_literal(a) for a in deco.args]
                kw = {k.arg: _literal(k.value) for k in deco.keywords}
                names = ["exercise", "points", "metric", "bands"][: len(args)]
                kw.update(zip(names, args))
                items.append(
                    Item(
                        nodeid=f"{rel}::{fn.name}",
                        exercise=str(kw["exercise"]),
                        points=float(kw["points"]),
                        kind=kind,
                        metric=kw.get("metric"),
                        bands=[tuple(b) for b in kw.get("bands", [])],
                        higher_is_better=kw.get("higher_is_better", True),
                        needs=kw.get("needs"),
                        checks=min_checks(fn, tree),
                        formula=kw.get("formula"),
                        baseline=tuple(kw.get("baseline", ())),
                    )
                )
    return items


def notebook_path(chapter: int) -> Path | None:
    found = sorted(NOTEBOOKS.glob(f"ch{chapter}_*.ipynb"))
    return found[0] if found else None


def notebook_items(chapter: int) -> list[Item]:
    """The graded cells of the chapter's source notebook, with their points."""
    path = notebook_path(chapter)
    if path is None:
        return []
    nb = json.loads(path.read_text(encoding="utf-8"))
    items = []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and meta.get("points"):
            items.append(
                Item(
                    nodeid=f"lab:{path.stem}::{meta['grade_id']}",
                    exercise=f"lab {chapter}",
                    points=float(meta["points"]),
                    kind="notebook",
                )
            )
    return items


@dataclass
class ExerciseInfo:
    id: str
    name: str
    path: str
    line: int
    summary: str


_EXERCISE = re.compile(r"""@exercise\(\s*["'](\d+\.\d+)["']\s*\)\s*\n\s*def\s+(\w+)""")


def exercises() -> dict[str, ExerciseInfo]:
    """Every ``@exercise("C.N")`` stub in the package, by id.

    A file that does not parse (a learner's syntax error) is read with a pattern
    instead, so its exercises are still known and can be reported as broken."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text, filename=str(path))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            try:
                text = path.read_bytes().decode("utf-8", errors="replace")
            except OSError:
                continue
            for m in _EXERCISE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found[m[1]] = ExerciseInfo(m[1], m[2], rel, line, "")
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for deco in fn.decorator_list:
                if (
                    isinstance(deco, ast.Call)
                    and getattr(deco.func, "id", getattr(deco.func, "attr", "")) == "exercise"
                    and deco.args
                ):
                    ex_id = str(_literal(deco.args[0]))
                    doc = (ast.get_docstring(fn) or "").strip().splitlines()
                    found[ex_id] = ExerciseInfo(ex_id, fn.name, rel, fn.lineno,
                                                doc[0] if doc else "")  # fmt: skip
    return found


def exercise_sort_key(ex_id: str):
    head, _, tail = ex_id.replace("lab ", "").partition(".")
    return (int(head), 1 if ex_id.startswith("lab") else 0, int(tail or 0))
