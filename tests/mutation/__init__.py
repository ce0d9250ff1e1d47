"""Generated mutants of the references: mutmut's mutation operators, graded like learners.

``python -m tests.mutation C`` (``make mutation CH=C``) makes every mutant that
mutmut's operators give for the functions of ``solutions/reference/chC*.py``
(one change each: ``+`` for ``-``, ``<`` for ``<=``, a number plus one, an
argument dropped or ``None``, ``x = None``, a string changed...) and the
course's own (``operators.py``: extreme initial values, ``while`` run once,
float64 narrowed to float32, in place on an input, a dropped copy), installs
each as the learner's code of the exercises whose reference reaches that
function, and runs only those exercises' graded tests. A mutant that keeps full
marks *survives*. Every survivor is either recorded as equivalent, with the
reason, in ``equivalent.toml`` beside this file, or is a gap in the graded tests.
Changes to the text of an error's ``hint="..."`` are not made: a hint's wording
is the learner's (the tests grade the op an error names and the facts in it);
``hint=None``, dropping the hint, is still a mutant.

Only generation lives here (no minitorch import); running is ``__main__.py``.
mutmut's own runner cannot grade these: it swaps functions through a
trampoline (``*args`` and an environment lookup) that Numba cannot compile,
while chapters 3, 4, 7 and 11 hand the exercise function to Numba, and the
grader installs a learner's function by name, which the trampoline hides.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import tomllib

from . import operators

ROOT = Path(__file__).resolve().parent.parent.parent
REFERENCE = ROOT / "solutions" / "reference"
EQUIVALENT = Path(__file__).resolve().parent / "equivalent.toml"


@dataclass(frozen=True)
class Generated:
    """One mutant: the whole reference module with one change in one function."""

    key: str  # "ch1.py:tensor_map:before => after" (stable while the function's text is)
    file: str  # "ch1.py"
    function: str  # the top-level function the change is in
    exercises: tuple  # the exercises whose reference is, or reaches, that function
    line: int  # the changed line in the file
    before: str  # the changed lines, stripped, joined by " / "
    after: str
    source: str  # the mutated module
    operator: str = "mutmut"  # or "course": this package's own (operators.py)

    @property
    def chapter(self) -> int:
        return int(self.file.removeprefix("ch").split("_")[0].removesuffix(".py"))

    @property
    def sample_rank(self) -> str:
        """A fixed order for drawing a sample: the same mutants every run."""
        return hashlib.sha1(self.key.encode()).hexdigest()


def reference_files(chapter: int) -> list[Path]:
    """``chC.py`` and its parts ``chC_*.py`` (a file of re-exports has no functions)."""
    return sorted([*REFERENCE.glob(f"ch{chapter}.py"), *REFERENCE.glob(f"ch{chapter}_*.py")])


def _reach(tree: ast.Module) -> dict[str, set[str]]:
    """For each top-level function, the top-level functions it calls, directly or not."""
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    calls = {
        name: {x.id for x in ast.walk(fn) if isinstance(x, ast.Name) and x.id in funcs} - {name}
        for name, fn in funcs.items()
    }
    reach = {}
    for name in funcs:
        seen, todo = set(), [name]
        while todo:
            for callee in calls[todo.pop()]:
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
        reach[name] = seen | {name}
    return reach


def _changed(old: str, new: str) -> tuple[int, str, str]:
    """The first changed line (0-based, in ``old``) and the changed lines of each side."""
    a, b = old.splitlines(), new.splitlines()
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
           if op[0] != "equal"]  # fmt: skip
    first = ops[0][1]
    before = " / ".join(a[i].strip() for op in ops for i in range(op[1], op[2]))
    after = " / ".join(b[j].strip() for op in ops for j in range(op[3], op[4]))
    return first, before, after


def _wording(line: str) -> str:
    """``line`` with every ``hint="..."`` string's text blanked (``hint=None`` stays)."""
    return re.sub(r"""hint=f?("[^"]*"|'[^']*')""", 'hint=""', line)


def _one(file, text, owners, seen, name, old, new, operator) -> Generated | None:
    """The mutant of ``file`` whose function ``name`` reads ``new`` instead of ``old``."""
    if new == old:
        return None
    start = text.index(old)
    assert text.count(old) == 1, f"{file}: {name} appears twice"
    first, before, after = _changed(old, new)
    if _wording(before) == _wording(after):
        return None  # a hint's wording is free: the contract grades the op and the facts
    key = f"{file}:{name}:{before} => {after}"
    seen[key] = seen.get(key, 0) + 1
    if seen[key] > 1:  # the same change at two places of one function
        key += f" #{seen[key]}"
    return Generated(
        key=key, file=file, function=name, exercises=owners,
        line=text.count("\n", 0, start) + first + 1, before=before, after=after,
        source=text[:start] + new + text[start + len(old):], operator=operator,
    )  # fmt: skip


def generate(chapter: int, exercise_names: dict[str, str]) -> list[Generated]:
    """Every mutant of chapter ``chapter``'s references.

    ``exercise_names`` maps each exercise id of the chapter to its function name
    (the stub's, which is the reference's). A mutant of a helper belongs to every
    exercise whose reference reaches it; one that no exercise reaches is skipped.
    """
    # mutmut reads its settings ([tool.mutmut] in pyproject.toml) from the working folder
    os.chdir(ROOT)
    from mutmut.mutation import file_mutation as fm

    by_name = {name: ex for ex, name in exercise_names.items()}
    out: list[Generated] = []
    for path in reference_files(chapter):
        text = path.read_text()
        reach = _reach(ast.parse(text))
        owners = {
            fn: tuple(
                sorted(
                    (by_name[e] for e in reach if e in by_name and fn in reach[e]),
                    key=lambda x: tuple(map(int, x.split("."))),
                )
            )  # fmt: skip
            for fn in reach
        }
        module, mutations, _, _ = fm.create_mutations(str(path), text)
        seen: dict[str, int] = {}
        changes = []
        for m in mutations:
            fn = m.contained_by_top_level_function
            if fn is None or not owners.get(fn.name.value):
                continue  # module level (mutmut skips it too), or no exercise reaches it
            new = module.code_for_node(fm.deep_replace(fn, m.original_node, m.mutated_node))
            changes.append((fn.name.value, module.code_for_node(fn), new, "mutmut"))
        for fn in ast.parse(text).body:
            if isinstance(fn, ast.FunctionDef) and owners.get(fn.name):
                old = ast.get_source_segment(text, fn)
                changes += [(fn.name, old, new, "course") for new in operators.mutations(old, text)]
        for name, old, new, operator in changes:
            g = _one(path.name, text, owners[name], seen, name, old, new, operator)
            out += [g] if g else []
    return out


def equivalents() -> dict[str, str]:
    """``equivalent.toml``: key -> why the mutant cannot be told apart from the reference."""
    data = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    return {e["key"]: e["why"] for e in data.get("equivalent", [])}


def open_exercises() -> dict[str, str]:
    """``equivalent.toml``'s ``[[open]]``: exercises graded on outcome. Their contract allows
    any strategy, so a mutant that stays valid and reaches every tier is another answer, not
    a gap; the hand-written mutants (``tests/mutants/``) hold the wrong ones."""
    data = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    return {e["exercise"]: e["why"] for e in data.get("open", [])}
