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


def test_a_fixed_sample_is_killed(tmp_path):
    out = tmp_path / "mutation.json"
    cmd = [sys.executable, "-m", "tests.mutation", "8", "--sample", "4", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    (result,) = json.loads(out.read_text())
    assert len(result["rows"]) == 4
    assert result["total"]["killed"] == 4, proc.stdout[-3000:]
