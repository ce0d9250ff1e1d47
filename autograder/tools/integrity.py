"""The grader's own files, checked against ``autograder/hashes.json`` before grading.

A root ``conftest.py`` is ignored (children run with ``--noconftest`` in a tree
that holds only ``minitorch/``, ``autograder/`` and the references), and an
edited test, point value, plugin or reference makes the grader refuse to score.
``python -m autograder.tools.integrity --write`` (``make hashes``) regenerates the
file after an intended change; ``tests/test_grader_sandbox.py`` fails when it
is stale.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

from ..config import ROOT

HASHES = ROOT / "autograder" / "hashes.json"
PATTERNS = (
    "autograder/*.py",
    "autograder/grader/*.py",
    "autograder/tools/*.py",
    "autograder/oracle.json.gz",
    "autograder/tests/**/*.py",
    "solutions/__init__.py",
    "solutions/reference/*.py",
    "solutions/notebooks/*.ipynb",
    "autograder/labs/*.ipynb",
    "minitorch/exercises.py",
)


def grader_files() -> list[str]:
    found = set()
    for pattern in PATTERNS:
        found |= {p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern)
                  if p.is_file() and "__pycache__" not in p.parts}  # fmt: skip
    return sorted(found)


def digest(data: bytes) -> str:
    # Line endings normalised so a checkout on Windows verifies too.
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


def current() -> dict[str, str]:
    """Hashes of the grader's files."""
    return {rel: digest((ROOT / rel).read_bytes()) for rel in grader_files()}


def problems() -> list[str]:
    """What differs from ``hashes.json``: edited, added or missing grader files."""
    try:
        expected = json.loads(HASHES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [f"{HASHES.relative_to(ROOT)} is missing or unreadable"]
    now = current()
    out = [f"{rel} was edited" for rel in sorted(now.keys() & expected.keys())
           if now[rel] != expected[rel]]  # fmt: skip
    out += [f"{rel} is not a grader file" for rel in sorted(now.keys() - expected.keys())]
    out += [f"{rel} is missing" for rel in sorted(expected.keys() - now.keys())]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="check or regenerate autograder/hashes.json")
    p.add_argument("--write", action="store_true", help="record the current grader files")
    args = p.parse_args(argv)
    if args.write:
        HASHES.write_text(json.dumps(current(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {HASHES.relative_to(ROOT)} ({len(current())} files)")
        return 0
    bad = problems()
    for line in bad:
        print(line)
    print(
        "grader files match hashes.json"
        if not bad
        else "run `make hashes` after an intended change"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
