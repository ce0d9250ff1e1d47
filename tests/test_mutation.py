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
    for chapter in range(1, 12):
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
    chapters = [str(c) for c in range(1, 12)]
    cmd = [sys.executable, "-m", "tests.mutation", *chapters, "--per-exercise", "1",
           "--json", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())
    assert [r["chapter"] for r in results] == list(range(1, 12))
    for result in results:
        reached = {e for row in result["rows"] for e in row["exercises"]}
        assert reached == set(_names(result["chapter"])), f"chapter {result['chapter']}"
        assert result["total"]["survived"] == result["total"]["error"] == 0, proc.stdout[-4000:]
