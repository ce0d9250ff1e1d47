"""Fingerprints of function bodies that renaming does not change, to find an answer's copy.

A function's print is its AST dump without its name, docstring or annotations, every
variable and argument renamed by first use; its code print is its bytecode (``co_code``
does not hold names). The references' prints are the answers; a grading tree or a release
that holds one of them holds a stub's worth of an answer.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = 12  # a body of fewer AST nodes (``return x``) is no answer: it is in any code


class _Rename(ast.NodeTransformer):
    def __init__(self):
        self.names: dict[str, str] = {}

    def _new(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(self._new(node.id), node.ctx), node)

    def visit_arg(self, node):
        return ast.copy_location(ast.arg(self._new(node.arg)), node)


def fingerprint(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if sum(not isinstance(n, ast.expr_context) for stmt in body for n in ast.walk(stmt)) < SMALL:
        return None
    bare = ast.FunctionDef(name="f", args=copy.deepcopy(fn.args), body=copy.deepcopy(body),
                           decorator_list=[], returns=None)  # fmt: skip
    return ast.dump(_Rename().visit(bare))


def source_prints(source: str) -> dict[str, str]:
    """print -> ``name:line`` of every function (nested ones too) in ``source``."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fp = fingerprint(node)
            if fp:
                found.setdefault(fp, f"{node.name}:{node.lineno}")
    return found


def code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def code_prints(source: str, filename: str = "<source>") -> dict[bytes, str]:
    """co_code -> ``name:line`` of every function compiled from ``source``."""
    top = compile(source, filename, "exec")
    return {c.co_code: f"{c.co_name}:{c.co_firstlineno}" for c in code_objects(top)
            if not c.co_name.startswith("<") and len(c.co_code) >= 4 * SMALL}  # fmt: skip


@functools.cache
def exercise_names() -> dict[str, str]:
    """Reference name -> exercise id, per chapter: ``{"8:align": "8.3", ...}``."""
    from autograder.grader.manifest import exercises

    return {f"{i.id.split('.')[0]}:{i.name}": i.id for i in exercises().values()}


def answer(ex_id: str) -> list[types.FunctionType]:
    """Exercise ``ex_id``'s reference and every helper it calls (read from its bytecode,
    through nested functions), not through another exercise's reference."""
    chapter = ex_id.split(".")[0]
    names = exercise_names()
    mine = next(n.split(":")[1] for n, i in names.items() if i == ex_id)
    module = importlib.import_module(f"solutions.reference.ch{chapter}")
    found, frontier = {}, [getattr(module, mine)]
    while frontier:
        fn = frontier.pop()
        if fn.__name__ in found:
            continue
        found[fn.__name__] = fn
        home = importlib.import_module(fn.__module__)
        for code in code_objects(fn.__code__):
            for name in code.co_names:
                other = getattr(home, name, None)
                if (inspect.isfunction(other) and other.__module__ == fn.__module__
                        and names.get(f"{chapter}:{name}", ex_id) == ex_id):  # fmt: skip
                    frontier.append(other)
    return list(found.values())


def answer_prints(ex_id: str) -> tuple[dict[str, str], dict[bytes, str]]:
    """The source and code prints of exercise ``ex_id``'s answer (:func:`answer`)."""
    src, code = {}, {}
    for fn in answer(ex_id):
        text = inspect.getsource(fn)
        where = f"{ex_id} {fn.__name__}"
        src.update({fp: where for fp in source_prints(text)})
        code.update({fp: where for fp in code_prints(text)})
    return src, code


def prints(source: str, filename: str = "<source>") -> tuple[dict, dict]:
    """The source and code prints of every function in ``source`` (none if it does not parse)."""
    try:
        return source_prints(source), code_prints(source, filename)
    except (SyntaxError, ValueError):
        return {}, {}


def holds(found: tuple[dict, dict], answers: tuple[dict, dict]) -> list[str]:
    """Which ``answers`` (:func:`answer_prints`) are among ``found`` (:func:`prints`):
    ``["8.4 _place in _bound:38", ...]``."""
    return [f"{a[fp]} in {f[fp]}" for f, a in zip(found, answers) for fp in f.keys() & a.keys()]
