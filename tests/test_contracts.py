"""Every promise in an exercise's docstring is cited by a graded test of that exercise.

A promise is a sentence of the ``@exercise`` docstring (Hint paragraphs and
code examples left out) with a promise word in it (``PROMISE``). A graded test
(``@graded("C.N", ...)`` in ``autograder/tests/``, or a ``@benchmark("C.N", ...)``
for a promise about speed) that checks one says so in its docstring, one line
per sentence::

    contract: <a verbatim fragment, 4 words or more, of the sentence>

matched with whitespace collapsed, case kept. A promise no test cites is a
defect: add the check to a graded test, or reword the docstring (the stub's and
the reference's) so it promises only what can be checked. A citation that
matches no sentence (the docstring changed) fails too. One test per chapter, so
each chapter passes or fails on its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROMISE = re.compile(
    r"\b(returns?|raises?|never|keeps?|only|must|always|new|not|same|equals?)\b", re.I
)
CITE = re.compile(r"^\s*contract:\s*(.+?)\s*$", re.M)
# A sentence ends at . ! ? before a space and a capital, a backquote or a bracket ("e.g." goes on).
SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z`(*])")
BULLET = re.compile(r"^\s*(?:[*-]|\d+\.)\s+")  # "* a", "- a", "1. a": an item of a list


def _id_of(decorator: ast.expr, name: str) -> str | None:
    """The literal first argument of ``@name("C.N", ...)`` (or ``@module.name(...)``)."""
    if not isinstance(decorator, ast.Call) or not decorator.args:
        return None
    func = decorator.func
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    first = decorator.args[0]
    if called == name and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value if re.fullmatch(r"\d+\.\d+", first.value) else None
    return None


def _decorated(paths, name: str):
    """(id, function name, docstring, file) for each function or class decorated ``@name(id)``."""
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for dec in node.decorator_list:
                    ex = _id_of(dec, name)
                    if ex:
                        yield ex, node.name, ast.get_docstring(node) or "", path


def _flat(text: str) -> str:
    return " ".join(text.split())


def sentences(doc: str) -> list[str]:
    """The docstring's sentences, Hint paragraphs and code examples left out."""
    out, code_next = [], False
    for para in re.split(r"\n\s*\n", doc):
        lines = para.splitlines()
        first = lines[0] if lines else ""
        # after "::", a ">>>" session, or an indented block that is not a list: an example
        is_code = code_next or first.lstrip().startswith(">>>")
        is_code = is_code or (first[:1] in (" ", "\t") and not BULLET.match(first))
        code_next = para.rstrip().endswith("::")
        if not lines or is_code or lines[0].lstrip().startswith("Hint"):
            continue
        # a ">>>" line and the output lines after it in the paragraph are an example
        kept = []
        for line in lines:
            if line.lstrip().startswith(">>>"):
                break
            kept.append(line)
        # list items are sentences of their own
        blocks, block = [], []
        for line in kept:
            if BULLET.match(line) and block:
                blocks.append(block)
                block = []
            block.append(BULLET.sub("", line))
        blocks.append(block)
        for b in blocks:
            text = _flat(" ".join(b)).rstrip(":").rstrip()
            text = text[:-1].rstrip() if text.endswith("::") else text
            out += [s for s in SENTENCE_END.split(text) if s]
    return out


def promises(doc: str) -> list[str]:
    return [s for s in sentences(doc) if PROMISE.search(s)]


def exercises() -> dict[str, tuple[str, str]]:
    """id -> (where, docstring) of every ``@exercise`` in minitorch/."""
    found = {}
    for ex, name, doc, path in _decorated(sorted((ROOT / "minitorch").rglob("*.py")), "exercise"):
        found[ex] = (f"{path.relative_to(ROOT)}:{name}", doc)
    return found


def citations() -> dict[str, list[tuple[str, str]]]:
    """id -> [(graded test or benchmark, cited fragment)] from ``contract:`` lines."""
    found: dict[str, list[tuple[str, str]]] = {}
    folder = ROOT / "autograder" / "tests"
    for pattern, decorator in (("test_*.py", "graded"), ("bench_*.py", "benchmark")):
        for ex, name, doc, path in _decorated(sorted(folder.rglob(pattern)), decorator):
            for fragment in CITE.findall(doc):
                found.setdefault(ex, []).append((f"{path.relative_to(ROOT)}::{name}", fragment))
    return found


def problems(chapter: int, exercises: dict, citations: dict) -> list[str]:
    """What is wrong with chapter ``chapter``'s citations, one entry per exercise."""
    out = []
    ids = sorted((e for e in exercises if e.split(".")[0] == str(chapter)),
                 key=lambda e: int(e.split(".")[1]))  # fmt: skip
    for ex in ids:
        where, doc = exercises[ex]
        said = promises(doc)
        cited = citations.get(ex, [])
        lines = []
        for test, fragment in cited:
            words = len(fragment.split())
            hits = [s for s in sentences(doc) if _flat(fragment) in s]
            if words < 4:
                lines.append(f"  {test} cites {fragment!r}: fewer than 4 words")
            elif not hits:
                lines.append(
                    f"  {test} cites {fragment!r}, which is in no sentence of the docstring"
                )
        for s in said:
            if not any(words >= 4 and _flat(f) in s
                       for _, f in cited for words in [len(f.split())]):  # fmt: skip
                lines.append(f"  uncited: {s}")
        if lines:
            out.append(f"{ex} ({where}):\n" + "\n".join(lines))
    return out


CHAPTERS = sorted({int(e.split(".")[0]) for e in exercises()})


@pytest.mark.parametrize("chapter", [f"ch{c}" for c in CHAPTERS])
def test_contracts(chapter):
    found = problems(int(chapter[2:]), exercises(), citations())
    assert not found, (
        "promise sentences of these exercises' docstrings that no graded test cites "
        "(add a 'contract: <fragment>' line to a graded test that checks it, or reword "
        "the docstring):\n" + "\n".join(found)
    )


def test_sentences_leave_out_hints_and_examples():
    doc = (
        "Return x, never y. Keep the rest.\n\nDetails:\n  * a bullet that must hold\n"
        '  * another\n1. a numbered item, e.g. "Quoted" is not new\n\n'
        "    indented, this is code and never a promise\n\n  * an indented list item, not new\n\n"
        "Example::\n\n    f() returns 3\n\n>>> f()\n3\n\n"
        "Hint: this is only advice.\n\ne.g. shapes equal the input's."
    )
    assert sentences(doc) == [
        "Return x, never y.", "Keep the rest.", "Details", "a bullet that must hold",
        "another", 'a numbered item, e.g. "Quoted" is not new', "an indented list item, not new",
        "Example", "e.g. shapes equal the input's.",
    ]  # fmt: skip
    assert promises(doc) == [
        "Return x, never y.", "Keep the rest.", "a bullet that must hold",
        'a numbered item, e.g. "Quoted" is not new', "an indented list item, not new",
        "e.g. shapes equal the input's.",
    ]  # fmt: skip


def test_problems_name_uncited_and_stale_citations():
    ex = {"9.1": ("m.py:f", "Return a new list. The input is not changed.")}
    cited = {"9.1": [("t::a", "Return a new list."), ("t::b", "the old wording here")]}
    (found,) = problems(9, ex, cited)
    assert "uncited: The input is not changed." in found
    assert "'the old wording here', which is in no sentence" in found
    assert "uncited: Return a new list." not in found
