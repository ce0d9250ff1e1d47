"""Smoke test of ``make mutation`` (tests/mutation/): generation for every chapter, and a
small fixed sample graded end to end. The full measurement is ``make mutation CH=N``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from autograder.grader import manifest
from tests.mutation import equivalents, generate

ROOT = Path(__file__).resolve().parent.parent


def _names(chapter: int) -> dict[str, str]:
    return {e: i.name for e, i in manifest.exercises().items() if e.split(".")[0] == str(chapter)}


def test_every_chapter_has_generated_mutants_with_owners():
    keys = set()
    for chapter in range(1, 13):
        found = generate(chapter, _names(chapter))
        assert len(found) > 50, f"chapter {chapter}: only {len(found)} mutants"
        for g in found:
            assert g.exercises, g.key
            assert g.before != g.after, g.key
            ast.parse(g.source)  # one change, still a module
        ours = {g.key for g in found}
        assert len(ours) == len(found), f"chapter {chapter}: two mutants share a key"
        keys |= ours
    stale = sorted(set(equivalents()) - keys)
    assert not stale, f"equivalent.toml names mutants that are no longer generated: {stale}"


def test_no_chapter_loses_a_killed_mutant(tmp_path):
    """CI's check that no chapter's mutation score falls: one fixed generated mutant of every
    exercise (the same ones every run), each graded like a learner's code, must be killed.
    A change that weakens an exercise's graded tests lets its mutant survive here."""
    out = tmp_path / "mutation.json"
    chapters = [str(c) for c in range(1, 13)]
    cmd = [sys.executable, "-m", "tests.mutation", *chapters, "--per-exercise", "1",
           "--json", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())
    assert [r["chapter"] for r in results] == list(range(1, 13))
    for result in results:
        reached = {e for row in result["rows"] for e in row["exercises"]}
        assert reached == set(_names(result["chapter"])), f"chapter {result['chapter']}"
        assert result["total"]["survived"] == result["total"]["error"] == 0, proc.stdout[-4000:]


def _variants(source: str, module: str = "import numpy as np\n") -> set[str]:
    from tests.mutation.operators import mutations

    found = list(mutations(source, module))
    for v in found:
        ast.parse(v)  # each is still a function
    return {" ".join(line.strip() for line in v.splitlines() if line.strip()) for v in found}


def test_extreme_initial_values_of_accumulators_only():
    src = (
        "def f(a):\n    best, n = 0.0, 0\n    k = 1\n    for x in a:\n"
        "        best = max(best, x)\n    return best, n, k\n"
    )
    got = _variants(src)
    body = "for x in a: best = max(best, x) return best, n, k"
    for text in ("np.inf", "-np.inf", "1e30"):
        assert f"def f(a): best, n = {text}, 0 k = 1 {body}" in got
    assert not any(" k = np.inf" in v or "0.0, np.inf" in v for v in got)  # not accumulators
    src = "def g(a):\n    m = -np.inf\n    for x in a:\n        m = max(m, x)\n    return m\n"
    assert "def g(a): m = 0.0 for x in a: m = max(m, x) return m" in _variants(src)
    # a module without numpy gets Python's own infinity
    assert any('float("inf")' in v for v in _variants(src.replace("-np.inf", "1"), module=""))


def test_while_becomes_if():
    src = "def f(n):\n    while n > 1:\n        n //= 2\n    return n\n"
    assert "def f(n): if n > 1: n //= 2 return n" in _variants(src)
    src = "def f(n):\n    while n > 1:\n        n -= 1\n        if n == 5:\n            continue\n"
    assert not any(v.startswith("def f(n): if") for v in _variants(src))  # continue: no loop


def test_dtype_narrowing():
    src = (
        "def f(x, out):\n    acc = np.zeros(3, dtype=np.float64)\n"
        "    zero = np.zeros(1, dtype=out.dtype)[0]\n    y = x.astype(np.float64)\n"
        "    z = np.empty(2, 'float64')\n    w = np.ones(2, dtype=np.float32)\n"
        "    return acc, zero, y, z, w\n"
    )
    got = "\n".join(_variants(src))
    assert "acc = np.zeros(3, dtype=np.float32)" in got
    assert "zero = np.zeros(1, dtype=np.float32)[0]" in got
    assert "y = x.astype(np.float32)" in got
    assert "z = np.empty(2, np.float32)" in got
    assert len(_variants(src)) == 4  # float32 already: nothing to narrow


def test_in_place_on_an_input_and_dropped_copy():
    src = (
        "def f(p, g, lr):\n    g = g + lr * p\n    q = p.copy()\n    r = np.copy(g)\n"
        "    s = lr\n    s = s + 1\n    return q, r, s\n"
    )
    got = "\n".join(_variants(src))
    assert "g += lr * p" in got  # g is a parameter: the caller's array would change
    assert "q = p r = np.copy(g)" in got and "r = g s = lr" in got
    assert "s += 1" not in got  # s is a local


def test_course_operators_reach_the_references():
    kinds = {"np.inf": 0, "if ": 0, "float32": 0}
    for chapter in (1, 3, 5, 9):
        for g in generate(chapter, _names(chapter)):
            if g.operator == "course":
                for k in kinds:
                    kinds[k] += k in g.after and k not in g.before
    assert all(kinds.values()), kinds
