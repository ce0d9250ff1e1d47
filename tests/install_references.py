"""Install the references as a learner's answers: ``python -m tests.install_references OUT``.

Writes ``OUT/minitorch`` and ``OUT/exercises``, a submission in which every
stub's ``raise NotImplementedError`` is replaced by its reference's body, as
a learner who copied it would have it, and every lab answer cell holds the
source notebook's answer. ``python -m autograder --submission OUT`` then
grades it the way learners are graded (one child per exercise, the
exercise's reference withheld), which must give full marks
(``make check-installed``, part of ``make test``).

A body is installed as written; the names it takes from its reference
module (imports, helpers, constants) are bound under a private prefix in the
stub's module, from a copy of the references inside the package
(``minitorch/_answers/``), so a stub module's own names are never shadowed.
The copy matters for Numba: kernels compile the stub's own function, so a
call that only delegates would not compile.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "solutions" / "reference"
NOTEBOOKS = ROOT / "solutions" / "notebooks"
PREFIX = "_ans_"
COPY = "_answers"  # minitorch/_answers/: the reference modules, as a learner's own helpers


def _module_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _definitions() -> dict[tuple[int, str], tuple[str, ast.FunctionDef, set[str]]]:
    """(chapter, reference function name) -> (module, its def, the module's top-level names).

    A chapter's references live in ``chC.py`` or in modules ``chC_*.py`` it re-exports."""
    found = {}
    for path in sorted(REFERENCE.glob("ch*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        chapter = int(re.match(r"ch(\d+)", path.stem)[1])
        names = _module_names(tree)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                found.setdefault((chapter, node.name), (path.stem, node, names))
    return found


class _Rename(ast.NodeTransformer):
    def __init__(self, names: set[str]):
        self.names, self.used = names, set()

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            self.used.add(node.id)
            node.id = PREFIX + node.id
        return node


def _local_names(fn: ast.FunctionDef) -> set[str]:
    """Names assigned in ``fn`` (its own locals shadow module names of the same name)."""
    args = fn.args
    local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    local |= {a.arg for a in (args.vararg, args.kwarg) if a}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not fn:
            local.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            local |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return local


def installed_body(fn: ast.FunctionDef, module_names: set[str]) -> tuple[str, set[str]]:
    """The body of reference ``fn`` (without its docstring) with module names prefixed."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    rename = _Rename(module_names - _local_names(fn))
    module = ast.Module(body=[rename.visit(stmt) for stmt in body], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)), rename.used


def install_stubs(package: Path, exercises: dict) -> list[str]:
    """Replace every stub's body in ``package`` (a copy of minitorch/); returns the ids done.

    The names the bodies take from their reference modules are bound once the
    whole package is imported: at the end of ``minitorch/__init__.py`` for the
    modules imported by then, at the end of the module itself for the others
    (``minitorch.onnx``), so the import order stays the package's own.
    """
    defs = _definitions()
    done, modules = [], []
    by_file: dict[str, list] = {}
    for info in exercises.values():
        by_file.setdefault(info.path, []).append(info)
    for rel, infos in sorted(by_file.items()):
        path = package.parent / rel
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        tree = ast.parse(source)
        stubs = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
        binds = set()
        for info in sorted(infos, key=lambda i: -stubs[i.name].lineno):
            module, ref, names = defs[int(info.id.split(".")[0]), info.name]
            raise_stmt = stubs[info.name].body[-1]
            assert isinstance(raise_stmt, ast.Raise), f"{rel}: {info.name} is not an untouched stub"
            body, used = installed_body(ref, names)
            text = textwrap.indent(body, " " * raise_stmt.col_offset) + "\n"
            lines[raise_stmt.lineno - 1 : raise_stmt.end_lineno] = [text]
            binds |= {(f"minitorch.{COPY}.{module}", n) for n in used}
            done.append(info.id)
        path.write_text("".join(lines) + BIND.format(binds=sorted(binds)), encoding="utf-8")
        modules.append(rel.removesuffix(".py").replace("/", "."))
    init = package / "__init__.py"
    init.write_text(init.read_text(encoding="utf-8") + READY.format(modules=modules))
    return done


BIND = """

def _ans_bind(binds={binds!r}):  # written by tests/install_references.py
    __import__("minitorch")._ans_bind_into(globals(), binds)


if getattr(__import__("sys").modules.get("minitorch"), "_answers_ready", False):
    _ans_bind()
"""
# In minitorch/__init__.py: a name whose answers module is still half-imported (an import
# cycle through the stub's own module) is bound when that module's import ends.
READY = """

_ans_pending = []  # written by tests/install_references.py


def _ans_bind_into(namespace, binds):
    import importlib

    for answers, name in binds:
        module = importlib.import_module(answers)
        if hasattr(module, name):
            namespace["_ans_" + name] = getattr(module, name)
        else:
            _ans_pending.append((namespace, answers, name))


def _ans_retry():
    waiting = list(_ans_pending)
    _ans_pending.clear()
    for namespace, answers, name in waiting:
        _ans_bind_into(namespace, [(answers, name)])


_answers_ready = True
for _name in {modules!r}:
    if _name in __import__("sys").modules:
        __import__("sys").modules[_name]._ans_bind()
"""
RETRY = """

__import__("minitorch")._ans_retry()  # written by tests/install_references.py
"""


def _answer_cells(source: dict) -> dict[str, str]:
    """grade_id -> the answer cell's text without the BEGIN/END SOLUTION markers."""
    answers = {}
    for cell in source["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            text = "".join(cell["source"])
            text = re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", "", text, flags=re.M)
            answers[meta["grade_id"]] = text
    return answers


def install_labs(exercises_dir: Path) -> int:
    """Write the source notebooks' answers into the released notebooks' answer cells."""
    filled = 0
    for released in sorted(exercises_dir.glob("ch*.ipynb")):
        answers = _answer_cells(json.loads((NOTEBOOKS / released.name).read_text("utf-8")))
        nb = json.loads(released.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell["source"] = answers[grade_id].splitlines(keepends=True)
                filled += 1
        released.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")
    return filled


def install(out: Path) -> tuple[list[str], int]:
    from autograder.grader import manifest

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    shutil.copytree(ROOT / "minitorch", out / "minitorch", ignore=ignore)
    shutil.copytree(ROOT / "exercises", out / "exercises", ignore=ignore)
    shutil.copytree(REFERENCE, out / "minitorch" / COPY, ignore=ignore)
    for path in (out / "minitorch" / COPY).glob("ch*.py"):
        path.write_text(path.read_text(encoding="utf-8") + RETRY, encoding="utf-8")
    done = install_stubs(out / "minitorch", manifest.exercises())
    return done, install_labs(out / "exercises")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    done, cells = install(args.out)
    print(f"installed {len(done)} reference bodies and {cells} lab answers in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
